"""Hybrid backend: reciprocal rank fusion (RRF) of several runs.

Cormack, Clarke & Büttcher 2009, "Reciprocal rank fusion outperforms Condorcet and individual rank
learning methods", SIGIR: each page gets ``score(d) = sum_r 1 / (k + rank_r(d))`` over the runs
``r`` that retrieved it, with ``k = 60`` and 1-based ranks. Ranks are vdr's trec_eval order
(:meth:`vdr.types.Run.ranked`: score descending, then corpus id descending), so fusing run files
gives the same result as fusing the in-memory runs. A page missing from a run contributes nothing
for that run; a query missing from a run likewise. Sums are taken in the order the runs are given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from ..types import Run
from ._common import check_k

__all__ = ["reciprocal_rank_fusion", "HybridBackend", "RRF_K"]

RRF_K = 60


def _check_rrf_k(k: object) -> float:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, float, np.integer, np.floating)) or not (0 <= float(k) < float("inf")):
        raise InputError(f"RRF k must be a finite number >= 0, got {k!r}")
    return float(k)


def reciprocal_rank_fusion(
    runs: Sequence[Run],
    k: float = RRF_K,
    *,
    depth: int | None = None,
    top: int | None = None,
    name: str = "rrf",
) -> Run:
    """Fuse ``runs`` by reciprocal rank: ``score(q, d) = sum_r 1 / (k + rank_r(q, d))``.

    Args:
        runs: one or more :class:`~vdr.types.Run` (plain ``{qid: {did: score}}`` dicts are validated
            into runs).
        k: the RRF constant (default 60, Cormack et al. 2009); >= 0.
        depth: use only each run's top ``depth`` pages per query (default: all it holds).
        top: keep the fused top ``top`` pages per query (default: all).
        name: run tag of the result.

    Returns:
        :class:`~vdr.types.Run` over the union of the runs' query ids (first-seen order); float64
        scores. A query that is in some run with an empty ranking stays, with an empty ranking.

    Raises:
        InputError: no runs, a bad ``k``, ``depth`` or ``top``, or an invalid dict run.
    """
    if isinstance(runs, Run) or not isinstance(runs, Sequence) or len(runs) == 0:
        raise InputError("reciprocal_rank_fusion needs a non-empty sequence of runs")
    kk = _check_rrf_k(k)
    depth = None if depth is None else check_k(depth)
    top = None if top is None else check_k(top)
    rs = [r if isinstance(r, Run) else Run(r) for r in runs]
    fused: dict[str, dict[str, float]] = {}
    for r in rs:
        for qid in r:
            row = fused.setdefault(qid, {})
            ranking = r.ranked(qid)
            if depth is not None:
                ranking = ranking[:depth]
            for rank, (did, _) in enumerate(ranking, start=1):
                row[did] = row.get(did, 0.0) + 1.0 / (kk + rank)
    out = Run._trusted(fused, name)
    return out.top_k(top) if top is not None else out


class HybridBackend:
    """Reciprocal rank fusion as a backend: fuses the runs of the backends that ran.

    Args:
        k: RRF constant (default 60).
        depth: per-run ranking depth used (default all).
        top: fused pages kept per query (default all).

    Attributes:
        config: ``{"backend": "hybrid", "method": "reciprocal rank fusion", "k", "depth", "top",
        "source", "fused": [names of the fused runs, set by fuse()]}``.

    Raises:
        InputError: bad ``k``, ``depth`` or ``top``.
    """

    def __init__(self, k: float = RRF_K, *, depth: int | None = None, top: int | None = None) -> None:
        self.k = _check_rrf_k(k)
        self.depth = None if depth is None else check_k(depth)
        self.top = None if top is None else check_k(top)
        self.config: dict = {
            "backend": "hybrid",
            "method": "reciprocal rank fusion: sum_r 1 / (k + rank_r), ranks in trec_eval order",
            "source": "Cormack, Clarke & Buettcher 2009 (SIGIR)",
            "k": self.k,
            "depth": self.depth,
            "top": self.top,
            "fused": [],
        }

    def fuse(self, runs: Sequence[Run], names: Sequence[str] | None = None) -> Run:
        """Fuse ``runs`` (see :func:`reciprocal_rank_fusion`); ``names`` (e.g. ``["lexical",
        "semantic"]``) are recorded in ``config["fused"]``.

        Raises:
            InputError: see :func:`reciprocal_rank_fusion`; ``names`` of the wrong length.
        """
        if names is not None and len(names) != len(runs):
            raise InputError(f"{len(names)} names for {len(runs)} runs")
        out = reciprocal_rank_fusion(runs, self.k, depth=self.depth, top=self.top, name="hybrid")
        self.config["fused"] = list(names) if names is not None else [r.name for r in runs]
        return out
