"""The :class:`Backend` protocol, the backend registry and the on-disk index cache.

A backend turns a corpus into an index once and answers query sets from it::

    backend.index(corpus)                 # build, or load from the cache (no page encoding then)
    run = backend.search(queries, depth)  # one Run per query variant
    backend.config                        # every setting that changes scores (results.json)
    backend.report                        # what index/search did (counts, cache hit, forward passes)

Built-in backends (:data:`BUILTIN`): ``multimodal`` (colpali-engine + page store + streaming MaxSim),
``lexical`` (BM25, bm25s), ``pyserini`` (BM25 through Pyserini / Lucene; needs ``vdr[pyserini]`` and
Java 21+), ``semantic`` (sentence-transformers), ``hybrid`` (reciprocal rank fusion
of two or more backends), ``run`` (a TREC/JSON run file given by the user) and ``mteb`` (the
multimodal backend run through ``mteb.evaluate``; needs the ``mteb`` extra) and ``served`` (the
multimodal backend's page vectors compressed or through an engine, scored against exact MaxSim:
:mod:`vdr.retrieve.served`) and ``rerank`` (another backend's run re-scored by a cross-encoder or a
multimodal reranker: :mod:`vdr.retrieve.rerank`). Other packages add
backends through the entry-point group ``vdr.backends`` (see ``docs/architecture.md``): the entry
point names a *factory*, a callable ``factory(ctx: BuildContext) -> Backend``.

Index cache: a backend that builds something costly keeps it in
``CACHE_DIR/<kind>/<fingerprint>/`` (:func:`cache_path`), where the fingerprint is a sha256 of the
corpus content and every setting that changes the index (:func:`fingerprint`). The folder is
written under a temporary name and renamed into place (:func:`write_cache_dir`), so a reader sees a
complete entry or none; entries hold safetensors, ``.npy`` (``allow_pickle=False``) and JSON only.
"""

from __future__ import annotations

from collections.abc import Iterator

import functools
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import InputError, VdrError
from ..types import QuerySet, Run

__all__ = [
    "Backend",
    "BuildContext",
    "BackendUnavailable",
    "BackendFactory",
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "register_backend",
    "backend_factory",
    "options_class",
    "check_backend_options",
    "create_backend",
    "available_backends",
    "fingerprint",
    "content_digest",
    "cache_path",
    "write_cache_dir",
    "read_json",
    "corpus_texts",
    "query_texts",
    "new_report",
]

ENTRY_POINT_GROUP = "vdr.backends"
#: Built-in backend names -> ``"module:factory"`` (imported on first use: no torch at import).
BUILTIN: dict[str, str] = {
    "multimodal": "vdr.retrieve.multimodal:build",
    "lexical": "vdr.retrieve.lexical:build",
    "semantic": "vdr.retrieve.semantic:build",
    "hybrid": "vdr.retrieve.hybrid:build",
    "run": "vdr.retrieve.runfile:build",
    "mteb": "vdr.integrations.mteb:build",
    "pyserini": "vdr.retrieve.pyserini:build",
    "served": "vdr.retrieve.served:build",
    "rerank": "vdr.retrieve.rerank:build",
}


class BackendUnavailable(VdrError):
    """A backend cannot run with what it was given (no model, a model that cannot be loaded, too
    few backends to fuse). :func:`vdr.evaluate` reports it as skipped with this message; any other
    error stops the evaluation."""


@runtime_checkable
class Backend(Protocol):
    """What every retrieval backend provides.

    Attributes:
        name: the backend's name in results (``"lexical"``, or the name given to a run file).
        config: every setting that changes scores, JSON-able (model, weights hash, parameters,
            library versions); written to ``results.json`` under ``config.backend_config``.
        report: what :meth:`index` and :meth:`search` did, JSON-able. Keys every backend fills:
            ``page_forward_passes`` (pages run through a model during this process' :meth:`index`:
            0 when everything came from a cache, and always 0 for backends without a model),
            ``cache`` (``{"hit": bool | None, "path": str | None}``; ``hit`` is ``None`` when the
            backend caches nothing), ``index`` (index statistics) and ``searches`` (``{variant:
            statistics}``, one entry per :meth:`search`, keyed by ``queries.name``).
    """

    name: str
    config: dict
    report: dict

    def index(self, corpus) -> None:
        """Build the index of ``corpus`` (a :class:`vdr.corpus.Corpus`), or load it from the
        on-disk cache when one with the same fingerprint exists.

        Raises:
            BackendUnavailable: the backend cannot run (reported as skipped).
            InputError: the corpus is unusable for this backend.
        """
        ...

    def search(self, queries: QuerySet, depth: int) -> Run:
        """The ``depth`` best pages of every query of ``queries`` (one variant), in trec_eval order
        (score descending, then corpus id descending). Every query id is in the run, possibly with
        an empty ranking.

        Raises:
            InputError: :meth:`index` was not called, bad queries or ``depth``.
        """
        ...


@dataclass(frozen=True)
class BuildContext:
    """What a backend factory gets from the experiment.

    Attributes:
        name: the backend's name in results (the registry name, or e.g. ``"anserini_bm25"`` for a run
            file given as ``runs={"pyserini": path}``).
        options: the backend's own options (``backend_options[name]`` of :func:`vdr.evaluate`):
            an instance of the factory's options dataclass (its ``Options`` attribute; the
            built-in ones are in :mod:`vdr.retrieve.options`) checked by :func:`create_backend`,
            or the plain mapping for a factory that declares none.
        cache_dir: root of the index cache (default ``CORPUS_DIR/.vdr-cache``); ``None``: no cache.
        corpus_dir: the corpus folder.
        device: ``"cuda"``, ``"cpu"``, ... or ``None`` (the backend decides).
        progress: show progress bars.
        built: the backends built before this one, by name (what ``hybrid`` fuses).
    """

    name: str
    options: Any = field(default_factory=dict)
    cache_dir: Path | None = None
    corpus_dir: Path | None = None
    device: str | None = None
    progress: bool = False
    built: Mapping[str, Backend] = field(default_factory=dict)


BackendFactory = Callable[[BuildContext], Backend]
_REGISTERED: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Register ``factory`` under ``name`` in this process (entry points do it for packages).

    Raises:
        InputError: ``name`` is taken (a built-in name, or registered before without ``replace``).
    """
    if name in BUILTIN or (name in _REGISTERED and not replace):
        raise InputError(f"backend name {name!r} is already taken")
    _REGISTERED[name] = factory


def _entry_points() -> list:
    """The installed ``vdr.backends`` entry points (tests replace this function)."""
    return list(_installed_entry_points())


@functools.lru_cache(maxsize=1)
def _installed_entry_points() -> tuple:
    """The ``vdr.backends`` entry points, looked up once per process: the lookup reads the
    metadata of every installed distribution (tens of milliseconds with a few hundred installed)."""
    from importlib.metadata import entry_points

    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def available_backends() -> list[str]:
    """Built-in names, then names registered here, then entry-point names (each once)."""
    names = list(BUILTIN) + [n for n in _REGISTERED if n not in BUILTIN]
    return names + [ep.name for ep in _entry_points() if ep.name not in names]


def backend_factory(name: str) -> BackendFactory:
    """The factory of backend ``name``: built-in, registered, or from an entry point.

    Raises:
        InputError: no backend of that name (the known names are listed), or an entry point that
            cannot be loaded.
        BackendUnavailable: a built-in backend whose optional dependency is not installed.
    """
    if name in BUILTIN:
        import importlib

        module, attr = BUILTIN[name].split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as e:  # an optional dependency (mteb) is not installed
            raise BackendUnavailable(f"backend {name!r} cannot be used: {e}") from None
    if name in _REGISTERED:
        return _REGISTERED[name]
    for ep in _entry_points():
        if ep.name == name:
            try:
                return ep.load()
            except Exception as e:  # a broken third-party package: say which
                raise InputError(f"backend {name!r}: cannot load entry point {ep.value!r}: {type(e).__name__}: {e}") from e
    raise InputError(f"unknown backend {name!r}; choose from {', '.join(available_backends())}")


def options_class(name: str) -> type | None:
    """The options dataclass of backend ``name``: a built-in's (:data:`vdr.retrieve.options.BUILTIN_OPTIONS`,
    read without importing the backend), else the factory's ``Options`` attribute, else ``None``
    (options pass through unchecked).

    Raises:
        InputError, BackendUnavailable: see :func:`backend_factory`.
    """
    from .options import BUILTIN_OPTIONS

    if name in BUILTIN_OPTIONS:
        return BUILTIN_OPTIONS[name]
    return getattr(backend_factory(name), "Options", None)


def check_backend_options(name: str, options: Mapping[str, Any] | Any = None, *, strings: bool = False) -> Any:
    """Backend ``name``'s options, checked once (:func:`vdr.retrieve.options.check_options`).

    Raises:
        InputError: an unknown backend, an unknown key, a value of the wrong type.
    """
    from .options import check_options

    return check_options(options_class(name), options, backend=name, strings=strings)


def create_backend(name: str, options: Mapping[str, Any] | Any = None, *, factory: str | None = None, **context: Any) -> Backend:
    """THE construction path of every backend, built-in or registered (``evaluate``, ``compare``,
    ``serve``, the rewards and the MTEB engine all build through it).

    Args:
        name: the backend's name in results.
        options: its options (a mapping, or an instance of its options dataclass).
        factory: the registry name of the factory (default ``name``; e.g. ``"run"`` for a run file
            named ``anserini_bm25``, ``"mteb"`` for the multimodal backend run through MTEB).
        **context: the other :class:`BuildContext` fields (``cache_dir``, ``corpus_dir``, ``device``,
            ``progress``, ``built``).

    Raises:
        InputError: an unknown backend or a bad option (named once, here); what the factory raises.
        BackendUnavailable: the backend cannot run (no model, a missing optional dependency).
    """
    key = factory or name
    checked = check_backend_options(key, options)
    return backend_factory(key)(BuildContext(name=name, options=checked, **context))


# --------------------------------------------------------------------------------------------- cache


def fingerprint(*parts: Any) -> str:
    """sha256 hex of ``parts`` as canonical JSON (sorted keys, no whitespace).

    Raises:
        TypeError: a part is not JSON-able.
    """
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def content_digest(items) -> str:
    """sha256 hex of ``(id, text)`` pairs in order, streamed (no copy of a large corpus): the
    corpus-content part of a cache key."""
    h = hashlib.sha256()
    for key, text in items:
        h.update(key.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\0")
    return h.hexdigest()


def cache_path(cache_dir: str | Path | None, kind: str, key: str) -> Path | None:
    """``cache_dir/kind/key`` (``None`` when there is no cache)."""
    return None if cache_dir is None else Path(cache_dir) / kind / key


def write_cache_dir(final: Path, fill: Callable[[Path], None]) -> Path:
    """Create the cache entry ``final`` atomically: ``fill(tmp)`` writes the files into a fresh
    temporary folder beside it, which is then renamed to ``final``. When another process created
    ``final`` meanwhile, its entry is kept (same fingerprint, same content) and ours is dropped.

    Returns:
        ``final``.

    Raises:
        OSError: the cache folder cannot be written (the temporary folder is removed).
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{final.name[:16]}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        fill(tmp)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        try:
            os.replace(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or ``None`` when it is missing or unreadable (a broken cache
    entry counts as a miss)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------------- inputs


def check_corpus(corpus, function: str = "Backend.index") -> None:
    """Refuse a ``corpus`` argument that no backend can index, before any work.

    Args:
        corpus: a page :class:`~vdr.corpus.Corpus`, a passage corpus (anything with
            ``iter_texts``/``texts``) or a mapping ``{corpus_id: text}``.
        function: the public function it was given to, for the message.

    Raises:
        ArgumentTypeError: anything else (a folder path as ``str`` or ``Path``, a list), naming
            ``function``, the argument, what it takes and, for a path, how to load it.
    """
    if callable(getattr(corpus, "iter_texts", None)) or callable(getattr(corpus, "texts", None)) or isinstance(corpus, Mapping):
        return
    from ..errors import wrong_type

    hint = f"a corpus folder is loaded with vdr.load_corpus({str(corpus)!r})" if isinstance(corpus, (str, Path)) else ""
    raise wrong_type(function, "corpus", "a loaded corpus (vdr.Corpus, vdr.PassageCorpus) or a {corpus_id: text} dict",
                     corpus, hint)


def corpus_texts(corpus) -> dict[str, str]:
    """``{corpus_id: text}`` of a :class:`~vdr.corpus.Corpus` (``corpus.texts()``) or of a mapping
    ``{corpus_id: text}`` given directly (checked by the backend)."""
    texts = getattr(corpus, "texts", None)
    return texts() if callable(texts) else corpus


def iter_corpus_texts(corpus, batch_size: int = 8192) -> Iterator[tuple[list[str], list[str]]]:
    """Stream the corpus as ``(ids, texts)`` batches of at most ``batch_size`` items, in corpus order.

    Works for every corpus kind: an object with ``iter_texts(batch_size)`` (a page
    :class:`~vdr.corpus.Corpus` or a passage corpus, which never holds all passages in memory) or a
    mapping ``{corpus_id: text}`` given directly (ids and texts are checked by the backend).
    """
    check_corpus(corpus)
    it = getattr(corpus, "iter_texts", None)
    if callable(it):
        yield from it(batch_size)
        return
    ids = list(corpus)
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        yield chunk, [corpus[i] for i in chunk]


def query_texts(queries) -> tuple[dict[str, str], str]:
    """``({query_id: text}, variant name)`` of a :class:`~vdr.types.QuerySet` or a plain mapping
    ``{query_id: text}`` (variant name ``"original"``)."""
    if isinstance(queries, QuerySet):
        return queries.texts(), queries.name
    return queries, "original"


def search_inputs(queries, depth) -> tuple[dict[str, str], str, int]:
    """The checked inputs of a text backend's ``search``: ``({query_id: text}, variant name,
    depth)`` (non-empty texts; see :func:`query_texts`).

    Raises:
        InputError: no queries, a bad id, a non-str, empty or whitespace-only text, a bad ``depth``.
    """
    from ._common import check_depth, check_texts

    texts, variant = query_texts(queries)
    return check_texts(texts, "query", allow_empty=False), variant, check_depth(depth)


def new_report() -> dict:
    """A fresh :attr:`Backend.report`: no forward passes, no cache, empty index and searches."""
    return {"page_forward_passes": 0, "cache": {"hit": None, "path": None}, "index": {}, "searches": {}}
