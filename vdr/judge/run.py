"""The ``vdr judge`` verb: RCP-nDCG@k for every run of a results folder (see :mod:`vdr.judge`).

The results are read only through :meth:`vdr.results.Results.load`; the comparisons use the one
comparison loop of vdr (:func:`vdr.stats.compare_variants`); the table is one
:class:`vdr.results.Table` (:func:`rcp_table`), printed by ``vdr judge`` and shown by ``vdr report``.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..options import with_keywords
from ..llm import LLM_FIELDS, LLMSettings, split_keywords
from ..results import RESULTS_FILE, Results, Table, fmt4, fmt_p, json_safe
from ..types import ORIGINAL
from .client import CorpusPages, JudgeClient, JudgeError
from .irt import Calibration, Priors
from .prompts import PROMPT_VERSION, prompts_fingerprint
from .rcp import build_pools, judge_pools, rcp_ndcg
from .schedule import Schedule

__all__ = ["judge", "JudgeOptions", "JudgeResult", "rcp_table", "ENDPOINT_ENV", "JUDGE_LLM", "FAILURES_FILE"]

ENDPOINT_ENV = "VDR_JUDGE_ENDPOINT"

JUDGE_LLM = LLMSettings(timeout=120.0, max_retries=4, backoff=1.0, max_tokens=2048, concurrency=4)
"""The judge's endpoint defaults (no endpoint: ``$VDR_JUDGE_ENDPOINT`` is read when none is given)."""

#: keyword of :func:`judge` -> :class:`~vdr.llm.LLMSettings` field of another name
_LLM_ALIASES = {"judge_model": "model"}


def rcp_table(document: dict) -> Table:
    """The RCP table of an ``rcp.json`` document: rows backend x variant; RCP-nDCG@k beside nDCG@k
    and hole@k, the change of RCP-nDCG@k against the originals with its p-values, the pages outside
    the calibrated pool; notes: the method and the judge calls.

    Raises:
        KeyError, TypeError: not an ``rcp.json`` document.
    """
    k = int(document["k"])
    comp = {(c.get("backend"), c.get("variant")): c for c in document.get("comparisons", [])}
    head = ("backend", "variant", f"RCP-nDCG@{k}", f"nDCG@{k}", f"hole@{k}", f"d RCP-nDCG@{k}", "p (perm)", "p (Holm)", "outside pool")
    rows = []
    for r in document["runs"]:
        c = comp.get((r.get("backend"), r.get("variant")))
        rows.append((str(r.get("backend")), str(r.get("variant")), fmt4(r.get(f"rcp_ndcg@{k}")), fmt4(r.get(f"ndcg@{k}")),
                     fmt4(r.get(f"hole@{k}")), None if c is None else f"{c['delta']:+.4f}",
                     None if c is None else fmt_p(c.get("p_value")), None if c is None else fmt_p(c.get("p_value_holm")),
                     None if r.get("outside_pool") is None else str(r["outside_pool"])))
    j, calls = document.get("judge", {}), document.get("calls", {})
    notes = (
        f"RCP-nDCG@{k} (Rubric-Calibrated Preferences; arXiv 2609.35739) replaces missing labels with calibrated judgments of"
        f" {j.get('model')} ({j.get('modality')}), prompts {document.get('prompt_version')}; pages outside the calibrated pool"
        " gain 0 and are counted (outside pool). qrels-based nDCG penalises unjudged pages by construction (see hole@k).",
        f"judge calls {calls.get('calls')}, cached answers {calls.get('cached')}" + _retry_note(calls) + ".",
    )
    return Table(head, tuple(rows), notes)


def _retry_note(calls: dict) -> str:
    """``"; 3 retries (2 after HTTP 429), 4.2 s waited; 5 thinking parts dropped"`` (empty when none)."""
    out = ""
    if calls.get("retries"):
        limited = f" ({calls['rate_limited']} after HTTP 429)" if calls.get("rate_limited") else ""
        out += f"; {calls['retries']} retries{limited}, {calls.get('waited_s', 0.0):.1f} s waited"
    if calls.get("thinking_dropped"):
        out += f"; {calls['thinking_dropped']} thinking parts dropped from answers"
    return out


@dataclass(frozen=True)
class JudgeResult:
    """What :func:`judge` returns and writes.

    Attributes:
        out_dir: ``RESULTS_DIR/judge``. k: the cutoff.
        rows: one dict per backend x variant: ``backend``, ``variant``, ``rcp_ndcg@k``, ``ndcg@k``,
            ``hole@k`` (``None`` when the results lack it), ``outside_pool`` (top-k pages outside the
            calibrated pool, gain 0), ``per_query``.
        comparisons: ``[(backend, Comparison)]`` of each rewrite vs the originals on ``rcp_ndcg@k``
            (Holm over the variants of a backend).
        calibration: the fitted :class:`~vdr.judge.irt.Calibration`.
        document: the ``rcp.json`` document.
    """

    out_dir: Path
    k: int
    rows: list[dict]
    comparisons: list
    calibration: Calibration
    document: dict = field(repr=False)

    def table(self) -> str:
        """The RCP table as plain text (:func:`rcp_table`)."""
        return rcp_table(self.document).to_text()


def _query_text(q) -> str:
    if q.history:
        return "Earlier turns of the conversation: " + " | ".join(q.history) + "\nCurrent query: " + q.text
    return q.text


def _inputs(res: Results, corpus_dir, queries, qrels):
    """Corpus, original queries and qrels: the overrides, else what the results recorded."""
    from ..corpus import Corpus
    from ..io.formats import load_qrels, load_queries

    def need(value, what: str, key: str):
        if value is None:
            raise InputError(f"the {what} recorded in {RESULTS_FILE} ({res.config.get(key)}) cannot be read; pass it explicitly",
                             path=res.root / RESULTS_FILE)
        return value

    corpus = Corpus.load(corpus_dir) if corpus_dir is not None else need(res.corpus, "corpus folder", "corpus_dir")
    originals = load_queries(queries) if queries is not None else res.variants.get(ORIGINAL)
    if originals is None or (queries is None and not len(originals)):
        need(None, "original queries", "queries")
    qrels_obj = load_qrels(qrels) if qrels is not None else need(res.qrels, "qrels file", "qrels")
    return corpus, originals, qrels_obj


def _score_runs(res: Results, entries, runs, cal, query_ids, k: int):
    """RCP-nDCG@k per run (rows) and each rewrite against the originals (compare_variants)."""
    from ..stats import compare_variants
    from ..metrics import MetricsResult

    rows, by_backend = [], {}
    m = f"rcp_ndcg@{k}"
    for entry, run in zip(entries, runs):
        vals, outside = rcp_ndcg(run, cal, query_ids, k)
        agg = entry.metrics.aggregate
        rows.append({"backend": entry.backend, "variant": entry.variant, "run_file": entry.run_file,
                     m: sum(vals.values()) / len(vals) if vals else 0.0, f"ndcg@{k}": agg.get(f"ndcg@{k}"),
                     f"hole@{k}": agg.get(f"hole@{k}"), "outside_pool": sum(outside.values()), "per_query": vals,
                     "outside_pool_per_query": outside})
        scores = MetricsResult(tuple(query_ids), {m: np.array([vals[q] for q in query_ids], dtype=np.float64)})
        by_backend.setdefault(entry.backend, {})[entry.variant] = scores
    cfg = res.config
    comparisons = compare_variants({b: v for b, v in by_backend.items() if ORIGINAL in v}, [m], seed=int(cfg.get("seed", 0)),
                                   n_permutations=int(cfg.get("n_permutations", 10_000)), n_bootstrap=int(cfg.get("n_bootstrap", 10_000)))
    return rows, comparisons


def _write(out_dir: Path, document: dict, cal: Calibration, query_ids, qrels_obj) -> None:
    """``gains.tsv`` and ``rcp.json``, atomically."""
    from ..io.atomic import atomic_write

    buf = io.StringIO()
    buf.write("query-id\tcorpus-id\ttheta\tgain\tjudged-grade\n")
    for q in query_ids:
        th = cal.theta(q)
        gn = cal.gains(q)
        for d in sorted(th, key=lambda x: (-th[x], x)):
            grade = qrels_obj.get(q, {}).get(d)
            buf.write(f"{q}\t{d}\t{th[d]:.6f}\t{gn[d]:.6f}\t{'' if grade is None else grade}\n")
    with atomic_write(out_dir / "gains.tsv") as f:
        f.write(buf.getvalue())
    with atomic_write(out_dir / "rcp.json") as f:
        json.dump(json_safe(document), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")


FAILURES_FILE = "failures.jsonl"
"""``RESULTS_DIR/judge/failures.jsonl``: one JSON object per failed window (its query, stage, phase,
index, pages and the reason), written when ``vdr judge`` stops on a failure."""


def _write_failures(out_dir: Path, failures: list[dict]) -> Path:
    """Write ``failures`` to ``out_dir/failures.jsonl`` (atomically); its path."""
    from ..io.atomic import atomic_write

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FAILURES_FILE
    with atomic_write(path) as f:
        for rec in failures:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def _document(k: int, client: JudgeClient, details: dict, pools: dict, cal: Calibration, rows: list, comparisons: list,
              results_path: Path) -> dict:
    """The ``rcp.json`` document: method, judge, calls, schedule, pools, calibration, rows, comparisons."""
    pool_sizes = [len(p) for p in pools.values()]
    document = {
        "method": {
            "name": "RCP-nDCG (Rubric-Calibrated Preferences)",
            "sources": ["arXiv 2609.35739", "github.com/cohere-ai/rcp-ndcg (docs/concepts)"],
            "gain": "linear g(theta) = sum_c gamma_c sigmoid(gamma_c (theta - beta_c)) / sum_c gamma_c; ideal from the query's calibrated pool",
            "pool": f"union of the top {k} of every backend x variant run + every qrels-judged page of the query",
            "outside_pool": "pages of a top k outside the calibrated pool gain 0 and are counted (outside_pool)",
        },
        "k": k,
        "prompt_version": PROMPT_VERSION,
        "prompts_fingerprint": prompts_fingerprint(),
        "judge": client.config(),
        "calls": client.stats.to_dict(),
        "schedule": details["schedule"],
        "windows": details["windows"],
        "pools": {"queries": len(pools), "pages": sum(pool_sizes), "min": min(pool_sizes, default=0),
                  "max": max(pool_sizes, default=0), "mean": (sum(pool_sizes) / len(pool_sizes)) if pool_sizes else 0.0},
        "calibration": cal.to_dict(),
        "runs": rows,
        "comparisons": [dict(c.to_dict(), backend=b) for b, c in comparisons],
        "gains_file": "gains.tsv",
        "results": str(results_path),
    }
    return document


def _check_pools(pools, corpus, originals, query_ids) -> None:
    """Raise :class:`InputError` if a pooled page is not in the corpus or an evaluated query has no text."""
    unknown = sorted({d for p in pools.values() for d in p if d not in corpus})
    if unknown:
        raise InputError(f"{len(unknown)} pooled page(s) are not in the corpus, e.g. {unknown[:5]}")
    missing_q = [q for q in query_ids if q not in originals]
    if missing_q:
        raise InputError(f"{len(missing_q)} evaluated query id(s) have no text, e.g. {missing_q[:5]}")


@dataclass(frozen=True)
class JudgeOptions:
    """Every option of :func:`judge` (all but ``results_dir``), with its default.

    ``vdr.judge(results_dir, endpoint=..., judge_model=..., k=5)`` builds one from its keywords;
    ``vdr.judge(results_dir, options=JudgeOptions(...), budget=100)`` starts from a given one (the
    keywords override its fields).

    Attributes:
        llm: the endpoint settings (:class:`~vdr.llm.LLMSettings`, default :data:`JUDGE_LLM`). As
            keywords of :func:`judge`: ``endpoint`` (OpenAI-compatible base URL, default
            ``$VDR_JUDGE_ENDPOINT``; required), ``judge_model`` (the model name the endpoint serves;
            required), ``api_key`` (default ``$VDR_JUDGE_API_KEY``, then ``$OPENAI_API_KEY``; never
            written), ``budget`` (most judge calls, HTTP attempts, this run may make; ``None``:
            unlimited; cached answers cost nothing), ``concurrency`` (parallel requests),
            ``timeout``, ``max_retries``, ``backoff``, ``temperature``, ``max_tokens``, ``json_mode``,
            ``top_p``, ``seed``, ``stop`` (see :class:`~vdr.llm.LLMSettings`).
        modality: ``"image"`` (page PNGs; a vision judge) or ``"text"`` (page text, cut to ``max_chars``).
        k: cutoff of RCP-nDCG@k and pool depth.
        cache: JSONL answer cache (default ``RESULTS_DIR/judge/cache.jsonl``).
        schedule: windows (default :meth:`Schedule.for_modality`). priors: calibration priors.
        max_chars: page texts are cut to this many characters (text modality).
        corpus_dir, queries, qrels: override the corpus, original queries and qrels recorded in
            the results (default: the recorded ones; the queries as evaluated, with history).
        progress: show the judged windows on stderr (a bar on a terminal, a line every 30 s in a log).
    """

    llm: LLMSettings = JUDGE_LLM
    modality: str = "image"
    k: int = 3
    cache: str | Path | None = None
    schedule: Schedule | None = None
    priors: Priors = Priors()
    max_chars: int = 4000
    corpus_dir: str | Path | None = None
    queries: str | Path | None = None
    qrels: str | Path | None = None
    progress: bool = False


_LLM_KEYWORDS = tuple(next((a for a, f in _LLM_ALIASES.items() if f == name), name) for name in LLM_FIELDS)


def _options(options: JudgeOptions | None, kwargs: dict[str, Any]) -> JudgeOptions:
    """``options`` (default :class:`JudgeOptions`) with the keywords of :func:`judge` applied.

    Raises:
        TypeError: a keyword that is neither a :class:`JudgeOptions` field nor an endpoint setting.
    """
    llm, rest = split_keywords(kwargs, _LLM_ALIASES)
    opts = with_keywords(JudgeOptions, options, rest, "judge", tuple(_LLM_KEYWORDS))
    return dataclasses.replace(opts, llm=dataclasses.replace(opts.llm, **llm)) if llm else opts


def judge(results_dir: str | Path, *, options: JudgeOptions | None = None, **kwargs: Any) -> JudgeResult:
    """Add RCP-nDCG@k to an evaluation written by :func:`vdr.evaluate`.

    Args:
        results_dir: the folder holding ``results.json`` and ``runs/`` (read with :meth:`Results.load`).
        options: a :class:`JudgeOptions` (default: all defaults).
        **kwargs: any field of :class:`JudgeOptions` (``modality``, ``k``, ``cache``, ``schedule``,
            ``priors``, ``max_chars``, ``corpus_dir``, ``queries``, ``qrels``) or endpoint setting
            (``endpoint``, ``judge_model``, ``api_key``, ``budget``, ``concurrency``, ``timeout``,
            ``max_retries``, ``backoff``, ``temperature``, ``max_tokens``, ``json_mode``): documented
            there, with their defaults; they override ``options``.

    Returns:
        :class:`JudgeResult`; ``rcp.json`` and ``gains.tsv`` are written atomically under
        ``RESULTS_DIR/judge/``, holding the results folder's lock (:func:`vdr.io.outdir.locked`)
        from reading the results to the last write.

    Raises:
        JudgeConfigError: no endpoint or model (nothing is computed, no score is made up).
        JudgeOutputError / JudgeCallError / BudgetExhausted: the judge failed or the budget ran out;
            every answer received is cached and a rerun resumes; no results file is written; the
            failed windows and their reasons are in ``RESULTS_DIR/judge/failures.jsonl`` (named in
            the message; removed by a run that succeeds).
        InputError: a missing or malformed ``results.json``, run, corpus, queries or qrels file;
            another vdr run holds the results folder's lock (raised at once, before any judge call).
        TypeError: a keyword that is not an option (named, with the known ones).
    """
    return _judge(Path(results_dir), _options(options, kwargs))


# help(judge) and inspect.signature(judge) list every option with its default
judge.__signature__ = inspect.Signature(
    [inspect.Parameter("results_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path"),
     inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="JudgeOptions | None"),
     *(inspect.Parameter(kw, inspect.Parameter.KEYWORD_ONLY, default=getattr(JUDGE_LLM, f.name), annotation=f.type)
       for kw, f in zip(_LLM_KEYWORDS, dataclasses.fields(LLMSettings))),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
       for f in dataclasses.fields(JudgeOptions) if f.name != "llm")],
    return_annotation="JudgeResult",
)


def _judge(results_dir: Path, o: JudgeOptions) -> JudgeResult:
    """:func:`judge` with its options gathered: from the folder lock to the written ``rcp.json``."""
    from ..metrics import parse_cutoffs

    from ..io.outdir import locked

    llm = o.llm if o.llm.endpoint else dataclasses.replace(o.llm, endpoint=os.environ.get(ENDPOINT_ENV) or None)
    k = parse_cutoffs(o.k, single=True)[0]
    out_dir = results_dir / "judge"
    with locked(results_dir):  # no vdr evaluate/compare/judge replaces the results or writes judge/ meanwhile
        client = JudgeClient(llm.endpoint, llm.model, modality=o.modality, settings=llm,
                             cache=Path(o.cache) if o.cache is not None else out_dir / "cache.jsonl")
        client.progress = o.progress
        res = Results.load(results_dir)
        corpus, originals, qrels_obj = _inputs(res, o.corpus_dir, o.queries, o.qrels)
        entries = [r for r in res.runs if r.run_file]
        if not entries:
            raise InputError("the results list no run files", path=results_dir / RESULTS_FILE)
        runs = [res.ranking(r.backend, r.variant) for r in entries]
        query_ids = res.query_ids or list(qrels_obj)
        pools = build_pools(runs, qrels_obj, k, query_ids)
        _check_pools(pools, corpus, originals, query_ids)
        texts = {q: _query_text(originals[q]) for q in query_ids}
        try:
            cal, details = judge_pools(pools, texts, CorpusPages(corpus, o.max_chars), client, o.schedule, o.priors)
        except JudgeError as e:
            if not client.failures:
                raise
            path = _write_failures(out_dir, client.failures)
            raise type(e)(f"{e}; {len(client.failures)} failed window(s) listed in {path}") from None
        (out_dir / FAILURES_FILE).unlink(missing_ok=True)
        rows, comparisons = _score_runs(res, entries, runs, cal, query_ids, k)
        document = _document(k, client, details, pools, cal, rows, comparisons, results_dir / RESULTS_FILE)
        out_dir.mkdir(parents=True, exist_ok=True)
        _write(out_dir, document, cal, query_ids, qrels_obj)
    return JudgeResult(out_dir, k, rows, comparisons, cal, document)
