"""The metrics stage: per-query retrieval metrics with trec_eval semantics, then their mean.

Metric names are parsed by the registry (:mod:`vdr.metrics.registry`) into :class:`Metric` values
written ``family@k`` (``ndcg@3``, ``mrr@3``, ``recall@10``, ``precision@5``, ``hit@5``, ``map@10``,
``judged@3``, ``hole@3``, ``ties@3``); ``mrr`` and ``map`` without ``@k`` use the whole ranking.
Every family is computed by its registry entry from one :class:`Ranked` context.

Conventions (all as trec_eval 10.0, github.com/usnistgov/trec_eval):

* **Ranking**: score descending (float64); ties broken by corpus id descending in byte order
  (trec_eval sorts by ``sim`` then ``docno``, both decreasing), so ``"p9"`` ranks before ``"p10"``.
* **Query set**: every query with at least one qrels line. A query whose judgment set is empty
  (JSON qrels ``{"q2": {}}``) is not in it: it is skipped and listed in the policy, never averaged
  as 0. A query absent from the run scores 0 on every metric (trec_eval ``-c``), or is left out
  with ``queries_missing_from_run="exclude"`` (trec_eval without ``-c``); run queries without qrels
  are ignored and counted. Queries whose qrels hold no grade > 0 count as 0 by
  default (``queries_without_relevant="zero"``) or are left out (``"exclude"``);
  :attr:`MetricsResult.policy` always says which, with counts.
* **Judged overlap** (:func:`check_judged_overlap`): a query whose retrieved pages all lack a qrels
  line is warned about; a run where this holds for every query (almost always an id-format
  mismatch) is refused unless ``allow_unjudged=True``.
* **Relevant** (binary metrics): grade >= ``relevance_level`` (default 1, trec_eval ``-l``).
* **Gain** (nDCG): the grade itself (linear), only grades > 0 (trec_eval ``ndcg_cut``).

The computation is vectorised with NumPy: each query's scores are placed in a padded row, rows
are sorted, and the rank of every judged corpus id is found by a batched binary search, so the
cost is O(N log L) for N scored pages and L pages per query, plus one Python step per qrels line.

>>> r = evaluate_run({"q1": {"d1": 0, "d2": 1}, "q2": {}}, {"q1": {"d1": 0.9, "d2": 0.8}}, ["nDCG@3", "P@1"])
>>> round(r.aggregate["ndcg@3"], 4), r.num_queries, r.policy["queries_skipped_no_judgments"]
(0.6309, 1, ['q2'])
"""

from __future__ import annotations

import copy
import csv
import inspect
import io
import json
import math
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import chain, repeat
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import InputError, VdrWarning
from ..options import with_keywords
from ..progress import counted
from ..io.atomic import atomic_write
from ..io.formats import load_qrels, load_run
from ..types import Qrels, Run
from .plan import METRICS_DEFAULTS, MetricPlan
from .kernels import MIN_GEO_MEAN
from .registry import (
    LEVEL_FAMILIES, METRICS, METRICS_CUTOFFS, Metric, default_metrics, metric_label, parse_cutoffs, parse_metric, parse_metrics,
)

__all__ = [
    "Metric",
    "METRICS",
    "parse_metric",
    "parse_cutoffs",
    "default_metrics",
    "evaluate_run",
    "check_judged_overlap",
    "MetricsResult",
    "Ranked",
    "metrics",
    "MetricsOptions",
]


# --------------------------------------------------------------------------------------------
# result


@dataclass(frozen=True)
class MetricsResult:
    """Per-query metric values and their means.

    Attributes:
        query_ids: the evaluated query ids, sorted (the query set; see the module docstring).
        values: ``{metric_name: float64 array of shape (len(query_ids),)}`` (canonical names;
            ``ties@k`` values are counts).
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
        """``{metric_name: mean over the query set}`` (NaN if the set is empty); families of kind
        ``"run_mean"`` (paper-compatible ``rr_full``) average over their non-NaN values only (the
        queries present in the run); families of kind ``"sum"`` (``num_ret``, ``num_rel``,
        ``num_rel_ret``) are SUMMED over the query set, as trec_eval's ``all`` line does; families of
        kind ``"gmean"`` (``gm_map``, ``gm_bpref``) take the geometric mean of max(value, 1e-5)."""
        return {m: _mean(v, _family_of(m)) for m, v in self.values.items()}

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
        """A plain-text table: one row per metric family, one column per cutoff, then notes on the
        query set; counts (``ties@k``) are given as totals in a note, not in the grid."""
        agg = self.aggregate
        fams: dict[str, dict[str, float]] = {}
        cuts: list[str] = []
        sums = []
        for name, v in agg.items():
            fam, _, k = name.partition("@")
            spec = _family_of(name)
            if spec is not None and spec.kind in ("count", "sum"):
                if spec.kind == "sum":
                    sums.append(f"{name} {v:g}")
                continue
            col = f"@{k}" if k else "all"
            fams.setdefault(fam, {})[col] = v
            if col not in cuts:
                cuts.append(col)
        cuts.sort(key=lambda c: (c == "all", int(c[1:]) if c != "all" else 0))
        labels = {f: metric_label(f) for f in fams}
        width = max([len(x) for x in labels.values()] + [6])
        lines = [f"{'metric':<{width}}  " + "  ".join(f"{c:>7}" for c in cuts)]
        for fam, vals in fams.items():
            cells = [f"{vals[c]:7.4f}" if c in vals else f"{'':>7}" for c in cuts]
            lines.append(f"{labels[fam]:<{width}}  " + "  ".join(cells))
        if sums:
            lines.append("counts, summed over the queries (as trec_eval's all line): " + ", ".join(sums))
        return "\n".join(lines + self._notes())

    def _notes(self) -> list[str]:
        p = self.policy
        lines = [
            f"{counted(self.num_queries, 'query')} averaged; relevant = grade >= {p.get('relevance_level')};"
            f" queries missing from the run {'left out' if str(p.get('missing_run_queries', '')).startswith('excluded') else 'scored 0'}:"
            f" {p.get('num_queries_missing_from_run')};"
            f" queries without relevant pages ({p.get('queries_without_relevant')}): {p.get('num_queries_without_relevant')};"
            f" run queries without qrels ignored: {p.get('num_run_queries_without_qrels')}"
        ]
        skipped = list(p.get("queries_skipped_no_judgments") or [])
        if skipped:
            lines.append(f"queries with an empty judgment set skipped (not averaged): {len(skipped)} ({_examples(skipped)})")
        unjudged = list(p.get("queries_all_unjudged") or [])
        if unjudged:
            lines.append(f"queries whose retrieved pages all lack a qrels line: {len(unjudged)} ({_examples(unjudged)})")
        lines += run_mean_notes(self)
        ties = p.get("tied_groups")
        if ties:
            cells = ", ".join(f"@{name.partition('@')[2]} {n}" for name, n in ties.items())
            lines.append(f"tied score groups in the top k (total over the queries; per query in --json/--per-query): {cells}")
        return lines


def run_mean_notes(res: "MetricsResult") -> list[str]:
    """One note per paper-compatible (``run_mean``) metric of ``res``: how many queries it averages."""
    out = []
    for m, v in res.values.items():
        f = METRICS.get(m.partition("@")[0])
        if f is not None and f.kind == "run_mean":
            n = int((~np.isnan(v)).sum())
            out.append(f"{metric_label(m)}: averaged over the {n} of {len(v)} queries present in the run only ({f.reference});"
                       " not comparable with vdr's mrr, which scores missing queries 0")
    return out


def _family_of(name: str):
    """The registry family of metric ``name`` (canonical, possibly with parameters), or ``None``."""
    base = name.partition("@")[0].partition("(")[0]
    level = next((f for f in LEVEL_FAMILIES if base.startswith(f + "_")), None)
    return METRICS.get(level or base)


def _mean(v: np.ndarray, family) -> float:
    """Mean of per-query values ``v``; over the non-NaN values for ``run_mean`` families; the sum for
    ``sum`` families (trec_eval's ``all`` line for counts); the geometric mean of max(v, 1e-5) for
    ``gmean`` families (trec_eval's ``gm_map``); NaN when there are no values."""
    if family is not None and family.kind == "sum":
        return _seq_sum(v) if len(v) else math.nan
    if family is not None and family.kind == "gmean":
        return float(np.exp(_seq_sum(np.log(np.where(v > MIN_GEO_MEAN, v, MIN_GEO_MEAN))) / len(v))) if len(v) else math.nan
    if family is not None and family.kind == "run_mean":
        v = v[~np.isnan(v)]
    return _seq_sum(v) / len(v) if len(v) else math.nan


def _seq_sum(v: np.ndarray) -> float:
    """The sum of float64 ``v`` added one value after the other, in order, as trec_eval's ``all`` line adds
    the queries (``te_acc_meas_s``: ``accum += value``, queries by id). numpy's ``sum`` and ``mean`` add
    pairwise, and Python's ``sum`` compensates (3.12): either can round a mean on a 5th-decimal tie the
    other way (issue 34). ``np.add.accumulate`` adds sequentially."""
    return float(np.add.accumulate(np.asarray(v, dtype=np.float64))[-1])


def _examples(ids: Sequence[str], n: int = 5) -> str:
    shown = ", ".join(repr(x) for x in ids[:n])
    return shown + (f", ... {len(ids) - n} more" if len(ids) > n else "")


# --------------------------------------------------------------------------------------------
# judged overlap (the id-format rule shared by `vdr metrics` and `vdr evaluate`)


def check_judged_overlap(
    qrels: Qrels | Mapping,
    retrieved: Run | Mapping | Collection[str],
    *,
    allow_unjudged: bool = False,
    query_ids: Iterable[str] | None = None,
    qrels_path: str | Path | None = None,
) -> list[str]:
    """Check that retrieved pages and qrels share ids: the rule against id-format mismatches.

    With a run (``{query_id: {corpus_id: score}}``), per query of the query set: a query whose
    retrieved pages all lack a qrels line for it is listed and warned about (:class:`VdrWarning`);
    if this holds for every query that retrieved anything, or no query of the qrels retrieved
    anything, the run almost surely uses other ids than the qrels (``p1`` vs ``p01``, a missing
    prefix or suffix) and :class:`InputError` is raised. With a plain collection of corpus ids
    (the pages a backend can retrieve, ``vdr evaluate``), the error is raised when no qrels corpus
    id is among them.

    Args:
        qrels: ``{query_id: {corpus_id: grade}}``.
        retrieved: a run (:class:`~vdr.types.Run` or ``{query_id: {corpus_id: score}}``), or the
            corpus ids retrievable for every query (a list, a set, a :class:`~vdr.corpus.Corpus`).
        allow_unjudged: score anyway: no error (the warning and the list remain).
        query_ids: the queries to check (default: the qrels queries with at least one line).
        qrels_path: the qrels file, named in the error.

    Returns:
        the ids of the queries whose retrieved pages are all unjudged, sorted (``[]`` for a collection).

    Raises:
        InputError: no overlap at all (examples of the run's and the qrels' ids are named), unless
            ``allow_unjudged``.

    >>> check_judged_overlap({"q1": {"p01": 1}}, {"q1": {"p1": 0.9}})
    Traceback (most recent call last):
    ...
    vdr.errors.InputError: no retrieved page of any query has a qrels line for that query, e.g. query 'q1': run ids ['p1'], qrels ids ['p01']; the ids almost always differ in format (zero padding, a prefix or a suffix); pass --allow-unjudged (allow_unjudged=True) to score the run anyway
    """
    qd = getattr(qrels, "_data", qrels)
    qids = sorted(query_ids) if query_ids is not None else sorted(q for q in qd if len(qd[q]))
    is_run = isinstance(retrieved, Run) or (isinstance(retrieved, Mapping) and all(isinstance(v, Mapping) for v in retrieved.values()))
    if not is_run:  # corpus ids (a list, a set, a Corpus mapping ids to pages)
        return _check_corpus_overlap(qd, qids, retrieved, allow_unjudged, qrels_path)
    rd = getattr(retrieved, "_data", retrieved)
    hit = [q for q in qids if q in rd and len(rd[q])]
    if not hit:
        if not allow_unjudged and qids:
            run_q = sorted(q for q in rd if len(rd[q]))
            raise InputError(
                f"the run retrieves no page for any of the {len(qids)} qrels queries: run query ids"
                f" [{_examples(run_q, 3)}], qrels query ids [{_examples(qids, 3)}]; query ids are compared as strings;"
                " pass --allow-unjudged (allow_unjudged=True) to score the run anyway (every query 0)",
                path=qrels_path,
            )
        return []
    unjudged = [q for q in hit if qd[q].keys().isdisjoint(rd[q].keys())]
    if len(unjudged) == len(hit) and not allow_unjudged:
        from ..corpus import id_normalisation_hint

        q = hit[0]
        hint = id_normalisation_hint(sorted({d for x in hit for d in qd[x]}), {d for x in hit for d in rd[x]})
        raise InputError(
            f"no retrieved page of any query has a qrels line for that query, e.g. query {q!r}:"
            f" run ids {list(rd[q])[:3]}, qrels ids {list(qd[q])[:3]}; " + (hint or "the ids almost always differ in format"
            " (zero padding, a prefix or a suffix)") + "; pass --allow-unjudged (allow_unjudged=True) to score the run anyway",
            path=qrels_path,
        )
    if unjudged:
        _warn_if_mismatch(qd, rd, hit, unjudged, getattr(retrieved, "name", None))
    return unjudged


def _warn_if_mismatch(qd: Mapping, rd: Mapping, hit: list[str], unjudged: list[str], name: str | None) -> None:
    """Warn (at the caller of :func:`check_judged_overlap`) when fewer queries retrieved a judged
    page than chance predicts (:func:`_expected_judged_hits`): a suspected id mismatch. Sparse
    qrels are only counted, in the policy (issue 25.5)."""
    observed, expected = len(hit) - len(unjudged), _expected_judged_hits(qd, rd, hit)
    if observed == 0 or observed < 0.5 * expected:
        warnings.warn(
            VdrWarning(
                f"{len(unjudged)} of {len(hit)} queries{f' of run {name!r}' if name else ''} retrieved only pages without"
                f" a qrels line ({_examples(unjudged)}): they score 0 on every metric; {observed} queries retrieved a"
                f" judged page where a random ranking of the same depth would give about {expected:.1f}: the run's ids"
                " may differ in format from the qrels' for some pages"
            ),
            stacklevel=3,
        )


def _expected_judged_hits(qd: Mapping, rd: Mapping, hit: list[str]) -> float:
    """How many of the queries ``hit`` would retrieve at least one judged page if each ranked its
    ``len(run[q])`` pages at random from the pages seen (the union of the run's and the qrels' ids,
    a lower bound of the corpus): ``sum_q 1 - (1 - J_q / N) ** d_q``. A run that does worse than
    this retrieves judged pages less often than chance: the ids probably differ in format. Sparse
    qrels (most retrieved pages unjudged) with a working retriever stay far above it."""
    seen = set().union(*(rd[q].keys() for q in rd), *(qd[q].keys() for q in qd))
    n = max(len(seen), 1)
    return float(sum(1.0 - (1.0 - min(len(qd[q]), n) / n) ** len(rd[q]) for q in hit))


def _check_corpus_overlap(qd: Mapping, qids: list[str], corpus_ids: Collection[str], allow_unjudged: bool, path) -> list[str]:
    ids = corpus_ids if isinstance(corpus_ids, (set, frozenset)) else set(corpus_ids)
    judged = sorted({d for q in qids for d in qd[q]})
    if judged and ids and ids.isdisjoint(judged) and not allow_unjudged:
        from ..corpus import id_normalisation_hint

        hint = id_normalisation_hint(judged, ids)
        raise InputError(
            f"the qrels' corpus ids are not pages of the corpus, not a single one: qrels ids [{_examples(judged, 3)}],"
            f" corpus ids [{_examples(sorted(ids), 3)}]; " + (hint or "the ids almost always differ in format"
            " (page ids are '<relative pdf path>#<page>', with spaces as %20)"),
            path=path,
        )
    return []


# --------------------------------------------------------------------------------------------
# engine


def _grades(qd: Mapping, qids: Sequence[str], n_lines: int) -> np.ndarray:
    """The grades of the qrels lines of ``qids``, in order: int64 ``(n_lines,)``.

    Raises:
        InputError: a grade outside the 64-bit range, naming the query and corpus id (issue 34.4).
    """
    try:
        return np.fromiter(chain.from_iterable(qd[q].values() for q in qids), dtype=np.int64, count=n_lines)
    except OverflowError:
        from ..io.formats import GRADE_MAX, GRADE_MIN, grade_range_message

        q, d, g = next((q, d, g) for q in qids for d, g in qd[q].items() if not GRADE_MIN <= g <= GRADE_MAX)
        raise InputError(grade_range_message(g, q, d), id=d) from None


def _exp_gain(g: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The exponential gain ``2^g - 1`` of grades ``g`` (int64), each divided by ``2^top`` (``top``:
    the highest grade of the line's query, int64, same shape): ``2^(g - top) - 2^-top``, float64.

    nDCG is a ratio of two sums of one query's gains, so the common factor ``2^-top`` cancels; a
    power of two scales a float exactly, so for grades up to 1000 the values are bit-identical to the
    unscaled ``2^g - 1``, and for any larger grade they stay finite (the unscaled gain overflows to
    inf and inf / inf is NaN; issue 34.4). The difference ``g - top`` is taken in int64, exactly.
    """
    return np.exp2((g - top).astype(np.float64)) - np.exp2(-top.astype(np.float64))


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


def _pad_lengths(lengths: np.ndarray) -> np.ndarray:
    """Padded row length of each query: the next power of two (0 for an empty query), so padding wastes at most 2x."""
    return np.where(lengths > 0, 1 << np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64), 0)


def _sorted_rows(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, qs: np.ndarray, L: int) -> np.ndarray:
    """The scores of queries ``qs`` as rows of width ``L``, padded with ``-inf``, sorted ascending: float64 ``(len(qs), L)``."""
    lens = lengths[qs]
    total = int(lens.sum())
    rr = np.repeat(np.arange(len(qs)), lens)
    within = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    M = np.full((len(qs), L), -np.inf)
    M[rr, within] = flat[np.repeat(starts[qs], lens) + within]
    M.sort(axis=1)
    return M


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
    pad = _pad_lengths(lengths)
    j_bucket = pad[j_q]
    row_in_bucket = np.empty(len(lengths), dtype=np.int64)
    for L in np.unique(j_bucket):
        L = int(L)
        qs = np.nonzero(pad == L)[0]
        row_in_bucket[qs] = np.arange(len(qs))
        M = _sorted_rows(flat, starts, lengths, qs, L)
        sel = np.nonzero(j_bucket == L)[0]
        rows = row_in_bucket[j_q[sel]]
        pos = _first_greater(M, rows, j_s[sel])  # M[row, pos - 1] is the entry's own score
        ranks[sel] = L - pos + 1
        tied[sel] = (pos >= 2) & (M[rows, np.maximum(pos - 2, 0)] == j_s[sel])
    return ranks, tied


def _tie_groups(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """Per query, the number of groups of >= 2 equal scores among its top ``k`` scores: int64 ``(n_queries,)``."""
    out = np.zeros(len(lengths), dtype=np.int64)
    pad = _pad_lengths(lengths)
    for L in np.unique(pad[pad > 0]):
        L = int(L)
        qs = np.nonzero(pad == L)[0]
        top = _sorted_rows(flat, starts, lengths, qs, L)[:, L - min(k, L):]  # the k largest, ascending
        valid = np.isfinite(top)  # -inf is padding (run scores are finite)
        eq = (top[:, 1:] == top[:, :-1]) & valid[:, 1:]
        begins = eq & ~np.concatenate([np.zeros((len(qs), 1), dtype=bool), eq[:, :-1]], axis=1)
        out[qs] = begins.sum(axis=1)
    return out


class Ranked:
    """The evaluation context the registry's families compute from (see :mod:`vdr.metrics.registry`).

    Built once per :func:`evaluate_run` call from the qrels lines of the query set and the run.
    Arrays over the judged-and-retrieved qrels lines (``j*``, length ``n_judged``): ``jq`` query
    index (int64), ``jg`` grade (int64), ``jr`` trec_eval rank (int64, 1-based, corpus-id tie-break
    applied), ``rel`` grade >= relevance level (bool). Per query (length ``nq``): ``num_rel``
    (int64) relevant lines, ``safe_rel`` = max(num_rel, 1), ``min_rank`` (float64, ``inf`` when no
    relevant page was retrieved), ``in_run`` (bool, the query has a non-empty ranking), ``max_grade``
    (int64, the highest grade >= 0 of the query's qrels; trec_eval's ``rbp`` scales gains by it). Relevant retrieved lines ordered by (query, rank): ``rq_``,
    ``rr_`` and ``r_prec`` (precision at that rank, float64), for average precision.
    """

    def __init__(self, qd: Mapping[str, Mapping[str, int]], run: Run, qids: Sequence[str], level: int) -> None:
        nq = self.nq = len(qids)
        rd = run._data
        empty: dict = {}
        runs = [rd.get(q, empty) for q in qids]
        # qrels lines as arrays: query index, grade, and the run's score (NaN: not retrieved; run scores are finite)
        qlens = np.fromiter((len(qd[q]) for q in qids), dtype=np.int64, count=nq)
        n_lines = int(qlens.sum())
        q_all = np.repeat(np.arange(nq), qlens)
        g_all = _grades(qd, qids, n_lines)
        s_all = np.fromiter(
            chain.from_iterable(map(rq.get, qd[q], repeat(math.nan)) for q, rq in zip(qids, runs)), dtype=np.float64, count=n_lines
        )
        self._qd, self._qids, self._runs = qd, qids, runs
        self._q_all, self._g_all = q_all, g_all
        self._set_level(level)
        pos_mask = g_all > 0
        self._pq, self._pg = q_all[pos_mask], g_all[pos_mask]
        self.max_grade = np.zeros(nq, dtype=np.int64)  # the highest grade >= 0 of each query's qrels
        np.maximum.at(self.max_grade, q_all[g_all >= 0], g_all[g_all >= 0])
        j_idx = np.nonzero(~np.isnan(s_all))[0]
        self.jq, self.jg = q_all[j_idx], g_all[j_idx]
        js = s_all[j_idx]

        flat, starts, qpos = run.columns()
        r_pos = np.fromiter((qpos.get(q, -1) for q in qids), dtype=np.int64, count=nq)
        self._lens = np.fromiter(map(len, runs), dtype=np.int64, count=nq)
        self.in_run = self._lens > 0  # queries with a ranking (a TREC run file cannot hold an empty one)
        self._starts = np.zeros(nq, dtype=np.int64)
        self._starts[r_pos >= 0] = starts[r_pos[r_pos >= 0]]
        self._flat = flat
        jr, tied = _ranks(flat, self._starts, self._lens, self.jq, js)
        if tied.any():
            _break_ties(jr, tied, _Lines(self.jq, js, j_idx, np.cumsum(qlens) - qlens), qd, qids,
                        (runs, flat, self._starts))
        self.jr = jr
        self.num_retrieved = self._lens
        self.pos_grades = self._pg
        self.rel = self.jg >= level
        self._relevant_order()
        self._levels: dict[int, "Ranked"] = {level: self}
        self._cache: dict = {}

    def _set_level(self, level: int) -> None:
        q_all, g_all, nq = self._q_all, self._g_all, self.nq
        self.level = level
        self.num_rel = np.bincount(q_all[g_all >= level], minlength=nq)
        self.num_nonrel = np.bincount(q_all[(g_all >= 0) & (g_all < level)], minlength=nq)
        self.safe_rel = np.maximum(self.num_rel, 1)

    def at_level(self, level: int) -> "Ranked":
        """This context with relevant = grade >= ``level`` (ir_measures' ``rel=`` parameter): the ranks
        are shared, the relevance-dependent arrays recomputed; cached per level."""
        if level not in self._levels:
            other = copy.copy(self)
            other._set_level(level)
            other.rel = other.jg >= level
            other._relevant_order()
            other._cache = {}
            self._levels[level] = other
        return self._levels[level]

    def judged_order(self, k: int | None = None) -> np.ndarray:
        """Indexes of the judged-and-retrieved entries at rank <= ``k`` (all with ``None``), ordered by
        (query, rank): int64 ``(n,)``."""
        if "order" not in self._cache:
            self._cache["order"] = np.lexsort((self.jr, self.jq))
        o = self._cache["order"]
        return o if k is None else o[self.jr[o] <= k]

    def ideal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The ideal ranking of every query (trec_eval's default gains): its qrels grades > 0 sorted
        descending. Returns ``(iq, ig, first, count)``: query index (int64) and grade (float64) of each ideal
        position, ordered by query then grade descending, and per query the index of its first position
        and its number of positions (int64 ``(nq,)``)."""
        if "ideal" not in self._cache:
            order = np.lexsort((-self._pg, self._pq))
            iq, ig = self._pq[order], self._pg[order]
            first = np.searchsorted(iq, np.arange(self.nq))
            count = np.bincount(iq, minlength=self.nq)
            self._cache["ideal"] = (iq, ig.astype(np.float64), first, count)
        return self._cache["ideal"]

    def ideal_pos(self) -> np.ndarray:
        """The 0-based position of each ideal entry within its query (:meth:`ideal`): float64."""
        iq, _, first, _ = self.ideal()
        return (np.arange(len(iq)) - first[iq]).astype(np.float64)

    def corpus_judged_ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """The retrieved pages that another query's qrels hold but the query's own do not (the
        corpus-wide judged set of MTEB's ``hole``): their query index and trec_eval rank, int64 ``(n,)``."""
        if "corpus" not in self._cache:
            judged_any = set().union(*(d.keys() for d in self._qd.values()))
            eq: list[int] = []
            ids: list[str] = []
            for i, (q, rq) in enumerate(zip(self._qids, self._runs)):
                extra = (rq.keys() & judged_any) - self._qd[q].keys()
                eq += [i] * len(extra)
                ids += sorted(extra)
            eq_a = np.asarray(eq, dtype=np.int64)
            es = np.fromiter((self._runs[i][d] for i, d in zip(eq, ids)), dtype=np.float64, count=len(ids))
            er, tied = _ranks(self._flat, self._starts, self._lens, eq_a, es)
            for t in np.nonzero(tied)[0].tolist():  # trec_eval's tie-break: corpus id descending
                d, s = ids[t], es[t]
                er[t] += sum(1 for o, v in self._runs[eq[t]].items() if float(v) == s and o > d)
            self._cache["corpus"] = (eq_a, er)
        return self._cache["corpus"]

    def _relevant_order(self) -> None:
        nq, jq, jr = self.nq, self.jq, self.jr
        # relevant retrieved entries ordered by (query, rank): the j-th has precision j / rank (AP)
        r_idx = np.nonzero(self.rel)[0]
        r_idx = r_idx[np.lexsort((jr[r_idx], jq[r_idx]))]
        self.rq_, self.rr_ = jq[r_idx], jr[r_idx]
        r_first = np.searchsorted(self.rq_, np.arange(nq))
        self.r_prec = (np.arange(len(self.rq_)) - r_first[self.rq_] + 1) / self.rr_
        self.min_rank = np.full(nq, np.inf)
        np.minimum.at(self.min_rank, self.rq_, self.rr_.astype(np.float64))

    def count(self, mask: np.ndarray, q: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        """Per query, the number (or the sum of ``w``) of the entries selected by ``mask``: float64 ``(nq,)``."""
        return np.bincount(q[mask], weights=None if w is None else w[mask], minlength=self.nq).astype(np.float64)

    def ndcg(self, k: int, *, gain: str, ideal: str) -> np.ndarray:
        """nDCG@k per query, float64 ``(nq,)``: ``gain`` ``"linear"`` (grade) or ``"exp"`` (2^grade - 1),
        ``ideal`` ``"qrels"`` (all the query's positive grades) or ``"run"`` (the retrieved top-k gains);
        0 where the ideal DCG is 0. Discount 1/log2(rank + 1) (Jarvelin & Kekalainen 2002)."""
        jq, jg, nq = self.jq, self.jg, self.nq
        jdisc = 1.0 / np.log2(self.jr + 1.0)
        jgain = np.where(jg > 0, jg, 0).astype(np.float64) if gain == "linear" else np.where(jg > 0, _exp_gain(jg, self.max_grade[jq]), 0.0)
        k = np.inf if k is None else k
        inK = self.jr <= k
        dcg = self.count(inK, jq, jgain * jdisc)
        if ideal == "qrels":  # ideal order: per query, positive grades descending
            order = np.lexsort((-self._pg, self._pq))
            pq_s, pg_s = self._pq[order], self._pg[order]
            pos_in_q = np.arange(len(pq_s)) - np.searchsorted(pq_s, np.arange(nq))[pq_s]
            idisc = 1.0 / np.log2(pos_in_q + 2.0)
            pgain = pg_s.astype(np.float64) if gain == "linear" else _exp_gain(pg_s, self.max_grade[pq_s])
            idcg = self.count(pos_in_q < k, pq_s, pgain * idisc)
        else:  # ideal from the retrieved top-k gains, sorted descending
            sel = np.nonzero(inK & (jg > 0))[0]
            sel = sel[np.lexsort((-jgain[sel], jq[sel]))]
            sq = jq[sel]
            p = np.arange(len(sel)) - np.searchsorted(sq, np.arange(nq))[sq]
            idcg = self.count(np.ones(len(sel), dtype=bool), sq, jgain[sel] / np.log2(p + 2.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(idcg > 0, dcg / idcg, 0.0)

    def tie_groups(self, k: int) -> np.ndarray:
        """Per query, the number of tied score groups in the top ``k``: int64 ``(nq,)``."""
        return _tie_groups(self._flat, self._starts, self._lens, k)


@dataclass(frozen=True)
class _Lines:
    """The judged-and-retrieved qrels lines of :class:`Ranked` (length ``n_judged``): ``jq`` query
    index (int64), ``js`` run score (float64), ``j_idx`` position among all the qrels lines (int64);
    and per query ``q_first``, the position of its first qrels line (int64, ``(nq,)``)."""

    jq: np.ndarray
    js: np.ndarray
    j_idx: np.ndarray
    q_first: np.ndarray


def _break_ties(jr: np.ndarray, tied: np.ndarray, lines: _Lines, qd: Mapping[str, Mapping[str, int]], qids: Sequence[str],
                ranking: tuple) -> None:
    """trec_eval breaks score ties by corpus id, descending: add to each tied entry's rank (in place)
    the number of pages with the same score and a greater corpus id.

    Args:
        jr: int64 ranks of the judged lines ``(n_judged,)``, updated in place.
        tied: bool ``(n_judged,)``, the lines whose score another page of the query shares.
        lines: the judged lines (:class:`_Lines`).
        qd: the qrels ``{query_id: {corpus_id: grade}}`` (lines in file order).
        qids: the query set, in the order of the query indexes.
        ranking: ``(runs, flat, starts)``: per query index its ranking ``{corpus_id: score}``, and the run's
            columns (:meth:`vdr.types.Run.columns`: all scores, float64, in the rankings' order, and each query
            index's start in them, int64 ``(nq,)``).
    """
    runs, flat, starts = ranking
    jq, js, j_idx, q_first = lines.jq, lines.js, lines.j_idx, lines.q_first
    by_query: dict[int, list[int]] = {}
    for t in np.nonzero(tied)[0].tolist():
        by_query.setdefault(int(jq[t]), []).append(t)
    for i, ts in by_query.items():
        want = {float(js[t]) for t in ts}
        scores = flat[starts[i]: starts[i] + len(runs[i])]  # the query's scores, in its ranking's order
        hit = np.flatnonzero(np.isin(scores, np.fromiter(want, dtype=np.float64, count=len(want))))
        keys = list(runs[i])
        groups: dict[float, list[str]] = {}
        for j, fv in zip(hit.tolist(), scores[hit].tolist()):
            groups.setdefault(fv, []).append(keys[j])
        ids = list(qd[qids[i]])
        for t in ts:
            d = ids[int(j_idx[t] - q_first[i])]
            jr[t] += sum(1 for other in groups[float(js[t])] if other > d)


def _compute(ctx: Ranked, m: Metric) -> np.ndarray:
    """Metric ``m``'s per-query values: its family's kernel on ``ctx`` (at ``m.rel``'s relevance level
    when given), with ``p`` for the families that take it."""
    fam = METRICS[m.family]
    c = ctx if m.rel is None else ctx.at_level(m.rel)
    return fam.compute(c, m.k, p=m.p) if "p" in fam.accepts else fam.compute(c, m.k)


def _query_set(qd: Mapping, queries_without_relevant: str) -> tuple[list[str], list[str], list[str]]:
    """``(query ids averaged, ids skipped for an empty judgment set, ids without a grade > 0)``."""
    empty = sorted(q for q, docs in qd.items() if not len(docs))
    no_rel = [q for q, docs in qd.items() if len(docs) and not any(g > 0 for g in docs.values())]
    out = set(empty) | (set(no_rel) if queries_without_relevant == "exclude" else set())
    qids = sorted(q for q in qd if q not in out)
    if not qids:
        why = " with a qrels line" + (" and a grade > 0" if queries_without_relevant == "exclude" else "")
        raise InputError("no queries to evaluate: the qrels hold no query" + why)
    return qids, empty, no_rel


def _check_policy(relevance_level, queries_without_relevant: str, queries_missing_from_run: str) -> int:
    """The relevance level as an int, after checking :func:`evaluate_run`'s policy arguments.

    Raises:
        InputError: a policy other than ``"zero"`` / ``"exclude"``, a non-integer level.
    """
    if queries_without_relevant not in ("zero", "exclude"):
        raise InputError(f"queries_without_relevant must be 'zero' or 'exclude', not {queries_without_relevant!r}")
    if queries_missing_from_run not in ("zero", "exclude"):
        raise InputError(f"queries_missing_from_run must be 'zero' or 'exclude', not {queries_missing_from_run!r}")
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, np.integer)):
        raise InputError(f"relevance_level must be an integer, not {relevance_level!r}")
    return int(relevance_level)


def evaluate_run(
    qrels: Qrels | Mapping,
    run: Run | Mapping,
    metrics: Sequence[str | Metric] | MetricPlan | None = None,
    *,
    relevance_level: int = 1,
    queries_without_relevant: Literal["zero", "exclude"] = "zero",
    allow_unjudged: bool = False,
    queries_missing_from_run: Literal["zero", "exclude"] = "zero",
    allow_id_mismatch: bool = False,
) -> MetricsResult:
    """Compute per-query metrics of ``run`` against ``qrels`` (trec_eval semantics, see module doc).

    Args:
        qrels: :class:`~vdr.types.Qrels` or a ``{query_id: {corpus_id: int grade}}`` dict.
        run: :class:`~vdr.types.Run` or a ``{query_id: {corpus_id: float score}}`` dict.
        metrics: metric names in any accepted spelling (``"ndcg@3"``, ``"nDCG@3"``, ``"ndcg_at_3"``),
            parsed :class:`Metric` values or a :class:`~vdr.metrics.MetricPlan` (its metrics, used as
            parsed); results use the canonical names. Default :func:`default_metrics` at
            :data:`~vdr.metrics.registry.METRICS_CUTOFFS` (1, 3, 5, 10).
        relevance_level: minimum grade that counts as relevant for the binary metrics
            (recall, precision, hit, mrr, map); nDCG uses the grades themselves.
        queries_without_relevant: ``"zero"`` (default) averages queries whose qrels hold no grade > 0
            as 0; ``"exclude"`` leaves them out. Either way they are counted in ``policy``.
        allow_unjudged: score a run none of whose retrieved pages has a qrels line (see
            :func:`check_judged_overlap`) instead of raising.
        queries_missing_from_run: ``"zero"`` (default, trec_eval ``-c``) scores a query of the qrels
            that the run does not rank 0 on every metric; ``"exclude"`` (trec_eval without ``-c``:
            the queries of both the qrels and the run) leaves it out. Either way it is counted in ``policy``.
            An empty ranking counts as missing (a TREC file cannot hold one).
        allow_id_mismatch: evaluate ids that match the qrels' only after normalisation (``q1`` / ``q01``,
            :mod:`vdr.io.idjoin`) as written; non-joining ids are always named in ``policy["id_join"]``.

    Returns:
        :class:`MetricsResult` with one float64 value per evaluated query and metric.

    Raises:
        InputError: unknown metric names, bad ids/grades/scores in dict input, a bad policy, a
            query set that is empty, or no judged overlap at all (unless ``allow_unjudged``).
        IdMismatchError: (an InputError) ids matching only after normalisation, named (unless ``allow_id_mismatch``).
    """
    if not isinstance(qrels, Qrels):
        qrels = Qrels(qrels)
    if not isinstance(run, Run):
        run = Run(run)
    if isinstance(metrics, MetricPlan):
        mlist = list(metrics.metrics)
    else:
        mlist = default_metrics() if metrics is None else parse_metrics(metrics)
    level = _check_policy(relevance_level, queries_without_relevant, queries_missing_from_run)
    qd, rd = qrels._data, run._data
    qids, empty, no_rel = _query_set(qd, queries_without_relevant)
    id_join = _join_query_ids(qd, rd, getattr(run, "name", None), allow_id_mismatch)
    qids, missing = _without_missing(qids, rd, queries_missing_from_run)
    unjudged = _check_overlap(qrels, run, qids, allow_unjudged, allow_id_mismatch, id_join)
    ctx = Ranked(qd, run, qids, level)
    values = {str(m): _compute(ctx, m) for m in mlist}

    policy = {
        "relevance_level": level,
        "gain": "linear grade, grades > 0 only (trec_eval ndcg_cut)",
        "tie_break": "score descending, then corpus id descending in byte order (trec_eval)",
        "missing_run_queries": "zero (trec_eval -c)" if queries_missing_from_run == "zero"
        else "excluded: not averaged (trec_eval without -c)",
        "queries_without_relevant": queries_without_relevant,
        "empty_judgment_sets": "skipped: not in the query set, listed in queries_skipped_no_judgments",
        "num_queries_in_qrels": len(qd),
        "num_queries_averaged": len(qids),
        "num_queries_without_relevant": len(no_rel),
        **_join_policy(qrels, run, missing, id_join, allow_id_mismatch),
        "num_queries_skipped_no_judgments": len(empty),
        "queries_skipped_no_judgments": empty,
        "allow_unjudged": bool(allow_unjudged),
        "num_queries_all_unjudged": len(unjudged),
        "queries_all_unjudged": unjudged,
    }
    ties = {str(m): int(values[str(m)].sum()) for m in mlist if METRICS[m.family].kind == "count"}
    if ties:
        policy["tied_groups"] = ties
    return MetricsResult(tuple(qids), values, policy)


def _without_missing(qids: list[str], rd: Mapping, mode: str) -> tuple[list[str], list[str]]:
    """``(query set, queries of the qrels missing from the run)``: a query the run does not hold,
    or holds with an empty ranking, is missing; with ``mode == "exclude"`` it leaves the query set.

    Raises:
        InputError: ``"exclude"`` and every query is missing.
    """
    missing = [q for q in qids if q not in rd or not len(rd[q])]
    if mode == "exclude" and missing:
        if len(missing) == len(qids):
            raise InputError(f"no query of the qrels is ranked by the run (queries_missing_from_run='exclude',"
                             f" trec_eval without -c): qrels query ids [{_examples(qids, 3)}]")
        qids = [q for q in qids if q not in set(missing)]
    return qids, missing


def _join_policy(qrels: Qrels, run: Run, missing: list[str], id_join: dict, allow_id_mismatch: bool) -> dict:
    """The policy entries of the joins (issue 34.1) and of the skipped comment lines (34.3): the
    queries missing from the run (counted and named), the run's queries without qrels, the id
    joins (:mod:`vdr.io.idjoin`) and the ``#`` lines of each file."""
    return {
        "num_queries_missing_from_run": len(missing),
        "queries_missing_from_run": missing[:1000],
        "num_run_queries_without_qrels": sum(1 for q in run._data if q not in qrels._data),
        "allow_id_mismatch": bool(allow_id_mismatch),
        "id_join": id_join,
        "comment_lines": {"policy": "lines whose first character is '#' are skipped, as trec_eval 10 does",
                          "qrels": len(qrels.comment_lines), "qrels_lines": list(qrels.comment_lines[:1000]),
                          "run": len(run.comment_lines), "run_lines": list(run.comment_lines[:1000])},
    }


def _join_query_ids(qd: Mapping, rd: Mapping, name: str | None, allow_id_mismatch: bool) -> dict:
    """:func:`vdr.io.idjoin.check_id_join` of the run's query ids (those with a ranking) and
    the qrels' (those with a judgment): ``{"query_ids": record}``.

    Raises:
        IdMismatchError: likely pairs, unless ``allow_id_mismatch``.
    """
    from ..io.idjoin import check_id_join, join_ids

    side = f"run {name!r}" if name else "run"
    j = join_ids((q for q in rd if len(rd[q])), (q for q in qd if len(qd[q])), what="query ids", left=side, right="qrels")
    return {"query_ids": check_id_join(j, allow_id_mismatch=allow_id_mismatch, stacklevel=5)}


def _check_overlap(qrels, run, qids: list[str], allow_unjudged: bool, allow_id_mismatch: bool, id_join: dict) -> list[str]:
    """:func:`check_judged_overlap`, preceded, when it would refuse or warn (every query, or fewer than
    chance predicts, retrieved only unjudged pages), by the corpus-id join of those queries (``id_join["corpus_ids"]``):
    a run page id that matches a qrels page id of the same query only after normalisation stops
    the evaluation, unless ``allow_id_mismatch``."""
    from ..io.idjoin import IdJoin, check_id_join, join_ids

    qd, rd = qrels._data, run._data
    hit = [q for q in qids if q in rd and len(rd[q])]
    disjoint = [q for q in hit if qd[q].keys().isdisjoint(rd[q].keys())]
    if disjoint and (len(disjoint) == len(hit) or len(hit) - len(disjoint) < 0.5 * _expected_judged_hits(qd, rd, hit)):
        pairs: list = []
        for q in disjoint:
            pairs += [(f"{q}: {a}", f"{q}: {b}", r) for a, b, r in join_ids(rd[q], qd[q], what="", left="", right="").pairs]
        side = f"run {run.name!r}" if getattr(run, "name", None) else "run"
        j = IdJoin("corpus ids", side, "qrels", [a for a, _, _ in pairs], [b for _, b, _ in pairs], pairs)
        id_join["corpus_ids"] = check_id_join(j, allow_id_mismatch=allow_id_mismatch, warn_unpaired=False, stacklevel=5)
    return check_judged_overlap(qrels, run, allow_unjudged=allow_unjudged, query_ids=qids)


@dataclass(frozen=True)
class MetricsOptions:
    """The keyword options of :func:`metrics` (``vdr.metrics(qrels, run, k, names, **options)``).

    Attributes:
        relevance_level, queries_without_relevant, allow_unjudged, queries_missing_from_run,
            allow_id_mismatch: see :func:`evaluate_run`.
        depth: if given, only each query's ``depth`` best pages are evaluated (trec_eval ``-M``:
            the rest of the ranking is discarded before any metric is computed).
        json_path: if given, write ``{"aggregate", "per_query", "num_queries", "policy"}`` there.
        per_query_path: if given, write a per-query CSV there.
    """

    relevance_level: int = 1
    queries_without_relevant: Literal["zero", "exclude"] = "zero"
    allow_unjudged: bool = False
    json_path: str | Path | None = None
    per_query_path: str | Path | None = None
    queries_missing_from_run: Literal["zero", "exclude"] = "zero"
    depth: int | None = None
    allow_id_mismatch: bool = False


def metrics(
    qrels: Qrels | Mapping | str | Path,
    run: Run | Mapping | str | Path,
    k: str | int | Iterable[int] = METRICS_CUTOFFS,
    metric_names: Sequence[str | Metric] | MetricPlan | None = None,
    *,
    options: MetricsOptions | None = None,
    **kwargs,
) -> MetricsResult:
    """Evaluate a run against qrels (files or objects); the Python face of ``vdr metrics``.

    Args:
        qrels: a :class:`~vdr.types.Qrels`, a dict, or a path (TREC, BEIR TSV or JSON; see
            :func:`vdr.io.load_qrels`).
        run: a :class:`~vdr.types.Run`, a dict, or a path (TREC run or JSON).
        k: cutoffs, as ``"1,3,5,10"`` or integers (:func:`parse_cutoffs`; default
            :data:`~vdr.metrics.registry.METRICS_CUTOFFS`); used with the default metric families
            (ndcg, mrr, recall, precision, hit, map, judged) and ``ties@k`` unless ``metric_names``
            is given (:data:`~vdr.metrics.plan.METRICS_DEFAULTS`).
        metric_names: explicit metric names in any accepted spelling (``["ndcg@3", "P@5", "RR"]``),
            or a :class:`~vdr.metrics.MetricPlan`; overrides ``k``.
        options: a :class:`MetricsOptions` (default: all defaults).
        **kwargs: any field of :class:`MetricsOptions` (``relevance_level``,
            ``queries_without_relevant``, ``allow_unjudged``, ``json_path``, ``per_query_path``);
            they override ``options``' fields.

    Returns:
        :class:`MetricsResult`.

    Raises:
        InputError: bad files, ids, grades, scores, cutoffs or metric names (file and line named);
            no judged overlap between run and qrels (unless ``allow_unjudged``).
        TypeError: a keyword that is not a :class:`MetricsOptions` field (named, with the known ones).

    >>> res = metrics({"q1": {"d1": 0, "d2": 1}}, {"q1": {"d1": 0.9, "d2": 0.9}}, k=2)
    >>> res.aggregate["ndcg@2"], res.policy["tied_groups"]
    (1.0, {'ties@2': 1})
    """
    o = with_keywords(MetricsOptions, options, kwargs, "metrics")
    plan = metric_names if isinstance(metric_names, MetricPlan) else MetricPlan.parse(metric_names, k=k, defaults=METRICS_DEFAULTS)
    for name, value, kind in (("qrels", qrels, Qrels), ("run", run, Run)):
        if not (isinstance(value, (str, Path, kind)) or callable(getattr(value, "items", None))):
            from ..errors import wrong_type

            raise wrong_type("metrics", name, f"a {kind.__name__}, a file path or a {{query_id: {{doc_id: {'grade' if name == 'qrels' else 'score'}}}}} dict",
                             value)
    if isinstance(qrels, (str, Path)):
        qrels = load_qrels(qrels)
    if isinstance(run, (str, Path)):
        run = load_run(run)
    if o.depth is not None:
        if isinstance(o.depth, bool) or not isinstance(o.depth, (int, np.integer)) or o.depth < 1:
            raise InputError(f"depth (trec_eval -M) must be an integer >= 1, got {o.depth!r}")
        run = (run if isinstance(run, Run) else Run(run)).top_k(int(o.depth))
    res = evaluate_run(
        qrels, run, plan,
        relevance_level=o.relevance_level, queries_without_relevant=o.queries_without_relevant, allow_unjudged=o.allow_unjudged,
        queries_missing_from_run=o.queries_missing_from_run, allow_id_mismatch=o.allow_id_mismatch,
    )
    if o.depth is not None:
        res.policy["depth"] = int(o.depth)
    if o.json_path is not None:
        res.write_json(o.json_path)
    if o.per_query_path is not None:
        res.write_per_query_csv(o.per_query_path)
    return res


# help(metrics) and inspect.signature(metrics) list every option with its default
metrics.__signature__ = inspect.Signature(
    [*(p for name, p in inspect.signature(metrics).parameters.items() if name != "kwargs"),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type) for f in fields(MetricsOptions))],
    return_annotation=inspect.signature(metrics).return_annotation,
)
