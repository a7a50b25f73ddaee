"""Encoders: page images and queries -> multi-vectors; :func:`embed` fills an :class:`~vdr.encode.store.EmbeddingStore`.

Importing this package does not import torch (so ``import vdr``, which imports
:mod:`vdr.encode.store`, does not): :mod:`vdr.encode.colpali` and its names here
(``LateInteractionEncoder``, ``QueryTemplate``, ...) are imported on first use.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import InputError

__all__ = ["embed", "EmbedReport", "LateInteractionEncoder", "QueryTemplate", "DEFAULT_QUERY_PREFIX", "page_content_hash"]

#: names of :mod:`vdr.encode.colpali` (which imports torch) served lazily by this package
_COLPALI = ("LateInteractionEncoder", "QueryTemplate", "DEFAULT_QUERY_PREFIX", "N_AUGMENTATION_TOKENS")


def __getattr__(name: str):
    if name in _COLPALI:
        from . import colpali

        return getattr(colpali, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class EmbedReport:
    """What :func:`embed` did.

    Attributes:
        store: the key folder that holds this encoder's vectors (open it with
            ``EmbeddingStore.open(store)``).
        fingerprint: the encoder fingerprint (sha256 hex).
        pages: pages in the corpus (= pages in the store afterwards).
        encoded: pages encoded in this run (new or changed content).
        reused: pages whose stored vectors matched their content hash.
        removed: stored pages no longer in the corpus, dropped from the store.
        tokens_per_page: ``{"min", "mean", "max"}`` over all stored pages (0s when empty).
        seconds: wall time of the whole call (loading excluded when an encoder was passed).
        pages_per_second: encoded pages / encoding seconds (0.0 when nothing was encoded).
        batch_size: the batch size requested; ``batch_size_final``: after out-of-memory back-off.
        encoder: the encoder's settings (model, revision, resolution, query template, dtype ...).
    """

    store: str
    fingerprint: str
    pages: int
    encoded: int
    reused: int
    removed: int
    tokens_per_page: dict
    seconds: float
    pages_per_second: float
    batch_size: int
    batch_size_final: int
    dtype: str
    encoder: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """A JSON-able dict of every field."""
        return asdict(self)


def page_content_hash(path: str | Path) -> str:
    """``"sha256:<hex>"`` of the page image file's bytes (the corpus records no content hash).

    Raises:
        InputError: the file cannot be read.
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while b := f.read(1 << 20):
                h.update(b)
    except OSError as e:
        raise InputError(f"cannot read page image ({e.strerror})", path=path) from None
    return "sha256:" + h.hexdigest()


def embed(
    corpus_dir: str | Path,
    model: "str | Path | LateInteractionEncoder",
    store_dir: str | Path,
    *,
    batch_size: int = 8,
    device: str | None = None,
    dtype: str = "float16",
    model_dtype: str | None = None,
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
    query_prefix: str = "Query: ",  # = colpali.DEFAULT_QUERY_PREFIX (literal: no torch import here)
    n_augmentation: int = 10,  # = colpali.N_AUGMENTATION_TOKENS
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    revision: str | None = None,
    num_workers: int | None = None,
    shard_pages: int = 256,
    progress: bool = True,
) -> EmbedReport:
    """Encode every page of a corpus into the embedding store, reusing what is already there.

    Pages whose image bytes (sha256) match the stored content hash under the same encoder
    fingerprint and stored dtype are reused; new or changed pages are encoded; pages no longer in
    the corpus are dropped. Progress is committed every ``shard_pages`` pages, so an interrupted
    run (even kill -9) resumes where it stopped and ends with the vectors an uninterrupted run gives.

    Under ``torchrun`` (a :mod:`vdr.distributed` process group of more than one rank) every rank calls
    this with the same arguments: the ranks hash their contiguous share of the pages and exchange the
    hashes; rank 0 opens the store, merges what an interrupted run left, drops stale pages and plans
    the pages to encode; each rank encodes its share of that list in whole batches
    (:func:`vdr.distributed.shard_batches`, so each batch is the one a single process forms) into its
    own rank journal and shards; after a barrier rank 0 merges the rank journals. The store is then
    the one a single process writes (same page ids in the same order, bit-identical vectors on the
    CPU); the report counts all ranks' pages. ``device`` ``None``/``"cuda"`` means ``cuda:LOCAL_RANK``.

    Args:
        corpus_dir: a corpus folder (``pages.jsonl`` + ``images/``, see :mod:`vdr.corpus`).
        model: hub name, local checkpoint folder, or an already loaded :class:`LateInteractionEncoder`
            (then ``device``, ``model_dtype``, ``trust_remote_code``, ``attn_implementation``,
            ``query_prefix``, ``n_augmentation``, ``min_pixels``, ``max_pixels``, ``revision`` are ignored).
        store_dir: the store folder; vectors go to its sub-folder for this encoder and ``dtype``.
        batch_size: pages per forward pass (halved on CUDA out-of-memory).
        device: ``"cuda"``, ``"cpu"``...; default CUDA when available.
        dtype: stored dtype, ``"float16"`` (default) or ``"float32"``.
        model_dtype: compute dtype (default bfloat16 on CUDA, float32 on CPU).
        trust_remote_code, attn_implementation, query_prefix, n_augmentation, min_pixels, max_pixels,
            revision: see :meth:`LateInteractionEncoder.load`.
        num_workers: DataLoader workers preparing images (default 2 on CUDA, 0 on CPU).
        shard_pages: pages per committed shard (the unit of resumption).
        progress: tqdm progress bar (pages/s).

    Returns:
        :class:`EmbedReport`.

    Raises:
        InputError: not a corpus folder, unreadable image (naming file and id), bad arguments.
        ModelLoadError: see :meth:`LateInteractionEncoder.load`.
        StoreError: another writer holds the store, or its files are inconsistent.
    """
    from .. import distributed as D
    from ..corpus import Corpus
    from .colpali import LateInteractionEncoder
    from .store import EmbeddingStore

    t0 = time.perf_counter()
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    if shard_pages < 1:
        raise InputError(f"shard_pages must be >= 1, got {shard_pages}")
    if dtype not in ("float16", "float32"):
        raise InputError(f"stored dtype must be float16 or float32, got {dtype!r}")
    corpus = Corpus.load(corpus_dir)
    distributed = D.is_distributed()
    if isinstance(model, LateInteractionEncoder):
        enc = model
    else:
        enc = LateInteractionEncoder.load(
            model, device=D.device_for_rank(device), dtype=model_dtype, trust_remote_code=trust_remote_code,
            attn_implementation=attn_implementation, query_prefix=query_prefix, n_augmentation=n_augmentation,
            min_pixels=min_pixels, max_pixels=max_pixels, revision=revision,
        )
    if enc.dim is None:
        raise InputError("the encoder does not report its vector dimension")
    if num_workers is None:
        num_workers = 2 if str(enc.device).startswith("cuda") else 0

    ids = corpus.ids()
    if distributed:
        return _embed_distributed(corpus, enc, store_dir, ids, t0, batch_size=batch_size, dtype=dtype,
                                  num_workers=num_workers, shard_pages=shard_pages, progress=progress)
    hashes = {pid: page_content_hash(corpus.image_path(pid)) for pid in ids}
    store = EmbeddingStore.open_for_writing(store_dir, encoder_fingerprint=enc.fingerprint,
                                            encoder_settings=enc.describe(), dtype=dtype, dim=enc.dim)
    t_enc = 0.0
    try:
        wanted = set(ids)
        stale = [pid for pid in store.ids() if pid not in wanted]
        store.remove(stale)
        todo = [pid for pid in ids if store.content_hash(pid) != hashes[pid]]
        reused = len(ids) - len(todo)
        if todo:
            t_enc = _encode_into(store, enc, corpus, todo, hashes, batch_size=batch_size, num_workers=num_workers,
                                 shard_pages=shard_pages, progress=progress)
        lengths = store.lengths()
        path = str(store.path)
    finally:
        store.close()
    return EmbedReport(
        store=path, fingerprint=enc.fingerprint, pages=len(ids), encoded=len(todo), reused=reused, removed=len(stale),
        tokens_per_page=_tokens_per_page(lengths), seconds=round(time.perf_counter() - t0, 3),
        pages_per_second=round(len(todo) / t_enc, 3) if t_enc > 0 else 0.0, batch_size=batch_size,
        batch_size_final=enc.batch_cap or batch_size, dtype=dtype, encoder=enc.describe(),
    )


def _tokens_per_page(lengths: list[int]) -> dict:
    return ({"min": min(lengths), "mean": round(statistics.fmean(lengths), 2), "max": max(lengths)} if lengths
            else {"min": 0, "mean": 0.0, "max": 0})


def _encode_into(store, enc, corpus, ids, hashes, *, batch_size, num_workers, shard_pages, progress) -> float:
    """Encode the pages ``ids`` of ``corpus`` into the writable ``store``, committing a shard every
    ``shard_pages`` pages (and at the end). Returns the encoding time in seconds."""
    t1 = time.perf_counter()
    for bids, vecs in enc.iter_pages(corpus, batch_size, ids=ids, num_workers=num_workers, progress=progress):
        for pid, v in zip(bids, vecs):
            store.add(pid, hashes[pid], v)
        if store.pending >= shard_pages:
            store.commit()
    store.commit()
    return time.perf_counter() - t1


def _embed_distributed(corpus, enc: LateInteractionEncoder, store_dir, ids: list[str], t0: float, *, batch_size: int,
                       dtype: str, num_workers: int, shard_pages: int, progress: bool) -> EmbedReport:
    """:func:`embed` under torchrun (every rank calls it; see :func:`embed` for the protocol)."""
    from .. import distributed as D
    from .store import EmbeddingStore

    # 1. hashes: each rank reads its contiguous share of the images, all ranks get all hashes
    hashes: dict[str, str] = {}
    for part in D.all_gather_object({pid: page_content_hash(corpus.image_path(pid)) for pid in D.shard(ids)}):
        hashes.update(part)

    # 2. rank 0: open the main writer (merges rank journals of an interrupted run, collects garbage),
    #    drop stale pages, plan the work; close before any rank writer opens
    def plan():
        st = EmbeddingStore.open_for_writing(store_dir, encoder_fingerprint=enc.fingerprint,
                                             encoder_settings=enc.describe(), dtype=dtype, dim=enc.dim)
        try:
            wanted = set(ids)
            stale = [pid for pid in st.ids() if pid not in wanted]
            st.remove(stale)
            todo = [pid for pid in ids if st.content_hash(pid) != hashes[pid]]
        finally:
            st.close()
        return len(stale), todo

    n_stale, todo = D.run_on_main(plan)

    # 3. every rank encodes its share, whole batches, into its own journal and shards
    mine = D.shard_batches(todo, batch_size)
    t_enc = 0.0
    if mine:
        w = EmbeddingStore.open_for_writing(store_dir, encoder_fingerprint=enc.fingerprint, encoder_settings=enc.describe(),
                                            dtype=dtype, dim=enc.dim, rank=D.rank())
        try:
            t_enc = _encode_into(w, enc, corpus, mine, hashes, batch_size=batch_size, num_workers=num_workers,
                                 shard_pages=shard_pages, progress=progress and D.is_main())
        except BaseException:
            w._pending = []  # keep what was committed; the rest is re-encoded on resume
            raise
        finally:
            w.close()
    facts = D.all_gather_object((t_enc, enc.batch_cap or batch_size))
    # 4. after every rank has closed its writer, rank 0 merges the rank journals
    def merge():
        st = EmbeddingStore.open_for_writing(store_dir, encoder_fingerprint=enc.fingerprint,
                                             encoder_settings=enc.describe(), dtype=dtype, dim=enc.dim)
        try:
            return str(st.path), st.lengths()
        finally:
            st.close()

    path, lengths = D.run_on_main(merge)
    t_max = max(t for t, _ in facts)
    return EmbedReport(
        store=path, fingerprint=enc.fingerprint, pages=len(ids), encoded=len(todo), reused=len(ids) - len(todo),
        removed=n_stale, tokens_per_page=_tokens_per_page(lengths), seconds=round(time.perf_counter() - t0, 3),
        pages_per_second=round(len(todo) / t_max, 3) if t_max > 0 else 0.0, batch_size=batch_size,
        batch_size_final=min(c for _, c in facts), dtype=dtype, encoder=enc.describe(),
    )
