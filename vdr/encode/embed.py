""":func:`embed`: every page of a corpus into the embedding store, once per page content.

This module imports torch only when :func:`embed` runs (through the encoder).

Under ``torchrun`` (a :mod:`vdr.distributed` process group of more than one rank) every rank calls
:func:`embed` with the same arguments: the ranks hash their contiguous share of the pages and
exchange the hashes; rank 0 opens the store, merges what an interrupted run left, drops stale pages,
copies duplicates of stored pages and plans the pages to encode; each rank encodes its share of that
list in whole batches (:func:`vdr.distributed.shard_batches`) into its own rank journal and shards,
storing each encoded page's duplicates with it; after a barrier rank 0 merges the rank journals.
The store is then the one a single process writes (same page ids in the same order, bit-identical
vectors on the CPU: batches never hold padding, see below); the report counts all ranks' pages. A
device ``None``/``"cuda"`` means ``cuda:LOCAL_RANK``; a batch size chosen from free memory is the
smallest any rank chose.

Pages are encoded by :class:`vdr.encode.pipeline.PagePipeline` (preprocessing in worker processes,
pinned memory and overlapped copies on CUDA, batches of equal image-token count) and written to the
store by a background thread (:class:`vdr.encode.pipeline.BackgroundWriter`), so the encode loop
never waits for casting, checks, shard files or fsync; the report's ``pipeline`` says how it went.
"""

from __future__ import annotations

import hashlib
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError, VdrWarning
from .settings import EncoderSettings

if TYPE_CHECKING:  # pragma: no cover
    from .colpali import LateInteractionEncoder

__all__ = ["embed", "EmbedReport", "page_content_hash"]


@dataclass(frozen=True)
class EmbedReport:
    """What :func:`embed` did. ``pages == reused + encoded + copied``.

    Attributes:
        store: the key folder that holds this encoder's vectors (open it with
            ``EmbeddingStore.open(store)``).
        fingerprint: the encoder's page fingerprint (sha256 hex), which keys the store folder.
        query_fingerprint: the encoder's query fingerprint (page fingerprint + query template):
            query vectors computed with this encoder are identified by it.
        pages: pages in the corpus (= pages in the store afterwards).
        encoded: pages run through the model in this call (page forward passes), one per distinct
            new or changed page content.
        reused: pages whose stored vectors matched their content hash (nothing done).
        copied: pages stored without a forward pass because a page with the same image bytes was
            encoded in this call or is already stored (duplicate pages).
        duplicates: pages of the corpus whose image bytes (sha256) equal an earlier page's.
        removed: stored pages no longer in the corpus, dropped from the store.
        tokens_per_page: ``{"min", "mean", "max"}`` over all stored pages (0s when empty).
        seconds: wall time of the whole call (loading excluded when an encoder was passed).
        pages_per_second: encoded pages / encoding seconds (0.0 when nothing was encoded).
        batch_size: pages per forward pass (the setting, or chosen from free memory on CUDA when it
            is unset; 0 when nothing was encoded); ``batch_size_final``: after out-of-memory back-off.
        dtype: the stored dtype (``"float16"`` or ``"float32"``).
        encoder: the encoder's settings record and run facts (model, revision, resolution, query
            template, compute dtype, device, attention implementation, fingerprints).
        settings: the :class:`~vdr.encode.settings.EncoderSettings` used, as JSON.
        duplicate_of: ``{page id: id of the first page with the same image bytes}`` for every
            duplicate page of the corpus.
        legacy_stores: key folders under the store folder written with an older key scheme (their
            vectors are not reused; delete them to reclaim the space).
        pipeline: how pages were encoded (:class:`~vdr.encode.pipeline.PipelineStats`): workers,
            pinned memory, CUDA streams, bucketing window, batch sizes, ``wait_s`` (the loop waiting
            for preprocessed pages), ``forward_s``, ``store_write_s`` (the background writer's busy
            time), ``batch_size_source`` and ``attn_implementation``; empty when nothing was encoded.
    """

    store: str
    fingerprint: str
    query_fingerprint: str
    pages: int
    encoded: int
    reused: int
    copied: int
    duplicates: int
    removed: int
    tokens_per_page: dict
    seconds: float
    pages_per_second: float
    batch_size: int
    batch_size_final: int
    dtype: str
    encoder: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    duplicate_of: dict = field(default_factory=dict)
    legacy_stores: list = field(default_factory=list)
    pipeline: dict = field(default_factory=dict)

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


@dataclass(frozen=True)
class _Plan:
    """What one :func:`embed` call does to the store (computed from page hashes alone).

    Attributes:
        stale: stored ids no longer in the corpus.
        encode: ids to run through the model, one per distinct new content, corpus order.
        copies: ``{encoded id: [ids stored with its vectors]}`` (duplicates among new pages).
        from_store: ``[(id, stored id with the same content)]``: copied from the store.
    """

    stale: list[str]
    encode: list[str]
    copies: dict[str, list[str]]
    from_store: list[tuple[str, str]]

    @property
    def copied(self) -> int:
        return len(self.from_store) + sum(len(v) for v in self.copies.values())


def _plan(ids: list[str], hashes: dict[str, str], stored: dict[str, str | None]) -> _Plan:
    """The plan for corpus ``ids`` with content ``hashes`` given the store's ``{id: hash}``."""
    wanted = set(ids)
    stale = [pid for pid in stored if pid not in wanted]
    valid: dict[str, str] = {}  # content hash -> first stored page id that holds it
    for pid in ids:
        if stored.get(pid) == hashes[pid]:
            valid.setdefault(hashes[pid], pid)
    encode: list[str] = []
    copies: dict[str, list[str]] = {}
    from_store: list[tuple[str, str]] = []
    first_new: dict[str, str] = {}
    for pid in ids:
        h = hashes[pid]
        if stored.get(pid) == h:
            continue
        if h in valid:
            from_store.append((pid, valid[h]))
        elif h in first_new:
            copies[first_new[h]].append(pid)
        else:
            first_new[h] = pid
            encode.append(pid)
            copies[pid] = []
    return _Plan(stale, encode, {k: v for k, v in copies.items() if v}, from_store)


def _duplicates(ids: list[str], hashes: dict[str, str]) -> dict[str, str]:
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for pid in ids:
        h = hashes[pid]
        if h in first:
            out[pid] = first[h]
        else:
            first[h] = pid
    return out


def _resolve(encoder, overrides: dict) -> tuple[EncoderSettings, "LateInteractionEncoder | None"]:
    """``(settings to use, the loaded encoder given or None)``; ``overrides`` (``None``: keep) go
    through :meth:`EncoderSettings.from_options`."""
    from .colpali import LateInteractionEncoder

    if isinstance(encoder, LateInteractionEncoder):
        return EncoderSettings.from_options(encoder.encoder_settings, **overrides), encoder
    if isinstance(encoder, (EncoderSettings, str, Path)):
        return EncoderSettings.from_options(encoder, **overrides), None
    raise InputError(f"embed needs EncoderSettings, a LateInteractionEncoder or a model name, got {type(encoder).__name__}")


def embed(
    corpus_dir: str | Path,
    encoder: "EncoderSettings | LateInteractionEncoder | str | Path",
    store_dir: str | Path,
    *,
    batch_size: int | None = None,
    store_dtype: str | None = None,
    num_workers: int | None = None,
    shard_pages: int | None = None,
    progress: bool = True,
) -> EmbedReport:
    """Encode every page of a corpus into the embedding store, reusing what is already there.

    Pages whose image bytes (sha256) match the stored content hash under the same page fingerprint
    and stored dtype are reused; a page whose image bytes equal another page's (a duplicate) is
    encoded once and its vectors stored under every id; other new or changed pages are encoded;
    pages no longer in the corpus are dropped. The query template is not part of the store key: a
    new query prefix reuses every stored page. Progress is committed every ``shard_pages`` pages,
    so an interrupted run (even kill -9) resumes where it stopped and ends with the vectors an
    uninterrupted run gives. Folders of an older key scheme under ``store_dir`` are never reused;
    a :class:`~vdr.errors.VdrWarning` names them.

    Under ``torchrun`` every rank calls it with the same arguments (see the module docstring).

    Args:
        corpus_dir: a corpus folder (``pages.jsonl`` + ``images/``, see :mod:`vdr.corpus`).
        encoder: :class:`~vdr.encode.settings.EncoderSettings` (the encoder is loaded here), an
            already loaded :class:`~vdr.encode.colpali.LateInteractionEncoder` (its
            ``encoder_settings`` give the run options), or a model name (default settings).
        store_dir: the store folder; vectors go to its sub-folder for this page fingerprint and dtype.
        batch_size, store_dtype, num_workers, shard_pages: override the settings' run options of
            the same name (``None``: keep them).
        progress: tqdm progress bar (pages/s).

    Returns:
        :class:`EmbedReport`.

    Raises:
        InputError: not a corpus folder, unreadable image (naming file and id), bad settings.
        ModelLoadError: see :meth:`LateInteractionEncoder.from_settings`.
        StoreError: another writer holds the store, or its files are inconsistent.
    """
    from .. import distributed as D
    from ..corpus import Corpus
    from .colpali import LateInteractionEncoder
    from .store import legacy_folders

    t0 = time.perf_counter()
    settings, enc = _resolve(encoder, dict(batch_size=batch_size, store_dtype=store_dtype, num_workers=num_workers,
                                           shard_pages=shard_pages))
    corpus = Corpus.load(corpus_dir)
    if enc is None:
        enc = LateInteractionEncoder.from_settings(settings.for_this_rank())
    if enc.dim is None:
        raise InputError("the encoder does not report its vector dimension")
    from .pipeline import default_workers

    workers = settings.num_workers if settings.num_workers is not None else default_workers(str(enc.device))
    legacy = [str(p) for p in legacy_folders(store_dir)]
    if legacy and D.is_main():
        warnings.warn(f"{len(legacy)} embedding store folder(s) written by an older vdr (their key included the query"
                      f" template) are not reused; pages are encoded once more. Delete them to reclaim space:"
                      f" {', '.join(legacy)}", VdrWarning, stacklevel=2)
    run = _Run(corpus, enc, settings, store_dir, workers, progress)
    ids = corpus.ids()
    if D.is_distributed():
        path, lengths, plan, t_enc, cap = run.distributed(ids)
    else:
        path, lengths, plan, t_enc, cap = run.single(ids)
    return EmbedReport(
        store=path, fingerprint=enc.page_fingerprint, query_fingerprint=enc.query_fingerprint, pages=len(ids),
        encoded=len(plan.encode), reused=len(ids) - len(plan.encode) - plan.copied, copied=plan.copied,
        duplicates=len(run.duplicate_of), removed=len(plan.stale), tokens_per_page=_tokens_per_page(lengths),
        seconds=round(time.perf_counter() - t0, 3),
        pages_per_second=round(len(plan.encode) / t_enc, 3) if t_enc > 0 else 0.0, batch_size=run.batch_size or 0,
        batch_size_final=cap, dtype=settings.store_dtype, encoder=enc.describe(), settings=settings.to_json(),
        duplicate_of=run.duplicate_of, legacy_stores=legacy, pipeline=run.pipeline,
    )


def _tokens_per_page(lengths: list[int]) -> dict:
    return ({"min": min(lengths), "mean": round(statistics.fmean(lengths), 2), "max": max(lengths)} if lengths
            else {"min": 0, "mean": 0.0, "max": 0})


class _Run:
    """One :func:`embed` call's state: corpus, encoder, settings, store folder, page hashes."""

    def __init__(self, corpus, enc, settings: EncoderSettings, store_dir, workers: int, progress: bool) -> None:
        self.corpus, self.enc, self.settings = corpus, enc, settings
        self.store_dir, self.workers, self.progress = store_dir, workers, progress
        self.hashes: dict[str, str] = {}
        self.duplicate_of: dict[str, str] = {}
        self.batch_size: int | None = settings.batch_size
        self.batch_source = "setting batch_size" if settings.batch_size is not None else None
        self.pipeline: dict = {}

    def _resolve_batch_size(self, ids: list[str]) -> int:
        """The settings' batch size, or (unset) the encoder's choice from free memory on CUDA
        (probed on the page of ``ids`` with the most image tokens), the default elsewhere."""
        if self.batch_size is None:
            enc = self.enc
            if not ids:
                return 1
            biggest = max(ids, key=lambda i: enc.page_cost(self.corpus[i].width, self.corpus[i].height))
            self.batch_size = enc.auto_batch_size(self.corpus.open_image(biggest))
            self.batch_source = enc.batch_size_source
        return self.batch_size

    def _writer(self, rank: int | None = None):
        from .store import EmbeddingStore

        e = self.enc
        return EmbeddingStore.open_for_writing(self.store_dir, encoder_fingerprint=e.page_fingerprint,
                                               encoder_settings=e.describe_pages(), dtype=self.settings.store_dtype,
                                               dim=e.dim, rank=rank)

    def _prepare(self, st, ids: list[str]) -> _Plan:
        """Plan against the open main writer ``st``; drop stale pages, copy duplicates of stored pages."""
        plan = _plan(ids, self.hashes, {pid: st.content_hash(pid) for pid in st.ids()})
        st.remove(plan.stale)
        for pid, src in plan.from_store:
            st.add(pid, self.hashes[pid], st.get(src))
            if st.pending >= self.settings.shard_pages:
                st.commit()
        st.commit()
        return plan

    def _encode_into(self, store, plan: _Plan, ids: list[str], *, progress: bool) -> float:
        """Encode ``ids`` (a part of ``plan.encode``) into the writable ``store``, storing each
        page's duplicates with its vectors, committing a shard every ``shard_pages`` pages (and at
        the end). Returns the encoding time in seconds."""
        from .pipeline import BackgroundWriter

        t1 = time.perf_counter()
        s = self.settings

        def write(bids: list[str], vecs: list) -> None:  # in the writer thread: casts, checks, shard files
            for pid, v in zip(bids, vecs):
                for same in (pid, *plan.copies.get(pid, ())):
                    store.add(same, self.hashes[pid], v)
                if store.pending >= s.shard_pages:
                    store.commit()

        writer = BackgroundWriter(write)
        try:
            for bids, vecs in self.enc.iter_pages(self.corpus, self._resolve_batch_size(ids), ids=ids, num_workers=self.workers,
                                                  progress=progress):
                writer.put(bids, vecs)
        except BaseException:
            writer.close(raise_error=False)  # what was encoded before the error is queued in the store, as before
            raise
        writer.close()
        store.commit()
        stats = self.enc.pipeline_stats
        self.pipeline = {**(stats.to_json() if stats is not None else {}), "store_write_s": round(writer.busy_s, 4),
                         "batch_size_source": self.batch_source,
                         "attn_implementation": getattr(self.enc, "attn_implementation", None),
                         "varlen_attention": False,
                         "varlen_note": "pages batch in equal image-token buckets: no padding for a varlen kernel to skip"}
        return time.perf_counter() - t1

    def single(self, ids: list[str]):
        """One process: ``(store path, lengths, plan, encoding seconds, final batch size)``."""
        self.hashes = {pid: page_content_hash(self.corpus.image_path(pid)) for pid in ids}
        self.duplicate_of = _duplicates(ids, self.hashes)
        st = self._writer()
        t_enc = 0.0
        try:
            plan = self._prepare(st, ids)
            if plan.encode:
                t_enc = self._encode_into(st, plan, plan.encode, progress=self.progress)
            return str(st.path), st.lengths(), plan, t_enc, self.enc.batch_cap or self.batch_size or 0
        finally:
            st.close()

    def distributed(self, ids: list[str]):
        """Under torchrun (every rank calls it; see :func:`embed` for the protocol); returns as :meth:`single`."""
        from .. import distributed as D

        # 1. hashes: each rank reads its contiguous share of the images, all ranks get all hashes
        for part in D.all_gather_object({pid: page_content_hash(self.corpus.image_path(pid)) for pid in D.shard(ids)}):
            self.hashes.update(part)
        self.duplicate_of = _duplicates(ids, self.hashes)

        # 2. rank 0: open the main writer (merges rank journals of an interrupted run, collects
        #    garbage), drop stale pages, copy duplicates of stored pages, plan; close before any rank writer opens
        def plan_on_main() -> _Plan:
            with self._writer() as st:
                return self._prepare(st, ids)

        plan = D.run_on_main(plan_on_main)
        # 3. every rank encodes its share, whole batches, into its own journal and shards; a batch
        #    size chosen from memory is the smallest any rank chose (the same batches everywhere)
        if self.batch_size is None:
            chosen = [b for b in D.all_gather_object(self._resolve_batch_size(plan.encode) if plan.encode else None) if b]
            self.batch_size = min(chosen) if chosen else 1
        mine = D.shard_batches(plan.encode, self.batch_size)
        t_enc = 0.0
        if mine:
            w = self._writer(rank=D.rank())
            try:
                t_enc = self._encode_into(w, plan, mine, progress=self.progress and D.is_main())
            except BaseException:
                w.discard_pending()  # keep what was committed; the rest is re-encoded on resume
                raise
            finally:
                w.close()
        facts = D.all_gather_object((t_enc, self.enc.batch_cap or self.batch_size))

        # 4. after every rank has closed its writer, rank 0 merges the rank journals
        def merge():
            with self._writer() as st:
                return str(st.path), st.lengths()

        path, lengths = D.run_on_main(merge)
        return path, lengths, plan, max(t for t, _ in facts), min(c for _, c in facts)
