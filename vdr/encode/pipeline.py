"""The page-encoding pipeline: the accelerator never waits for a page that is not ready.

:class:`PagePipeline` runs one model over many page images:

* **Preprocessing in worker processes**: opening the image (a corpus page's PNG, a path, a PIL
  image), the processor's resize and patching (``processor.process_images``) run in
  ``num_workers`` DataLoader processes, page by page (so the first batch is ready after
  ``batch_size / workers`` pages, not ``batch_size``, and no worker holds up a whole batch), about
  ``prefetch`` batches ahead, floating tensors already in a 16-bit compute dtype (half the bytes to
  pass, pin and copy; the same rounding the device would apply); this process joins a batch's pages
  straight into **pinned** host memory when the device is CUDA (page-locked: copied by DMA,
  asynchronously).
* **Copies overlapped with compute** (CUDA only): each batch goes to the device on a side stream
  while the previous batch's forward pass runs; its vectors come back with one asynchronous copy
  into pinned memory, collected one batch later. On the CPU there is nothing to overlap and no
  stream is created.
* **Equal-token buckets**: within each window of ``window`` consecutive pages (in input order),
  pages with the same number of image tokens form the batches (:func:`plan_batches`), so no batch
  carries padding: a page's vectors do not depend on the batch it was in (bitwise on the CPU), and
  no compute is spent on padding. Results are returned in input order, window by window.
* **Batch size from free memory** on CUDA (:func:`batch_size_from_memory`; the encoder measures one
  page's peak memory with a probe forward); :data:`DEFAULT_BATCH_SIZE` pages elsewhere.
* **Accounting** (:attr:`PagePipeline.stats`): pages, batches, seconds, ``wait_s`` (time the loop
  spent waiting for a preprocessed batch: near 0 when preprocessing keeps up), ``forward_s``.

Store writes in a background thread are :class:`vdr.encode.embed`'s part (:class:`BackgroundWriter`).

This module imports torch.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from ..errors import InputError
from .settings import DEFAULT_BATCH_SIZE as _SETTINGS_DEFAULT

__all__ = ["PagePipeline", "PipelineStats", "plan_batches", "batch_size_from_memory", "default_workers", "BackgroundWriter",
           "DEFAULT_BATCH_SIZE", "BUCKET_BATCHES", "MEMORY_FRACTION", "MAX_AUTO_BATCH"]

#: Pages per forward pass where no memory figure chooses it (the CPU; ``--batch-size`` unset).
DEFAULT_BATCH_SIZE = _SETTINGS_DEFAULT
#: A bucketing window holds this many batches of pages (``window = batch_size * BUCKET_BATCHES``).
BUCKET_BATCHES = 16
#: Share of the free accelerator memory the page batches may take (the rest: allocator slack, queries).
MEMORY_FRACTION = 0.8
#: Largest batch size chosen from memory (beyond it throughput no longer grows; OOM back-off stays).
MAX_AUTO_BATCH = 64


def plan_batches(counts: Sequence[Any], batch_size: int, window: int) -> list[list[int]]:
    """Batches of item positions: within each window of ``window`` consecutive items, the items with
    equal ``counts`` (image tokens, or any hashable bucket key), in input order, cut into batches of
    at most ``batch_size``.

    >>> plan_batches([5, 7, 5, 7, 7, 5], 2, 6)
    [[0, 2], [5], [1, 3], [4]]

    Raises:
        InputError: ``batch_size`` or ``window`` < 1.
    """
    if batch_size < 1 or window < 1:
        raise InputError(f"batch_size and window must be >= 1, got {batch_size} and {window}")
    out: list[list[int]] = []
    for start in range(0, len(counts), window):
        groups: dict[Any, list[int]] = {}
        for i in range(start, min(start + window, len(counts))):
            groups.setdefault(counts[i], []).append(i)
        for members in groups.values():  # first-seen count first
            out += [members[a:a + batch_size] for a in range(0, len(members), batch_size)]
    return out


def default_workers(device: str) -> int:
    """Preprocessing workers when none are asked for: on CUDA one per CPU core but one, at most 8
    (the processor's resize and patching keep a large GPU busy only in parallel); 0 on the CPU
    (the model is the bottleneck there, and the workers would take its cores)."""
    import os

    if not str(device).startswith("cuda"):
        return 0
    return max(1, min(8, (os.cpu_count() or 2) - 1))


def batch_size_from_memory(free_bytes: int, per_page_bytes: int, *, fraction: float = MEMORY_FRACTION,
                           cap: int = MAX_AUTO_BATCH) -> int:
    """Pages per forward pass that fit ``fraction`` of ``free_bytes`` when one page's forward pass
    takes ``per_page_bytes`` at its peak (activations grow linearly with the batch), within
    ``[1, cap]``.

    >>> batch_size_from_memory(80 * 2**30, 2 * 2**30)
    32
    >>> batch_size_from_memory(1 * 2**30, 2 * 2**30), batch_size_from_memory(2**40, 2**20)
    (1, 64)
    """
    if per_page_bytes <= 0:
        return cap
    return max(1, min(cap, int(free_bytes * fraction) // int(per_page_bytes)))


@dataclass
class PipelineStats:
    """What one :meth:`PagePipeline.run` did.

    Attributes:
        pages, batches: items encoded and forward passes run.
        seconds: wall time of the run.
        wait_s: time the loop waited for the next preprocessed batch (the accelerator idle, unless
            it was still busy with the previous batch); ``first_wait_s``: of it, the wait for the
            first batch (worker start-up and one batch of preprocessing: nothing to overlap yet).
        forward_s: time in the forward calls as the host saw it (on CUDA, kernel launches; the
            device runs on asynchronously).
        preprocess_s: wall seconds the workers spent opening and preprocessing pages, summed over
            pages (divided by ``workers``: the preprocessing's share of the run, as it went on
            this machine; more than the forward passes: add workers).
        batch_sizes: pages per forward pass, in order.
        workers, pin_memory, cuda_streams, window: how it ran.
    """

    pages: int = 0
    batches: int = 0
    seconds: float = 0.0
    wait_s: float = 0.0
    first_wait_s: float = 0.0
    forward_s: float = 0.0
    preprocess_s: float = 0.0
    batch_sizes: list = field(default_factory=list)
    workers: int = 0
    pin_memory: bool = False
    cuda_streams: bool = False
    window: int = 0

    def to_json(self) -> dict:
        """A JSON-able dict (batch sizes summarised: count, min, max, mean)."""
        bs = self.batch_sizes
        return {"pages": self.pages, "batches": self.batches, "seconds": round(self.seconds, 4), "wait_s": round(self.wait_s, 4),
                "first_wait_s": round(self.first_wait_s, 4), "preprocess_s": round(self.preprocess_s, 4), "forward_s": round(self.forward_s, 4), "workers": self.workers, "pin_memory": self.pin_memory,
                "cuda_streams": self.cuda_streams, "window": self.window,
                "batch_size": {"min": min(bs), "max": max(bs), "mean": round(sum(bs) / len(bs), 2)} if bs else None}


class _Items(Dataset):
    """Position -> (position, id, RGB PIL image), opened lazily (in the worker processes)."""

    def __init__(self, ids: list[str], opener: Callable[[int], Any]) -> None:
        self.ids = ids
        self.opener = opener

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return i, self.ids[i], (time.perf_counter(), self.opener(i))


class _Collate:
    """Runs the processor in the worker: ``(positions, ids, sizes (w, h), processed batch)``."""

    def __init__(self, processor) -> None:
        self.processor = processor

    def __call__(self, items):
        images = [it[2][1] for it in items]
        batch = self.processor.process_images(images)
        return [it[0] for it in items], [it[1] for it in items], [im.size for im in images], batch


class _One:
    """Runs the processor on one page in the worker: ``(position, id, size (w, h), processed page)``.
    With ``dtype`` (a 16-bit compute dtype), floating tensors are cast to it here, as the device
    would cast them (round to nearest even, the same on every device): half the bytes to move."""

    def __init__(self, processor, dtype: torch.dtype | None = None) -> None:
        self.processor = processor
        self.dtype = dtype

    def __call__(self, item):
        i, pid, (t0, image) = item
        batch = self.processor.process_images([image])
        if self.dtype is not None:
            batch = {k: v.to(self.dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in batch.items()}
        return i, pid, image.size, batch, time.perf_counter() - t0


def _merge(parts: list[dict], pin: bool, buffers: dict | None = None) -> dict:
    """One batch from pages processed one by one: every tensor concatenated along its first axis
    (pages of one bucket have the same token and patch counts, so this is what the processor gives
    for the batch, without padding); into pinned memory when ``pin`` (PyTorch's pinned-memory
    cache reuses the blocks), else into ``buffers`` (reused from batch to batch while shapes repeat:
    no fresh pages to fault in; only where the batch is consumed before the next is merged)."""
    if len(parts) == 1 and not pin:
        return dict(parts[0])
    out = {}
    for k, v in parts[0].items():
        if isinstance(v, torch.Tensor):
            vals = [p[k] for p in parts]
            shape = (sum(x.shape[0] for x in vals), *v.shape[1:])
            dst = buffers.get(k) if buffers is not None else None
            if dst is None or dst.shape != shape or dst.dtype != v.dtype:
                dst = torch.empty(shape, dtype=v.dtype, pin_memory=pin)
                if buffers is not None:
                    buffers[k] = dst
            out[k] = torch.cat(vals, out=dst)
        else:
            out[k] = v
    return out


@contextmanager
def _threads(n: int | None):
    """Run the block with ``n`` intra-op CPU threads (``None``: unchanged)."""
    if n is None or n == torch.get_num_threads():
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


class PagePipeline:
    """Encode page images with a forward function, preprocessing in workers (see the module docstring).

    Args:
        processor: has ``process_images(list of PIL images) -> dict of tensors`` (a colpali-engine
            processor); run in the worker processes.
        forward: ``forward(batch on the device) -> list of (n_tokens, dim) tensors on the device``,
            one per page, padding already removed.
        device: where ``forward`` runs (``"cuda"``, ``"cuda:1"``, ``"cpu"``).
        batch_size: pages per forward pass (>= 1).
        num_workers: worker processes (0: preprocessing in this process).
        prefetch: batches the workers prepare ahead, together (``num_workers`` > 0).
        dtype: floating inputs are cast to it on the device (the model's compute dtype); ``None``: kept.
        host_threads: intra-op CPU threads for this process's host copies (joining a batch's pages,
            splitting the vectors); default 1 on CUDA, where the workers have the cores and the
            model does not run on them (a parallel copy would wait for a busy core), unchanged on
            the CPU (the model needs them).

    Hooks (attributes, optional): ``check(ids, sizes, batch)`` raises on a bad batch (run in this
    process); ``fallback(batch, rebuild, n, error) -> list of CPU tensors`` replaces ``forward``
    after a CUDA out-of-memory ``error``, and (``error`` ``None``) for every batch larger than
    ``cap()``, the batch size an earlier error settled on (``rebuild(a, b)`` preprocesses pages
    ``a..b-1`` of the batch again).

    Attributes:
        window: pages per bucketing window (``batch_size * BUCKET_BATCHES``; may be set before :meth:`run`).
        stats: :class:`PipelineStats` of the last :meth:`run`.
    """

    def __init__(self, processor, forward: Callable, *, device: str, batch_size: int, num_workers: int = 0, prefetch: int = 2,
                 dtype: torch.dtype | None = None, host_threads: int | None = None) -> None:
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise InputError(f"num_workers must be >= 0, got {num_workers}")
        self.processor, self.forward = processor, forward
        self.device = torch.device(device)
        self.batch_size, self.num_workers, self.prefetch = batch_size, num_workers, max(1, prefetch)
        self.window = batch_size * BUCKET_BATCHES
        self.dtype = dtype
        self.check: Callable | None = None
        self.fallback: Callable | None = None
        self.cap: Callable[[], int | None] | None = None
        self.cuda = self.device.type == "cuda" and torch.cuda.is_available()
        self.host_threads = host_threads if host_threads is not None else (1 if self.cuda else None)
        self.stats = PipelineStats()

    # ------------------------------------------------------------------ device transfers
    def _to_device(self, batch: dict, stream) -> dict:
        """``batch`` on the device (floating tensors in :attr:`dtype`); on CUDA copied on ``stream``
        asynchronously from pinned memory, and made safe to use on the current stream."""
        def move(v):
            if not isinstance(v, torch.Tensor):
                return v
            v = v.to(self.device, non_blocking=self.cuda)
            return v.to(self.dtype) if self.dtype is not None and v.is_floating_point() else v

        if stream is None:
            return {k: move(v) for k, v in batch.items()}
        with torch.cuda.stream(stream):
            out = {k: move(v) for k, v in batch.items()}
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(stream)
        for v in out.values():
            if isinstance(v, torch.Tensor):
                v.record_stream(current)  # the allocator must not reuse it before the forward pass ends
        return out

    def _to_host(self, vecs: list[torch.Tensor]):
        """``(host float32 tensor of every page's rows, lengths, event or None)``: one copy; on CUDA
        asynchronous into pinned memory, complete when the event is."""
        lengths = [int(v.shape[0]) for v in vecs]
        flat = torch.cat(vecs).float() if len(vecs) > 1 else vecs[0].float()
        if not self.cuda or flat.device.type != "cuda":
            return flat.cpu(), lengths, None
        host = torch.empty(flat.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, lengths, event

    # ------------------------------------------------------------------ the loop
    def run(self, opener: Callable[[int], Any], ids: Sequence[str], counts: Sequence[int], *,
            progress: Callable[[int], None] | None = None) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        """Encode items ``0..len(ids)-1`` (``opener(i)`` gives item ``i``'s RGB PIL image).

        Args:
            opener: position -> PIL image (picklable: it runs in the workers).
            ids: the items' ids (labels in errors and in the output).
            counts: each item's bucket: its image-token count, or any hashable key (items with
                equal keys batch together, and must then be processed to tensors of equal shapes).
            progress: called with the pages done after each batch.

        Yields:
            ``(ids, vectors)`` window by window, in input order: each vector a float32 CPU tensor
            ``(n_tokens, dim)``.
        """
        ids = [str(i) for i in ids]
        if len(counts) != len(ids):
            raise InputError(f"{len(counts)} token counts for {len(ids)} pages")
        st = self.stats = PipelineStats(workers=self.num_workers, pin_memory=self.cuda, cuda_streams=self.cuda, window=self.window)
        if not ids:
            return
        t0 = time.perf_counter()
        batches = plan_batches(counts, self.batch_size, self.window)
        half = self.dtype if self.dtype in (torch.float16, torch.bfloat16) else None
        ds, one = _Items(list(ids), opener), _One(self.processor, half)
        ahead = max(2, -(-self.prefetch * self.batch_size // max(1, self.num_workers)))  # pages per worker
        loader = DataLoader(ds, sampler=[i for b in batches for i in b], batch_size=None, num_workers=self.num_workers,
                            collate_fn=one, prefetch_factor=ahead if self.num_workers > 0 else None, persistent_workers=False)
        collate = _Collate(self.processor)  # out-of-memory rebuilds, in this process
        buffers: dict = {}  # host batch tensors reused from batch to batch (no CUDA: the forward pass is done with them)
        stream = torch.cuda.Stream(self.device) if self.cuda else None
        done: dict[int, torch.Tensor] = {}  # position -> vectors, until its window is yielded
        pending = None  # the last batch submitted: its vectors are on their way back
        window = 0  # the first window not yet yielded
        it = iter(loader)
        for planned in batches:
            t = time.perf_counter()
            items = [next(it) for _ in planned]
            st.wait_s += time.perf_counter() - t
            if not st.batches:
                st.first_wait_s = st.wait_s
            idx, bids, sizes = [x[0] for x in items], [x[1] for x in items], [x[2] for x in items]
            st.preprocess_s += sum(x[4] for x in items)
            try:
                with _threads(self.host_threads):
                    batch = _merge([x[3] for x in items], self.cuda, None if self.cuda else buffers)
            except RuntimeError:  # pages of one bucket the processor shaped differently: processed together here
                batch = collate([ds[i] for i in idx])[3]
            if self.check is not None:
                self.check(bids, sizes, batch)
            t = time.perf_counter()
            out = self._forward(batch, idx, ds, collate, stream)  # queued before waiting for the previous batch
            del batch  # (its buffers are merged into again: the forward pass is done with them, or holds its own copy)
            st.forward_s += time.perf_counter() - t
            st.batches += 1
            st.pages += len(idx)
            st.batch_sizes.append(len(idx))
            if pending is not None:
                with _threads(self.host_threads):
                    self._collect(pending, done)
            pending = (idx, out)
            # batches are planned window by window: once a batch of a later window runs, the earlier ones are done
            while window < idx[0] // self.window:
                yield self._window(window, ids, done)
                window += 1
            if progress is not None:
                progress(len(idx))
        if pending is not None:
            self._collect(pending, done)
        while window * self.window < len(ids):
            yield self._window(window, ids, done)
            window += 1
        st.seconds = time.perf_counter() - t0

    def _window(self, w: int, ids: list[str], done: dict) -> tuple[list[str], list[torch.Tensor]]:
        """Window ``w``'s ids and vectors in input order (taken out of ``done``)."""
        a, b = w * self.window, min(len(ids), (w + 1) * self.window)
        return ids[a:b], [done.pop(p) for p in range(a, b)]

    def _forward(self, batch: dict, idx: list[int], ds: _Items, collate: _Collate, stream):
        """The batch's vectors on their way to the host: ``(host tensor, lengths, event)``, or a
        list of CPU tensors after an out-of-memory fallback."""
        def rebuild(a: int, b: int):
            return collate([ds[i] for i in idx[a:b]])[3]

        cap = self.cap() if self.cap is not None else None
        if self.fallback is not None and cap is not None and len(idx) > cap:
            return self.fallback(batch, rebuild, len(idx), None)
        try:
            dev = self._to_device(batch, stream)
            vecs = self.forward(dev)
            del dev
            return self._to_host(vecs)
        except RuntimeError as e:
            if self.fallback is None or not _is_oom(e):
                raise
            error = e
        return self.fallback(batch, rebuild, len(idx), error)

    @staticmethod
    def _collect(pending, done: dict) -> None:
        """Wait for a batch's copy to the host and file its vectors by position."""
        idx, out = pending
        if isinstance(out, list):  # the out-of-memory fallback's CPU tensors
            vecs = out
        else:
            host, lengths, event = out
            if event is not None:
                event.synchronize()
            vecs = list(torch.split(host, lengths))
        for p, v in zip(idx, vecs):
            done[p] = v


def _is_oom(e: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or ("out of memory" in str(e).lower() and isinstance(e, RuntimeError))


class BackgroundWriter:
    """Writes encoded pages into an embedding store from a thread, so the encode loop never waits
    for the store (casting, the finiteness check, shard files, fsync).

    ``put(ids, vectors)`` queues a batch (blocking when ``depth`` batches wait: memory stays
    bounded); the thread calls ``write(ids, vectors)`` for each, in order. The first error the thread
    meets is raised by the next ``put`` or by ``close``; batches queued after it are dropped.

    Args:
        write: ``write(ids, vectors)``, run in the thread (store adds and commits).
        depth: batches that may wait in the queue.
    """

    _STOP = object()

    def __init__(self, write: Callable[[list[str], list[torch.Tensor]], None], depth: int = 4) -> None:
        self._write = write
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self.error: BaseException | None = None
        self.busy_s = 0.0
        self._thread = threading.Thread(target=self._loop, name="vdr-store-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is self._STOP:
                return
            if self.error is not None:
                continue  # drain: the error is reported once
            t = time.perf_counter()
            try:
                self._write(*item)
            except BaseException as e:  # noqa: BLE001 - handed to the encode loop
                self.error = e
            self.busy_s += time.perf_counter() - t

    def put(self, ids: list[str], vectors: list[torch.Tensor]) -> None:
        """Queue one batch; raises the thread's first error, if any."""
        self._raise()
        self._queue.put((ids, vectors))

    def close(self, *, raise_error: bool = True) -> None:
        """Write what is queued, stop the thread; raises its first error, if any (unless
        ``raise_error`` is false: another error is on its way)."""
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            e, self.error = self.error, None
            raise e
