"""The metric kernels: one function per metric family, computed on a :class:`~vdr.metrics.compute.Ranked`.

Each kernel takes the evaluation context ``ctx`` (the ranked judged entries of one run against the
qrels' query set, trec_eval order and tie rule applied) and the cutoff ``k`` (``None``: the whole
ranking, for the families that accept it) and returns a float64 array of shape ``(ctx.nq,)``: one
value per query of the query set, in query-id order. The registry (:mod:`vdr.metrics.registry`)
declares each family once (name, aliases, role, definition, reference) and points at its kernel
here; :func:`~vdr.metrics.evaluate_run` dispatches through the registry.

Conventions shared by every kernel (trec_eval 10.0): rank ``r`` is 1-based; "relevant" is grade >=
the relevance level; a query whose qrels hold no relevant page scores 0 on the recall-type
measures (never NaN); pages without a qrels line are non-relevant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:  # the evaluation context; imported for annotations only (no cycle at runtime)
    from .compute import Ranked

__all__ = ["ndcg", "ndcg_exp", "ndcg_run", "mrr", "rr_full", "recall", "precision", "hit", "average_precision", "judged",
           "judged_ret", "hole", "hole_corpus", "ties", "rprec", "bpref", "infap", "iprec_at_recall", "eleven_pt_avg",
           "num_ret", "num_rel", "num_rel_ret", "err", "rbp"]

#: trec_eval's INFAP_EPSILON (trec_eval.h).
INFAP_EPSILON = 0.00001
#: gdeval.pl's $MAX_JUDGMENT: ERR's stopping probability is (2^grade - 1) / 2^4.
ERR_MAX_GRADE = 4


def _lim(k: int | None) -> float:
    """The cutoff as a rank limit: ``inf`` for the whole ranking."""
    return np.inf if k is None else k


# ------------------------------------------------------------------------------------------------ nDCG


def ndcg(ctx: "Ranked", k: int | None) -> np.ndarray:
    """nDCG@k, linear gain: ``DCG@k / IDCG@k`` with ``DCG@k = sum_{r <= k} g_r / log2(r + 1)``,
    ``g = grade`` for grades > 0 (else 0), IDCG@k from ALL the query's positive qrels grades sorted
    descending and cut at k; 0 when IDCG is 0. Jarvelin & Kekalainen 2002; trec_eval ``ndcg_cut``."""
    return ctx.ndcg(k, gain="linear", ideal="qrels")


def ndcg_exp(ctx: "Ranked", k: int | None) -> np.ndarray:
    """nDCG@k with exponential gain ``g = 2^grade - 1`` (grade > 0); Burges et al. 2005 (RankNet)."""
    return ctx.ndcg(k, gain="exp", ideal="qrels")


def ndcg_run(ctx: "Ranked", k: int | None) -> np.ndarray:
    """nDCG@k with the ideal DCG formed from the retrieved top-k gains only, sorted descending (the
    NDCG@3 recipe of query-rewriting evaluation after Cha et al. 2025, arXiv 2507.23242)."""
    return ctx.ndcg(k, gain="linear", ideal="run")


# ------------------------------------------------------------------------------------------------ reciprocal rank


def mrr(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Reciprocal rank ``1 / r`` of the first relevant page within the top ``k`` (the whole ranking
    when ``k`` is ``None``), else 0. Voorhees 1999 (TREC-8 QA); trec_eval ``recip_rank``."""
    lim = np.inf if k is None else k
    return np.where(ctx.min_rank <= lim, 1.0 / ctx.min_rank, 0.0)


def rr_full(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Reciprocal rank of the first relevant entry in the whole ranking (or the top ``k``), NaN for
    the queries with no ranking in the run, so that the mean covers the run's queries only: the
    "MRR" of ConvSearch-R1's released evaluation code (BeastyZ/ConvSearch-R1,
    ``src/eval/get_metrics_using_ance.py`` / ``get_metrics_using_bm25.py``, ``print_trec_res``:
    pytrec_eval ``recip_rank`` on qrels binarised at ``rel_threshold``, then ``np.average`` over
    ``evaluator.evaluate(runs).values()``, i.e. the qrels queries present in the run file)."""
    return np.where(ctx.in_run, mrr(ctx, k), np.nan)


# ------------------------------------------------------------------------------------------------ set measures


def _relevant_in_top(ctx: "Ranked", k: int) -> np.ndarray:
    """Per query, the number of relevant pages at rank <= k: float64 ``(nq,)``."""
    return ctx.count(ctx.rel & (ctx.jr <= k), ctx.jq)


def recall(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Relevant pages in the top k / all relevant pages of the query (0 when it has none);
    trec_eval ``recall_k``."""
    return np.where(ctx.num_rel > 0, _relevant_in_top(ctx, k) / ctx.safe_rel, 0.0)


def precision(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Relevant pages in the top k / k (fewer than k retrieved still divides by k); trec_eval ``P_k``."""
    return _relevant_in_top(ctx, k) / k


def hit(ctx: "Ranked", k: int | None) -> np.ndarray:
    """1 when any relevant page is in the top k, else 0; trec_eval ``success_k``."""
    return (_relevant_in_top(ctx, k) > 0).astype(np.float64)


def average_precision(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Average precision: the sum over relevant pages at rank ``r <= k`` of (relevant in top r) / r,
    divided by all relevant pages of the query (0 when it has none). Harman 1993 (TREC); trec_eval
    ``map`` (whole ranking, ``k`` ``None``) and ``map_cut_k``."""
    lim = np.iinfo(np.int64).max if k is None else k
    return np.where(ctx.num_rel > 0, ctx.count(ctx.rr_ <= lim, ctx.rq_, ctx.r_prec) / ctx.safe_rel, 0.0)


# ------------------------------------------------------------------------------------------------ diagnostics


def judged(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Pages in the top k that have any qrels line for the query (any grade) / k (vdr's own; after
    ir_measures ``Judged@k``, MacAvaney, Macdonald & Ounis 2022, ECIR, which divides by min(k, retrieved))."""
    return ctx.count(ctx.jr <= k, ctx.jq) / k


def judged_ret(ctx: "Ranked", k: int | None) -> np.ndarray:
    """ir_measures ``Judged@k``: pages in the top k with a qrels line for the query / min(k, retrieved);
    0 for a query with nothing retrieved (ir_measures 0.4, ``providers/judged_provider.py``)."""
    n = np.minimum(ctx.num_retrieved, _lim(k))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, ctx.count(ctx.jr <= _lim(k), ctx.jq) / n, 0.0)


def hole(ctx: "Ranked", k: int | None) -> np.ndarray:
    """``1 - judged@k``: the share of the top k without a qrels line for the query; the empty slots of a
    run shorter than k count as holes (vdr's own; after MTEB's ``hole@k``)."""
    return 1.0 - ctx.count(ctx.jr <= k, ctx.jq) / k


def hole_corpus(ctx: "Ranked", k: int | None) -> np.ndarray:
    """MTEB's ``Hole_at_k``: pages of the top k that no query's qrels hold (the corpus-wide judged set),
    / k; empty slots are not holes (mteb ``_evaluators/retrieval_metrics.py``, ``hole``)."""
    eq, er = ctx.corpus_judged_ranks()
    in_top = ctx.count(ctx.jr <= k, ctx.jq) + ctx.count(er <= k, eq)
    return (np.minimum(ctx.num_retrieved, k) - in_top) / k


def ties(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Number of tied score groups in the top k (groups of >= 2 pages with exactly equal scores,
    trec_eval order), as float64 counts; Lin & Yang 2019, "The Impact of Score Ties on
    Repeatability in Document Ranking" (SIGIR)."""
    return ctx.tie_groups(k).astype(np.float64)


# ------------------------------------------------------------------------------------------------ trec_eval's other measures


def _excl_cumsum(q: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per group of equal ``q`` (``q`` sorted), the sum of ``x`` over the entries BEFORE each entry: float64."""
    c = np.cumsum(x, dtype=np.float64) - x
    if len(q) == 0:
        return c
    first = np.searchsorted(q, q)  # the first entry of each entry's group
    return c - c[first]


def rprec(ctx: "Ranked", k: int | None) -> np.ndarray:
    """R-precision: relevant pages in the top min(R, retrieved) / R, R the query's relevant pages;
    0 when R = 0 or nothing is retrieved (trec_eval ``m_Rprec.c``); the ranking cut at ``k`` first."""
    ret = np.minimum(ctx.num_retrieved, _lim(k))
    look = np.minimum(ret, ctx.num_rel)[ctx.jq]
    hits = ctx.count(ctx.rel & (ctx.jr <= look), ctx.jq)
    return np.where((ctx.num_rel > 0) & (ret > 0), hits / ctx.safe_rel, 0.0)


def bpref(ctx: "Ranked", k: int | None) -> np.ndarray:
    """bpref (Buckley & Voorhees 2004): ``1/R * sum`` over the relevant retrieved pages of
    ``1 - min(n, R) / min(N, R)`` (1 when n = 0), n = judged non-relevant pages ranked above, N = the
    query's judged non-relevant pages (grade 0 .. level - 1); pages without a qrels line or with a
    negative grade are skipped (trec_eval ``m_bpref.c``)."""
    o = ctx.judged_order(k)
    q, g = ctx.jq[o], ctx.jg[o]
    rel = g >= ctx.level
    nonrel = (g >= 0) & ~rel
    n = _excl_cumsum(q, nonrel.astype(np.float64))[rel]
    qr = q[rel]
    R = ctx.num_rel[qr].astype(np.float64)
    N = ctx.num_nonrel[qr].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        term = np.where(n > 0, 1.0 - np.minimum(n, R) / np.minimum(N, R), 1.0)
    return ctx.count(np.ones(len(qr), dtype=bool), qr, term) / ctx.safe_rel


def infap(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Inferred AP (Yilmaz & Aslam 2006), as trec_eval ``m_infap.c``: ``1/R * sum`` over the relevant
    retrieved pages at rank ``r`` (``j = r - 1``) of ``1`` when ``r = 1``, else ``1/(j+1) + (j/(j+1)) *
    (J/j) * ((rel + e) / (rel + nonrel + 2e))``: J the pages above with a qrels line (a negative grade
    is pooled but unjudged), rel / nonrel the judged relevant / non-relevant pages above, e = 1e-5."""
    o = ctx.judged_order(k)
    q, g, r = ctx.jq[o], ctx.jg[o], ctx.jr[o].astype(np.float64)
    rel = g >= ctx.level
    nonrel = (g >= 0) & ~rel
    rel_b = _excl_cumsum(q, rel.astype(np.float64))[rel]
    non_b = _excl_cumsum(q, nonrel.astype(np.float64))[rel]
    all_b = _excl_cumsum(q, np.ones(len(q)))[rel]
    fj = r[rel] - 1.0
    e = INFAP_EPSILON
    with np.errstate(invalid="ignore", divide="ignore"):
        term = np.where(fj == 0, 1.0, 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * (all_b / fj) * ((rel_b + e) / (rel_b + non_b + 2 * e)))
    return ctx.count(np.ones(len(term), dtype=bool), q[rel], term) / ctx.safe_rel


def _suffix_max_precision(ctx: "Ranked", k: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The relevant retrieved pages (rank <= k) by (query, rank): their query, their ordinal j (1-based)
    within the query, and the highest precision at their rank or below (the interpolated precision)."""
    sel = ctx.rr_ <= _lim(k)
    q, prec = ctx.rq_[sel], ctx.r_prec[sel]
    if len(q) == 0:
        return q, q, prec
    j = np.arange(len(q)) - np.searchsorted(q, q) + 1
    # suffix maximum within each query: reversed running maximum, groups kept apart by an offset
    off = (ctx.nq - q) * 2.0
    smax = np.maximum.accumulate((prec + off)[::-1])[::-1] - off
    return q, j, smax


def _iprec(ctx: "Ranked", k: int | None, levels: tuple[float, ...]) -> np.ndarray:
    """Interpolated precision at each recall level: float64 ``(len(levels), nq)`` (trec_eval)."""
    q, j, smax = _suffix_max_precision(ctx, k)
    rel_ret = ctx.count(np.ones(len(q), dtype=bool), q)
    width = int(j.max()) + 1 if len(j) else 1
    key = q * width + j  # ascending: entries are ordered by (query, rank)
    out = np.zeros((len(levels), ctx.nq))
    if len(key) == 0:
        return out
    for i, lv in enumerate(levels):
        n = np.floor(lv * ctx.num_rel + 0.5).astype(np.int64)  # C lround (trec_eval 10)
        want = np.where(n == 0, 1, n)  # recall 0: the precision interpolated at the first relevant page
        ok = want <= rel_ret  # false for a query without relevant retrieved pages
        idx = np.minimum(np.searchsorted(key, np.arange(ctx.nq) * width + want), len(key) - 1)
        out[i] = np.where(ok, smax[idx], 0.0)
    return out


def iprec_at_recall(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """Interpolated precision at recall level ``p`` (trec_eval ``m_iprec_at_recall.c``): the highest
    precision at any rank at or below the rank where ``round(p * R)`` relevant pages are retrieved (the
    first relevant page for ``round(...) = 0``); 0 when that many are never retrieved."""
    if p is None:
        raise InputError("iprec_at_recall needs a recall level, e.g. iprec_at_recall_0.10")
    return _iprec(ctx, k, (p,))[0]


def eleven_pt_avg(ctx: "Ranked", k: int | None) -> np.ndarray:
    """The mean of the interpolated precisions at the 11 recall levels 0.0, 0.1, ..., 1.0
    (trec_eval ``m_11pt_avg.c``)."""
    return _iprec(ctx, k, tuple(i / 10 for i in range(11))).mean(axis=0)


def num_ret(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Pages retrieved (at most k): float64 counts (trec_eval ``num_ret``; summed in the aggregate)."""
    return np.minimum(ctx.num_retrieved, _lim(k)).astype(np.float64)


def num_rel(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Relevant pages of the query (grade >= the relevance level): float64 counts (trec_eval ``num_rel``)."""
    return ctx.num_rel.astype(np.float64)


def num_rel_ret(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Relevant pages retrieved (in the top k): float64 counts (trec_eval ``num_rel_ret``)."""
    return ctx.count(ctx.rel & (ctx.jr <= _lim(k)), ctx.jq)


def err(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Expected reciprocal rank (Chapelle et al. 2009) as gdeval.pl computes it: ``sum_{r <= k} R_r / r *
    prod_{i < r} (1 - R_i)``, ``R = (2^grade - 1) / 2^4`` for grades > 0 (else 0).

    Raises:
        InputError: a grade above 4 in the qrels (gdeval refuses such a file)."""
    if len(ctx.pos_grades) and int(ctx.pos_grades.max()) > ERR_MAX_GRADE:
        raise InputError(f"ERR (as gdeval computes it) takes grades 0..{ERR_MAX_GRADE}; the qrels hold grade {int(ctx.pos_grades.max())}")
    o = ctx.judged_order(k)
    o = o[ctx.jg[o] > 0]
    q, g, r = ctx.jq[o], ctx.jg[o].astype(np.float64), ctx.jr[o].astype(np.float64)
    R = (np.exp2(g) - 1.0) / 2.0 ** ERR_MAX_GRADE
    survive = np.exp(_excl_cumsum(q, np.log1p(-R)))
    return ctx.count(np.ones(len(q), dtype=bool), q, R * survive / r)


def rbp(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """Rank-biased precision (Moffat & Zobel 2008), binary: ``(1 - p) * sum_{r <= k} rel_r * p^(r - 1)``,
    rel = grade >= the relevance level, ``p`` = 0.8 unless given (ir_measures ``RBP(rel=1)``)."""
    p = 0.8 if p is None else p
    sel = ctx.rel & (ctx.jr <= _lim(k))
    return ctx.count(sel, ctx.jq, (1.0 - p) * np.power(p, ctx.jr - 1.0))
