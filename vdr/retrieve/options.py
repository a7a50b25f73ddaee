"""Backend options, declared once per backend as a frozen dataclass (issue 23, item 2).

Each field is one option: its name, type, default, help text (``metadata["help"]``) and whether it
changes scores (``metadata["scores"]``; settings that only change speed or memory do not). The same
declaration drives the Python constructors (``BM25Backend(k1=0.9)`` is checked against
:class:`LexicalOptions`), the registry (:func:`vdr.retrieve.base.create_backend`), ``vdr evaluate
--backend-option NAME.KEY=VALUE`` (strings converted by the field's type, :func:`parse_option`) and
the convenience flags of the CLI (``--bm25-k1``, ``--semantic-model``, ``--rrf-k``:
:data:`CLI_ALIASES`).

A bad option is refused in ONE function, :func:`check_options`, with an
:class:`~vdr.errors.InputError` naming the backend, the key, the expected type and the allowed keys.

This module is light (no numpy, no torch): the CLI reads it at import.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import InputError
from .budget import DEFAULT_MAX_QUERY_TOKENS

__all__ = [
    "option",
    "check_options",
    "parse_option",
    "options_from",
    "describe_options",
    "score_settings",
    "LexicalOptions",
    "SemanticOptions",
    "HybridOptions",
    "MultimodalOptions",
    "RunOptions",
    "MtebOptions",
    "PyseriniOptions",
    "ServedOptions",
    "RerankOptions",
    "BUILTIN_OPTIONS",
    "CLI_ALIASES",
]


def option(default: Any, help: str, *, scores: bool = True) -> Any:
    """A dataclass field of an options record: ``default``, ``help`` text and whether it changes scores."""
    return field(default=default, metadata={"help": help, "scores": scores})


# --------------------------------------------------------------------------------------------- checking


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_name(tp: Any) -> str:
    if tp is Any:
        return "any"
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(tp) if a is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))}[{args}]" if args else getattr(origin, "__name__", str(origin))
    return getattr(tp, "__name__", str(tp))


def _accepts(tp: Any, value: Any) -> bool:
    """Whether ``value`` is of type ``tp`` (int, float, bool, str, Path, None, unions, sequences,
    mappings; anything for ``Any``; ints are floats, bools are neither)."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, value) for a in typing.get_args(tp))
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is Path:
        return isinstance(value, (str, Path))
    if origin in (Sequence, list, tuple) or tp in (Sequence, list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        ok = isinstance(value, (list, tuple)) or (origin is Sequence and isinstance(value, Sequence) and not isinstance(value, str))
        return ok and (not args or all(_accepts(args[0], v) for v in value))
    if origin in (Mapping, dict) or tp in (Mapping, dict):
        return isinstance(value, Mapping)
    return True  # an annotation this checker does not know: the backend checks the value


def parse_option(tp: Any, raw: str) -> Any:
    """Convert the string ``raw`` (``--backend-option NAME.KEY=VALUE``) by the field type ``tp``.

    ``null``/``none`` give ``None`` for optional fields; ``int``, ``float`` and ``bool`` (``true``,
    ``false``, ``1``, ``0``, ``yes``, ``no``) are parsed; a ``str`` field keeps the text (a JSON
    string literal is unquoted); other types (lists, mappings, ``Any``) are read as JSON when it
    parses, else kept as text.

    Raises:
        ValueError: ``raw`` is not of type ``tp`` (:func:`check_options` names the option).
    """
    args = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
    if type(None) in args and raw.strip().lower() in ("null", "none"):
        return None
    errors = []
    for a in sorted(args, key=lambda a: a in (str, Path)):  # text last: "[1]" in a str | list field is the list
        if a is type(None):
            continue
        try:
            return _parse_one(a, raw)
        except ValueError as e:
            errors.append(str(e))
    raise ValueError("; ".join(errors) or f"cannot read {raw!r}")


def _parse_one(tp: Any, raw: str) -> Any:
    s = raw.strip()
    if tp is bool:
        low = s.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{raw!r} is not a bool")
    if tp is int:
        return int(s)
    if tp is float:
        return float(s)
    if tp in (str, Path):
        if len(s) >= 2 and s[0] == s[-1] == '"':
            try:
                return json.loads(s)
            except ValueError:
                pass
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if not _accepts(tp, value):
        raise ValueError(f"{raw!r} is not {_type_name(tp)}")
    return value


def _refuse(backend: str, label: str, message: str, cls: type) -> InputError:
    known = ", ".join(f"{f.name} ({_type_name(_hints(cls)[f.name])})" for f in dataclasses.fields(cls))
    return InputError(f"backend {backend!r}: {message}; {label} options: {known}")


def check_options(cls: type | None, values: Mapping[str, Any] | Any, *, backend: str, strings: bool = False) -> Any:
    """THE check of a backend's options: ``values`` -> an instance of the options dataclass ``cls``.

    Args:
        cls: the backend's options dataclass, or ``None`` (a third-party factory without one: the
            mapping passes through unchecked, strings read as JSON when they parse).
        values: ``{key: value}`` (or already an instance of ``cls``, returned as is).
        backend: the backend's name (named in errors).
        strings: values are CLI strings, converted by the field types (:func:`parse_option`).

    Returns:
        ``cls(**values)`` (unset fields keep their defaults), or a ``dict`` when ``cls`` is ``None``.

    Raises:
        InputError: an unknown key, or a value of the wrong type (backend, key, expected type and
            the allowed keys named).
    """
    if cls is not None and isinstance(values, cls):
        return values
    if values is not None and not isinstance(values, Mapping):
        raise InputError(f"backend {backend!r}: options must be a mapping {{key: value}}, got {type(values).__name__}")
    values = dict(values or {})
    if cls is None:
        if strings:
            out = {}
            for k, v in values.items():
                try:
                    out[k] = json.loads(v) if isinstance(v, str) else v
                except ValueError:
                    out[k] = v
            return out
        return values
    label = getattr(cls, "label", backend)
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise _refuse(backend, label, f"unknown {label} option(s) {unknown}", cls)
    for key, value in list(values.items()):
        tp = hints[key]
        if strings and isinstance(value, str):
            try:
                values[key] = value = parse_option(tp, value)
            except ValueError as e:
                raise _refuse(backend, label, f"option {key}={value!r} must be {_type_name(tp)} ({e})", cls) from None
        if not _accepts(tp, value):
            raise _refuse(backend, label, f"option {key}={value!r} must be {_type_name(tp)}, got {type(value).__name__}", cls)
    return cls(**values)


def options_from(cls: type, options: Any, kwargs: Mapping[str, Any], *, backend: str) -> Any:
    """The options of a constructor that takes ``options`` (an instance of ``cls``) or keywords
    (``BM25Backend(k1=0.9)``), checked by :func:`check_options`; keywords override ``options``.

    Raises:
        InputError: see :func:`check_options`.
    """
    base = check_options(cls, options if options is not None else {}, backend=backend)
    if not kwargs:
        return base
    checked = check_options(cls, kwargs, backend=backend)
    return dataclasses.replace(base, **{k: getattr(checked, k) for k in kwargs})


def describe_options(cls: type) -> list[dict]:
    """``[{"name", "type", "default", "help", "scores"}, ...]`` of an options dataclass (for help texts)."""
    hints = _hints(cls)
    return [{"name": f.name, "type": _type_name(hints[f.name]), "default": f.default, "help": f.metadata.get("help", ""),
             "scores": f.metadata.get("scores", True)} for f in dataclasses.fields(cls)]


def score_settings(opts: Any) -> dict:
    """The fields of an options instance that change scores, ``{name: value}``."""
    return {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts) if f.metadata.get("scores", True)}


# --------------------------------------------------------------------------------------------- built-in backends


@dataclass(frozen=True)
class LexicalOptions:
    """Options of the ``lexical`` backend (:class:`vdr.retrieve.lexical.BM25Backend`, bm25s)."""

    label: ClassVar[str] = "BM25"

    k1: float | None = option(None, "BM25 term-frequency saturation k1 (default 1.5)")
    b: float | None = option(None, "BM25 length normalisation b (default 0.75)")
    method: str = option("lucene", "BM25 variant (bm25s; default lucene)")
    delta: float = option(0.5, "Delta of the bm25l and bm25+ variants (default 0.5)")
    stemmer: str | None = option("auto", "auto (English when PyStemmer is installed), none, or a PyStemmer language (english, porter, german ...)")
    stopwords: str | Sequence[str] | None = option("en", "Stopword list: a language code or name (en, de, french ...) or none (default en)")
    lower: bool = option(True, "Lower-case before tokenising (default: yes)")
    analyzer: str = option("default", "BM25 analyzer: default, or lucene (Lucene's EnglishAnalyzer, as Pyserini)")
    preset: str | None = option(None, "Published BM25 k1/b: topiocqa (0.9/0.4), qrecc or msmarco (0.82/0.68); k1/b override it")
    max_query_tokens: int | None = option(DEFAULT_MAX_QUERY_TOKENS, "Query budget in whitespace tokens (vdr.retrieve.budget; null: none)")
    batch_size: int = option(8192, "Texts analysed per batch while indexing", scores=False)
    allow_no_text: bool = option(False, "Run even when no page has text (every query would score 0; the fix: ingest with --ocr auto,"
                                 " or a dataset copy with page text)", scores=False)


@dataclass(frozen=True)
class SemanticOptions:
    """Options of the ``semantic`` backend (:class:`vdr.retrieve.semantic.DenseBackend`)."""

    label: ClassVar[str] = "semantic"

    model: str | Path | None = option(None, "sentence-transformers model (name or folder) of the semantic backend (default: all-MiniLM-L6-v2, offline)")
    architecture: str = option("auto", "sentence-transformers, ance (RoBERTa first token -> embeddingHead -> LayerNorm, as Pyserini's"
                               " AnceEncoder), or auto (ance for a folder whose config.json names RobertaDot_NLL_LN or AnceEncoder)")
    batch_size: int = option(32, "Texts per forward pass", scores=False)
    query_prompt: str | None = option(None, "String prepended to every query (default: the model's declared query prompt, as"
                                      " sentence-transformers' encode_query; \"\": none)")
    document_prompt: str | None = option(None, "String prepended to every page (default: the model's declared document prompt, as"
                                         " encode_document; \"\": none)")
    prompt_name: str | None = option(None, "Name of a prompt the model declares (config_sentence_transformers.json), prepended to"
                                     " every query, as encode_query(prompt_name=...)")
    query_max_length: int | None = option(None, "Tokens a query may use (default the model's max_seq_length; 64 for ance)")
    passage_max_length: int | None = option(None, "Tokens a page, passage or window may use (default the model's; 384 for ance)")
    long_text: str = option("maxp", "maxp (windows, best window scores) or truncate (the model's cut)")
    window: int | None = option(None, "Content tokens per window (default: the most that fit)")
    stride: int | None = option(None, "Tokens between window starts (default window // 2)")
    similarity: str | None = option(None, "cosine, dot, euclidean or manhattan, as sentence-transformers defines them (default: the"
                                    " model's similarity_fn_name; cosine when it declares none; dot for ance)")
    normalize: bool | None = option(None, "Legacy: true is similarity=cosine, false is similarity=dot (default: from similarity)")
    search: str = option("auto", "auto (FAISS when installed, else NumPy), faiss or numpy", scores=False)
    chunk_rows: int = option(65536, "Store rows scored per float32 chunk", scores=False)
    index_batch_size: int = option(4096, "Passages read per streaming batch", scores=False)
    query_runtime: str = option("auto", "What embeds the queries: auto, torch or onnx")
    onnx_cache: str | None = option(None, "Where the ONNX query encoder is exported: user (default: VDR_CACHE or"
                                    " XDG_CACHE_HOME/vdr, one export per model for every corpus), corpus (the index cache)"
                                    " or a folder", scores=False)
    allow_pickle_weights: bool = option(False, "Read pytorch_model.bin weights (a pickle) when the model has no *.safetensors; only for"
                                        " a checkpoint from a source you trust (default: safetensors only)", scores=False)
    allow_no_text: bool = option(False, "Run even when no page has text (every query would score 0; the fix: ingest with --ocr auto,"
                                 " or a dataset copy with page text)", scores=False)


@dataclass(frozen=True)
class HybridOptions:
    """Options of the ``hybrid`` backend (:class:`vdr.retrieve.hybrid.HybridBackend`, reciprocal rank fusion)."""

    label: ClassVar[str] = "hybrid"

    rrf_k: float = option(60, "RRF constant of the hybrid backend: score = sum 1 / (rrf_k + rank)")
    fuse: Sequence[str] | None = option(None, "Names of the backends to fuse (default: lexical and semantic when built)")
    depth: int | None = option(None, "Per-run ranking depth used (default all a run holds)")


@dataclass(frozen=True)
class MultimodalOptions:
    """Options of the ``multimodal`` backend (:class:`vdr.retrieve.multimodal.MultimodalBackend`)."""

    label: ClassVar[str] = "multimodal"

    encoder: Any = option(None, "Encoder settings (EncoderSettings or a mapping of its fields; model required)")
    store: Path | None = option(None, "Embedding store folder (default CORPUS_DIR/embeddings)", scores=False)
    query_cache_size: int | None = option(4096, "Query texts whose vectors are kept (LRU; null: no bound)", scores=False)


@dataclass(frozen=True)
class RunOptions:
    """Options of the ``run`` backend (:class:`vdr.retrieve.runfile.RunFileBackend`)."""

    label: ClassVar[str] = "run"

    path: Path | Mapping[str, Any] | None = option(None, "A run file, or {variant: run file} (required)")
    allow_id_mismatch: bool = option(False, "Evaluate query ids that match the queries' only after normalisation as written"
                                            " (default: an error naming the pairs; vdr.io.idjoin)")


@dataclass(frozen=True)
class MtebOptions:
    """Options of the ``mteb`` engine (:class:`vdr.integrations.mteb.MtebBackend`)."""

    label: ClassVar[str] = "mteb"

    encoder: Any = option(None, "Encoder settings (as the multimodal backend's)")
    store: Path | None = option(None, "Embedding store folder (default CORPUS_DIR/embeddings)", scores=False)
    qrels: Any = option(None, "The qrels (required)")
    out_dir: Path = option("mteb", "Folder of MTEB's TaskResult JSON and predictions", scores=False)
    ks: Sequence[int] | None = option(None, "Cutoffs compared with MTEB's scores (default: vdr evaluate's, vdr.metrics.registry)")
    dataset: str | None = option(None, "The ViDoRe dataset name (MTEB's main metric)")


@dataclass(frozen=True)
class PyseriniOptions:
    """Options of the ``pyserini`` backend (:class:`vdr.retrieve.pyserini.PyseriniBackend`)."""

    label: ClassVar[str] = "pyserini"

    index_dir: Path | None = option(None, "An existing Lucene index (default: build one from the corpus)")
    preset: str | None = option(None, "topiocqa, qrecc, msmarco or pyserini (exclusive with k1/b)")
    k1: float | None = option(None, "BM25 k1 (default 0.9, Pyserini's)")
    b: float | None = option(None, "BM25 b (default 0.4, Pyserini's)")
    threads: int = option(2, "batch_search threads", scores=False)
    max_query_tokens: int | None = option(DEFAULT_MAX_QUERY_TOKENS, "Query budget in whitespace tokens (null: none)")
    stemmer: str = option("porter", "porter, krovetz or none")
    keep_stopwords: bool = option(False, "Keep Lucene's English stopwords")
    index_threads: int | None = option(None, "Threads of pyserini.index.lucene (default CPU count, at most 8)", scores=False)


@dataclass(frozen=True)
class ServedOptions:
    """Options of a served system (:class:`vdr.retrieve.served.ServedBackend`; ``vdr evaluate --serve-as``)."""

    label: ClassVar[str] = "served"

    system: str | None = option(None, "The system, as --serve-as spells it: pool:3, int8, binary, fp16, bf16, muvera, qdrant,"
                                " lancedb or plaid, with key=value parameters (vdr.retrieve.served.parse_serve_as)")
    exact: str = option("multimodal", "The exact backend whose page vectors are served (default multimodal)")


@dataclass(frozen=True)
class RerankOptions:
    """Options of a reranked system (:class:`vdr.retrieve.rerank.RerankBackend`; ``vdr evaluate --rerank MODEL``)."""

    label: ClassVar[str] = "rerank"

    model: str | Path | None = option(None, "The reranker: a hub name or a local folder (required)")
    base: str = option("lexical", "The backend whose run is reranked (built before; default lexical)")
    depth: int = option(100, "Pages of the base's run re-scored per query; pages below are dropped")
    kind: str = option("auto", "text (a cross-encoder over query + page text), multimodal (a reranker that reads the page"
                       " image: rerankers' MonoVLMRanker) or auto (multimodal for a Qwen2-VL checkpoint or a MonoQwen/MonoVLM name)")
    library: str = option("auto", "text: sentence-transformers (CrossEncoder.predict, the default) or rerankers (TransformerRanker.rank);"
                          " multimodal: rerankers (MonoVLMRanker.rank)")
    max_length: int | None = option(None, "Tokens of a query + page pair (text kind; default the model's)")
    revision: str | None = option(None, "Hub revision of the model (part of the cache key of a hub name)")
    dtype: str | None = option(None, "Multimodal weights dtype: float32, bfloat16 or float16 (default bfloat16 on CUDA, float32 on CPU)")
    processor: str | None = option(None, "Multimodal: the processor (default the model folder when it holds one, else"
                                   " Qwen/Qwen2-VL-2B-Instruct, as rerankers)")
    attn_implementation: str = option("sdpa", "Multimodal: attention implementation (sdpa, eager, flash_attention_2)", scores=False)
    trust_remote_code: bool = option(False, "Run the model repository's own code (only for a model you trust)")
    batch_size: int = option(32, "Pairs per forward pass (text kind)", scores=False)


#: Built-in backend name -> its options dataclass (read without importing the backend's module).
BUILTIN_OPTIONS: dict[str, type] = {
    "lexical": LexicalOptions,
    "semantic": SemanticOptions,
    "hybrid": HybridOptions,
    "multimodal": MultimodalOptions,
    "run": RunOptions,
    "mteb": MtebOptions,
    "pyserini": PyseriniOptions,
    "served": ServedOptions,
    "rerank": RerankOptions,
}

#: The CLI's convenience flags, each an alias of one backend option: ``{parameter name: (backend,
#: key, flag)}`` (``vdr evaluate --bm25-k1 0.9`` is ``--backend-option lexical.k1=0.9``). Their
#: defaults and help texts come from the option's field.
CLI_ALIASES: dict[str, tuple[str, str, str]] = {
    "semantic_model": ("semantic", "model", "--semantic-model"),
    "rrf_k": ("hybrid", "rrf_k", "--rrf-k"),
    **{f"bm25_{k}": ("lexical", k, f"--bm25-{k}") for k in ("k1", "b", "method", "delta", "stemmer", "stopwords", "lower", "preset", "analyzer")},
}
