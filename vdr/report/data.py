"""Reading a results folder written by :func:`vdr.evaluate` back into Python (reports, notebooks).

:func:`load_results` reads ``RESULTS_DIR/results.json`` and, around it, what a report or a notebook
needs: the summary table as rows, per-query metric values, the ranked pages of every backend x
variant (from the TREC files in ``runs/``), the query texts (and conversation history) of every
variant, the qrels and the page corpus. Everything outside ``results.json`` is optional: a missing
``per_query.csv``, query file, qrels file or corpus folder (moved, deleted) becomes a warning in
:attr:`Results.warnings`, never an exception, so that a report still shows what it can.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..corpus import Corpus
from ..errors import InputError, VdrError
from ..io.formats import load_qrels, load_queries, load_run
from ..types import Qrels, Query, Run

__all__ = ["Results", "load_results", "RESULTS_FILE", "ORIGINAL"]

RESULTS_FILE = "results.json"
PER_QUERY_FILE = "per_query.csv"
ORIGINAL = "original"


def _resolve(path: str | None, root: Path) -> Path | None:
    """First existing candidate for a path recorded in ``results.json``: as written (absolute, or
    relative to the current folder), then relative to the results folder and each folder above it
    (``vdr evaluate`` records paths as given, relative to the folder it ran in, e.g. the repository
    root for ``out/demo/results``). ``None`` when ``path`` is empty or none exists."""
    if not path:
        return None
    p = Path(path)
    if p.is_absolute():
        return p if p.exists() else None
    root = root.resolve()
    for c in [p, root / p, *(a / p for a in root.parents)]:
        if c.exists():
            return c
    return None


@dataclass
class Results:
    """A results folder, loaded. Build it with :func:`load_results`.

    Attributes:
        root: the results folder.
        document: the parsed ``results.json`` (see :meth:`vdr.experiment.EvaluationResults.to_dict`).
        config: ``document["config"]``: every option of the evaluation.
        skipped: backends that did not run, with the reason (``{backend: reason}``).
        backends: backends with runs, in ``results.json`` order (``"macro"`` included when present).
        variants: variant names, ``"original"`` first.
        table_metrics: the summary table's metric columns (``ndcg@3, mrr@3, recall@5, recall@10,
            hole@3`` by default); the first is the primary metric.
        query_ids: the evaluated query set (the qrels' queries), in ``results.json`` order.
        queries: ``{variant: {query id: Query(text, history)}}``; texts are those evaluated (from
            ``per_query.csv``), history from the variant's query file when it can still be read.
        qrels: the qrels (``qid -> corpus id -> grade``), or ``None`` when the file is gone.
        corpus: the page corpus (page images for thumbnails), or ``None`` when it is gone.
        warnings: what could not be read (human-readable lines).
    """

    root: Path
    document: dict
    config: dict
    skipped: dict[str, str]
    backends: list[str]
    variants: list[str]
    table_metrics: list[str]
    query_ids: list[str]
    queries: dict[str, dict[str, Query]]
    qrels: Qrels | None
    corpus: Corpus | None
    warnings: list[str] = field(default_factory=list)
    _runs: dict = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- table and values

    @property
    def primary(self) -> str:
        """The primary metric (``"ndcg@3"`` by default): first column of the summary table."""
        return self.table_metrics[0]

    @property
    def rewrite_variants(self) -> list[str]:
        """Every variant except ``"original"`` (``concat`` included), in order."""
        return [v for v in self.variants if v != ORIGINAL]

    @property
    def relevance_level(self) -> int:
        """Minimum grade counted as relevant by the evaluation (``config.relevance_level``, default 1)."""
        return int(self.config.get("relevance_level", 1))

    def _run_doc(self, backend: str, variant: str) -> dict:
        for r in self.document["runs"]:
            if r["backend"] == backend and r["variant"] == variant:
                return r
        raise KeyError(f"no run for backend {backend!r}, variant {variant!r} in {self.root / RESULTS_FILE}")

    def aggregate(self, backend: str, variant: str) -> dict[str, float]:
        """Mean of every metric over the query set for ``backend`` x ``variant`` (``{metric: value}``).

        Raises:
            KeyError: no such run.
        """
        return dict(self._run_doc(backend, variant)["aggregate"])

    def per_query(self, backend: str, variant: str) -> dict[str, dict[str, float]]:
        """``{query id: {metric: value}}`` of ``backend`` x ``variant`` (values in [0, 1]).

        Raises:
            KeyError: no such run.
        """
        return self._run_doc(backend, variant)["per_query"]

    def values(self, backend: str, variant: str, metric: str) -> np.ndarray:
        """Per-query values of ``metric``, float64 array of shape ``(len(query_ids),)`` aligned with
        :attr:`query_ids` (``null`` values in the JSON become NaN).

        Raises:
            KeyError: no such run or metric.
        """
        pq = self.per_query(backend, variant)
        return np.array([np.nan if pq[q][metric] is None else pq[q][metric] for q in self.query_ids], dtype=np.float64)

    def deltas(self, backend: str, variant: str, metric: str | None = None) -> dict[str, float]:
        """Per-query change ``rewritten - original`` of ``metric`` (default: the primary one) on
        ``backend``: ``{query id: delta}`` in :attr:`query_ids` order, each in [-1, 1].

        Raises:
            KeyError: no such run or metric.
        """
        metric = metric or self.primary
        a = self.values(backend, ORIGINAL, metric)
        b = self.values(backend, variant, metric)
        return {q: float(y - x) for q, x, y in zip(self.query_ids, a, b)}

    def comparison(self, backend: str, variant: str, metric: str | None = None) -> dict | None:
        """The ``comparisons`` entry of ``variant`` vs the originals on ``backend`` for ``metric``
        (default primary): ``delta``, ``p_value``, ``p_value_holm``, ``ci95``, ``wins``/``ties``/
        ``losses``, ...; ``None`` when there is none (the originals themselves, an uncompared metric)."""
        metric = metric or self.primary
        for c in self.document.get("comparisons", []):
            if c.get("backend") == backend and c.get("variant") == variant and c.get("metric") == metric:
                return c
        return None

    def rows(self) -> list[dict]:
        """The summary table as rows, one per backend x variant in ``results.json`` order.

        Each row holds ``backend``, ``variant``, every table metric (mean, float), ``queries``
        (number averaged) and, for rewrite variants, the change on the primary metric: ``delta``,
        ``p_value`` (randomization test), ``p_value_holm``, ``p_value_ttest`` (``None`` when
        undefined), ``ci95`` (``(low, high)``), ``wins``, ``ties``, ``losses``; these are ``None``
        for the originals.
        """
        out = []
        for r in self.document["runs"]:
            row: dict = {"backend": r["backend"], "variant": r["variant"]}
            for m in self.table_metrics:
                row[m] = r["aggregate"].get(m)
            row["queries"] = r["num_queries"]
            c = self.comparison(r["backend"], r["variant"])
            for key in ("delta", "p_value", "p_value_holm", "p_value_ttest", "ci95", "wins", "ties", "losses"):
                v = None if c is None else c.get(key)
                row[key] = tuple(v) if key == "ci95" and v is not None else v
            out.append(row)
        return out

    # ---------------------------------------------------------------- runs, qrels, pages

    def run_path(self, backend: str, variant: str) -> Path | None:
        """Path of the TREC run of ``backend`` x ``variant`` (``None`` for ``macro`` rows, which have none).

        Raises:
            KeyError: no such run.
        """
        rel = self._run_doc(backend, variant).get("run_file")
        return None if not rel else self.root / rel

    def run(self, backend: str, variant: str) -> Run:
        """The ranked pages of ``backend`` x ``variant`` read from its TREC file (cached).

        Raises:
            KeyError: no such run. InputError: the run file is missing or malformed.
        """
        key = (backend, variant)
        if key not in self._runs:
            p = self.run_path(backend, variant)
            if p is None:
                raise InputError(f"backend {backend!r} has no run file (an average of other backends)")
            if not p.is_file():
                raise InputError("run file is missing", path=p)
            self._runs[key] = load_run(p)
        return self._runs[key]

    def ranked(self, backend: str, variant: str, query_id: str, k: int | None = 10) -> list[tuple[str, float]]:
        """The ``k`` best pages of one query, ``[(corpus id, score), ...]`` best first, in
        trec_eval order (score descending, ties by corpus id descending); ``[]`` when the run
        retrieved nothing for the query; all pages when ``k`` is ``None``.

        Raises:
            KeyError: no such run. InputError: the run file is missing or malformed.
        """
        run = self.run(backend, variant)
        if query_id not in run:
            return []
        r = run.ranked(query_id)
        return r if k is None else r[:k]

    def judgments(self, query_id: str) -> dict[str, int]:
        """Every judged page of ``query_id`` with its grade (``{corpus id: grade}``, highest grade
        first); ``{}`` when the query has none or the qrels could not be read."""
        if self.qrels is None or query_id not in self.qrels:
            return {}
        return dict(sorted(self.qrels[query_id].items(), key=lambda kv: (-kv[1], kv[0])))

    def relevant(self, query_id: str) -> dict[str, int]:
        """Pages of ``query_id`` with grade >= :attr:`relevance_level`, highest grade first."""
        return {d: g for d, g in self.judgments(query_id).items() if g >= self.relevance_level}

    def grade(self, query_id: str, corpus_id: str) -> int | None:
        """The qrels grade of a page for a query; ``None`` when the page is unjudged."""
        return self.judgments(query_id).get(corpus_id)

    def page_image(self, corpus_id: str):
        """The page image as an RGB ``PIL.Image.Image``, or ``None`` when the corpus, the page or its
        image file is missing or unreadable (never raises for those)."""
        if self.corpus is None or corpus_id not in self.corpus:
            return None
        try:
            return self.corpus.open_image(corpus_id)
        except (VdrError, OSError):
            return None

    def table(self) -> str:
        """The summary table as Markdown (same numbers as ``results.json``, 4 decimals)."""
        from .render import table_markdown

        return table_markdown(self)

    def _repr_html_(self) -> str:  # Jupyter shows the summary table
        from .render import table_html

        return table_html(self)


def _read_per_query_texts(path: Path, variants: list[str]) -> dict[str, dict[str, str]]:
    """``{variant: {query id: text}}`` from ``per_query.csv`` (columns ``text[<variant>]``)."""
    out: dict[str, dict[str, str]] = {v: {} for v in variants}
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        head = next(reader, None) or []
        cols = {v: head.index(f"text[{v}]") for v in variants if f"text[{v}]" in head}
        for row in reader:
            if not row:
                continue
            for v, i in cols.items():
                if i < len(row):
                    out[v][row[0]] = row[i]
    return out


def load_results(results_dir: str | Path) -> Results:
    """Load a results folder written by :func:`vdr.evaluate` (``vdr evaluate --out RESULTS_DIR``).

    Paths recorded in ``results.json`` (corpus, queries, qrels, rewrite files) are looked up as
    written, then relative to the results folder and its parent. What cannot be found or read is
    listed in :attr:`Results.warnings` and left as ``None``/empty: the corpus (no page images), the
    qrels (no relevance marks), the query files (no history), ``per_query.csv`` (texts from the
    query files instead).

    Args:
        results_dir: the folder holding ``results.json``, ``per_query.csv`` and ``runs/``.

    Returns:
        :class:`Results`.

    Raises:
        InputError: the folder or its ``results.json`` is missing, not valid JSON, or not a vdr
            results document (no ``runs``).
    """
    root = Path(results_dir)
    path = root / RESULTS_FILE
    if not path.is_file():
        raise InputError(f"not a results folder: {RESULTS_FILE} is missing (run `vdr evaluate --out ...` first)", path=root)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"invalid JSON ({e})", path=path) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise InputError("not a vdr results document (no 'runs')", path=path)
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict) or not {"backend", "variant", "aggregate", "per_query"} <= set(r):
            raise InputError(f"run #{i + 1} lacks backend/variant/aggregate/per_query", path=path)
    config = doc.get("config") or {}
    warnings: list[str] = []

    backends = list(dict.fromkeys(r["backend"] for r in doc["runs"]))
    variants = list(dict.fromkeys([*config.get("variants", []), *(r["variant"] for r in doc["runs"])]))
    if ORIGINAL in variants:
        variants.remove(ORIGINAL)
        variants.insert(0, ORIGINAL)
    first = doc["runs"][0]
    table_metrics = list(config.get("table_metrics") or [m for m in first["aggregate"] if not m.startswith("judged@")][:5])
    query_ids = list(first["per_query"])

    # query texts (as evaluated) and history (from the query files)
    vinfo = doc.get("variants") or {}
    texts: dict[str, dict[str, str]] = {v: {} for v in variants}
    pq_path = root / PER_QUERY_FILE
    if pq_path.is_file():
        try:
            texts = _read_per_query_texts(pq_path, variants)
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            warnings.append(f"{pq_path}: cannot be read ({e}); query texts taken from the query files")
    else:
        warnings.append(f"{pq_path} is missing; query texts taken from the query files")
    files: dict[str, dict[str, Query]] = {}
    for v in variants:
        src = (vinfo.get(v) or {}).get("source")
        if v != "concat" and v != ORIGINAL:
            src = (config.get("rewrites") or {}).get(v, src)
        elif v == ORIGINAL:
            src = config.get("queries", src)
        p = _resolve(src, root)
        if p is None or not p.is_file():
            if src:
                warnings.append(f"query file of variant {v!r} not found ({src}); history not shown")
            continue
        try:
            files[v] = dict(load_queries(p, name=v).items())
        except (VdrError, OSError) as e:
            warnings.append(f"query file of variant {v!r} cannot be read: {e}")
    queries: dict[str, dict[str, Query]] = {}
    for v in variants:
        fq = files.get(v, {})
        fo = files.get(ORIGINAL, {})
        out: dict[str, Query] = {}
        for q in query_ids:
            text = texts.get(v, {}).get(q)
            if text is None:  # no per_query.csv: rebuild from the query files
                if v == "concat" and q in fo:
                    text = " ".join([*fo[q].history, fo[q].text])
                elif q in fq:
                    text = fq[q].text
                else:
                    continue
            src_q = fo.get(q) if v == "concat" else fq.get(q)  # concat: the originals' history, joined into its text
            out[q] = Query(text, tuple(src_q.history) if src_q is not None else ())
        queries[v] = out

    qrels = None
    qp = _resolve(config.get("qrels"), root)
    if qp is None:
        warnings.append(f"qrels file not found ({config.get('qrels')}); relevance marks not shown")
    else:
        try:
            qrels = load_qrels(qp)
        except (VdrError, OSError) as e:
            warnings.append(f"qrels cannot be read: {e}")

    corpus = None
    cp = _resolve(config.get("corpus_dir"), root)
    if cp is None:
        warnings.append(f"corpus folder not found ({config.get('corpus_dir')}); page images not shown")
    else:
        try:
            corpus = Corpus.load(cp)
        except (VdrError, OSError) as e:
            warnings.append(f"corpus cannot be read: {e}; page images not shown")

    return Results(
        root=root,
        document=doc,
        config=config,
        skipped=dict(doc.get("skipped") or {}),
        backends=backends,
        variants=variants,
        table_metrics=table_metrics,
        query_ids=query_ids,
        queries=queries,
        qrels=qrels,
        corpus=corpus,
        warnings=warnings,
    )


def fmt_p(p: float | None) -> str:
    """A p-value as the summary table prints it (``n/a`` when undefined)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"
