"""Data parallelism on PyTorch's own engine (``torch.distributed``), for ``torchrun -m vdr ...``.

vdr never starts processes or rendezvous of its own: ``torchrun`` (``python -m torch.distributed.run``)
starts one process per GPU (or CPU slot) and sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``; :func:`init` joins the process group through the ``env://``
rendezvous, with the ``nccl`` backend when CUDA is available and ``gloo`` otherwise (override with
``VDR_DIST_BACKEND``). Multi-node runs use torchrun's own rendezvous (``--nnodes``, ``--rdzv-endpoint``).

Without torchrun (no ``WORLD_SIZE`` > 1 in the environment) nothing here does anything: every helper
answers as a single process (rank 0 of 1), :func:`init` returns ``False`` and torch is not imported.

How work is split (all splits are deterministic functions of the input list, the rank and the world
size, so every rank computes the same plan without talking to the others):

* :func:`shard` splits a list **contiguously**: rank ``r`` of ``W`` gets ``items[start:stop]`` with
  sizes differing by at most one, ranks in order. Contiguous (rather than strided) keeps each rank's
  pages together on disk and makes the concatenation of the ranks' parts, in rank order, the input
  list again (so a store written by several ranks lists its pages in the single-process order).
* :func:`shard_batches` splits a list in whole batches of ``batch_size`` items, contiguously: every
  rank encodes exactly the batches a single process would encode, so batch composition (and with it
  every padded shape) is the same and the vectors are bit-identical on the CPU.

Environment:
    ``VDR_DIST_BACKEND``: ``nccl`` or ``gloo`` (default: nccl with CUDA, else gloo).
    ``VDR_DIST_TIMEOUT_S``: collective timeout in seconds (default 14400: ranks wait at barriers while
    others encode their share).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from .errors import VdrError

__all__ = [
    "launched_by_torchrun", "init", "shutdown", "is_distributed", "rank", "world_size", "local_rank", "is_main",
    "barrier", "shard_bounds", "shard", "shard_batches", "all_gather_object", "gather_object", "broadcast_object",
    "device_for_rank", "run_on_main", "RankFailed",
]

T = TypeVar("T")


class RankFailed(VdrError):
    """Raised on the other ranks when the step that rank 0 ran for everybody failed there
    (rank 0 raises the original error; the CLI prints only rank 0's)."""


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def launched_by_torchrun() -> bool:
    """True when the environment names a world of more than one process (``WORLD_SIZE`` > 1, as torchrun sets)."""
    return _env_int("WORLD_SIZE", 1) > 1 and "RANK" in os.environ


def _dist():
    import torch.distributed as dist

    return dist


def is_distributed() -> bool:
    """True when a ``torch.distributed`` process group of more than one process is initialised."""
    if not launched_by_torchrun():
        return False
    dist = _dist()
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def init(backend: str | None = None) -> bool:
    """Join the process group torchrun prepared (``env://``), once; a no-op without torchrun.

    On CUDA, the rank's GPU is ``cuda:LOCAL_RANK`` (set as the current device before the group is
    created, as NCCL needs).

    Args:
        backend: ``"nccl"`` or ``"gloo"``; default ``VDR_DIST_BACKEND``, else nccl when CUDA is
            available, else gloo.

    Returns:
        Whether this process is now part of a group of more than one process.
    """
    if not launched_by_torchrun():
        return False
    import torch

    dist = _dist()
    if dist.is_initialized():
        return dist.get_world_size() > 1
    backend = backend or os.environ.get("VDR_DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend=backend, init_method="env://",
                            timeout=timedelta(seconds=float(os.environ.get("VDR_DIST_TIMEOUT_S", 4 * 3600))))
    return dist.get_world_size() > 1


def shutdown() -> None:
    """Leave the process group (after a final barrier); a no-op when none is initialised."""
    if not launched_by_torchrun():
        return
    dist = _dist()
    if dist.is_available() and dist.is_initialized():
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()


def rank() -> int:
    """This process' global rank (0 without a process group)."""
    return _dist().get_rank() if is_distributed() else 0


def world_size() -> int:
    """Number of processes (1 without a process group)."""
    return _dist().get_world_size() if is_distributed() else 1


def local_rank() -> int:
    """Rank on this node (``LOCAL_RANK``, 0 when not set)."""
    return _env_int("LOCAL_RANK", 0)


def is_main() -> bool:
    """True on rank 0 (and in a single process): the one that writes outputs and prints."""
    return rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if is_distributed():
        _dist().barrier()


def shard_bounds(n: int, rank_: int | None = None, world: int | None = None) -> tuple[int, int]:
    """``(start, stop)`` of rank ``rank_``'s contiguous part of ``n`` items: the first ``n % world``
    ranks get one item more; parts follow each other in rank order and cover ``range(n)`` exactly."""
    r = rank() if rank_ is None else rank_
    w = world_size() if world is None else world
    if not 0 <= r < w:
        raise ValueError(f"rank {r} outside world of {w}")
    base, extra = divmod(n, w)
    start = r * base + min(r, extra)
    return start, start + base + (1 if r < extra else 0)


def shard(items: Sequence[T], rank_: int | None = None, world: int | None = None) -> list[T]:
    """This rank's contiguous part of ``items`` (see :func:`shard_bounds`); all of it in a single process."""
    a, b = shard_bounds(len(items), rank_, world)
    return list(items[a:b])


def shard_batches(items: Sequence[T], batch_size: int, rank_: int | None = None, world: int | None = None) -> list[T]:
    """This rank's part of ``items`` in whole batches of ``batch_size`` (contiguous, by batch count),
    so that the batches each rank forms are exactly those a single process forms."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n_batches = -(-len(items) // batch_size)
    a, b = shard_bounds(n_batches, rank_, world)
    return list(items[a * batch_size:b * batch_size])


def all_gather_object(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank; ``[obj]`` in a single process."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * world_size()
    _dist().all_gather_object(out, obj)
    return out


def gather_object(obj: Any, dst: int = 0) -> list[Any] | None:
    """Every rank's ``obj`` in rank order on rank ``dst``, ``None`` elsewhere; ``[obj]`` in a single process."""
    if not is_distributed():
        return [obj]
    out: list[Any] | None = [None] * world_size() if rank() == dst else None
    _dist().gather_object(obj, out, dst=dst)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank (the others' argument is ignored); ``obj`` in a single process."""
    if not is_distributed():
        return obj
    box = [obj if rank() == src else None]
    _dist().broadcast_object_list(box, src=src)
    return box[0]


def run_on_main(fn, *args, **kwargs):
    """Run ``fn`` on rank 0 only and hand its result to every rank.

    An exception on rank 0 is re-raised there and turned into :class:`RankFailed` (with its message)
    on the other ranks, so no rank waits forever for a result that will never come.
    """
    if not is_distributed():
        return fn(*args, **kwargs)
    if is_main():
        try:
            res = fn(*args, **kwargs)
        except BaseException as e:
            broadcast_object(("error", f"{type(e).__name__}: {e}"))
            raise
        broadcast_object(("ok", res))
        return res
    status, res = broadcast_object(None)
    if status == "error":
        raise RankFailed(f"rank 0 failed: {res}")
    return res


def device_for_rank(device: str | None) -> str | None:
    """The device this rank computes on: ``cuda:LOCAL_RANK`` when ``device`` is ``None`` or ``"cuda"``
    and CUDA is available under torchrun; otherwise ``device`` unchanged."""
    if not is_distributed():
        return device
    import torch

    if (device is None or device == "cuda") and torch.cuda.is_available():
        return f"cuda:{local_rank()}"
    return device
