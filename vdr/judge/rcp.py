"""Pools, the two judging stages, and RCP-nDCG@k.

Source: RCP-nDCG paper (arXiv 2609.35739), reference documentation of cohere-ai/rcp-ndcg
(``docs/concepts/metric.md``): RCP-nDCG@k is nDCG@k with linear gains ``g(theta)`` of the calibrated
abilities; the ideal ranking sorts the query's calibrated pool by gain; a page outside the
calibrated pool gains 0 (vdr counts and reports such pages).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..types import Run
from .bradley_terry import fit_windows
from .client import JudgeClient, PageSource, Window
from .irt import Calibration, Priors, calibrate
from .schedule import Schedule, balanced_windows, n_windows, query_rng, rubric_count, stratified_windows

__all__ = ["build_pools", "judge_pools", "rcp_ndcg"]


def build_pools(runs: Sequence[Run], qrels: Mapping[str, Mapping[str, int]], k: int, query_ids: Sequence[str]) -> dict[str, list[str]]:
    """The pool of each query: the union of the top ``k`` pages of every run, plus every page the
    qrels judge for the query (any grade), in first-seen order (runs in order, then qrels).

    Args:
        runs: every backend x variant run. qrels: ``{query_id: {corpus_id: grade}}``.
        k: depth (>= 1). query_ids: the queries to pool (the evaluated query set).

    Returns:
        ``{query_id: [corpus_id, ...]}`` for every id of ``query_ids``.
    """
    pools: dict[str, dict[str, None]] = {q: {} for q in query_ids}
    for run in runs:
        for q in query_ids:
            if q in run:
                for d, _ in run.ranked(q)[:k]:
                    pools[q][d] = None
    for q in query_ids:
        for d in qrels.get(q, {}):
            pools[q][d] = None
    return {q: list(p) for q, p in pools.items()}


def _tournament_windows(q: str, pool: list[str], sch: Schedule, phase: str, index_lists: list[list[int]], start: int = 0) -> list[Window]:
    out = []
    for n, idx in enumerate(index_lists):
        pages = tuple(pool[i] for i in idx)
        out.append(Window(q, "tournament", phase, start + n, pages))
        if sch.reverse:
            out.append(Window(q, "tournament", phase, start + n, pages[::-1], reversed=True))
    return out


def _scored(windows: list[Window], answers: list, index: dict[str, dict[str, int]]):
    per_q: dict[str, list] = {}
    for w, a in zip(windows, answers):
        per_q.setdefault(w.query_id, []).append(([index[w.query_id][p] for p in w.pages], a))
    return per_q


def judge_pools(
    pools: Mapping[str, Sequence[str]],
    queries: Mapping[str, str],
    pages: PageSource,
    client: JudgeClient,
    schedule: Schedule | None = None,
    priors: Priors = Priors(),
) -> tuple[Calibration, dict]:
    """Run Stage A and Stage B on every pool and fit the calibration.

    Order of requests: (1) every query's random tournament windows (and their reversed copies) and
    rubric windows, (2) the stratified tournament windows from a preliminary Bradley-Terry fit of
    (1). The final Stage A scores come from all tournament windows.

    Args:
        pools: ``{query_id: [corpus_id, ...]}`` (see :func:`build_pools`).
        queries: ``{query_id: text shown to the judge}``.
        pages: page source for the client's modality. client: the judge.
        schedule: default :meth:`Schedule.for_modality` of the client's modality.
        priors: calibration priors.

    Returns:
        ``(calibration, details)``; details holds the window counts per stage/phase and the
        Stage A scores.

    Raises:
        JudgeOutputError, JudgeCallError, BudgetExhausted: from the client (answers so far cached).
        ValueError: no rubric answers (every pool empty).
    """
    sch = schedule or Schedule.for_modality(client.modality)
    pools = {q: list(dict.fromkeys(p)) for q, p in pools.items()}
    index = {q: {d: n for n, d in enumerate(p)} for q, p in pools.items()}
    first: list[Window] = []
    for q, pool in pools.items():
        n = len(pool)
        w = min(sch.window, n)
        if n >= 2:
            rng = query_rng(sch.seed, q, "tournament-random")
            first += _tournament_windows(q, pool, sch, "random", balanced_windows(n, w, n_windows(sch.random_placements, n, w), rng))
        wr = min(sch.rubric_window, n)
        if n:
            rng = query_rng(sch.seed, q, "rubric")
            for m, idx in enumerate(balanced_windows(n, wr, rubric_count(sch.rubric_placements, n, wr), rng)):
                first.append(Window(q, "rubric", "random", m, tuple(pool[i] for i in idx)))
    ans1 = client.judge(first, queries, pages)
    t_first = [(w, a) for w, a in zip(first, ans1) if w.stage == "tournament"]
    scored = _scored([w for w, _ in t_first], [a for _, a in t_first], index)
    second: list[Window] = []
    for q, pool in pools.items():
        n = len(pool)
        w = min(sch.window, n)
        cnt = n_windows(sch.stratified_placements, n, w)
        if n >= 2 and cnt:
            prelim = fit_windows(n, scored.get(q, []))
            rng = query_rng(sch.seed, q, "tournament-stratified")
            second += _tournament_windows(q, pool, sch, "stratified", stratified_windows(prelim, w, cnt, rng))
    ans2 = client.judge(second, queries, pages)
    for q, lst in _scored(second, ans2, index).items():
        scored.setdefault(q, []).extend(lst)
    theta_bt = {q: dict(zip(pool, fit_windows(len(pool), scored.get(q, [])).tolist())) for q, pool in pools.items()}
    rubric: dict[str, list] = {}
    for w, a in zip(first, ans1):
        if w.stage == "rubric":
            rubric.setdefault(w.query_id, []).extend(zip(w.pages, a))
    cal = calibrate(theta_bt, rubric, priors)
    counts: dict[str, int] = {}
    for w in first + second:
        key = f"{w.stage}.{w.phase}"
        counts[key] = counts.get(key, 0) + 1
    return cal, {"windows": counts, "schedule": sch.to_dict(), "theta_bt": theta_bt}


def rcp_ndcg(run: Run, calibration: Calibration, query_ids: Sequence[str], k: int) -> tuple[dict[str, float], dict[str, int]]:
    """RCP-nDCG@k of one run per query.

    ``DCG@k = sum_{r=1..k} g(d_r) / log2(r + 1)`` over the run's ranking (vdr/trec_eval order:
    score descending, ties by corpus id descending); the ideal DCG sorts the gains of the query's
    calibrated pool, cut at ``k``; nDCG is 0 when the ideal is 0 or the query is missing from the
    run. A page of the top ``k`` outside the calibrated pool gains 0 and is counted.

    Args:
        run: the run. calibration: the fitted calibration. query_ids: the query set. k: cutoff.

    Returns:
        ``({query_id: value}, {query_id: pages of the top k outside the pool})``.

    Raises:
        KeyError: a query of ``query_ids`` is not calibrated.
    """
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    values, outside = {}, {}
    for q in query_ids:
        gains = calibration.gains(q)
        ideal = sorted(gains.values(), reverse=True)[:k]
        idcg = float(np.dot(ideal, disc[: len(ideal)]))
        top = [d for d, _ in run.ranked(q)[:k]] if q in run else []
        g = [gains.get(d, 0.0) for d in top]
        outside[q] = sum(d not in gains for d in top)
        dcg = float(np.dot(g, disc[: len(g)])) if g else 0.0
        values[q] = dcg / idcg if idcg > 0 and math.isfinite(idcg) else 0.0
    return values, outside
