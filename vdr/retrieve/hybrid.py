"""Hybrid backend: reciprocal rank fusion (RRF) of several runs.

Cormack, Clarke & Büttcher 2009, "Reciprocal rank fusion outperforms Condorcet and individual rank
learning methods", SIGIR: each page gets ``score(d) = sum_r 1 / (rrf_k + rank_r(d))`` over the runs
``r`` that retrieved it, with ``rrf_k = 60`` and 1-based ranks. Ranks are vdr's trec_eval order
(:meth:`vdr.types.Run.ranked`: score descending, then corpus id descending), so fusing run files
gives the same result as fusing the in-memory runs. A page missing from a run contributes nothing
for that run; a query missing from a run likewise. Sums are taken in the order the runs are given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InputError
from ..types import QuerySet, Run
from ._common import check_depth
from .options import HybridOptions, check_options
from .base import Backend, BackendUnavailable, BuildContext, new_report

__all__ = ["reciprocal_rank_fusion", "HybridBackend", "RRF_K", "DEFAULT_FUSED"]

#: The RRF constant of Cormack et al. (2009).
RRF_K = 60
#: What ``hybrid`` fuses by default: those of these backends that were built.
DEFAULT_FUSED = ("multimodal", "lexical", "semantic")


def _check_rrf_k(rrf_k: object) -> float:
    if isinstance(rrf_k, (bool, np.bool_)) or not isinstance(rrf_k, (int, float, np.integer, np.floating)) or not (0 <= float(rrf_k) < float("inf")):
        raise InputError(f"rrf_k (the RRF constant) must be a finite number >= 0, got {rrf_k!r}")
    return float(rrf_k)


def reciprocal_rank_fusion(
    runs: Sequence[Run],
    rrf_k: float = RRF_K,
    *,
    depth: int | None = None,
    top: int | None = None,
    name: str = "rrf",
) -> Run:
    """Fuse ``runs`` by reciprocal rank: ``score(q, d) = sum_r 1 / (rrf_k + rank_r(q, d))``.

    Args:
        runs: one or more :class:`~vdr.types.Run` (plain ``{qid: {did: score}}`` dicts are validated
            into runs).
        rrf_k: the RRF constant (default 60, Cormack et al. 2009); >= 0.
        depth: use only each run's top ``depth`` pages per query (default: all it holds).
        top: keep the fused top ``top`` pages per query (default: all).
        name: run tag of the result.

    Returns:
        :class:`~vdr.types.Run` over the union of the runs' query ids (first-seen order); float64
        scores. A query that is in some run with an empty ranking stays, with an empty ranking.

    Raises:
        InputError: no runs, a bad ``rrf_k``, ``depth`` or ``top``, or an invalid dict run.
    """
    if isinstance(runs, Run) or not isinstance(runs, Sequence) or len(runs) == 0:
        raise InputError("reciprocal_rank_fusion needs a non-empty sequence of runs")
    kk = _check_rrf_k(rrf_k)
    depth = None if depth is None else check_depth(depth)
    top = None if top is None else check_depth(top, "top")
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
    out = Run.from_checked(fused, name)
    return out.top_k(top) if top is not None else out


class HybridBackend:
    """Reciprocal rank fusion of two or more backends, as a :class:`~vdr.retrieve.base.Backend`.

    :meth:`search` asks every fused backend for its ``depth`` best pages and keeps the fused
    ``depth`` best (the fused backends answer from their own index; wrap them to reuse runs that
    were computed already, as :func:`vdr.evaluate` does).

    Args:
        backends: the backends to fuse (each a :class:`~vdr.retrieve.base.Backend`); two or more
            for :meth:`search`; none is fine for :meth:`fuse` alone.
        rrf_k: RRF constant (default 60).
        depth: per-run ranking depth used (default all the run holds).
        top: fused pages kept per query by :meth:`fuse` (default all; :meth:`search` keeps ``depth``).
        name: the backend's name in results (default ``"hybrid"``).

    Attributes:
        config: ``{"backend": "hybrid", "method", "source", "rrf_k", "depth", "top", "fused":
            [names of the fused backends or runs]}``.
        report: ``page_forward_passes`` 0 (the fused backends report their own), ``index``:
            ``{"fused": names}``, ``searches``: per variant ``{"num_queries", "depth"}``.

    Raises:
        InputError: bad ``rrf_k``, ``depth`` or ``top``.
    """

    def __init__(self, backends: Sequence[Backend] = (), *, rrf_k: float = RRF_K, depth: int | None = None,
                 top: int | None = None, name: str = "hybrid") -> None:
        self.rrf_k = _check_rrf_k(rrf_k)
        self.depth = None if depth is None else check_depth(depth)
        self.top = None if top is None else check_depth(top, "top")
        self.backends = list(backends)
        self.name = name
        self.report: dict = new_report()
        self.config: dict = {
            "backend": "hybrid",
            "method": "reciprocal rank fusion: sum_r 1 / (rrf_k + rank_r), ranks in trec_eval order",
            "source": "Cormack, Clarke & Buettcher 2009 (SIGIR)",
            "rrf_k": self.rrf_k,
            "depth": self.depth,
            "top": self.top,
            "fused": [b.name for b in self.backends],
        }

    def index(self, corpus) -> None:
        """Index every fused backend (each loads or builds its own index).

        Raises:
            InputError: fewer than two backends to fuse; what the fused backends raise.
        """
        self._need_two()
        for b in self.backends:
            b.index(corpus)
        self.report["index"] = {"fused": [b.name for b in self.backends]}

    def search(self, queries: QuerySet, depth: int) -> Run:
        """Fuse the fused backends' ``depth`` best pages per query; keep the fused ``depth`` best.

        Raises:
            InputError: fewer than two backends, a bad ``depth``; what the fused backends raise.
        """
        self._need_two()
        depth = check_depth(depth)
        runs = [b.search(queries, depth) for b in self.backends]
        out = reciprocal_rank_fusion(runs, self.rrf_k, depth=self.depth, top=depth, name=self.name)
        variant = queries.name if isinstance(queries, QuerySet) else "original"
        self.report["searches"][variant] = {"num_queries": len(out), "depth": depth}
        return out

    def _need_two(self) -> None:
        if len(self.backends) < 2:
            raise InputError(f"the hybrid backend needs at least two backends to fuse, got {[b.name for b in self.backends]}")

    def fuse(self, runs: Sequence[Run], names: Sequence[str] | None = None) -> Run:
        """Fuse ``runs`` (see :func:`reciprocal_rank_fusion`); ``names`` (e.g. ``["lexical",
        "semantic"]``) are recorded in ``config["fused"]``.

        Raises:
            InputError: see :func:`reciprocal_rank_fusion`; ``names`` of the wrong length.
        """
        if names is not None and len(names) != len(runs):
            raise InputError(f"{len(names)} names for {len(runs)} runs")
        out = reciprocal_rank_fusion(runs, self.rrf_k, depth=self.depth, top=self.top, name=self.name)
        self.config["fused"] = list(names) if names is not None else [r.name for r in runs]
        return out


def build(ctx: BuildContext) -> HybridBackend:
    """Registry factory: fuse the backends built before this one.

    Options (:class:`~vdr.retrieve.options.HybridOptions`): ``rrf_k`` (default 60), ``fuse`` (names
    of the backends to fuse; default those of :data:`DEFAULT_FUSED` that were built), ``depth``
    (per-run ranking depth).

    Raises:
        BackendUnavailable: fewer than two of the backends to fuse were built.
        InputError: a bad value, or a name in ``fuse`` that names no backend.
    """
    o = check_options(HybridOptions, ctx.options, backend=ctx.name)
    if o.fuse is None:
        ran = [b for b in DEFAULT_FUSED if b in ctx.built]
    else:
        ran = list(o.fuse)
        missing = [n for n in ran if n not in ctx.built]
        if missing:
            raise BackendUnavailable(f"cannot fuse {missing}: not among the backends that ran ({list(ctx.built) or 'none'})")
    if len(ran) < 2:
        raise BackendUnavailable(f"needs at least two backends that ran, got {ran or 'none'}")
    return HybridBackend([ctx.built[n] for n in ran], rrf_k=o.rrf_k, depth=o.depth, name=ctx.name)


build.Options = HybridOptions
