"""Multimodal backend: a ColPali-family encoder (colpali-engine), the page store, streaming MaxSim.

:meth:`MultimodalBackend.index` loads the encoder and fills the embedding store with
:func:`vdr.encode.embed` (pages whose image bytes and encoder fingerprint match the store are
reused: a re-run encodes no page); :meth:`MultimodalBackend.search` encodes each distinct query
text once (kept in memory across variants) and scores every page with streaming MaxSim top-k
(:func:`vdr.retrieve.maxsim.maxsim_topk`: float32 accumulation, trec_eval tie order).

Under ``torchrun`` (:mod:`vdr.distributed`) every rank calls :meth:`~MultimodalBackend.index` and
:meth:`~MultimodalBackend.search` in the same order: pages are embedded in shards across ranks,
query texts in whole batches per rank (gathered on every rank), and MaxSim partitions the pages
(per-query top-k merged on rank 0). Rank 0 gets the runs; the other ranks get empty runs.

This module is the one place where ``vdr evaluate`` loads the encoder
(:func:`load_encoder`), fills the store and opens it (:func:`index_pages`); the MTEB engine
(:class:`vdr.integrations.mteb.MtebBackend`) goes through the same two functions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import VdrError
from ..types import QuerySet, Run
from ._common import check_depth
from .options import MultimodalOptions, check_options
from .base import BackendUnavailable, BuildContext, new_report

__all__ = ["MultimodalBackend", "QUERY_CACHE_SIZE", "ENCODER_OPTIONS", "load_encoder", "index_pages", "store_bytes_per_page", "build"]

#: Encoder options accepted as a plain mapping (see :class:`MultimodalBackend`): ``model`` (required)
#: and the keywords of :meth:`~vdr.encode.settings.EncoderSettings.from_options` (``model_dtype`` is
#: ``compute_dtype``; the deprecated ``dtype`` is ``store_dtype`` here).
ENCODER_OPTIONS = ("model", "device", "batch_size", "trust_remote_code", "model_dtype", "compute_dtype", "attn_implementation",
                   "query_prefix", "n_augmentation", "min_pixels", "max_pixels", "revision", "dtype", "store_dtype",
                   "num_workers", "query_batch_size", "shard_pages")
#: Default bound of :class:`MultimodalBackend`'s query-vector cache (query texts, LRU).
QUERY_CACHE_SIZE = 4096


def encoder_settings(encoder: Any):
    """One :class:`~vdr.encode.settings.EncoderSettings` from settings or a mapping of encoder options
    (:meth:`~vdr.encode.settings.EncoderSettings.from_options`).

    Raises:
        BackendUnavailable: no ``model``.
        InputError: an unknown option or an invalid value (the option is named).
    """
    from ..encode.settings import EncoderSettings

    if not isinstance(encoder, EncoderSettings) and not dict(encoder).get("model"):
        raise BackendUnavailable("no --model given (a ColPali-family checkpoint: hub name or local path)")
    return EncoderSettings.from_options(encoder, dtype_means="store_dtype")


def load_encoder(settings):
    """Load the encoder that ``settings`` (:class:`~vdr.encode.settings.EncoderSettings`) name, under
    torchrun on this rank's device.

    Returns:
        :class:`~vdr.encode.colpali.LateInteractionEncoder`.

    Raises:
        ModelLoadError, InputError: as :meth:`~vdr.encode.colpali.LateInteractionEncoder.from_settings`.
    """
    from ..encode.colpali import LateInteractionEncoder

    return LateInteractionEncoder.from_settings(settings.for_this_rank())


def index_pages(enc, corpus_dir: str | Path, store_dir: str | Path, *, progress: bool):
    """Embed the corpus pages into the store (reusing stored vectors; run options from the
    encoder's settings) and open the store for reading.

    Returns:
        ``(EmbedReport, EmbeddingStore)``.

    Raises:
        InputError, StoreError: see :func:`vdr.encode.embed`.
    """
    from ..encode import embed
    from ..encode.store import EmbeddingStore

    rep = embed(corpus_dir, enc, store_dir, progress=progress)
    return rep, EmbeddingStore.open(rep.store)


class MultimodalBackend:
    """ColPali-family late interaction over page images, as a :class:`~vdr.retrieve.base.Backend`.

    Args:
        encoder: an :class:`~vdr.encode.settings.EncoderSettings` (what ``vdr embed`` and ``vdr
            evaluate`` build from their encoder options), or a mapping of its fields
            (:data:`ENCODER_OPTIONS`; ``model`` required).
        store: the embedding store folder (default ``CORPUS_DIR/embeddings``): it is this backend's
            on-disk index cache, keyed by encoder fingerprint and page content hash.
        progress: progress bars.
        name: the backend's name in results (default ``"multimodal"``).
        query_cache_size: most query texts whose multi-vectors are kept between searches
            (default :data:`QUERY_CACHE_SIZE`, 4096; a text met again, e.g. in another variant or
            another reward request, is not encoded again). Least-recently-used eviction: past the
            bound the texts searched longest ago are dropped. ``0``: nothing kept between
            searches; ``None``: no bound. A single search always encodes each of its distinct
            texts once, whatever the bound.

    Attributes:
        config: the encoder settings (model, weights digest, classes, resolution, query template,
            compute dtype), its fingerprint, device, attention implementation, stored and score
            dtypes, batch size and store path (after :meth:`index`).
        report: ``page_forward_passes`` (pages encoded by :meth:`index`), ``cache`` (``hit``: no
            page needed encoding; ``path``: the store key folder), ``index`` (pages, encoded,
            reused, removed, tokens per page, final batch size), ``searches`` (per variant: queries,
            distinct texts, texts encoded, depth).
        encoder, store: the loaded encoder and the opened store (after :meth:`index`).
        query_cache_size: the bound (see Args); :meth:`query_cache_info` gives the occupancy.

    Raises:
        BackendUnavailable: no ``model`` (at construction).
        InputError: an unknown encoder option; a negative or non-integer ``query_cache_size``.
    """

    def __init__(self, encoder: Any, *, store: str | Path | None = None, progress: bool = False,
                 name: str = "multimodal", query_cache_size: int | None = QUERY_CACHE_SIZE) -> None:
        from collections import OrderedDict

        from ..errors import InputError

        if query_cache_size is not None and (isinstance(query_cache_size, bool) or not isinstance(query_cache_size, int)
                                             or query_cache_size < 0):
            raise InputError(f"query_cache_size must be an integer >= 0 or None, got {query_cache_size!r}")
        self.query_cache_size = query_cache_size
        self.settings = encoder_settings(encoder)
        self.store_dir = None if store is None else Path(store)
        self.progress = progress
        self.name = name
        self.encoder = None
        self.store = None
        self.report: dict = new_report()
        self.config: dict = {"backend": "multimodal", "model": self.settings.model}
        self._query_vecs: OrderedDict[str, Any] = OrderedDict()  # LRU: least recently searched first

    def _unavailable(self, e: VdrError) -> BackendUnavailable:
        return BackendUnavailable(f"model {self.settings.model!r} could not be used: {e}")

    def index(self, corpus) -> None:
        """Load the encoder (once) and embed the pages of ``corpus`` (a :class:`~vdr.corpus.Corpus`)
        that the store does not hold yet.

        Raises:
            BackendUnavailable: ``corpus`` is a passage corpus (no page images), the model cannot be
                loaded, or embedding failed (missing weights, an offline hub name, an unreadable page
                image, a store error: the reason is given).
        """
        if corpus.kind != "page":
            raise BackendUnavailable(
                f"the multimodal backend needs a page corpus (page images); {corpus.root} is a"
                f" {corpus.kind} corpus: use the lexical or semantic backend"
            )
        try:
            if self.encoder is None:
                self.encoder = load_encoder(self.settings)
            store_dir = self.store_dir if self.store_dir is not None else Path(corpus.root) / "embeddings"
            rep, self.store = index_pages(self.encoder, corpus.root, store_dir, progress=self.progress)
        except VdrError as e:
            raise self._unavailable(e) from e
        enc = self.encoder
        self.config = dict(
            enc.settings, backend="multimodal", fingerprint=enc.fingerprint, page_fingerprint=enc.page_fingerprint,
            query_fingerprint=enc.query_fingerprint, query_template=enc.query_template.to_json(),
            batch_size=self.settings.batch_size, store=str(rep.store), stored_dtype=rep.dtype,  # batch_size as asked (None: auto)
            device=str(enc.device), attn_implementation=getattr(enc, "attn_implementation", None),
            score_dtype="float32 (MaxSim accumulated in float32)",
            bytes_per_page=store_bytes_per_page(self.store),
        )
        self.report = new_report()
        self.report["page_forward_passes"] = rep.encoded
        self.report["cache"] = {"hit": rep.encoded == 0, "path": str(rep.store)}
        self.report["index"] = {
            "pages": rep.pages, "encoded": rep.encoded, "reused": rep.reused, "removed": rep.removed,
            "tokens_per_page": rep.tokens_per_page, "batch_size_final": rep.batch_size_final,
            "copied": rep.copied, "duplicate_pages": rep.duplicates,
        }

    def query_cache_info(self) -> dict:
        """``{"entries": query texts kept, "max_entries": query_cache_size (None: no bound),
        "eviction": "lru"}``."""
        return {"entries": len(self._query_vecs), "max_entries": self.query_cache_size, "eviction": "lru"}

    def _query_vectors(self, texts: list[str]) -> tuple[list, int]:
        """The multi-vector of each of ``texts`` (distinct), encoding those not cached (whole batches
        per rank under torchrun); then the cache keeps the most recent ``query_cache_size`` texts.
        Returns ``(vectors in the order of texts, how many were encoded)``."""
        from .. import distributed as D

        cache = self._query_vecs
        got = {t: cache[t] for t in texts if t in cache}
        todo = [t for t in texts if t not in got]
        qbs = self.settings.queries_per_batch
        parts = D.all_gather_object(self.encoder.encode_queries(D.shard_batches(todo, qbs), batch_size=qbs, progress=self.progress))
        got.update(zip(todo, (e for part in parts for e in part)))
        bound = self.query_cache_size
        for t in texts if bound is None else texts[max(0, len(texts) - bound):]:  # most recent last
            cache[t] = got[t]
            cache.move_to_end(t)
        while bound is not None and len(cache) > bound:
            cache.popitem(last=False)
        return [got[t] for t in texts], len(todo)

    def search(self, queries: QuerySet, depth: int) -> Run:
        """MaxSim top-``depth`` pages of every query of ``queries``; each distinct text is encoded
        once (across variants) and scored once.

        Returns:
            :class:`~vdr.types.Run` (float32 MaxSim scores widened to float); under torchrun an
            empty run on ranks other than 0.

        Raises:
            InputError: :meth:`index` was not called; a bad ``depth``.
            BackendUnavailable: encoding or scoring failed.
        """
        from .. import distributed as D
        from .maxsim_sharded import sharded_maxsim_topk
        from ..errors import InputError

        if self.store is None:
            raise InputError("MultimodalBackend.search: call index(corpus) first")
        depth = check_depth(depth)
        texts = list(dict.fromkeys(q.text for q in queries.values()))
        try:
            vecs, n_new = self._query_vectors(texts)
            device = self.settings.device
            score_device = D.device_for_rank(device) if device and str(device).startswith("cuda") else None
            t0 = time.perf_counter()
            top = sharded_maxsim_topk(vecs, self.store, min(depth, len(self.store)), device=score_device)
            seconds = time.perf_counter() - t0
        except VdrError as e:
            raise self._unavailable(e) from e
        variant = queries.name
        self.report["searches"][variant] = {"num_queries": len(queries), "distinct_query_texts": len(texts),
                                            "query_texts_encoded": n_new, "depth": depth, "score_seconds": round(seconds, 6)}
        if top is None:  # not rank 0
            return Run.from_checked({}, f"{self.name}-{variant}")
        by_text = {t: dict(zip(ids, scores)) for t, ids, scores in zip(texts, top.ids, top.scores.tolist())}
        return Run.from_checked({qid: dict(by_text[q.text]) for qid, q in queries.items()}, f"{self.name}-{variant}")


def store_bytes_per_page(store) -> float:
    """Mean bytes of a page's stored vectors in ``store`` (an :class:`~vdr.encode.store.EmbeddingStore`
    or any source with ``lengths()``, ``dim`` and a torch ``dtype``): tokens x dim x the dtype's size.
    The storage column of the served-vs-exact audit (:mod:`vdr.retrieve.served`)."""
    lengths = store.lengths()
    return sum(lengths) * store.dim * store.dtype.itemsize / max(1, len(lengths))


def encoder_option(encoder: Any, device: str | None) -> Any:
    """The ``encoder`` option with the experiment's ``device`` as its default (a mapping is copied)."""
    if encoder is None or isinstance(encoder, Mapping):
        encoder = dict(encoder or {})
        encoder.setdefault("device", device)
    return encoder


def build(ctx: BuildContext) -> MultimodalBackend:
    """Registry factory. Options (:class:`~vdr.retrieve.options.MultimodalOptions`): ``encoder``
    (the encoder options mapping, see :class:`MultimodalBackend`; its ``device`` defaults to
    ``ctx.device``), ``store`` and ``query_cache_size``. (The MTEB engine is the registry entry
    ``mteb``: :func:`vdr.integrations.mteb.build`.)

    Raises:
        BackendUnavailable: no model.
        InputError: a bad encoder option.
    """
    o = check_options(MultimodalOptions, ctx.options, backend=ctx.name)
    return MultimodalBackend(encoder_option(o.encoder, ctx.device), store=o.store, progress=ctx.progress, name=ctx.name,
                             query_cache_size=o.query_cache_size)


build.Options = MultimodalOptions
