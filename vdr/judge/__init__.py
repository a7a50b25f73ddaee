"""Judge-calibrated evaluation: RCP-nDCG beside qrels-based nDCG (``vdr judge``).

Pages that no qrels line judges count as irrelevant in nDCG, so a rewrite that retrieves new,
useful pages is penalised (``hole@k`` shows how often). RCP-nDCG (Rubric-Calibrated Preferences;
arXiv 2609.35739, reference code and documentation cohere-ai/rcp-ndcg) replaces the missing labels
with calibrated judgments of an LLM/VLM judge:

1. **Pool** per query: the union of the top ``k`` pages of every backend x variant run of
   ``results.json`` plus every qrels-judged page of the query (:func:`~vdr.judge.rcp.build_pools`).
2. **Stage A** (:mod:`vdr.judge.schedule`, :mod:`vdr.judge.bradley_terry`): the judge scores windows
   of pages on -5..+5; each window is also sent reversed; a Bradley-Terry fit of the soft pairwise
   preferences (weight ``2/w``, ridge 1e-4) orders each pool.
3. **Stage B**: five yes/no criteria per page, asked in windows (:mod:`vdr.judge.prompts`).
4. **Calibration** (:mod:`vdr.judge.irt`): one 2PL model over all rubric answers maps every query's
   Stage A scores onto one scale; gain ``g(theta)`` in (0, 1).
5. **RCP-nDCG@k** (:func:`~vdr.judge.rcp.rcp_ndcg`) per backend x variant, with the paired comparison
   original vs rewritten (:mod:`vdr.compare`).

:func:`judge` writes ``RESULTS_DIR/judge/rcp.json``, ``RESULTS_DIR/judge/gains.tsv`` (query-id,
corpus-id, theta, gain, judged-grade) and keeps the answer cache in ``RESULTS_DIR/judge/cache.jsonl``.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .client import (
    BudgetExhausted,
    CorpusPages,
    JudgeCache,
    JudgeCallError,
    JudgeClient,
    JudgeConfigError,
    JudgeError,
    JudgeOutputError,
    TextPages,
    Window,
)
from .irt import Calibration, ItemParams, Priors, calibrate, fit_2pl, gain
from .prompts import PROMPT_VERSION, prompts_fingerprint
from .rcp import build_pools, judge_pools, rcp_ndcg
from .schedule import Schedule

__all__ = [
    "judge",
    "JudgeResult",
    "JudgeClient",
    "JudgeCache",
    "CorpusPages",
    "TextPages",
    "Window",
    "Schedule",
    "Priors",
    "Calibration",
    "ItemParams",
    "calibrate",
    "fit_2pl",
    "gain",
    "build_pools",
    "judge_pools",
    "rcp_ndcg",
    "JudgeError",
    "JudgeConfigError",
    "JudgeOutputError",
    "JudgeCallError",
    "BudgetExhausted",
    "PROMPT_VERSION",
]

ENDPOINT_ENV = "VDR_JUDGE_ENDPOINT"


@dataclass(frozen=True)
class JudgeResult:
    """What :func:`judge` returns and writes.

    Attributes:
        out_dir: ``RESULTS_DIR/judge``. k: the cutoff.
        rows: one dict per backend x variant: ``backend``, ``variant``, ``rcp_ndcg@k``, ``ndcg@k``,
            ``hole@k`` (``None`` when results.json lacks it), ``outside_pool`` (top-k pages outside the
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
        """Rows backend x variant: RCP-nDCG@k beside nDCG@k and hole@k, the change of RCP-nDCG@k
        against the originals with its p-values, and the pages outside the pool."""
        m = f"rcp_ndcg@{self.k}"
        comp = {(b, c.variant): c for b, c in self.comparisons}
        head = ["backend", "variant", f"RCP-nDCG@{self.k}", f"nDCG@{self.k}", f"hole@{self.k}", "d RCP", "p (perm)", "p (Holm)", "outside pool"]
        rows = []
        for r in self.rows:
            c = comp.get((r["backend"], r["variant"]))
            f = lambda x: "" if x is None else f"{x:.4f}"  # noqa: E731
            rows.append([r["backend"], r["variant"], f(r[m]), f(r.get(f"ndcg@{self.k}")), f(r.get(f"hole@{self.k}")),
                         "" if c is None else f"{c.delta:+.4f}", "" if c is None else f"{c.p_value:.4f}",
                         "" if c is None else f"{c.p_value_holm:.4f}", str(r["outside_pool"])])
        widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(x, widths)) for x in rows]
        d = self.document
        lines.append(f"judge {d['judge']['model']} ({d['judge']['modality']}), prompts {PROMPT_VERSION}; calls {d['calls']['calls']},"
                     f" cached answers {d['calls']['cached']}; pages outside the calibrated pool gain 0 (counted above).")
        return "\n".join(lines)


def _resolve(p: str | Path | None, results_dir: Path, what: str) -> Path:
    if p is None:
        raise InputError(f"results.json does not name the {what}; pass it explicitly", path=results_dir / "results.json")
    p = Path(p)
    if p.exists() or p.is_absolute():
        return p
    alt = results_dir / p
    return alt if alt.exists() else p


def _query_text(q) -> str:
    if q.history:
        return "Earlier turns of the conversation: " + " | ".join(q.history) + "\nCurrent query: " + q.text
    return q.text


def judge(
    results_dir: str | Path,
    *,
    endpoint: str | None = None,
    judge_model: str | None = None,
    modality: str = "image",
    budget: int | None = None,
    k: int = 3,
    api_key: str | None = None,
    concurrency: int = 4,
    cache: str | Path | None = None,
    schedule: Schedule | None = None,
    priors: Priors = Priors(),
    timeout: float = 120.0,
    max_retries: int = 4,
    backoff: float = 1.0,
    max_chars: int = 4000,
    json_mode: bool = False,
    corpus_dir: str | Path | None = None,
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
) -> JudgeResult:
    """Add RCP-nDCG@k to an evaluation written by :func:`vdr.evaluate`.

    Args:
        results_dir: the folder holding ``results.json`` and ``runs/``.
        endpoint: OpenAI-compatible base URL (default ``$VDR_JUDGE_ENDPOINT``); required.
        judge_model: model name the endpoint serves; required.
        modality: ``"image"`` (page PNGs; a vision judge) or ``"text"`` (page text, cut to ``max_chars``).
        budget: most judge calls (HTTP attempts) this run may make; ``None``: unlimited. Cached
            answers cost nothing.
        k: cutoff of RCP-nDCG@k and pool depth.
        api_key: default ``$VDR_JUDGE_API_KEY``, then ``$OPENAI_API_KEY``; never written.
        concurrency: parallel requests. cache: JSONL answer cache (default ``RESULTS_DIR/judge/cache.jsonl``).
        schedule: windows (default :meth:`Schedule.for_modality`). priors: calibration priors.
        timeout, max_retries, backoff, json_mode: see :class:`~vdr.judge.client.JudgeClient`.
        corpus_dir, queries, qrels: override the paths recorded in ``results.json``.

    Returns:
        :class:`JudgeResult`; ``rcp.json`` and ``gains.tsv`` are written atomically under
        ``RESULTS_DIR/judge/``.

    Raises:
        JudgeConfigError: no endpoint or model (nothing is computed, no score is made up).
        JudgeOutputError / JudgeCallError / BudgetExhausted: the judge failed or the budget ran out;
            every answer received is cached and a rerun resumes; no results file is written.
        InputError: a missing or malformed ``results.json``, run, corpus, queries or qrels file.
    """
    from ..compare import compare_arrays, holm_adjust
    from ..corpus import Corpus
    from ..io.atomic import atomic_write
    from ..io.formats import load_qrels, load_queries, load_run
    from ..metrics import parse_cutoffs

    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    k = parse_cutoffs(k, single=True)[0]
    results_dir = Path(results_dir)
    out_dir = results_dir / "judge"
    client = JudgeClient(endpoint, judge_model, modality=modality, api_key=api_key,
                         cache=Path(cache) if cache is not None else out_dir / "cache.jsonl",
                         concurrency=concurrency, budget=budget, timeout=timeout, max_retries=max_retries,
                         backoff=backoff, json_mode=json_mode)
    rpath = results_dir / "results.json"
    try:
        doc = json.loads(rpath.read_text(encoding="utf-8"))
        cfg, run_entries = doc["config"], doc["runs"]
    except FileNotFoundError:
        raise InputError("no results.json here: run `vdr evaluate ... --out RESULTS_DIR` first", path=rpath) from None
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise InputError(f"not a vdr results.json ({e})", path=rpath) from None
    corpus = Corpus.load(_resolve(corpus_dir or cfg.get("corpus_dir"), results_dir, "corpus folder"))
    originals = load_queries(_resolve(queries or cfg.get("queries"), results_dir, "queries file"))
    qrels_path = _resolve(qrels or cfg.get("qrels"), results_dir, "qrels file")
    qrels_obj = load_qrels(qrels_path)
    entries = [r for r in run_entries if r.get("run_file")]
    if not entries:
        raise InputError("results.json lists no run files", path=rpath)
    runs = [load_run(results_dir / r["run_file"]) for r in entries]
    query_ids = list(entries[0]["per_query"]) or list(qrels_obj)
    pools = build_pools(runs, qrels_obj, k, query_ids)
    unknown = sorted({d for p in pools.values() for d in p if d not in corpus})
    if unknown:
        raise InputError(f"{len(unknown)} pooled page(s) are not in the corpus, e.g. {unknown[:5]}")
    missing_q = [q for q in query_ids if q not in originals]
    if missing_q:
        raise InputError(f"{len(missing_q)} evaluated query id(s) have no text, e.g. {missing_q[:5]}")
    texts = {q: _query_text(originals[q]) for q in query_ids}
    cal, details = judge_pools(pools, texts, CorpusPages(corpus, max_chars), client, schedule, priors)

    rows, per_run = [], {}
    m = f"rcp_ndcg@{k}"
    for entry, run in zip(entries, runs):
        vals, outside = rcp_ndcg(run, cal, query_ids, k)
        agg = entry.get("aggregate", {})
        row = {"backend": entry["backend"], "variant": entry["variant"], "run_file": entry["run_file"],
               m: sum(vals.values()) / len(vals) if vals else 0.0,
               f"ndcg@{k}": agg.get(f"ndcg@{k}"), f"hole@{k}": agg.get(f"hole@{k}"),
               "outside_pool": sum(outside.values()), "per_query": vals, "outside_pool_per_query": outside}
        rows.append(row)
        per_run[(entry["backend"], entry["variant"])] = vals
    comparisons = []
    seed = int(cfg.get("seed", 0))
    nperm = int(cfg.get("n_permutations", 10_000))
    nboot = int(cfg.get("n_bootstrap", 10_000))
    for b in dict.fromkeys(e["backend"] for e in entries):
        base = per_run.get((b, "original"))
        if base is None:
            continue
        comps = []
        for (bb, v), vals in per_run.items():
            if bb == b and v != "original":
                comps.append(compare_arrays([base[q] for q in query_ids], [vals[q] for q in query_ids], m,
                                            variant=v, n_permutations=nperm, n_bootstrap=nboot, seed=seed))
        if comps:
            comparisons += [(b, c) for c in holm_adjust(comps)]

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
        "results": str(rpath),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
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
        json.dump(_finite(document), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    return JudgeResult(out_dir, k, rows, comparisons, cal, document)


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class _CallableModule(types.ModuleType):
    """``vdr.judge`` both as a package and as the verb: calling the module calls :func:`judge`."""

    def __call__(self, results_dir, **kwargs) -> JudgeResult:
        """Same as :func:`judge`."""
        return judge(results_dir, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
