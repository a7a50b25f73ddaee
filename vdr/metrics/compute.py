"""The evaluate stage: per-query retrieval metrics with trec_eval semantics, then their mean.

Metric names are parsed, hashable :class:`Metric` values written ``family@k`` (``ndcg@3``,
``mrr@3``, ``recall@10``, ``precision@5``, ``hit@5``, ``map@10``, ``judged@3``, ``hole@3``);
``mrr`` and ``map`` without ``@k`` use the whole ranking. :data:`METRICS` is the registry.

Conventions (all as trec_eval 10.0, github.com/usnistgov/trec_eval):

* **Ranking**: score descending (float64); ties broken by corpus id descending in byte order
  (trec_eval sorts by ``sim`` then ``docno``, both decreasing), so ``"p9"`` ranks before ``"p10"``.
* **Query set**: every query with at least one qrels line. A query absent from the run scores 0
  on every metric (trec_eval ``-c``); run queries without qrels are ignored and counted.
  Queries whose qrels hold no grade > 0 count as 0 by default (``queries_without_relevant="zero"``)
  or are left out (``"exclude"``); :attr:`MetricsResult.policy` always says which, with counts.
* **Relevant** (binary metrics): grade >= ``relevance_level`` (default 1, trec_eval ``-l``).
* **Gain** (nDCG): the grade itself (linear), only grades > 0 (trec_eval ``ndcg_cut``).

The computation is vectorised with NumPy: each query's scores are placed in a padded row, rows
are sorted, and the rank of every judged corpus id is found by a batched binary search, so the
cost is O(N log L) for N scored pages and L pages per query, plus one Python step per qrels line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import InputError
from ..io.atomic import atomic_write
from ..io.formats import load_qrels, load_run
from ..types import Qrels, Run

__all__ = ["Metric", "METRICS", "parse_metric", "default_metrics", "evaluate_run", "MetricsResult", "metrics"]


# --------------------------------------------------------------------------------------------
# registry


@dataclass(frozen=True)
class _Family:
    name: str
    needs_k: bool
    formula: str
    source: str


METRICS: dict[str, _Family] = {
    f.name: f
    for f in (
        _Family(
            "ndcg",
            True,
            "DCG@k / IDCG@k; DCG@k = sum_{rank r <= k} g_r / log2(r + 1), g = grade if grade > 0 else 0;"
            " IDCG@k from ALL the query's qrels grades > 0, sorted descending, cut at k; 0 when IDCG is 0",
            "Jarvelin & Kekalainen 2002; trec_eval ndcg_cut",
        ),
        _Family(
            "ndcg_exp",
            True,
            "as ndcg@k with exponential gain g = 2^grade - 1 (grade > 0)",
            "Burges et al. 2005 (RankNet); opt-in, not trec_eval's default",
        ),
        _Family(
            "ndcg_run",
            True,
            "as ndcg@k but IDCG@k formed from the retrieved top-k gains only, sorted descending;"
            " inflates scores when relevant pages are missed",
            "NDCG@3 recipe used for query-rewriting evaluation after Cha et al. 2025 (arXiv 2507.23242); opt-in",
        ),
        _Family(
            "mrr",
            False,
            "1 / rank of the first relevant page within the top k (whole list without @k), else 0",
            "trec_eval recip_rank (with -M k for @k)",
        ),
        _Family("recall", True, "relevant pages in the top k / all relevant pages of the query (0 if none)", "trec_eval recall_k"),
        _Family("precision", True, "relevant pages in the top k / k", "trec_eval P_k"),
        _Family("hit", True, "1 if any relevant page is in the top k, else 0", "trec_eval success_k"),
        _Family(
            "map",
            False,
            "sum over relevant pages at rank r <= k of (relevant in top r) / r, divided by all relevant pages of the query",
            "trec_eval map_cut_k (map without @k)",
        ),
        _Family(
            "judged",
            True,
            "pages in the top k that have any qrels line for the query (any grade) / k",
            "ir_measures Judged@k",
        ),
        _Family("hole", True, "1 - judged@k: share of the top k without a qrels line", "MTEB hole@k (per-query qrels)"),
    )
}

_NAME_RE = re.compile(r"^([a-z_]+)(?:@(\d+))?$")


@dataclass(frozen=True, order=True)
class Metric:
    """A parsed metric name: ``family`` (a key of :data:`METRICS`) and cutoff ``k`` (``None`` = whole list)."""

    family: str
    k: int | None = None

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def parse_metric(name: str | Metric) -> Metric:
    """Parse ``"ndcg@3"`` into ``Metric("ndcg", 3)``.

    Raises:
        InputError: unknown family, a missing/zero cutoff where one is required; the message lists
            the known metrics.
    """
    if isinstance(name, Metric):
        return name
    m = _NAME_RE.match(name.strip().lower())
    known = ", ".join(f"{f}@k" if METRICS[f].needs_k else f"{f}[@k]" for f in METRICS)
    if not m or m.group(1) not in METRICS:
        raise InputError(f"unknown metric {name!r}; known metrics: {known}")
    fam, k = m.group(1), m.group(2)
    if k is None and METRICS[fam].needs_k:
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {fam}@10")
    if k is not None and int(k) < 1:
        raise InputError(f"metric {name!r}: the cutoff must be >= 1")
    return Metric(fam, None if k is None else int(k))


DEFAULT_FAMILIES = ("ndcg", "mrr", "recall", "precision", "hit", "map", "judged")


def default_metrics(ks: Iterable[int] = (1, 3, 5, 10)) -> list[Metric]:
    """The standard set: ndcg, mrr, recall, precision, hit, map and judged at each cutoff in ``ks``."""
    return [Metric(f, int(k)) for f in DEFAULT_FAMILIES for k in ks]


# --------------------------------------------------------------------------------------------
# result


@dataclass(frozen=True)
class MetricsResult:
    """Per-query metric values and their means.

    Attributes:
        query_ids: the evaluated query ids, sorted (the query set; see the module docstring).
        values: ``{metric_name: float64 array of shape (len(query_ids),)}``.
        policy: how the query set and relevance were defined, with counts (written to JSON).
    """

    query_ids: tuple[str, ...]
    values: Mapping[str, np.ndarray]
    policy: Mapping[str, object] = field(default_factory=dict)

    @property
    def num_queries(self) -> int:
        """Number of queries averaged."""
        return len(self.query_ids)

    @property
    def aggregate(self) -> dict[str, float]:
        """``{metric_name: mean over the query set}`` (NaN if the set is empty)."""
        return {m: (float(v.mean()) if len(v) else math.nan) for m, v in self.values.items()}

    @property
    def per_query(self) -> dict[str, dict[str, float]]:
        """``{query_id: {metric_name: value}}``."""
        names = list(self.values)
        cols = [self.values[m].tolist() for m in names]
        return {q: dict(zip(names, row)) for q, row in zip(self.query_ids, zip(*cols))}

    def to_dict(self) -> dict:
        """``{"aggregate", "per_query", "num_queries", "policy"}`` as plain JSON-ready types."""
        return {
            "aggregate": self.aggregate,
            "per_query": self.per_query,
            "num_queries": self.num_queries,
            "policy": dict(self.policy),
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` atomically as JSON."""
        with atomic_write(path) as f:
            json.dump(self.to_dict(), f, indent=1, ensure_ascii=False)
            f.write("\n")

    def write_per_query_csv(self, path: str | Path) -> None:
        """Write one row per query (``query-id`` then one column per metric) atomically."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        names = list(self.values)
        w.writerow(["query-id", *names])
        cols = [self.values[m].tolist() for m in names]
        for q, row in zip(self.query_ids, zip(*cols)):
            w.writerow([q, *(repr(x) for x in row)])
        with atomic_write(path) as f:
            f.write(buf.getvalue())

    def table(self) -> str:
        """A plain-text table: one row per metric family, one column per cutoff."""
        agg = self.aggregate
        fams: dict[str, dict[str, float]] = {}
        cuts: list[str] = []
        for name, v in agg.items():
            fam, _, k = name.partition("@")
            col = f"@{k}" if k else "all"
            fams.setdefault(fam, {})[col] = v
            if col not in cuts:
                cuts.append(col)
        cuts.sort(key=lambda c: (c == "all", int(c[1:]) if c != "all" else 0))
        width = max([len(f) for f in fams] + [6])
        lines = [f"{'metric':<{width}}  " + "  ".join(f"{c:>7}" for c in cuts)]
        for fam, vals in fams.items():
            cells = [f"{vals[c]:7.4f}" if c in vals else f"{'':>7}" for c in cuts]
            lines.append(f"{fam:<{width}}  " + "  ".join(cells))
        p = self.policy
        lines.append(
            f"{self.num_queries} queries averaged; relevant = grade >= {p.get('relevance_level')};"
            f" queries missing from the run scored 0: {p.get('num_queries_missing_from_run')};"
            f" queries without relevant pages ({p.get('queries_without_relevant')}): {p.get('num_queries_without_relevant')};"
            f" run queries without qrels ignored: {p.get('num_run_queries_without_qrels')}"
        )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# engine


def _first_greater(M: np.ndarray, rows: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Batched binary search: for each i, the first column j with ``M[rows[i], j] > s[i]`` (rows ascending)."""
    L = M.shape[1]
    lo = np.zeros(len(rows), dtype=np.int64)
    hi = np.full(len(rows), L, dtype=np.int64)
    for _ in range(max(1, int(L).bit_length())):
        mid = (lo + hi) >> 1
        cond = M[rows, np.minimum(mid, L - 1)] > s
        active = lo < hi
        hi = np.where(active & cond, mid, hi)
        lo = np.where(active & ~cond, mid + 1, lo)
    return lo


def _ranks(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, j_q: np.ndarray, j_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank of each judged-and-retrieved entry among its query's scores, ignoring the corpus-id tie-break.

    Args:
        flat: all run scores, float64 ``(n_entries,)``; query ``i`` owns ``flat[starts[i]:starts[i] + lengths[i]]``.
        j_q, j_s: query index and score of each entry to rank.

    Returns:
        ``(ranks, tied)``: 1 + the number of strictly greater scores, int64; and a bool mask of the
        entries whose score is shared with another page of the query (their rank needs the tie-break).
    """
    ranks = np.zeros(len(j_q), dtype=np.int64)
    tied = np.zeros(len(j_q), dtype=bool)
    if len(j_q) == 0:
        return ranks, tied
    # bucket queries by padded row length (next power of two), so padding wastes at most 2x
    pad = np.where(lengths > 0, 1 << np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64), 0)
    j_bucket = pad[j_q]
    row_in_bucket = np.empty(len(lengths), dtype=np.int64)
    for L in np.unique(j_bucket):
        L = int(L)
        qs = np.nonzero(pad == L)[0]
        row_in_bucket[qs] = np.arange(len(qs))
        lens = lengths[qs]
        total = int(lens.sum())
        rr = np.repeat(np.arange(len(qs)), lens)
        within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
        M = np.full((len(qs), L), -np.inf)
        M[rr, within] = flat[np.repeat(starts[qs], lens) + within]
        M.sort(axis=1)
        sel = np.nonzero(j_bucket == L)[0]
        rows = row_in_bucket[j_q[sel]]
        pos = _first_greater(M, rows, j_s[sel])  # M[row, pos - 1] is the entry's own score
        ranks[sel] = L - pos + 1
        tied[sel] = (pos >= 2) & (M[rows, np.maximum(pos - 2, 0)] == j_s[sel])
    return ranks, tied


def evaluate_run(
    qrels: Qrels | Mapping,
    run: Run | Mapping,
    metrics: Sequence[str | Metric] | None = None,
    *,
    relevance_level: int = 1,
    queries_without_relevant: Literal["zero", "exclude"] = "zero",
) -> MetricsResult:
    """Compute per-query metrics of ``run`` against ``qrels`` (trec_eval semantics, see module doc).

    Args:
        qrels: :class:`~vdr.types.Qrels` or a ``{query_id: {corpus_id: int grade}}`` dict.
        run: :class:`~vdr.types.Run` or a ``{query_id: {corpus_id: float score}}`` dict.
        metrics: metric names (``"ndcg@3"``...); default :func:`default_metrics` at 1, 3, 5, 10.
        relevance_level: minimum grade that counts as relevant for the binary metrics
            (recall, precision, hit, mrr, map); nDCG uses the grades themselves.
        queries_without_relevant: ``"zero"`` (default) averages queries whose qrels hold no grade > 0
            as 0; ``"exclude"`` leaves them out. Either way they are counted in ``policy``.

    Returns:
        :class:`MetricsResult` with one float64 value per evaluated query and metric.

    Raises:
        InputError: unknown metric names, bad ids/grades/scores in dict input, a bad policy, or a
            query set that is empty.
    """
    if not isinstance(qrels, Qrels):
        qrels = Qrels(qrels)
    if not isinstance(run, Run):
        run = Run(run)
    mlist = default_metrics() if metrics is None else [parse_metric(m) for m in metrics]
    mlist = list(dict.fromkeys(mlist))
    if queries_without_relevant not in ("zero", "exclude"):
        raise InputError(f"queries_without_relevant must be 'zero' or 'exclude', not {queries_without_relevant!r}")
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, np.integer)):
        raise InputError(f"relevance_level must be an integer, not {relevance_level!r}")
    level = int(relevance_level)

    qd, rd = qrels._data, run._data
    no_rel = [q for q, docs in qd.items() if not any(g > 0 for g in docs.values())]
    excluded = set(no_rel) if queries_without_relevant == "exclude" else set()
    qids = sorted(q for q in qd if q not in excluded)
    if not qids:
        raise InputError("no queries to evaluate: the qrels hold no query" + (" with a grade > 0" if excluded else ""))
    nq = len(qids)
    empty: dict = {}
    runs = [rd.get(q, empty) for q in qids]

    # qrels lines as arrays: query index, grade, and the run's score (NaN: not retrieved; run scores are finite)
    qlens = np.fromiter((len(qd[q]) for q in qids), dtype=np.int64, count=nq)
    n_lines = int(qlens.sum())
    q_all = np.repeat(np.arange(nq), qlens)
    g_all = np.fromiter(chain.from_iterable(qd[q].values() for q in qids), dtype=np.int64, count=n_lines)
    s_all = np.fromiter(
        chain.from_iterable(map(rq.get, qd[q], repeat(math.nan)) for q, rq in zip(qids, runs)), dtype=np.float64, count=n_lines
    )
    num_rel = np.bincount(q_all[g_all >= level], minlength=nq)
    pos_mask = g_all > 0
    pq, pg = q_all[pos_mask], g_all[pos_mask]
    j_idx = np.nonzero(~np.isnan(s_all))[0]
    jq, js, jg = q_all[j_idx], s_all[j_idx], g_all[j_idx]

    flat, starts, qpos = run._columns()
    r_pos = np.fromiter((qpos.get(q, -1) for q in qids), dtype=np.int64, count=nq)
    r_lens = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
    r_starts = np.zeros(nq, dtype=np.int64)
    r_starts[r_pos >= 0] = starts[r_pos[r_pos >= 0]]
    jr, tied = _ranks(flat, r_starts, r_lens, jq, js)
    if tied.any():  # trec_eval breaks score ties by corpus id, descending: count tied ids greater than ours
        q_first = np.cumsum(qlens) - qlens
        by_query: dict[int, list[int]] = {}
        for t in np.nonzero(tied)[0].tolist():
            by_query.setdefault(int(jq[t]), []).append(t)
        for i, ts in by_query.items():
            want = {float(js[t]) for t in ts}
            groups: dict[float, list[str]] = {}
            for d, v in runs[i].items():
                fv = float(v)
                if fv in want:
                    groups.setdefault(fv, []).append(d)
            judged_ids = list(qd[qids[i]])
            for t in ts:
                d = judged_ids[int(j_idx[t] - q_first[i])]
                jr[t] += sum(1 for other in groups[float(js[t])] if other > d)

    rel = jg >= level
    jgain_lin = np.where(jg > 0, jg, 0).astype(np.float64)
    jdisc = 1.0 / np.log2(jr + 1.0)
    # ideal order: per query, positive grades descending
    order = np.lexsort((-pg, pq))
    pq_s, pg_s = pq[order], pg[order]
    first = np.searchsorted(pq_s, np.arange(nq))
    pos_in_q = np.arange(len(pq_s)) - first[pq_s]
    idisc = 1.0 / np.log2(pos_in_q + 2.0)
    # relevant retrieved entries ordered by (query, rank): the j-th has precision j / rank (AP)
    r_idx = np.nonzero(rel)[0]
    r_idx = r_idx[np.lexsort((jr[r_idx], jq[r_idx]))]
    rq_, rr_ = jq[r_idx], jr[r_idx]
    r_first = np.searchsorted(rq_, np.arange(nq))
    r_prec = (np.arange(len(rq_)) - r_first[rq_] + 1) / rr_
    min_rank = np.full(nq, np.inf)
    np.minimum.at(min_rank, rq_, rr_.astype(np.float64))

    def count(mask: np.ndarray, q: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(q[mask], weights=None if w is None else w[mask], minlength=nq).astype(np.float64)

    def ndcg(k: int, gain: str, ideal: str) -> np.ndarray:
        jgain = jgain_lin if gain == "linear" else np.where(jg > 0, np.exp2(jg.astype(np.float64)) - 1.0, 0.0)
        inK = jr <= k
        dcg = count(inK, jq, jgain * jdisc)
        if ideal == "qrels":
            pgain = pg_s.astype(np.float64) if gain == "linear" else np.exp2(pg_s.astype(np.float64)) - 1.0
            idcg = count(pos_in_q < k, pq_s, pgain * idisc)
        else:  # ideal from the retrieved top-k gains, sorted descending
            sel = np.nonzero(inK & (jg > 0))[0]
            sel = sel[np.lexsort((-jgain[sel], jq[sel]))]
            sq = jq[sel]
            p = np.arange(len(sel)) - np.searchsorted(sq, np.arange(nq))[sq]
            idcg = count(np.ones(len(sel), dtype=bool), sq, jgain[sel] / np.log2(p + 2.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(idcg > 0, dcg / idcg, 0.0)

    values: dict[str, np.ndarray] = {}
    safe_rel = np.maximum(num_rel, 1)
    for m in mlist:
        k = m.k
        f = m.family
        if f == "ndcg":
            v = ndcg(k, "linear", "qrels")
        elif f == "ndcg_exp":
            v = ndcg(k, "exp", "qrels")
        elif f == "ndcg_run":
            v = ndcg(k, "linear", "run")
        elif f == "mrr":
            lim = np.inf if k is None else k
            v = np.where(min_rank <= lim, 1.0 / min_rank, 0.0)
        elif f == "recall":
            v = np.where(num_rel > 0, count(rel & (jr <= k), jq) / safe_rel, 0.0)
        elif f == "precision":
            v = count(rel & (jr <= k), jq) / k
        elif f == "hit":
            v = (count(rel & (jr <= k), jq) > 0).astype(np.float64)
        elif f == "map":
            lim = np.iinfo(np.int64).max if k is None else k
            v = np.where(num_rel > 0, count(rr_ <= lim, rq_, r_prec) / safe_rel, 0.0)
        elif f == "judged":
            v = count(jr <= k, jq) / k
        elif f == "hole":
            v = 1.0 - count(jr <= k, jq) / k
        else:  # pragma: no cover - the registry and this switch are kept in step by tests
            raise InputError(f"metric {m} is registered but not implemented")
        values[str(m)] = v

    policy = {
        "relevance_level": level,
        "gain": "linear grade, grades > 0 only (trec_eval ndcg_cut)",
        "tie_break": "score descending, then corpus id descending in byte order (trec_eval)",
        "missing_run_queries": "zero (trec_eval -c)",
        "queries_without_relevant": queries_without_relevant,
        "num_queries_in_qrels": len(qd),
        "num_queries_averaged": nq,
        "num_queries_without_relevant": len(no_rel),
        "num_queries_missing_from_run": sum(1 for q in qids if q not in rd),
        "num_run_queries_without_qrels": sum(1 for q in rd if q not in qd),
    }
    return MetricsResult(tuple(qids), values, policy)


def _parse_ks(k: str | Iterable[int]) -> list[int]:
    if isinstance(k, str):
        try:
            ks = [int(x) for x in k.replace(" ", "").split(",") if x]
        except ValueError:
            raise InputError(f"--k must be comma-separated integers like 1,3,5,10, got {k!r}") from None
    else:
        ks = [int(x) for x in k]
    if not ks or any(x < 1 for x in ks):
        raise InputError(f"cutoffs must be integers >= 1, got {k!r}")
    return sorted(dict.fromkeys(ks))


def metrics(
    qrels: Qrels | Mapping | str | Path,
    run: Run | Mapping | str | Path,
    k: str | Iterable[int] = (1, 3, 5, 10),
    metric_names: Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    queries_without_relevant: Literal["zero", "exclude"] = "zero",
    json_path: str | Path | None = None,
    per_query_path: str | Path | None = None,
) -> MetricsResult:
    """Evaluate a run against qrels (files or objects); the Python face of ``vdr metrics``.

    Args:
        qrels: a :class:`~vdr.types.Qrels`, a dict, or a path (TREC, BEIR TSV or JSON; see
            :func:`vdr.io.load_qrels`).
        run: a :class:`~vdr.types.Run`, a dict, or a path (TREC run or JSON).
        k: cutoffs, as ``"1,3,5,10"`` or integers; used with the default metric families
            (ndcg, mrr, recall, precision, hit, map, judged) unless ``metric_names`` is given.
        metric_names: explicit metric names (``["ndcg@3", "hole@3", "mrr"]``); overrides ``k``.
        relevance_level, queries_without_relevant: see :func:`evaluate_run`.
        json_path: if given, write ``{"aggregate", "per_query", "num_queries", "policy"}`` there.
        per_query_path: if given, write a per-query CSV there.

    Returns:
        :class:`MetricsResult`.

    Raises:
        InputError: bad files, ids, grades, scores, cutoffs or metric names (file and line named).
    """
    if isinstance(qrels, (str, Path)):
        qrels = load_qrels(qrels)
    if isinstance(run, (str, Path)):
        run = load_run(run)
    names = metric_names if metric_names else default_metrics(_parse_ks(k))
    res = evaluate_run(qrels, run, names, relevance_level=relevance_level, queries_without_relevant=queries_without_relevant)
    if json_path is not None:
        res.write_json(json_path)
    if per_query_path is not None:
        res.write_per_query_csv(per_query_path)
    return res
