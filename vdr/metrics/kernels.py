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
           "num_ret", "num_rel", "num_rel_ret", "err", "rbp", "ndcg_rel", "rndcg", "g_measure", "bin_g", "rbp_graded",
           "rbp_resid", "unj", "relative_precision", "set_precision", "set_recall", "set_relative_precision", "set_map",
           "set_f", "utility", "rprec_mult", "num_nonrel_judged_ret", "num_q", "gm_map", "gm_bpref"]

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
    # suffix maximum within each query, exactly: a reversed running maximum over integer keys (the
    # query's block, then the precision's rank among the distinct precisions), mapped back to the
    # precision itself. Adding and removing a float offset instead turned 0.1 into 0.09999999999999964
    # and printed trec_eval's half-way values one digit low (issue 34).
    uniq, rank = np.unique(prec, return_inverse=True)
    block = (ctx.nq - q).astype(np.int64) * len(uniq)
    key = np.maximum.accumulate((block + rank.reshape(-1))[::-1])[::-1]
    return q, j, uniq[key - block]


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


# ------------------------------------------------------------------------------------------------ trec_eval's all_trec set
# Gains below are trec_eval's defaults: a page's gain is its grade (grades > 0; the relevance level
# plays no part), the ideal ranking holds the query's positive grades sorted descending.

#: trec_eval's MIN_GEO_MEAN: the floor of a per-query value before the geometric mean (gm_map, gm_bpref).
MIN_GEO_MEAN = 0.00001
#: trec_eval's default persistence of ``rbp`` and ``rbp_resid``.
TREC_RBP_P = 0.9


def _retrieved(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Pages retrieved per query, the ranking cut at ``k``: int64 ``(nq,)`` (trec_eval ``num_ret`` under ``-M k``)."""
    return np.minimum(ctx.num_retrieved, _lim(k))


def _positive(ctx: "Ranked", k: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The retrieved pages with a grade > 0 at rank <= ``k``, by (query, rank): query index, grade
    (float64) and rank (float64)."""
    o = ctx.judged_order(k)
    o = o[ctx.jg[o] > 0]
    return ctx.jq[o], ctx.jg[o].astype(np.float64), ctx.jr[o].astype(np.float64)


def _ideal_at(ctx: "Ranked", q: np.ndarray, n: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """``cum`` (a per-query cumulative array over the ideal ranking, :meth:`Ranked.ideal`) at the
    first ``n`` ideal positions of query ``q``; 0 where ``n`` is 0: float64, the shape of ``q``."""
    _, _, first, count = ctx.ideal()
    m = np.minimum(n, count[q]).astype(np.int64)
    if len(cum) == 0:
        return np.zeros(len(q))
    return np.where(m > 0, cum[np.clip(first[q] + m - 1, 0, len(cum) - 1)], 0.0)


def _ideal_cumsum(ctx: "Ranked", w: np.ndarray) -> np.ndarray:
    """Per query, the running sum of ``w`` over the ideal ranking (inclusive): float64, aligned with :meth:`Ranked.ideal`."""
    iq = ctx.ideal()[0]
    return _excl_cumsum(iq, w) + w


def _dcg_at(q: np.ndarray, r: np.ndarray, cdcg: np.ndarray, bq: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """The DCG of query ``bq`` at rank ``cut``: ``cdcg`` (running DCG of the entries ``(q, r)``, ordered
    by query then rank) at the last entry of ``bq`` ranked at or above ``cut``; 0 when none is."""
    if len(q) == 0:
        return np.zeros(len(bq))
    width = int(r.max()) + 1
    key = q.astype(np.int64) * width + r.astype(np.int64)
    bkey = bq.astype(np.int64) * width + np.minimum(cut, width - 1).astype(np.int64)
    idx = np.searchsorted(key, bkey, side="right") - 1
    ok = (idx >= 0) & (q[np.maximum(idx, 0)] == bq)
    return np.where(ok, cdcg[np.maximum(idx, 0)], 0.0)


def ndcg_rel(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``ndcg_rel`` (``m_ndcg_rel.c``): nDCG averaged over the query's pages of grade > 0 --
    at the rank of each such retrieved page, ``DCG@r / IDCG@r``; for each one not retrieved, the
    final ``DCG / IDCG`` -- divided by their number; gain = grade; 0 when no page has a grade > 0."""
    q, g, r = _positive(ctx, k)
    w = g / np.log2(r + 1.0)
    cd = _excl_cumsum(q, w) + w
    _, ig, _, count = ctx.ideal()
    icum = _ideal_cumsum(ctx, ig / np.log2(ctx.ideal_pos() + 2.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        s = ctx.count(np.ones(len(q), dtype=bool), q, cd / _ideal_at(ctx, q, r, icum))
        dcg = ctx.count(np.ones(len(q), dtype=bool), q, w)
        idcg = _ideal_at(ctx, np.arange(ctx.nq), count, icum)
        s = s + np.where(count > 0, (count - ctx.count(np.ones(len(q), dtype=bool), q)) * dcg / np.where(idcg > 0, idcg, 1.0), 0.0)
        return np.where((s > 0) & (count > 0), s / np.maximum(count, 1), 0.0)


def rndcg(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``Rndcg`` (``m_Rndcg.c``): the mean of nDCG@c over the R levels c -- the ranks where the
    ideal gain drops (the number of the query's pages at each positive grade, cumulated from the top
    grade down) -- plus nDCG over the whole ranking when more than (pages of grade > 0) + 1 are
    retrieved; gain = grade; 0 when the query has no relevant page (grade >= the relevance level)."""
    q, g, r = _positive(ctx, k)
    w = g / np.log2(r + 1.0)
    cd = _excl_cumsum(q, w) + w
    iq, ig, _, count = ctx.ideal()
    pos = ctx.ideal_pos()
    icum = _ideal_cumsum(ctx, ig / np.log2(pos + 2.0))
    ends = np.ones(len(iq), dtype=bool)  # the last ideal position of each grade of each query
    if len(iq) > 1:
        ends[:-1] = (iq[1:] != iq[:-1]) | (ig[1:] != ig[:-1])
    bq, c = iq[ends], pos[ends] + 1
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = _dcg_at(q, r, cd, bq, c) / icum[ends]
        s = ctx.count(np.ones(len(bq), dtype=bool), bq, terms)
        nb = ctx.count(np.ones(len(bq), dtype=bool), bq)
        tail = (_retrieved(ctx, k) > count + 1) & (count > 0)
        idcg = _ideal_at(ctx, np.arange(ctx.nq), count, icum)
        s = s + np.where(tail, ctx.count(np.ones(len(q), dtype=bool), q, w) / np.where(idcg > 0, idcg, 1.0), 0.0)
        nb = nb + tail
        return np.where((ctx.num_rel > 0) & (nb > 0), s / np.maximum(nb, 1), 0.0)


def g_measure(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``G`` (``m_G.c``, "normalized gain"): ``sum`` over the retrieved pages of grade > 0 at
    rank r of ``gain / log2(2 + C(r) - S(r))``, S(r) the gains retrieved at ranks <= r, C(r) the sum of
    max(ideal gain, 1) over the ideal ranks <= r; divided by the query's total positive gain; gain = grade."""
    q, g, r = _positive(ctx, k)
    s_run = _excl_cumsum(q, g) + g
    _, ig, _, count = ctx.ideal()
    icum = _ideal_cumsum(ctx, ig)
    cost = _ideal_at(ctx, q, r, icum) + np.maximum(0.0, r - count[q])
    total = _ideal_at(ctx, np.arange(ctx.nq), count, icum)
    got = ctx.count(np.ones(len(q), dtype=bool), q, g / np.log2(2.0 + cost - s_run))
    return np.where(total > 0, got / np.where(total > 0, total, 1.0), 0.0)


def bin_g(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``binG`` (``m_binG.c``): ``1/R * sum`` over the relevant retrieved pages of
    ``1 / log2(2 + n)``, n = the pages ranked above it that are not relevant (judged or not)."""
    sel = ctx.rr_ <= _lim(k)
    q, r = ctx.rq_[sel], ctx.rr_[sel].astype(np.float64)
    j = np.arange(len(q)) - np.searchsorted(q, q) + 1.0  # 1-based ordinal among the relevant
    return ctx.count(np.ones(len(q), dtype=bool), q, 1.0 / np.log2(2.0 + r - j)) / ctx.safe_rel


def rbp_graded(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """trec_eval ``rbp`` (``m_rbp.c``): ``(1 - p) * sum_{r <= k} gain_r * p^(r - 1)``, gain = grade /
    the query's highest grade when that is above 1 (gains scaled into [0, 1]), else the grade;
    ``p`` = 0.9 unless given. The relevance level plays no part."""
    p = TREC_RBP_P if p is None else p
    q, g, r = _positive(ctx, k)
    norm = np.maximum(ctx.max_grade[q], 1).astype(np.float64)
    return (1.0 - p) * ctx.count(np.ones(len(q), dtype=bool), q, g / norm * np.power(p, r - 1.0))


def rbp_resid(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """trec_eval ``rbp_resid`` (``m_rbp_resid.c``): the most RBP could rise if every unjudged retrieved
    page (no qrels line, or a negative grade) had gain 1: ``p^n + (1 - p) * sum`` over the unjudged
    pages of ``p^(r - 1)`` (n pages retrieved), which is ``1 - (1 - p) * sum`` over the judged ones;
    0 when every retrieved page is judged. ``p`` = 0.9 unless given."""
    p = TREC_RBP_P if p is None else p
    sel = (ctx.jg >= 0) & (ctx.jr <= _lim(k))
    judged = ctx.count(sel, ctx.jq)
    w = ctx.count(sel, ctx.jq, np.power(p, ctx.jr - 1.0))
    return np.where(_retrieved(ctx, k) > judged, 1.0 - (1.0 - p) * w, 0.0)


def unj(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``unj_k`` (``m_unjudged.c``): unjudged pages (no qrels line, or a negative grade) in
    the top k / k; a run shorter than k is filled with judged pages (empty slots are not unjudged)."""
    judged = ctx.count((ctx.jg >= 0) & (ctx.jr <= k), ctx.jq)
    return (_retrieved(ctx, k) - judged) / k


def relative_precision(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``relative_P_k`` (``m_rel_P.c``): relevant pages in the top k / min(k, R); 0 when R = 0."""
    return np.where(ctx.num_rel > 0, _relevant_in_top(ctx, k) / np.minimum(k, ctx.safe_rel), 0.0)


def _set_counts(ctx: "Ranked", k: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(relevant retrieved, retrieved, relevant) per query, the ranking cut at ``k``: float64 ``(nq,)``."""
    return num_rel_ret(ctx, k), _retrieved(ctx, k).astype(np.float64), ctx.num_rel.astype(np.float64)


def set_precision(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``set_P``: relevant retrieved / retrieved (0 when nothing is retrieved)."""
    a, n, _ = _set_counts(ctx, k)
    return np.where(n > 0, a / np.maximum(n, 1.0), 0.0)


def set_recall(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``set_recall``: relevant retrieved / relevant (0 when the query has no relevant page)."""
    a, _, R = _set_counts(ctx, k)
    return np.where(R > 0, a / np.maximum(R, 1.0), 0.0)


def set_relative_precision(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``set_relative_P``: relevant retrieved / min(retrieved, relevant) (0 when either is 0)."""
    a, n, R = _set_counts(ctx, k)
    return np.where((n > 0) & (R > 0), a / np.maximum(np.minimum(n, R), 1.0), 0.0)


def set_map(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``set_map``: relevant retrieved^2 / (retrieved * relevant), set precision times set recall."""
    a, n, R = _set_counts(ctx, k)
    return np.where((n > 0) & (R > 0), a * a / np.maximum(n * R, 1.0), 0.0)


def set_f(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """trec_eval ``set_F.x`` (``m_set_F.c``): ``(x + 1) P R / (x P + R)`` of set precision P and set
    recall R, x = ``p`` (trec_eval's and ir_measures' ``beta``; 1 when ``None``: ``2 P R / (P + R)``);
    0 when nothing relevant is retrieved. float64 ``(n_queries,)``.

    trec_eval uses x as written (not squared): ``set_F.2`` is ``3 P R / (2 P + R)``; ir_measures'
    ``SetF(beta=2)`` passes beta to trec_eval unchanged, so both mean this value."""
    a, n, R = _set_counts(ctx, k)
    x = 1.0 if p is None else float(p)
    with np.errstate(invalid="ignore", divide="ignore"):
        P, Rc = a / n, a / R
        return np.where(a > 0, (x + 1.0) * P * Rc / (x * P + Rc), 0.0)


def utility(ctx: "Ranked", k: int | None) -> np.ndarray:
    """trec_eval ``utility`` with its default coefficients (1, -1, 0, 0): relevant retrieved minus
    non-relevant retrieved (a count, negative for most runs; pages without a qrels line are non-relevant)."""
    a, n, _ = _set_counts(ctx, k)
    return a - (n - a)


def rprec_mult(ctx: "Ranked", k: int | None, p: float | None = None) -> np.ndarray:
    """trec_eval ``Rprec_mult_X`` (``m_Rprec_mult.c``): precision at rank c = floor(X * R + 0.9) (the
    relevant pages in the top c / c; a run shorter than c is filled with non-relevant pages); 0 when R = 0.

    Raises:
        InputError: no multiplier ``p``."""
    if p is None:
        raise InputError("rprec_mult needs a multiple of R, e.g. rprec_mult_0.20")
    c = np.floor(p * ctx.num_rel + 0.9)
    hits = ctx.count(ctx.rel & (ctx.jr <= np.minimum(c, _lim(k))[ctx.jq]), ctx.jq)
    return np.where((ctx.num_rel > 0) & (c > 0), hits / np.maximum(c, 1.0), 0.0)


def num_nonrel_judged_ret(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Judged non-relevant pages retrieved (0 <= grade < the relevance level): float64 counts
    (trec_eval ``num_nonrel_judged_ret``; summed in the aggregate)."""
    return ctx.count((ctx.jg >= 0) & ~ctx.rel & (ctx.jr <= _lim(k)), ctx.jq)


def num_q(ctx: "Ranked", k: int | None) -> np.ndarray:
    """1 per query of the query set (trec_eval ``num_q``: summed in the aggregate, the queries averaged)."""
    return np.ones(ctx.nq)


def gm_map(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Average precision per query (:func:`average_precision`); the aggregate is trec_eval's geometric
    mean ``exp(mean(log(max(AP, 1e-5))))`` (``m_gm_map.c``)."""
    return average_precision(ctx, k)


def gm_bpref(ctx: "Ranked", k: int | None) -> np.ndarray:
    """bpref per query (:func:`bpref`); the aggregate is trec_eval's geometric mean
    ``exp(mean(log(max(bpref, 1e-5))))`` (``m_gm_bpref.c``)."""
    return bpref(ctx, k)
