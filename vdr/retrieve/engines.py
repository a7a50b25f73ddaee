"""Engine adapters for served late-interaction retrieval (issue 36, "served vs exact").

Each engine indexes page multi-vectors (ColPali-family token embeddings, float32
``(n_tokens, dim)`` per page) in a third-party retrieval engine and returns the engine's own
top-k per query, so that :mod:`vdr.retrieve.served` can compare what a served system returns
with vdr's exact MaxSim (``score(q, p) = sum_i max_j <q_i, p_j>``).

* ``qdrant`` (:class:`QdrantEngine`): qdrant-client, in-process local mode by default, or a Qdrant
  server (``url``) with the same request code; a named multivector with the ``MAX_SIM`` comparator,
  optionally behind a dense prefetch on the pages' mean vectors.
* ``lancedb`` (:class:`LanceDBEngine`): an embedded LanceDB table with a multivector column; flat
  (exact) search by default, LanceDB's own ANN index on request.
* ``plaid`` (:class:`PlaidEngine`): fast-plaid's PLAID index (centroids + residual compression).

Build one with :func:`make_engine`; parameters may be given as strings (``"100"``, ``"true"``).
The libraries are imported when an engine is made, so this module imports without them; a missing
library raises :class:`~vdr.retrieve.base.BackendUnavailable` naming the pip command.

Nothing is pickled: indexes live in the engine's own formats, in ``folder`` or a temporary folder.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.metadata
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import InputError
from .base import BackendUnavailable

__all__ = ["ENGINES", "Engine", "make_engine", "QdrantEngine", "LanceDBEngine", "PlaidEngine",
           "EngineParam", "PIP_SERVED", "PIP_PLAID"]

#: what installs the qdrant and lancedb engines
PIP_SERVED = "pip install 'vdr[served]'"
#: fast-plaid's wheels pin torch exactly (``torch==2.9.0`` for the ``.290`` build), hence ``--no-deps``
PIP_PLAID = ("pip install 'usearch>=2.21' 'joblib>=1.5.1' && "
             "pip install --no-deps fast-plaid==1.7.0.290 fastkmeans==0.5.0")


@runtime_checkable
class Engine(Protocol):
    """What every engine adapter provides.

    Attributes:
        kind: the engine's name in :data:`ENGINES` (``"qdrant"``, ``"lancedb"``, ``"plaid"``).
        config: JSON-able: library and version, every parameter that changes results, where the
            index lives (``"embedded"`` or a URL without credentials), how scores are made, sources.
    """

    kind: str
    config: dict

    def build(self, ids: list[str], vectors: Callable[[str], np.ndarray], dim: int,
              folder: Path | None) -> None:
        """Index the pages ``ids`` in this order; ``vectors(page_id)`` is float32 ``(n_tokens, dim)``."""

    def search(self, queries: list[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """Per query (float32 ``(n_tokens_i, dim)``) up to ``k`` ``(page_id, score)``, best first."""

    def bytes_per_page(self) -> float | None:
        """Index size divided by the number of pages, or ``None`` when not measurable."""

    def close(self) -> None:
        """Release the client and remove a temporary folder."""


# --------------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class EngineParam:
    """One engine parameter.

    Attributes:
        default: the value when not given (``None``: the library's own default / not used).
        type: ``int``, ``float``, ``bool`` or ``str``; strings given are converted to it.
        help: one line for the docs and error messages.
        choices: the allowed values, when restricted.
        secret: never written to ``config`` (an API key).
    """

    default: Any
    type: type
    help: str
    choices: tuple = ()
    secret: bool = False


_TYPE_NAMES = {int: "an integer", float: "a number", bool: "a boolean (true/false)", str: "a string"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(kind: str, name: str, spec: EngineParam, value: Any) -> Any:
    """``value`` as ``spec.type`` (strings parsed); ``None``/``"none"`` where the default is ``None``.

    Raises:
        InputError: a value that is not of the type or not among the choices, naming both.
    """
    where = f"{kind} engine parameter {name}={value!r}"
    if value is None or (spec.default is None and isinstance(value, str) and value.lower() in ("none", "")):
        if spec.default is None:
            return None
        raise InputError(f"{where}: takes {_TYPE_NAMES[spec.type]}, not None")
    try:
        if spec.type is bool:
            if isinstance(value, bool):
                out = value
            elif str(value).strip().lower() in _TRUE | _FALSE:
                out = str(value).strip().lower() in _TRUE
            else:
                raise ValueError(value)
        elif spec.type is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            out = int(str(value).strip()) if isinstance(value, str) else int(value)
        elif spec.type is float:
            out = float(value)
        else:
            out = str(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: takes {_TYPE_NAMES[spec.type]}") from None
    if spec.choices and out not in spec.choices:
        raise InputError(f"{where}: takes one of {', '.join(map(str, spec.choices))}")
    return out


def _parse_params(kind: str, specs: Mapping[str, EngineParam], params: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of ``specs``, from ``params`` (converted) or its default.

    Raises:
        InputError: an unknown parameter (naming the allowed ones) or a bad value.
    """
    unknown = sorted(set(params) - set(specs))
    if unknown:
        raise InputError(f"unknown {kind} engine parameter(s) {', '.join(unknown)}; "
                         f"{kind} takes {', '.join(sorted(specs))}")
    return {name: _coerce(kind, name, spec, params[name]) if name in params else spec.default
            for name, spec in specs.items()}


def _require(module: str, kind: str, pip: str) -> Any:
    """Import ``module`` or raise :class:`BackendUnavailable` naming ``pip``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise BackendUnavailable(f"the {kind} engine needs the Python package {module!r} ({e}); "
                                 f"install it with: {pip}") from None


def _version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _public_url(url: str) -> str:
    """``url`` without user info, query string and fragment (where API keys hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _folder_bytes(path: Path) -> int:
    """Total size in bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _as_matrix(x: Any, dim: int, what: str) -> np.ndarray:
    """``x`` as a C-contiguous float32 ``(n, dim)`` array with n >= 1.

    Raises:
        InputError: another shape, naming ``what``.
    """
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if a.ndim != 2 or a.shape[1] != dim or a.shape[0] == 0:
        raise InputError(f"{what}: expected a float32 (n_tokens, {dim}) array with n_tokens >= 1, "
                         f"got shape {tuple(a.shape)}")
    return a


def _unit_mean(m: np.ndarray) -> np.ndarray:
    """The L2-normalised mean of the rows of ``m`` (float32 ``(dim,)``; zero stays zero)."""
    v = m.mean(axis=0, dtype=np.float64)
    n = float(np.linalg.norm(v))
    return (v / n if n > 0 else v).astype(np.float32)


@contextlib.contextmanager
def _gc_frozen():
    """Run the block with the objects that exist now frozen (:func:`gc.freeze`), unless already frozen.

    fast-plaid calls :func:`gc.collect` about ten times per ``create``/``search``; in a process
    holding torch and an evaluation (~400,000 objects) each full collection took ~0.6 s, longer than
    the index build on small corpora. Freezing moves the existing objects out of those collections
    (they are not fast-plaid's garbage); what the block allocates is still collected.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _EngineBase:
    """Shared parameter handling, scratch folder and page bookkeeping of the engines."""

    kind = ""
    LIBRARY = ""      # the distribution whose version goes to config
    MODULE = ""       # the module imported at construction
    PIP = PIP_SERVED
    PARAMS: dict[str, EngineParam] = {}

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.params = _parse_params(self.kind, self.PARAMS, dict(params or {}))
        self._lib = _require(self.MODULE, self.kind, self.PIP)
        self.ids: list[str] = []
        self.dim = 0
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.folder: Path | None = None
        self.config = self._config()

    def _config(self) -> dict:
        """The JSON-able config: library, version and the non-secret parameters."""
        return {"engine": self.kind, "library": self.LIBRARY, "version": _version(self.LIBRARY),
                "params": {n: v for n, v in self.params.items() if not self.PARAMS[n].secret}}

    def _workdir(self, folder: Path | None) -> Path:
        """``folder`` (created) or a temporary folder removed at :meth:`close`."""
        if folder is None:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix=f"vdr-{self.kind}-")
            self.folder = Path(self._tmp.name)
        else:
            self.folder = Path(folder)
            self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def _check_ids(self, ids: list[str], dim: int) -> None:
        """Refuse no pages, duplicate ids and a non-positive ``dim``; remember both."""
        if not ids:
            raise InputError(f"{self.kind} engine: no pages to index")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))
            raise InputError(f"{self.kind} engine: duplicate page id {dup!r}", id=dup)
        if dim <= 0:
            raise InputError(f"{self.kind} engine: dim must be positive, got {dim}")
        self.ids, self.dim = list(ids), int(dim)

    def _cleanup(self) -> None:
        """Remove the temporary folder, if any."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


# ------------------------------------------------------------------------------------- qdrant
class QdrantEngine(_EngineBase):
    """Qdrant multivector (``MAX_SIM`` comparator) search through qdrant-client.

    Local in-process mode by default (``QdrantClient(location=":memory:")``), on disk with
    ``path``, or a Qdrant server with ``url`` (+ ``api_key``, else the ``QDRANT_API_KEY``
    environment variable; never written to ``config``): the requests are the same. The collection
    has a named multivector ``colpali`` (``VectorParams(size=dim, distance=DOT,
    multivector_config=MultiVectorConfig(comparator=MAX_SIM))``), point ids are the pages'
    positions, payload ``page_id``. With ``prefetch="mean"`` a second named vector ``mean`` (the
    L2-normalised mean of the page's tokens, dot product) preselects ``candidates`` points with the
    query's normalised mean, and the multivector rescores them: Qdrant's documented multi-stage
    pattern for ColPali/ColBERT
    (https://qdrant.tech/documentation/concepts/hybrid-queries/#multi-stage-queries,
    https://qdrant.tech/documentation/advanced-tutorials/pdf-retrieval-at-scale/).

    Args:
        params: see :attr:`PARAMS`; strings are converted.

    Raises:
        InputError: unknown parameters or values; ``url`` together with ``path``.
        BackendUnavailable: qdrant-client is not installed.
    """

    kind = "qdrant"
    LIBRARY = "qdrant-client"
    MODULE = "qdrant_client"
    PARAMS = {
        "url": EngineParam(None, str, "a Qdrant server (http://host:6333); default: in-process local mode"),
        "api_key": EngineParam(None, str, "the server's API key (else $QDRANT_API_KEY); never recorded",
                               secret=True),
        "path": EngineParam(None, str, "local mode on disk in this folder (default: in memory)"),
        "collection": EngineParam("vdr_colpali", str, "the collection (replaced at build)"),
        "prefetch": EngineParam("none", str, "none, or mean: dense prefetch on mean vectors, then MaxSim",
                                choices=("none", "mean")),
        "candidates": EngineParam(100, int, "prefetch limit (with prefetch=mean)"),
        "batch_size": EngineParam(64, int, "points per upsert and queries per query_batch_points"),
    }

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        p = self.params
        if p["url"] and p["path"]:
            raise InputError(f"qdrant engine: give url={p['url']!r} or path={p['path']!r}, not both")
        for name in ("candidates", "batch_size"):
            if p[name] < 1:
                raise InputError(f"qdrant engine parameter {name}={p[name]}: must be >= 1")
        self.client: Any = None

    def _config(self) -> dict:
        p = self.params
        config = super()._config()
        config["params"].pop("url", None)
        if p["prefetch"] == "none":
            config["params"].pop("candidates")
        config["where"] = (_public_url(p["url"]) if p["url"]
                           else "embedded (path)" if p["path"] else "embedded (:memory:)")
        config["score"] = ("Qdrant's score: MaxSim of dot products (sum over query tokens of the best page token)"
                           + ("; only the prefetch candidates (mean-vector dot product) are rescored"
                              if p["prefetch"] == "mean" else ""))
        config["source"] = ["https://qdrant.tech/documentation/concepts/vectors/#multivectors",
                            "https://qdrant.tech/documentation/concepts/hybrid-queries/#multi-stage-queries"]
        return config

    def _connect(self) -> Any:
        """A ``QdrantClient`` for the configured location."""
        p = self.params
        if p["url"]:
            key = p["api_key"] or os.environ.get("QDRANT_API_KEY") or None
            return self._lib.QdrantClient(url=p["url"], api_key=key)
        if p["path"]:
            return self._lib.QdrantClient(path=p["path"])
        return self._lib.QdrantClient(location=":memory:")

    def build(self, ids: list[str], vectors: Callable[[str], np.ndarray], dim: int,
              folder: Path | None) -> None:
        """(Re)create the collection and upsert every page, ``batch_size`` points at a time.

        Args:
            ids: page ids; point id = position in ``ids``.
            vectors: ``page_id -> float32 (n_tokens, dim)``.
            dim: the embedding dimension.
            folder: unused (the index is in memory, in ``path`` or on the server).
        """
        from qdrant_client import models

        self._check_ids(ids, dim)
        if self.client is None:
            self.client = self._connect()
        name, mean = self.params["collection"], self.params["prefetch"] == "mean"
        if self.client.collection_exists(name):
            self.client.delete_collection(name)
        config = {"colpali": models.VectorParams(
            size=dim, distance=models.Distance.DOT,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM))}
        if mean:
            config["mean"] = models.VectorParams(size=dim, distance=models.Distance.DOT)
        self.client.create_collection(name, vectors_config=config)
        batch: list = []
        for pos, pid in enumerate(self.ids):
            m = _as_matrix(vectors(pid), dim, f"page {pid!r}")
            vec = {"colpali": m.tolist()}
            if mean:
                vec["mean"] = _unit_mean(m).tolist()
            batch.append(models.PointStruct(id=pos, vector=vec, payload={"page_id": pid}))
            if len(batch) >= self.params["batch_size"]:
                self.client.upsert(name, points=batch, wait=True)
                batch = []
        if batch:
            self.client.upsert(name, points=batch, wait=True)

    def request(self, query: np.ndarray, k: int) -> Any:
        """The ``QueryRequest`` this engine sends for one query (``query_points`` takes the same fields).

        Args:
            query: float32 ``(n_tokens, dim)``.
            k: the number of points to return.
        """
        from qdrant_client import models

        q = _as_matrix(query, self.dim, "query")
        prefetch = None
        if self.params["prefetch"] == "mean":
            prefetch = models.Prefetch(query=_unit_mean(q).tolist(), using="mean",
                                       limit=self.params["candidates"])
        return models.QueryRequest(query=q.tolist(), using="colpali", limit=k, prefetch=prefetch,
                                   with_payload=["page_id"])

    def search(self, queries: list[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """Top ``k`` pages per query through ``query_batch_points`` (``batch_size`` queries a call).

        Args:
            queries: float32 ``(n_tokens_i, dim)`` each.
            k: the number of pages per query.

        Returns:
            per query ``[(page_id, score), ...]`` in the order Qdrant returned them (best first).
        """
        if self.client is None:
            raise InputError("qdrant engine: search before build")
        out: list[list[tuple[str, float]]] = []
        size = self.params["batch_size"]
        for start in range(0, len(queries), size):
            requests = [self.request(q, k) for q in queries[start:start + size]]
            for response in self.client.query_batch_points(self.params["collection"], requests=requests):
                out.append([(str(p.payload["page_id"]), float(p.score)) for p in response.points])
        return out

    def bytes_per_page(self) -> float | None:
        """On-disk size / pages in ``path`` mode; ``None`` in memory and on a server."""
        if not self.params["path"] or not self.ids:
            return None
        return _folder_bytes(Path(self.params["path"])) / len(self.ids)

    def close(self) -> None:
        """Close the client (the collection stays on a server and in ``path``)."""
        if self.client is not None:
            self.client.close()
            self.client = None
        self._cleanup()


# ------------------------------------------------------------------------------------ lancedb
_LANCE_INDEX_TYPES = {"IVF_PQ": "IvfPq", "IVF_FLAT": "IvfFlat", "IVF_SQ": "IvfSq", "IVF_RQ": "IvfRq",
                      "IVF_HNSW_SQ": "HnswSq", "IVF_HNSW_PQ": "HnswPq", "IVF_HNSW_FLAT": "HnswFlat"}


class LanceDBEngine(_EngineBase):
    """LanceDB multivector search (embedded).

    A table with ``id`` (string) and ``vector`` (``list<fixed_size_list<float32, dim>>``, LanceDB's
    multivector type), searched with ``table.search(q).distance_type(metric).limit(k)``. LanceDB
    documents multivector search with the cosine metric only
    (https://lancedb.github.io/documentation/guides/search/multivector-search.html); its distance
    is ``sum_i (1 - max_j cos(q_i, p_j))`` (measured), so ``score = -_distance`` = MaxSim over
    cosines minus the number of query tokens: the ranking of exact MaxSim on L2-normalised vectors.
    Flat (exhaustive) search by default; ``index=true`` builds LanceDB's ANN index
    (``index_type``, default IVF_PQ, the one the multivector guide builds) on the multivector
    column; its training is not seeded (LanceDB exposes no seed). ``uri`` connects elsewhere
    (another folder, ``s3://...``, ``db://...`` for LanceDB Cloud with ``api_key`` or
    ``$LANCEDB_API_KEY``; untested here).

    Args:
        params: see :attr:`PARAMS`; strings are converted.

    Raises:
        InputError: unknown parameters or values.
        BackendUnavailable: lancedb is not installed.
    """

    kind = "lancedb"
    LIBRARY = "lancedb"
    MODULE = "lancedb"
    PARAMS = {
        "uri": EngineParam(None, str, "a LanceDB URI (default: the build folder, embedded)"),
        "api_key": EngineParam(None, str, "LanceDB Cloud key (else $LANCEDB_API_KEY); never recorded",
                               secret=True),
        "table": EngineParam("pages", str, "the table (replaced at build)"),
        "metric": EngineParam("cosine", str, "distance type; LanceDB documents cosine for multivectors",
                              choices=("cosine", "dot")),
        "index": EngineParam(False, bool, "build LanceDB's ANN index (default: flat, exact search)"),
        "index_type": EngineParam("IVF_PQ", str, "ANN index type (with index=true)",
                                  choices=tuple(_LANCE_INDEX_TYPES)),
        "num_partitions": EngineParam(None, int, "IVF partitions (default: LanceDB's)"),
        "num_sub_vectors": EngineParam(None, int, "PQ sub-vectors (default: LanceDB's)"),
        "nprobes": EngineParam(None, int, "partitions probed per query (default: LanceDB's)"),
        "refine_factor": EngineParam(None, int, "re-rank refine_factor * k with full vectors (default: none)"),
        "batch_size": EngineParam(256, int, "pages per Arrow record batch at build"),
    }

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.db: Any = None
        self.table: Any = None

    def _config(self) -> dict:
        p = self.params
        config = super()._config()
        config["params"].pop("uri", None)
        if not p["index"]:
            for name in ("index_type", "num_partitions", "num_sub_vectors", "nprobes", "refine_factor"):
                config["params"].pop(name)
        config["where"] = _public_url(p["uri"]) if p["uri"] else "embedded"
        config["score"] = ("-_distance; LanceDB's multivector distance is sum over query tokens of "
                           "(1 - best cosine), so score = MaxSim(cosine) - n_query_tokens")
        config["search"] = "ann index" if p["index"] else "flat (exhaustive)"
        config["source"] = ["https://lancedb.github.io/documentation/guides/search/multivector-search.html"]
        return config

    def _batches(self, vectors: Callable[[str], np.ndarray]) -> Any:
        """The pages as a ``pyarrow.RecordBatchReader`` of ``batch_size`` rows per batch."""
        import pyarrow as pa

        dim, size = self.dim, self.params["batch_size"]
        schema = pa.schema([pa.field("id", pa.string()),
                            pa.field("vector", pa.list_(pa.list_(pa.float32(), dim)))])

        def gen():
            for start in range(0, len(self.ids), size):
                chunk = self.ids[start:start + size]
                mats = [_as_matrix(vectors(pid), dim, f"page {pid!r}") for pid in chunk]
                offsets = np.zeros(len(mats) + 1, dtype=np.int32)
                np.cumsum([len(m) for m in mats], out=offsets[1:])
                tokens = pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(mats).reshape(-1)), dim)
                column = pa.ListArray.from_arrays(pa.array(offsets), tokens, type=schema.field("vector").type)
                yield pa.record_batch([pa.array(chunk, pa.string()), column], schema=schema)

        return pa.RecordBatchReader.from_batches(schema, gen())

    def build(self, ids: list[str], vectors: Callable[[str], np.ndarray], dim: int,
              folder: Path | None) -> None:
        """Create the table (replacing one of the same name) and, with ``index``, its ANN index.

        Args:
            ids: page ids (rows in this order).
            vectors: ``page_id -> float32 (n_tokens, dim)``.
            dim: the embedding dimension.
            folder: where the embedded database lives (default: a temporary folder); ignored with ``uri``.

        Raises:
            InputError: LanceDB refuses to train the index on these rows (the message names the count).
        """
        self._check_ids(ids, dim)
        p = self.params
        if p["uri"]:
            key = p["api_key"] or os.environ.get("LANCEDB_API_KEY") or None
            self.db = self._lib.connect(p["uri"], **({"api_key": key} if key else {}))
        else:
            self.db = self._lib.connect(str(self._workdir(folder) / "lancedb"))
        self.db.drop_table(p["table"], ignore_missing=True)
        self.table = self.db.create_table(p["table"], data=self._batches(vectors))
        if p["index"]:
            self._create_index()

    def _create_index(self) -> None:
        """Train LanceDB's ANN index on the multivector column."""
        from lancedb import index as lance_index

        p = self.params
        options = {"distance_type": p["metric"]}
        for name in ("num_partitions", "num_sub_vectors"):
            if p[name] is not None:
                options[name] = p[name]
        cls = getattr(lance_index, _LANCE_INDEX_TYPES[p["index_type"]])
        if "num_sub_vectors" in options and "num_sub_vectors" not in cls.__dataclass_fields__:
            raise InputError(f"lancedb engine: num_sub_vectors={p['num_sub_vectors']} does not apply "
                             f"to index_type={p['index_type']}")
        try:
            self.table.create_index("vector", config=cls(**options))
        except (RuntimeError, ValueError, OSError) as e:
            raise InputError(f"lancedb engine: LanceDB could not build a {p['index_type']} index on "
                             f"{len(self.ids)} pages ({e}); use index=false (flat search) or more "
                             "pages, fewer num_partitions") from None

    def query(self, query: np.ndarray, k: int) -> Any:
        """The LanceDB query builder this engine runs for one query (float32 ``(n_tokens, dim)``)."""
        p = self.params
        q = self.table.search(_as_matrix(query, self.dim, "query"), vector_column_name="vector")
        q = q.distance_type(p["metric"]).limit(k)
        if p["index"] and p["nprobes"] is not None:
            q = q.nprobes(p["nprobes"])
        if p["index"] and p["refine_factor"] is not None:
            q = q.refine_factor(p["refine_factor"])
        return q.select(["id", "_distance"])

    def search(self, queries: list[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """Top ``k`` pages per query, one LanceDB query each.

        Args:
            queries: float32 ``(n_tokens_i, dim)`` each.
            k: the number of pages per query.

        Returns:
            per query ``[(page_id, -_distance), ...]`` in LanceDB's order (best first).
        """
        if self.table is None:
            raise InputError("lancedb engine: search before build")
        out = []
        for q in queries:
            t = self.query(q, k).to_arrow()
            out.append([(str(i), -float(d)) for i, d in
                        zip(t.column("id").to_pylist(), t.column("_distance").to_pylist())])
        return out

    def bytes_per_page(self) -> float | None:
        """Size of the embedded database folder (table + index) / pages; ``None`` with ``uri``."""
        if self.params["uri"] or self.folder is None or not self.ids:
            return None
        return _folder_bytes(self.folder / "lancedb") / len(self.ids)

    def close(self) -> None:
        """Drop the handles and remove a temporary folder."""
        self.table = self.db = None
        self._cleanup()


# -------------------------------------------------------------------------------------- plaid
class PlaidEngine(_EngineBase):
    """PLAID (centroid interaction + residual compression) through fast-plaid, on the CPU by default.

    ``FastPlaid(index=folder/"plaid", device=device).create(documents_embeddings=[...])`` with
    fast-plaid's defaults (``nbits=4``, ``kmeans_niters=4``, ``max_points_per_centroid=256``,
    ``seed=42``: k-means is seeded, so an index is reproducible), then ``search(queries_embeddings=
    [...], top_k=k, n_ivf_probe=8, n_full_scores=4096)``; queries of different lengths go as a list
    (fast-plaid packs them; it trims trailing all-zero rows and searches in float16). Results are
    ``(position, score)``, mapped back to page ids; the score is PLAID's MaxSim over the
    decompressed (approximate) page vectors. Paper: Santhanam et al., "PLAID: An Efficient Engine
    for Late Interaction Retrieval", CIKM 2022 (https://arxiv.org/abs/2205.09707); library:
    https://github.com/lightonai/fast-plaid.

    Args:
        params: see :attr:`PARAMS`; strings are converted.

    Raises:
        InputError: unknown parameters or values.
        BackendUnavailable: fast-plaid is not installed (the message gives :data:`PIP_PLAID`).
    """

    kind = "plaid"
    LIBRARY = "fast-plaid"
    MODULE = "fast_plaid.search"
    PIP = PIP_PLAID
    PARAMS = {
        "nbits": EngineParam(4, int, "bits per residual dimension", choices=(1, 2, 4, 8)),
        "kmeans_niters": EngineParam(4, int, "k-means iterations for the centroids"),
        "max_points_per_centroid": EngineParam(256, int, "k-means sample cap per centroid"),
        "n_samples_kmeans": EngineParam(None, int, "documents sampled for k-means (default: fast-plaid's)"),
        "seed": EngineParam(42, int, "k-means and compression seed"),
        "n_ivf_probe": EngineParam(8, int, "centroids probed per query token"),
        "n_full_scores": EngineParam(4096, int, "candidates scored with full (decompressed) MaxSim"),
        "device": EngineParam("cpu", str, "torch device: cpu, cuda, cuda:0, ..."),
    }

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.index: Any = None

    def _config(self) -> dict:
        config = super()._config()
        config["where"] = "embedded"
        config["score"] = "fast-plaid's score: MaxSim over the compressed (centroid + residual) page vectors"
        config["source"] = ["https://arxiv.org/abs/2205.09707", "https://github.com/lightonai/fast-plaid"]
        return config

    def build(self, ids: list[str], vectors: Callable[[str], np.ndarray], dim: int,
              folder: Path | None) -> None:
        """Create the PLAID index in ``folder/plaid`` (default: a temporary folder).

        Args:
            ids: page ids; fast-plaid's document ids are the positions in ``ids``.
            vectors: ``page_id -> float32 (n_tokens, dim)``.
            dim: the embedding dimension.
            folder: where the index is written.
        """
        import torch

        self._check_ids(ids, dim)
        p = self.params
        path = self._workdir(folder) / "plaid"
        if path.exists():
            shutil.rmtree(path)
        docs = [torch.from_numpy(_as_matrix(vectors(pid), dim, f"page {pid!r}")) for pid in self.ids]
        with _gc_frozen():
            self.index = self._lib.FastPlaid(index=str(path), device=p["device"])
            self.index.create(documents_embeddings=docs, kmeans_niters=p["kmeans_niters"],
                              max_points_per_centroid=p["max_points_per_centroid"], nbits=p["nbits"],
                              n_samples_kmeans=p["n_samples_kmeans"], seed=p["seed"])

    def search(self, queries: list[np.ndarray], k: int) -> list[list[tuple[str, float]]]:
        """Top ``k`` pages per query: one ``FastPlaid.search`` call over all queries.

        Args:
            queries: float32 ``(n_tokens_i, dim)`` each.
            k: the number of pages per query.

        Returns:
            per query ``[(page_id, score), ...]`` in fast-plaid's order (best first).
        """
        import torch

        if self.index is None:
            raise InputError("plaid engine: search before build")
        if not queries:
            return []
        p = self.params
        qs = [torch.from_numpy(_as_matrix(q, self.dim, "query")) for q in queries]
        with _gc_frozen():
            results = self.index.search(queries_embeddings=qs, top_k=k, n_ivf_probe=p["n_ivf_probe"],
                                        n_full_scores=p["n_full_scores"], show_progress=False)
        return [[(self.ids[int(pos)], float(score)) for pos, score in hits] for hits in results]

    def bytes_per_page(self) -> float | None:
        """Size of the index folder / pages."""
        if self.folder is None or not self.ids:
            return None
        return _folder_bytes(self.folder / "plaid") / len(self.ids)

    def close(self) -> None:
        """Release fast-plaid's index and remove a temporary folder."""
        if self.index is not None:
            with _gc_frozen():
                self.index.close()
            self.index = None
        self._cleanup()


#: engine kind -> its class
ENGINES: dict[str, type] = {"qdrant": QdrantEngine, "lancedb": LanceDBEngine, "plaid": PlaidEngine}


def make_engine(kind: str, params: Mapping[str, Any] | None = None) -> Engine:
    """The engine ``kind`` with ``params`` (values may be strings: ``"100"``, ``"true"``, ``"none"``).

    Args:
        kind: a key of :data:`ENGINES`.
        params: the engine's options (each class's ``PARAMS``).

    Returns:
        the engine, not yet built.

    Raises:
        InputError: an unknown kind or parameter (naming the allowed ones), or a bad value.
        BackendUnavailable: the engine's library is not installed (naming the pip command).
    """
    if kind not in ENGINES:
        raise InputError(f"unknown engine {kind!r}; engines: {', '.join(ENGINES)}")
    return ENGINES[kind](params or {})
