"""Served systems: the exact multimodal backend's page vectors as a production backend serves them.

A *served system* scores the same queries as the exact backend (``multimodal``: full-precision
MaxSim over the page store) from a compressed copy of the page vectors, or through a multi-vector
engine, so that :mod:`vdr.experiment.audit` can say how far it ranks from exact MaxSim and whether a
rewrite's gain survives it (issue 36). It is an ordinary backend in results, named
``<exact>-<system>`` (``multimodal-pool3``, ``multimodal-binary``, ``multimodal-qdrant``).

Systems (``--serve-as SPEC``, :func:`parse_serve_as`):

* ``pool[:F]`` -- hierarchical token pooling with colpali-engine's own
  :class:`~colpali_engine.compression.token_pooling.HierarchicalTokenPooler` (pool factor ``F``,
  default 3: at most ``n_tokens // F`` clusters per page, each the L2-normalised mean of its tokens;
  Elastic's ColPali post, illuin-tech/colpali#181), scored by exact MaxSim.
* ``int8`` -- scalar quantisation as sentence-transformers' ``util.quantization.quantize_embeddings(precision="int8")``
  defines it (per-dimension ranges over every page token, 256 buckets, ``floor``), pages restored
  with the same library's rescoring rule (``(q + 128) * step + start``) and scored by MaxSim
  against the float query (asymmetric, as a rescoring engine does); 1 byte per value.
* ``binary[:hamming=vespa|elasticsearch]`` -- sign bits (``quantize_embeddings(precision="ubinary")``:
  bit = value > 0) of pages AND queries, Hamming MaxSim: Vespa's ColPali ranking
  ``sum_i max_j 1 / (1 + hamming(q_i, p_j))`` (vespa-engine/vespa#32232; the default) or
  Elasticsearch ``rank_vectors`` ``maxSimInvHamming``: ``sum_i max_j (dim - hamming) / dim``.
* ``fp16`` / ``bf16`` -- the stored vectors cast to 16 bits (round to nearest even), exact MaxSim
  (float32 accumulation). On a float16 store ``fp16`` is the exact system itself.
* ``muvera[:k_sim=..,dim_proj=..,r_reps=..,seed=..,candidates=..]`` -- MUVERA fixed-dimensional
  encodings (Dhulipala et al. 2024, arXiv 2405.19504) computed by fastembed's
  :class:`~fastembed.postprocess.Muvera` (its defaults: ``k_sim=5, dim_proj=16, r_reps=20,
  seed=42``), a single-vector dot-product first stage keeping ``candidates`` pages (default 100),
  re-ranked by exact MaxSim. The run holds the re-ranked candidates only.
* ``qdrant``, ``lancedb``, ``plaid`` -- engines (:mod:`vdr.retrieve.engines`): the index is built from
  the page store and the engine's own search answers; their options go to the engine.

The page store keeps the full vectors, so every system runs from it without encoding a page again;
pooled pages (the slow one) are cached under ``CACHE_DIR/served/<key>``, the key holding the encoder
fingerprint, every page's content hash and the system's parameters. Query vectors come from the exact
backend's own cache (a text is encoded once for every system).

Each system reports ``bytes_per_page`` (mean storage of its page representation: tokens x bytes per
token; MUVERA adds its encoding to the vectors it re-ranks from) and, per variant, ``score_seconds``
(ranking time, query encoding excluded) -- the audit's storage and time columns.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError, VdrError
from ..types import QuerySet, Run
from ._common import check_depth
from .base import BackendUnavailable, BuildContext, cache_path, fingerprint, new_report, write_cache_dir
from .options import ServedOptions, check_options

__all__ = ["ServedBackend", "ServedSpec", "parse_serve_as", "COMPRESSIONS", "ENGINE_KINDS", "SYSTEMS",
           "hamming_maxsim", "int8_pages", "pool_pages", "build"]

#: Compressions and their parameters ``{kind: {param: default}}``.
COMPRESSIONS: dict[str, dict[str, Any]] = {
    "pool": {"factor": 3},
    "int8": {},
    "binary": {"hamming": "vespa"},
    "fp16": {},
    "bf16": {},
    "muvera": {"k_sim": 5, "dim_proj": 16, "r_reps": 20, "seed": 42, "candidates": 100},
}
#: Engines (their parameters are checked by :func:`vdr.retrieve.engines.make_engine`).
ENGINE_KINDS = ("qdrant", "lancedb", "plaid")
SYSTEMS = (*COMPRESSIONS, *ENGINE_KINDS)
_SOURCES = {
    "pool": "colpali-engine HierarchicalTokenPooler (colpali_engine.compression.token_pooling)",
    "int8": "sentence-transformers quantize_embeddings(precision='int8'), float query vs restored pages",
    "binary": "sentence-transformers quantize_embeddings(precision='ubinary'); Hamming MaxSim as Vespa (1/(1+h)) or"
              " Elasticsearch rank_vectors maxSimInvHamming ((dim-h)/dim)",
    "fp16": "IEEE float16 storage (round to nearest even), float32 MaxSim",
    "bf16": "bfloat16 storage (round to nearest even), float32 MaxSim",
    "muvera": "MUVERA fixed-dimensional encodings (Dhulipala et al. 2024, arXiv 2405.19504) by fastembed.postprocess.Muvera,"
              " re-ranked by exact MaxSim",
}
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class ServedSpec:
    """One ``--serve-as`` system.

    Attributes:
        name: its backend name in results (``multimodal-pool3``, or the name the spec gave).
        kind: one of :data:`SYSTEMS`.
        params: its parameters (compressions: defaults filled in; engines: as given).
        text: the spec as written (recorded in results.json, re-read when the folder is re-run).
    """

    name: str
    kind: str
    params: Mapping[str, Any]
    text: str

    @property
    def is_engine(self) -> bool:
        """Whether the system is an engine (else a compression of the page vectors)."""
        return self.kind in ENGINE_KINDS


def _value(raw: str) -> Any:
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def _one_spec(text: str, exact: str) -> ServedSpec:
    """``[NAME=]KIND[:VALUE | :key=value,...]`` -> :class:`ServedSpec` (see :func:`parse_serve_as`)."""
    name = None
    head = text.split(":", 1)[0]
    if "=" in head:
        name, text = text.split("=", 1)
        name = name.strip()
        if not name:
            raise InputError(f"--serve-as ={text}: the name before '=' is empty; give NAME=SPEC or SPEC alone")
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in SYSTEMS:
        raise InputError(f"--serve-as {text!r}: unknown system {kind!r}; choose from {', '.join(SYSTEMS)}"
                         " (parameters as key=value after a colon: pool:3, binary:hamming=elasticsearch, qdrant:prefetch=mean)")
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            if kind != "pool" or params:
                raise InputError(f"--serve-as {text!r}: {part!r} must be key=value (a bare number only gives pool's factor)")
            key, value = "factor", part
        params[key.strip()] = _value(value.strip())
    if kind in COMPRESSIONS:
        known = COMPRESSIONS[kind]
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise InputError(f"--serve-as {text!r}: unknown {kind} parameter(s) {unknown}; known: {', '.join(known) or 'none'}")
        params = {**known, **params}
        _check_params(kind, params, text)
    else:  # an engine's parameters, checked now (before any page is encoded) by the engine's own rules
        from .engines import ENGINES, _parse_params

        try:
            _parse_params(kind, ENGINES[kind].PARAMS, dict(params))
        except InputError as e:
            raise InputError(f"--serve-as {text!r}: {e}") from None
    suffix = params["factor"] if kind == "pool" else "-es" if kind == "binary" and params["hamming"] == "elasticsearch" else ""
    default = f"{exact}-{kind}{suffix}"
    name = name or default
    if not _NAME_RE.match(name):
        raise InputError(f"--serve-as {text!r}: name {name!r} must be letters, digits, '_', '.', '-' (it names files)")
    return ServedSpec(name, kind, params, text)


def _check_params(kind: str, params: Mapping[str, Any], text: str) -> None:
    ints = {"factor": 2, "k_sim": 1, "dim_proj": 1, "r_reps": 1, "candidates": 1, "seed": 0}
    for key, low in ints.items():
        if key in params and (isinstance(params[key], bool) or not isinstance(params[key], int) or params[key] < low):
            raise InputError(f"--serve-as {text!r}: {key} must be an integer >= {low}, got {params[key]!r}")
    if kind == "binary" and params["hamming"] not in ("vespa", "elasticsearch"):
        raise InputError(f"--serve-as {text!r}: hamming must be vespa or elasticsearch, got {params['hamming']!r}")


def parse_serve_as(specs: Sequence[str] | str | None, exact: str = "multimodal") -> list[ServedSpec]:
    """Parse ``--serve-as`` values: ``[NAME=]KIND[:PARAMS]``, PARAMS one number (``pool:3``: the pool
    factor) or ``key=value`` pairs separated by commas (``muvera:candidates=200``,
    ``qdrant:prefetch=mean,candidates=100``). The default name is ``<exact>-<kind>`` (pool:
    ``<exact>-pool<F>``; Elasticsearch's Hamming rule: ``<exact>-binary-es``); give ``NAME=`` to
    run one kind twice.

    Returns:
        one :class:`ServedSpec` per value, in order.

    Raises:
        InputError: an unknown system or parameter, a bad value, a bad or repeated name.
    """
    if specs is None:
        return []
    values = [specs] if isinstance(specs, str) else list(specs)
    out = [_one_spec(str(s), exact) for s in values]
    seen: dict[str, str] = {}
    for s in out:
        if s.name in seen:
            raise InputError(f"--serve-as {s.text!r} and {seen[s.name]!r} are both named {s.name!r}; name one: NAME={s.text}")
        seen[s.name] = s.text
    return out


# --------------------------------------------------------------------------------------------- compressions


def pool_pages(pages: Sequence[Any], factor: int) -> list:
    """Hierarchical token pooling of each page by colpali-engine's ``HierarchicalTokenPooler``.

    Args:
        pages: tensors ``(n_tokens, dim)`` (any float dtype).
        factor: the pool factor (>= 2): at most ``max(n_tokens // factor, 1)`` vectors per page.

    Returns:
        one tensor ``(n_clusters, dim)`` per page, in the page's dtype. A page of one token is kept
        as it is (the pooler refuses it).
    """
    from colpali_engine.compression.token_pooling import HierarchicalTokenPooler

    pooler = HierarchicalTokenPooler()
    out = []
    for p in pages:
        out.append(p if p.shape[0] < 2 else pooler.pool_embeddings([p], pool_factor=factor)[0])
    return out


def int8_ranges(pages: Sequence[Any]):
    """Per-dimension ``[min; max]`` over every page token: the calibration of
    ``quantize_embeddings(precision="int8")``; float32 ``(2, dim)``."""
    import numpy as np

    lo = np.min([p.float().min(0).values.numpy() for p in pages], axis=0)
    hi = np.max([p.float().max(0).values.numpy() for p in pages], axis=0)
    return np.vstack((lo, hi)).astype(np.float32)


def int8_pages(pages: Sequence[Any], ranges) -> list:
    """Pages quantised to int8 by sentence-transformers' ``quantize_embeddings(precision="int8",
    ranges=ranges)`` and restored as its rescoring does (``(q + 128) * step + start``, ``step =
    (max - min) / 255``): float32 tensors ``(n_tokens, dim)``."""
    import numpy as np
    import torch
    from sentence_transformers.util.quantization import quantize_embeddings

    steps = (ranges[1] - ranges[0]) / 255
    steps = np.where(steps == 0, 1, steps).astype(np.float32)
    out = []
    for p in pages:
        q = quantize_embeddings(p.float().numpy(), precision="int8", ranges=ranges)
        out.append(torch.from_numpy(((q.astype(np.float64) + 128) * steps + ranges[0]).astype(np.float32)))
    return out


def sign_bits(vectors) -> Any:
    """``quantize_embeddings(precision="ubinary")`` of ``(n, dim)`` vectors unpacked to ``+1`` (value
    > 0) / ``-1`` float32 ``(n, dim)``."""
    import numpy as np
    import torch
    from sentence_transformers.util.quantization import quantize_embeddings

    dim = vectors.shape[1]
    packed = quantize_embeddings(vectors.float().numpy(), precision="ubinary")
    bits = np.unpackbits(packed, axis=-1)[:, :dim].astype(np.float32)
    return torch.from_numpy(2.0 * bits - 1.0)


def hamming_maxsim(queries: Sequence[Any], pages: Sequence[Any], *, hamming: str = "vespa", block_tokens: int = 1 << 15):
    """Hamming MaxSim of sign vectors (``+1/-1`` float32, :func:`sign_bits`): ``sum_i max_j f(h_ij)``
    with ``h = (dim - <q_i, p_j>) / 2`` the Hamming distance of the bit vectors and ``f(h) = 1 / (1 +
    h)`` (Vespa's ColPali ranking, ``hamming="vespa"``) or ``(dim - h) / dim`` (Elasticsearch
    ``maxSimInvHamming``, ``hamming="elasticsearch"``). Both ``f`` decrease with ``h``, so ``max_j f =
    f(min_j h)``: one GEMM per block of pages, a segment max over each page's tokens, then ``f``. Dot
    products of +/-1 are exact in float32.

    Args:
        queries: ``n_queries`` tensors ``(n_tokens, dim)``; pages: ``n_pages`` tensors.
        hamming: ``"vespa"`` or ``"elasticsearch"``.
        block_tokens: page tokens per GEMM (memory: query tokens x block_tokens float32).

    Returns:
        float32 tensor ``(n_queries, n_pages)``.
    """
    import torch

    dim = queries[0].shape[1]
    Q = torch.cat(list(queries)).float()
    seg = torch.repeat_interleave(torch.arange(len(queries)), torch.tensor([q.shape[0] for q in queries]))
    out = torch.empty((len(queries), len(pages)), dtype=torch.float32)
    start = 0
    while start < len(pages):
        stop, tokens = start, 0
        while stop < len(pages) and (stop == start or tokens + pages[stop].shape[0] <= block_tokens):
            tokens += pages[stop].shape[0]
            stop += 1
        block = torch.cat([p.float() for p in pages[start:stop]])
        lengths = torch.tensor([p.shape[0] for p in pages[start:stop]])
        best = torch.segment_reduce((Q @ block.T).T.contiguous(), "max", lengths=lengths, axis=0)  # (pages, query tokens)
        h = (dim - best.T) / 2  # (query tokens, pages): the smallest Hamming distance
        f = 1.0 / (1.0 + h) if hamming == "vespa" else (dim - h) / dim
        out[:, start:stop] = torch.zeros((len(queries), stop - start)).index_add_(0, seg, f)
        start = stop
    return out


def _topk_by_scores(scores, ids: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
    """Per row of ``scores`` ``(n_queries, n_pages)`` the ``k`` best ``(page id, score)``, ties in
    trec_eval order (page id descending)."""
    import torch

    n = len(ids)
    tie = torch.empty(n, dtype=torch.int64)
    tie[torch.as_tensor(sorted(range(n), key=lambda j: ids[j], reverse=True))] = torch.arange(n)
    out = []
    for row in scores:
        o = torch.argsort(tie, stable=True)
        o = o[torch.argsort(row[o], descending=True, stable=True)][:k]
        out.append([(ids[j], float(row[j])) for j in o.tolist()])
    return out


# --------------------------------------------------------------------------------------------- backend


class ServedBackend:
    """A served system over the exact multimodal backend's page store, as a
    :class:`~vdr.retrieve.base.Backend` (see the module docstring for the systems).

    Args:
        exact: the exact backend (a :class:`~vdr.retrieve.multimodal.MultimodalBackend`, possibly
            wrapped by the evaluation's memo: its ``backend`` attribute).
        spec: the system (:class:`ServedSpec`).
        name: its name in results (default ``spec.name``).
        cache_dir: index cache root (pooled pages are cached in ``served/<key>``); ``None``: none.

    Attributes:
        config: ``{"backend": "served", "served": {"exact", "system", "kind", "parameters",
            "source", "spec"}, "bytes_per_page", "exact_bytes_per_page", ...}`` (+ the engine's config).
        report: the usual keys; ``index`` (pages, bytes per page, seconds, cache) and per variant
            ``searches[v]`` (``num_queries``, ``depth``, ``score_seconds``).

    Raises:
        BackendUnavailable: the exact backend is not a multimodal backend with a page store.
    """

    def __init__(self, exact: Any, spec: ServedSpec, *, name: str | None = None, cache_dir: Path | None = None) -> None:
        self._exact_index = exact.index  # the evaluation's memo indexes once (a second index would reset the report)
        self.exact = getattr(exact, "backend", exact)
        if not hasattr(self.exact, "_query_vectors"):
            raise BackendUnavailable(f"serves the multimodal backend's page vectors; {getattr(exact, 'name', exact)!r} has none")
        self.spec = spec
        self.name = name or spec.name
        self.cache_dir = cache_dir
        self.report: dict = new_report()
        self.config: dict = {"backend": "served", "served": self._served_config(getattr(exact, "name", "multimodal"))}
        self._pages = None  # list of tensors (compressions scored by MaxSim or Hamming)
        self._ids: list[str] = []
        self._engine = None
        self._fde = None

    def _served_config(self, exact_name: str) -> dict:
        s = self.spec
        return {"exact": exact_name, "system": s.kind, "kind": "engine" if s.is_engine else "compression",
                "parameters": dict(s.params), "source": _SOURCES.get(s.kind, "vdr.retrieve.engines"), "spec": s.text}

    def index(self, corpus) -> None:
        """Index the exact backend (no page is encoded again when its store holds them), then build
        this system's page representation from the store.

        Raises:
            BackendUnavailable: the exact backend cannot run, or the system's library is missing.
        """
        from .. import distributed as D

        if self.exact.store is None or self._exact_index != self.exact.index:
            self._exact_index(corpus)
        store = self.exact.store
        self._ids = store.ids()
        t0 = time.perf_counter()
        if D.is_main():
            try:
                self._build(store)
            except ImportError as e:
                raise BackendUnavailable(f"{self.spec.kind}: {e} (pip install 'vdr[served]')") from e
        from .multimodal import store_bytes_per_page

        lengths = store.lengths()
        exact_bytes = store_bytes_per_page(store)
        self.config.update(self._bytes(exact_bytes, lengths, store.dim), exact_bytes_per_page=exact_bytes,
                           stored_dtype=str(store.dtype).replace("torch.", ""), exact_fingerprint=store.encoder_fingerprint)
        if self._engine is not None:
            self.config["engine"] = dict(self._engine.config)
        self.report["index"].update(pages=len(self._ids), seconds=round(time.perf_counter() - t0, 4),
                                    bytes_per_page=self.config["bytes_per_page"])

    def _bytes(self, exact_bytes: float, lengths: Sequence[int], dim: int) -> dict:
        kind, n = self.spec.kind, max(1, len(lengths))
        tokens = sum(lengths) / n
        if kind == "pool" and self._pages is not None:
            itemsize = self._pages[0].element_size() if self._pages else 2
            return {"bytes_per_page": sum(p.shape[0] for p in self._pages) * dim * itemsize / n}
        per_token = {"int8": dim, "binary": (dim + 7) // 8, "fp16": 2 * dim, "bf16": 2 * dim}
        if kind in per_token:
            return {"bytes_per_page": tokens * per_token[kind]}
        if kind == "muvera":
            fde = 0 if self._fde is None else self._fde.shape[1] * 4
            return {"bytes_per_page": exact_bytes + fde, "first_stage_bytes_per_page": fde}
        measured = self._engine.bytes_per_page() if self._engine is not None else None
        return {"bytes_per_page": measured}

    def _store_pages(self, store) -> list:
        return [store.get(p) for p in self._ids]

    def _build(self, store) -> None:
        import torch

        kind, params = self.spec.kind, self.spec.params
        if kind == "pool":
            self._pages = self._cached_pool(store, params["factor"])
        elif kind == "int8":
            pages = self._store_pages(store)
            self._pages = int8_pages(pages, int8_ranges(pages))
        elif kind == "binary":
            self._pages = [sign_bits(p).to(torch.int8) for p in self._store_pages(store)]  # +/-1 in a byte (memory)
        elif kind in ("fp16", "bf16"):
            dtype = torch.float16 if kind == "fp16" else torch.bfloat16
            self._pages = [p.to(dtype) for p in self._store_pages(store)]
        elif kind == "muvera":
            self._fde = self._muvera(store)
        else:
            from .engines import make_engine

            self._engine = make_engine(kind, params)
            self._engine.build(self._ids, lambda pid: store.get(pid).float().numpy(), store.dim, None)

    def _cached_pool(self, store, factor: int) -> list:
        """Pooled pages, from ``CACHE_DIR/served/<key>`` when there (safetensors), else pooled and cached."""
        from safetensors.torch import load_file, save_file

        key = fingerprint("served-pool", 1, factor, store.encoder_fingerprint, str(store.dtype),
                          [(p, store.content_hash(p)) for p in self._ids])
        folder = cache_path(self.cache_dir, "served", key)
        if folder is not None and (folder / "pages.safetensors").is_file():
            try:
                got = load_file(str(folder / "pages.safetensors"))
                self.report["cache"] = {"hit": True, "path": str(folder)}
                return [got[str(i)] for i in range(len(self._ids))]
            except (OSError, KeyError, ValueError):
                pass  # a broken entry is a miss
        pages = pool_pages(self._store_pages(store), factor)
        if folder is not None:
            tensors = {str(i): p.contiguous() for i, p in enumerate(pages)}
            write_cache_dir(folder, lambda tmp: save_file(tensors, str(tmp / "pages.safetensors")))
        self.report["cache"] = {"hit": False, "path": None if folder is None else str(folder)}
        return pages

    def _muvera(self, store):
        import numpy as np
        from fastembed.postprocess import Muvera

        p = self.spec.params
        if p["dim_proj"] > store.dim:
            raise InputError(f"--serve-as {self.spec.text!r}: dim_proj {p['dim_proj']} exceeds the vectors' dim {store.dim}")
        self._muvera_model = Muvera(dim=store.dim, k_sim=p["k_sim"], dim_proj=p["dim_proj"], r_reps=p["r_reps"], random_seed=p["seed"])
        return np.stack([self._muvera_model.process_document(store.get(pid).float().numpy()) for pid in self._ids]).astype(np.float32)

    def search(self, queries: QuerySet, depth: int) -> Run:
        """The system's top-``depth`` pages of every query (query vectors from the exact backend).

        Returns:
            :class:`~vdr.types.Run`; under torchrun an empty run on ranks other than 0.

        Raises:
            InputError: :meth:`index` was not called; a bad ``depth``.
            BackendUnavailable: encoding or the engine failed.
        """
        from .. import distributed as D

        if not self._ids:
            raise InputError("ServedBackend.search: call index(corpus) first")
        depth = check_depth(depth)
        texts = list(dict.fromkeys(q.text for q in queries.values()))
        try:
            vecs, _ = self.exact._query_vectors(texts)
        except VdrError as e:
            raise BackendUnavailable(f"query encoding failed: {e}") from e
        if not D.is_main():
            return Run.from_checked({}, f"{self.name}-{queries.name}")
        t0 = time.perf_counter()
        top = self._rank(vecs, min(depth, len(self._ids)))
        seconds = time.perf_counter() - t0
        self.report["searches"][queries.name] = {"num_queries": len(queries), "distinct_query_texts": len(texts),
                                                 "depth": depth, "score_seconds": round(seconds, 6)}
        by_text = {t: dict(row) for t, row in zip(texts, top)}
        return Run.from_checked({qid: dict(by_text[q.text]) for qid, q in queries.items()}, f"{self.name}-{queries.name}")

    def _rank(self, vecs: list, k: int) -> list[list[tuple[str, float]]]:
        """Per query text, the ``k`` best ``(page id, score)`` of the system."""
        from .maxsim import PackedPages, maxsim_topk

        kind = self.spec.kind
        if self._engine is not None:
            try:
                return self._engine.search([v.float().numpy() for v in vecs], k)
            except Exception as e:  # an engine's own error: the run is skipped with the reason
                raise BackendUnavailable(f"{kind} search failed: {type(e).__name__}: {e}") from e
        if kind == "binary":
            scores = hamming_maxsim([sign_bits(v) for v in vecs], self._pages, hamming=self.spec.params["hamming"])
            return _topk_by_scores(scores, self._ids, k)
        if kind == "muvera":
            return self._muvera_rank(vecs, k)
        top = maxsim_topk(vecs, PackedPages.pack(self._pages, ids=self._ids), k)
        return [list(zip(ids, row)) for ids, row in zip(top.ids, top.scores.tolist())]

    def _muvera_rank(self, vecs: list, k: int) -> list[list[tuple[str, float]]]:
        """MUVERA first stage (FDE dot products, top ``candidates``), then exact MaxSim over them: each
        query's candidates padded into one ``(candidates, longest, dim)`` float32 block, padding masked
        to -inf before the max (float32 products and sums, as :func:`vdr.retrieve.maxsim.maxsim`)."""
        import numpy as np
        import torch

        store, c = self.exact.store, min(self.spec.params["candidates"], len(self._ids))
        fq = np.stack([self._muvera_model.process_query(v.float().numpy()) for v in vecs]).astype(np.float32)
        first = _topk_by_scores(torch.from_numpy(fq @ self._fde.T), self._ids, c)
        out = []
        for v, cands in zip(vecs, first):
            ids = [pid for pid, _ in cands]
            pages = [store.get(p) for p in ids]
            width = max(p.shape[0] for p in pages)
            block = torch.zeros((len(pages), width, v.shape[1]), dtype=torch.float32)
            mask = torch.ones((len(pages), width), dtype=torch.bool)
            for i, p in enumerate(pages):
                block[i, :p.shape[0]] = p.float()
                mask[i, :p.shape[0]] = False
            sims = torch.einsum("qd,cld->cql", v.float(), block).masked_fill(mask.unsqueeze(1), float("-inf"))
            scores = sims.amax(dim=2).sum(dim=1)  # (candidates,)
            out.append(_topk_by_scores(scores.unsqueeze(0), ids, min(k, len(ids)))[0])
        return out


def build(ctx: BuildContext) -> ServedBackend:
    """Registry factory. Options (:class:`~vdr.retrieve.options.ServedOptions`): ``system`` (a
    ``--serve-as`` spec, required) and ``exact`` (the exact backend's name, default ``multimodal``),
    which must have been built before.

    Raises:
        BackendUnavailable: the exact backend did not run (its reason is in the skipped list).
        InputError: a bad spec.
    """
    o = check_options(ServedOptions, ctx.options, backend=ctx.name)
    if not o.system:
        raise InputError(f"backend {ctx.name!r}: option system (a --serve-as spec such as binary or pool:3) is required")
    spec = _one_spec(o.system, o.exact)
    if o.exact not in ctx.built:
        raise BackendUnavailable(f"serves the {o.exact!r} backend's page vectors, and {o.exact!r} did not run")
    return ServedBackend(ctx.built[o.exact], spec, name=ctx.name, cache_dir=ctx.cache_dir)


build.Options = ServedOptions
