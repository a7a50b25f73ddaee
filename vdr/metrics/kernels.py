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

if TYPE_CHECKING:  # the evaluation context; imported for annotations only (no cycle at runtime)
    from .compute import Ranked

__all__ = ["ndcg", "ndcg_exp", "ndcg_run", "mrr", "rr_full", "recall", "precision", "hit", "average_precision", "judged",
           "hole", "ties"]


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
    """Pages in the top k that have any qrels line for the query (any grade) / k; ir_measures
    ``Judged@k`` (MacAvaney, Macdonald & Ounis 2022, ECIR)."""
    return ctx.count(ctx.jr <= k, ctx.jq) / k


def hole(ctx: "Ranked", k: int | None) -> np.ndarray:
    """``1 - judged@k``: the share of the top k without a qrels line (MTEB ``hole@k``, per-query qrels)."""
    return 1.0 - ctx.count(ctx.jr <= k, ctx.jq) / k


def ties(ctx: "Ranked", k: int | None) -> np.ndarray:
    """Number of tied score groups in the top k (groups of >= 2 pages with exactly equal scores,
    trec_eval order), as float64 counts; Lin & Yang 2019, "The Impact of Score Ties on
    Repeatability in Document Ranking" (SIGIR)."""
    return ctx.tie_groups(k).astype(np.float64)
