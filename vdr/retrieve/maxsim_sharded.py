"""MaxSim top-k with the pages partitioned across the ranks of a torchrun process group
(:mod:`vdr.distributed`): each rank scores its contiguous part of the page store with
:func:`vdr.retrieve.maxsim.maxsim_topk` and rank ``dst`` merges the parts. It lives in ``retrieve``,
above the process-group helpers of :mod:`vdr.distributed`, which import no stage."""

from __future__ import annotations

from ..distributed import gather_object, is_distributed, rank, shard_bounds
from .maxsim import DEFAULT_BUDGET_BYTES, SubsetSource, TopK, maxsim_topk, merge_topk

__all__ = ["sharded_maxsim_topk"]


def sharded_maxsim_topk(queries, source, k: int, *, device=None, budget_bytes: int | None = None, dst: int = 0,
                        precision: str = "exact"):
    """:func:`vdr.retrieve.maxsim.maxsim_topk` with the pages partitioned across ranks.

    Every rank calls it with the same queries and source. Rank ``r`` scores its contiguous part of
    ``source.ids()`` (:func:`vdr.distributed.shard`, store order, so each rank reads its own region of the shards),
    keeps its own top ``k``, and rank ``dst`` merges them with :func:`vdr.retrieve.maxsim.merge_topk` (score
    descending, then page id descending): exactly the single-process top-k when the scores agree,
    which they do bit for bit on the CPU.

    ``precision`` is :func:`~vdr.retrieve.maxsim.maxsim_topk`'s (``"exact"`` by default).

    Returns:
        :class:`~vdr.retrieve.maxsim.TopK` (indices are positions in ``source.ids()``) on rank ``dst``, ``None``
        on the others; in a single process, ``maxsim_topk(queries, source, k)``.
    """
    budget = DEFAULT_BUDGET_BYTES if budget_bytes is None else budget_bytes
    if not is_distributed():
        return maxsim_topk(queries, source, k, device=device, budget_bytes=budget, precision=precision)
    ids = source.ids()
    a, b = shard_bounds(len(ids))
    part = None
    if b > a:
        top = maxsim_topk(queries, SubsetSource(source, ids[a:b]), min(k, b - a), device=device, budget_bytes=budget,
                          precision=precision)
        part = TopK(top.scores, top.indices + a, top.ids)
    parts = gather_object(part, dst=dst)
    if rank() != dst:
        return None
    return merge_topk(parts, min(k, len(ids)))
