"""Retrieve, then rerank (issue 37, item 3): another backend's run re-scored by a reranker.

A *reranked system* takes the run of a base backend (any backend that ran before it: ``lexical``,
``semantic``, ``multimodal``, ``hybrid``, a run file), re-scores the base's top ``depth`` pages of
every query with a reranker and ranks them by the reranker's score alone (ties in trec_eval order:
page id descending). Pages below ``depth`` are dropped, as retrieve-then-rerank pipelines do: the
reranked run holds at most ``depth`` pages per query. It is a backend of its own in results, named
``<base>+rerank`` (``lexical+rerank``), audited against its base by
:func:`vdr.experiment.audit.rerank_audit` (does each rewrite's gain hold before and after reranking?).

Rerankers, through maintained libraries (never a re-implementation):

* ``kind="text"`` -- a cross-encoder over (query text, page text): sentence-transformers'
  :class:`~sentence_transformers.CrossEncoder` (``library="sentence-transformers"``, the default;
  scores are :meth:`CrossEncoder.predict`'s, its default activation included: a sigmoid for a
  one-label model) or rerankers' ``TransformerRanker`` (``library="rerankers"``; scores are its
  ``rank``'s: raw logits).
* ``kind="multimodal"`` -- a reranker that reads the page image: rerankers' ``MonoVLMRanker``
  (MonoQwen2-VL: a Qwen2-VL causal LM; the score is the softmax probability of its "True" token
  against "False" after the image and the query). Needs a page corpus (page images).

Cache: every score is kept under ``CACHE_DIR/rerank/<model key>/``, the key a sha256 of the model's
identity (a local folder: the sha256 of each of its files; a hub name: name and revision), the kind,
the library and its version and every option that changes scores. One JSON file per query text
(named by the sha256 of the text, the text inside) holds ``{page id: {"hash", "score"}}``, the hash
being the page's content (text: sha256 of its text; multimodal: the page image's pixel sha256, or of
its file), so that a changed page is scored again. Files are written atomically (a concurrent
writer's entries may be lost: a later miss, never a wrong score). A re-run scores no pair again
(``pairs_scored`` 0, ``pairs_cached`` all); the model is loaded only when a pair must be scored.

Each search reports ``pairs_scored``, ``pairs_cached``, ``rerank_seconds`` (scoring, model loading
excluded; the base's search is not counted), ``score_seconds`` (the same: the audit's time column)
and ``ms_per_query``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import time
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..errors import InputError, VdrError
from ..types import QuerySet, Run
from ._common import check_depth
from .base import BackendUnavailable, BuildContext, cache_path, fingerprint, new_report, read_json
from .options import RerankOptions, check_options, score_settings

__all__ = ["RerankBackend", "RerankCache", "detect_kind", "model_identity", "rerank_name", "KINDS", "LIBRARIES", "SUFFIX", "build"]

#: The suffix of a reranked system's name: ``lexical`` -> ``lexical+rerank``.
SUFFIX = "+rerank"
KINDS = ("auto", "text", "multimodal")
LIBRARIES = ("auto", "sentence-transformers", "rerankers")
#: rerankers' MonoVLMRanker answer tokens (its PREDICTION_TOKENS default), given explicitly.
VLM_TOKENS = ("False", "True")
_VLM_NAMES = ("monoqwen", "monovlm")
_VLM_TYPES = ("qwen2_vl",)
_FILE_HASHES: dict[tuple, str] = {}


def rerank_name(base: str) -> str:
    """The reranked system's name in results: ``<base>+rerank``."""
    return f"{base}{SUFFIX}"


def detect_kind(model: str | Path) -> str:
    """``"multimodal"`` for a Qwen2-VL checkpoint (a folder whose ``config.json`` has ``model_type``
    ``qwen2_vl``) or a name containing MonoQwen / MonoVLM, else ``"text"``."""
    text = str(model)
    cfg = read_json(Path(text) / "config.json") if Path(text).is_dir() else None
    if isinstance(cfg, dict) and cfg.get("model_type") in _VLM_TYPES:
        return "multimodal"
    return "multimodal" if any(n in text.lower() for n in _VLM_NAMES) else "text"


def _file_sha256(f: Path) -> str:
    st = f.stat()
    key = (str(f.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        from ..io.digest import file_sha256

        _FILE_HASHES[key] = file_sha256(f)
    return _FILE_HASHES[key]


def model_identity(model: str | Path, revision: str | None = None) -> dict:
    """What identifies the reranker's weights in the cache key: a local folder's files
    (``{"folder", "files": {name: sha256}}``, memoised per path, size and mtime) or a hub name's
    ``{"name", "revision"}`` (``revision`` ``None``: the hub's default branch at load time)."""
    p = Path(str(model))
    if p.is_dir():
        files = {f.name: _file_sha256(f) for f in sorted(p.iterdir()) if f.is_file() and not f.name.startswith(".")}
        return {"folder": str(p.resolve()), "files": files}
    return {"name": str(model), "revision": revision}


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


# --------------------------------------------------------------------------------------------- cache


class RerankCache:
    """Reranker scores by (query text, page id, page content hash) in one folder (see the module
    docstring); ``folder`` ``None``: nothing is kept.

    Args:
        folder: ``CACHE_DIR/rerank/<model key>`` or ``None``.
    """

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def _file(self, query: str) -> Path:
        return self.folder / f"{hashlib.sha256(query.encode('utf-8')).hexdigest()}.json"

    def get(self, query: str, pages: Mapping[str, str]) -> dict[str, float]:
        """``{page id: score}`` of the pages of ``pages`` (``{page id: content hash}``) cached for ``query``
        with the same content hash (a missing or unreadable file: ``{}``)."""
        if self.folder is None:
            return {}
        doc = read_json(self._file(query))
        if not isinstance(doc, dict) or doc.get("query") != query or not isinstance(doc.get("scores"), dict):
            return {}
        held = doc["scores"]
        return {p: float(held[p]["score"]) for p, h in pages.items() if isinstance(held.get(p), dict) and held[p].get("hash") == h}

    def put(self, query: str, scores: Mapping[str, tuple[str, float]]) -> None:
        """Add ``{page id: (content hash, score)}`` to ``query``'s file (atomically replaced)."""
        if self.folder is None or not scores:
            return
        from ..io.atomic import write_text_atomic

        f = self._file(query)
        doc = read_json(f)
        held = doc["scores"] if isinstance(doc, dict) and doc.get("query") == query and isinstance(doc.get("scores"), dict) else {}
        held.update({p: {"hash": h, "score": s} for p, (h, s) in scores.items()})
        write_text_atomic(f, json.dumps({"query": query, "scores": held}, sort_keys=True, ensure_ascii=False))


# --------------------------------------------------------------------------------------------- scorers


class _TextScorer:
    """A cross-encoder over (query, page text) through sentence-transformers or rerankers."""

    def __init__(self, o: RerankOptions, library: str, device: str) -> None:
        model = str(o.model)
        self.batch_size = o.batch_size
        self.library = library
        if library == "sentence-transformers":
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(model, max_length=o.max_length, device=device, revision=o.revision,
                                      trust_remote_code=o.trust_remote_code)
        else:
            from rerankers import Reranker

            tk = {"model_max_length": o.max_length} if o.max_length else {}
            with contextlib.redirect_stdout(io.StringIO()):  # rerankers prints its progress on stdout
                self.model = Reranker(model, model_type="cross-encoder", device=device, verbose=0, batch_size=o.batch_size,
                                      dtype="float32", tokenizer_kwargs={"revision": o.revision, "trust_remote_code": o.trust_remote_code, **tk},
                                      model_kwargs={"revision": o.revision, "trust_remote_code": o.trust_remote_code})

    def score(self, query: str, ids: Sequence[str], docs: Sequence[str]) -> list[float]:
        """The scores of ``docs`` (page texts) for ``query``, in order."""
        if self.library == "sentence-transformers":
            out = self.model.predict([(query, d) for d in docs], batch_size=self.batch_size, show_progress_bar=False)
            return [float(x) for x in out]
        ranked = self.model.rank(query, list(docs), doc_ids=list(ids))
        by_id = {r.document.doc_id: float(r.score) for r in ranked.results}
        return [by_id[i] for i in ids]


class _VlmScorer:
    """A multimodal reranker that reads the page image: rerankers' ``MonoVLMRanker``."""

    def __init__(self, o: RerankOptions, device: str, dtype: str) -> None:
        from rerankers import Reranker

        model = str(o.model)
        proc = o.processor or (model if any((Path(model) / f).is_file() for f in ("processor_config.json", "preprocessor_config.json"))
                               else None)
        kw = {"processor_name": proc} if proc else {}
        with contextlib.redirect_stdout(io.StringIO()):  # MonoVLMRanker prints its dtype and progress on stdout
            self.model = Reranker(model, model_type="monovlm", device=device, dtype=dtype, verbose=0, token_false=VLM_TOKENS[0],
                                  token_true=VLM_TOKENS[1], attention_implementation=o.attn_implementation,
                                  processor_kwargs={"trust_remote_code": o.trust_remote_code, "revision": o.revision},
                                  model_kwargs={"trust_remote_code": o.trust_remote_code, "revision": o.revision}, **kw)
        if self.model is None:
            raise BackendUnavailable("rerankers cannot load MonoVLMRanker (pip install 'rerankers[transformers]')")

    def score(self, query: str, ids: Sequence[str], docs: Sequence[str]) -> list[float]:
        """The scores of ``docs`` (page image paths) for ``query``, in order (``MonoVLMRanker.rank``)."""
        ranked = self.model.rank(query, list(docs), doc_ids=list(ids))
        by_id = {r.document.doc_id: float(r.score) for r in ranked.results}
        return [by_id[i] for i in ids]


# --------------------------------------------------------------------------------------------- backend


class RerankBackend:
    """The base backend's top ``depth`` pages per query re-scored by a reranker, as a
    :class:`~vdr.retrieve.base.Backend` (see the module docstring).

    Args:
        base: the base backend (built, possibly the evaluation's memo: indexed once, its searches kept).
        options: :class:`~vdr.retrieve.options.RerankOptions` (or a mapping of its fields).
        name: its name in results (default ``<base>+rerank``).
        cache_dir: cache root (scores in ``rerank/<model key>``); ``None``: no cache.
        device: ``"cuda"``, ``"cpu"``... (default CUDA when available).

    Attributes:
        config: ``{"backend": "rerank", "rerank": {"base", "model", "kind", "library", "library_version",
            "depth", "max_length", "source", ...}, "model_key"}``.
        report: the usual keys; ``searches[variant]``: ``num_queries``, ``distinct_query_texts``,
            ``depth``, ``pairs``, ``pairs_scored``, ``pairs_cached``, ``rerank_seconds``,
            ``score_seconds``, ``ms_per_query``; ``model_loaded`` (a pair had to be scored) and then
            ``load_seconds``.

    Raises:
        InputError: no model, a bad kind, library or depth.
    """

    def __init__(self, base: Any, options: RerankOptions | Mapping | None = None, *, name: str | None = None,
                 cache_dir: Path | None = None, device: str | None = None) -> None:
        o = check_options(RerankOptions, options or {}, backend=name or "rerank")
        if not o.model:
            raise InputError(f"backend {name or 'rerank'!r}: option model (the reranker: a hub name or a folder) is required")
        check_depth(o.depth, "rerank depth")
        for key, allowed in (("kind", KINDS), ("library", LIBRARIES)):
            if getattr(o, key) not in allowed:
                raise InputError(f"backend {name or 'rerank'!r}: {key} must be one of {', '.join(allowed)}, got {getattr(o, key)!r}")
        self.base = base
        self.o = o
        self.name = name or rerank_name(getattr(base, "name", o.base))
        self.kind = detect_kind(o.model) if o.kind == "auto" else o.kind
        self.library = "rerankers" if self.kind == "multimodal" else ("sentence-transformers" if o.library == "auto" else o.library)
        if self.kind == "multimodal" and o.library == "sentence-transformers":
            raise InputError(f"backend {self.name!r}: a multimodal reranker runs through rerankers, not sentence-transformers")
        self.device = device or _default_device()
        self.dtype = o.dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.cache_dir = cache_dir
        self.report: dict = new_report()
        self.report["model_loaded"] = False
        self.config: dict = {"backend": "rerank", "rerank": self._rerank_config()}
        self._scorer = None
        self._corpus = None
        self._hashes: dict[str, str] = {}
        self._cache = RerankCache(None)

    def _rerank_config(self) -> dict:
        o = self.o
        source = {"sentence-transformers": "sentence_transformers.CrossEncoder.predict (its default activation)",
                  "rerankers": "rerankers MonoVLMRanker.rank (P(True) vs False)" if self.kind == "multimodal"
                  else "rerankers TransformerRanker.rank (logits)"}[self.library]
        return {"base": getattr(self.base, "name", o.base), "model": str(o.model), "kind": self.kind, "library": self.library,
                "library_version": _version(self.library), "depth": o.depth, "max_length": o.max_length if self.kind == "text" else None,
                "dtype": self.dtype if self.kind == "multimodal" else None, "revision": o.revision, "source": source,
                "dropped": "pages below depth in the base's run are dropped"}

    def _model_key(self) -> str:
        settings = {k: v for k, v in score_settings(self.o).items() if k not in ("base", "depth", "model")}
        return fingerprint("rerank", 1, model_identity(self.o.model, self.o.revision), self.kind, self.library,
                           _version(self.library), self.dtype if self.kind == "multimodal" else None,
                           {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()})

    def index(self, corpus) -> None:
        """Index the base backend (once: the evaluation's memo keeps it) and read the pages' content
        hashes (page text, or page image for a multimodal reranker). The model is not loaded here.

        Raises:
            BackendUnavailable: a multimodal reranker over a corpus without page images; the base cannot run.
        """
        self.base.index(corpus)
        if self.kind == "multimodal" and getattr(corpus, "kind", None) != "page":
            raise BackendUnavailable(f"{self.name}: a multimodal reranker reads page images; this corpus has none (passages)")
        self._corpus = corpus
        self._hashes = self._content_hashes(corpus)
        key = self._model_key()
        self.config["model_key"] = key
        folder = cache_path(self.cache_dir, "rerank", key)
        self._cache = RerankCache(folder)
        self.report["cache"] = {"hit": None, "path": None if folder is None else str(folder)}
        self.report["index"].update(pages=len(self._hashes), kind=self.kind)

    def _content_hashes(self, corpus) -> dict[str, str]:
        from .base import corpus_texts

        if self.kind == "text":
            return {p: hashlib.sha256(t.encode("utf-8")).hexdigest() for p, t in corpus_texts(corpus).items()}
        out = {}
        for p in corpus.ids():
            digest = getattr(corpus[p], "image_sha256", None)
            out[p] = digest or _file_sha256(corpus.image_path(p))
        return out

    def _docs(self, ids: Sequence[str]) -> list[str]:
        """What the reranker reads of each page: its text, or its image file (multimodal)."""
        if self.kind == "multimodal":
            return [str(self._corpus.image_path(p)) for p in ids]
        texts = getattr(self._corpus, "texts", None)
        if not hasattr(self, "_texts"):
            self._texts = texts() if callable(texts) else dict(self._corpus)
        return [self._texts[p] for p in ids]

    def _load(self):
        if self._scorer is None:
            t0 = time.perf_counter()
            try:
                self._scorer = _VlmScorer(self.o, self.device, self.dtype) if self.kind == "multimodal" else _TextScorer(
                    self.o, self.library, self.device)
            except ImportError as e:
                raise BackendUnavailable(f"{self.name}: {e} (pip install 'vdr[rerank]')") from e
            except (OSError, ValueError) as e:
                raise BackendUnavailable(f"{self.name}: cannot load reranker {str(self.o.model)!r}: {type(e).__name__}: {e}") from e
            self.report["model_loaded"] = True
            self.report["load_seconds"] = round(time.perf_counter() - t0, 6)
        return self._scorer

    def rescore(self, query: str, ids: Sequence[str]) -> tuple[dict[str, float], int]:
        """The reranker's scores of pages ``ids`` for ``query`` (cached ones read, the others scored in
        one call and cached). Returns ``({page id: score}, number of pairs scored)``.

        Raises:
            BackendUnavailable: the reranker cannot be loaded or fails on a pair.
        """
        want = {p: self._hashes.get(p, "") for p in ids}
        got = self._cache.get(query, want)
        todo = [p for p in ids if p not in got]
        if todo:
            scorer = self._load()
            try:
                scores = scorer.score(query, todo, self._docs(todo))
            except VdrError:
                raise
            except Exception as e:  # the library's own failure: the system is skipped with the reason
                raise BackendUnavailable(f"{self.name}: the reranker failed on query {query[:60]!r}: {type(e).__name__}: {e}") from e
            new = dict(zip(todo, scores))
            self._cache.put(query, {p: (want[p], s) for p, s in new.items()})
            got.update(new)
        return got, len(todo)

    def search(self, queries: QuerySet, depth: int) -> Run:
        """The base's run at ``max(depth, rerank depth)``, its top rerank-depth pages per query
        re-scored, ranked by the reranker and cut to ``depth``.

        Raises:
            InputError: :meth:`index` was not called; a bad ``depth``.
            BackendUnavailable: the reranker cannot be loaded or fails.
        """
        if self._corpus is None:
            raise InputError("RerankBackend.search: call index(corpus) first")
        depth = check_depth(depth)
        base_run = self.base.search(queries, max(depth, self.o.depth))
        texts = {qid: q.text for qid, q in queries.items()}
        scored = cached = 0
        by_text: dict[tuple[str, tuple], dict[str, float]] = {}
        t0 = time.perf_counter()
        load_s = 0.0
        out: dict[str, dict[str, float]] = {}
        for qid, text in texts.items():
            ids = tuple(p for p, _ in (base_run.ranked(qid) if qid in base_run else [])[: self.o.depth])
            key = (text, ids)
            if key not in by_text:
                loaded = self._scorer is not None
                by_text[key], n = self.rescore(text, ids) if ids else ({}, 0)
                if not loaded and self._scorer is not None:
                    load_s = self.report["load_seconds"]  # model loading is not rerank time
                scored += n
                cached += len(ids) - n
            ranked = sorted(by_text[key].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:depth]
            out[qid] = dict(ranked)
        seconds = time.perf_counter() - t0 - load_s
        self._record(queries, depth, len(by_text), scored, cached, seconds)
        return Run.from_checked(out, f"{self.name}-{queries.name}")

    def _record(self, queries: QuerySet, depth: int, distinct: int, scored: int, cached: int, seconds: float) -> None:
        n = len(queries)
        self.report["searches"][queries.name] = {
            "num_queries": n, "distinct_query_texts": distinct, "depth": self.o.depth, "pairs": scored + cached,
            "pairs_scored": scored, "pairs_cached": cached, "rerank_seconds": round(seconds, 6), "score_seconds": round(seconds, 6),
            "ms_per_query": round(1000 * seconds / n, 3) if n else None}
        searches = self.report["searches"].values()
        total_scored = sum(s["pairs_scored"] for s in searches)
        total = sum(s["pairs"] for s in searches)
        self.report["cache"]["hit"] = None if self._cache.folder is None else bool(total) and total_scored == 0


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a dependency
        return "cpu"


def build(ctx: BuildContext) -> RerankBackend:
    """Registry factory. Options (:class:`~vdr.retrieve.options.RerankOptions`): ``model`` (required),
    ``base`` (the backend whose run is reranked, built before; default ``lexical``), ``depth``...

    Raises:
        BackendUnavailable: the base backend did not run (its reason is in the skipped list).
        InputError: no model, a bad option.
    """
    o = check_options(RerankOptions, ctx.options, backend=ctx.name)
    if o.base not in ctx.built:
        raise BackendUnavailable(f"reranks the {o.base!r} backend's run, and {o.base!r} did not run")
    return RerankBackend(ctx.built[o.base], o, name=ctx.name, cache_dir=ctx.cache_dir, device=ctx.device)


build.Options = RerankOptions
