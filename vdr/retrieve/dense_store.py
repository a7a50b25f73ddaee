"""On-disk float16 passage-vector store and exact inner-product search over it.

The store (one folder, written once, read memory-mapped)::

    vectors.npy     float16 (n_rows, dim): one row per encoded window (one per passage without
                    windows), passages back to back in corpus order; a plain .npy (no pickle)
    offsets.npy     int64 (n_passages + 1,): rows of passage i are offsets[i]:offsets[i + 1]
    ids.json        the n_passages corpus ids, in row order
    vdr-store.json  format, shape, dtype and whatever the writer records (settings, counts)

:class:`VectorStoreWriter` fills it streaming (a batch of passages at a time, never the whole
collection in memory): ``vectors.npy`` is written with a fixed-size header that is completed when
the last row is in. :class:`ExactSearcher` answers a batch of queries with the exact top ``depth``
passages by inner product, scoring a passage by its BEST row (MaxP when rows are windows;
Dai & Callan 2019, SIGIR). Rows are read in float32 chunks of ``chunk_rows`` (memory stays
bounded: ``chunk_rows x dim x 4`` bytes plus the chunk's scores), searched by FAISS
``IndexFlatIP`` (exact; faiss-gpu when a GPU is available to FAISS) or, when ``faiss`` is not
importable, by a NumPy matrix product. The candidates of every chunk are then re-scored in float64
from the stored rows, so the final scores do not depend on the search engine or on BLAS'
summation order: both engines return identical runs up to exact ties at the depth cut.

FAISS pads results with id ``-1`` and score ``-3.4e38`` when fewer than ``k`` rows exist; such
entries are dropped, never mapped to a passage (``vectors[-1]`` would be the LAST passage).
Non-finite vectors are refused when written (an :class:`~vdr.errors.InputError` naming the passage).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import InputError

__all__ = ["VectorStoreWriter", "VectorStore", "ExactSearcher", "faiss_info", "check_finite"]

STORE_FORMAT = 1
_VECTORS, _OFFSETS, _IDS, _META = "vectors.npy", "offsets.npy", "ids.json", "vdr-store.json"
_HEADER_BYTES = 128  # fixed .npy header size (magic + version + length + padded dict)


def _npy_header(shape: tuple[int, int]) -> bytes:
    """A version 1.0 ``.npy`` header of exactly :data:`_HEADER_BYTES` bytes for little-endian float16 ``shape``."""
    d = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % shape
    body_len = _HEADER_BYTES - 10
    body = d + " " * (body_len - 1 - len(d)) + "\n"
    if len(body) != body_len:  # pragma: no cover - shapes beyond 10^40 rows
        raise ValueError("shape too large for the fixed .npy header")
    return b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + body.encode("latin1")


def check_finite(vectors: np.ndarray, ids, what: str) -> None:
    """Raise when a row of ``vectors`` (``(n, dim)``, any float dtype) holds NaN or inf.

    Args:
        ids: the id of each row's passage or query (same length as ``vectors``).
        what: ``"passage"`` or ``"query"`` (named in the message).

    Raises:
        InputError: naming the first offending id and the number of such rows.
    """
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        idx = np.nonzero(bad)[0]
        first = ids[int(idx[0])]
        raise InputError(
            f"the semantic model produced a non-finite (NaN or inf) vector for {what} {first!r}"
            f" ({len(idx)} {what} vector(s) affected); such a vector would silently never be retrieved",
            id=first,
        )


class VectorStoreWriter:
    """Write a vector store streaming into ``folder`` (which must exist and be empty).

    Args:
        folder: the store folder.
        dim: vector dimension.

    Use :meth:`add` for each batch, then :meth:`close` with the metadata to record.
    """

    def __init__(self, folder: str | Path, dim: int) -> None:
        self.folder = Path(folder)
        self.dim = int(dim)
        self._fh = open(self.folder / _VECTORS, "wb")
        self._fh.write(b"\0" * _HEADER_BYTES)
        self._rows = 0
        self._counts: list[np.ndarray] = []
        self.ids: list[str] = []

    def add(self, ids: list[str], vectors: np.ndarray, rows_per_id: np.ndarray) -> None:
        """Append the rows of passages ``ids``: ``vectors`` float ``(sum(rows_per_id), dim)``, the
        rows of ``ids[i]`` being the ``rows_per_id[i]`` (>= 1) consecutive rows after those of ``ids[i-1]``.

        Raises:
            InputError: a non-finite vector (before or after the cast to float16), naming the passage.
        """
        counts = np.asarray(rows_per_id, dtype=np.int64)
        if vectors.shape != (int(counts.sum()), self.dim) or (counts < 1).any():
            raise ValueError(f"vectors {vectors.shape} do not match {len(ids)} passages with {int(counts.sum())} rows of dim {self.dim}")
        owner = np.repeat(np.arange(len(ids)), counts)
        check_finite(vectors, [ids[i] for i in owner], "passage")
        half = np.ascontiguousarray(vectors, dtype="<f2")
        check_finite(half, [ids[i] for i in owner], "passage")  # float16 overflow (|x| > 65504)
        self._fh.write(half.tobytes())
        self._rows += half.shape[0]
        self._counts.append(counts)
        self.ids.extend(ids)

    def close(self, meta: dict) -> None:
        """Complete the header, write offsets, ids and ``vdr-store.json`` (``meta`` plus shape), fsync."""
        self._fh.seek(0)
        self._fh.write(_npy_header((self._rows, self.dim)))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        counts = np.concatenate(self._counts) if self._counts else np.zeros(0, dtype=np.int64)
        np.save(self.folder / _OFFSETS, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), allow_pickle=False)
        (self.folder / _IDS).write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")
        doc = dict(meta, format=STORE_FORMAT, dtype="float16", num_rows=self._rows, num_passages=len(self.ids), dim=self.dim)
        (self.folder / _META).write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")

    def abort(self) -> None:
        """Close the file without completing the store (the caller removes the folder)."""
        if not self._fh.closed:
            self._fh.close()


class VectorStore:
    """A store opened read-only: ``vectors`` float16 memory map ``(n_rows, dim)``, ``offsets`` int64
    ``(n_passages + 1,)``, ``ids`` (list of str), ``meta`` (dict)."""

    def __init__(self, folder: Path, vectors: np.ndarray, offsets: np.ndarray, ids: list[str], meta: dict) -> None:
        self.folder, self.vectors, self.offsets, self.ids, self.meta = folder, vectors, offsets, ids, meta

    @classmethod
    def open(cls, folder: str | Path) -> "VectorStore | None":
        """The store in ``folder``, or ``None`` (a cache miss) when it is missing or damaged.

        Damaged: a file missing, truncated or not what it should be (not a plain float16 / int64
        ``.npy``, JSON that does not parse, is not UTF-8 or not of the right type, ids that are not
        strings), or files that disagree (shapes, offsets, counts, another store format). Such an
        entry is removed (only when it holds nothing but the store's own files) so that the
        caller's rebuild can take its place; no error is raised for it.
        """
        folder = Path(folder)
        if not folder.is_dir():
            return None
        try:
            store = cls._read(folder)
        except (OSError, ValueError, EOFError):  # numpy/json on a truncated or garbage file
            store = None
        if store is None:
            _discard(folder)
        return store

    @classmethod
    def _read(cls, folder: Path) -> "VectorStore | None":
        """The store, ``None`` when its files disagree; raises OSError/ValueError/EOFError on unreadable files."""
        meta = json.loads((folder / _META).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != STORE_FORMAT:
            return None
        vectors = np.load(folder / _VECTORS, mmap_mode="r", allow_pickle=False)
        offsets = np.load(folder / _OFFSETS, allow_pickle=False)
        ids = json.loads((folder / _IDS).read_text(encoding="utf-8"))
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or meta.get("num_passages") != len(ids):
            return None
        ok = (vectors.dtype == np.float16 and vectors.ndim == 2 and vectors.shape == (meta.get("num_rows"), meta.get("dim"))
              and offsets.dtype == np.int64 and offsets.shape == (len(ids) + 1,) and int(offsets[0]) == 0
              and int(offsets[-1]) == vectors.shape[0] and bool((np.diff(offsets) >= 1).all()))
        return cls(folder, vectors, offsets, ids, meta) if ok else None

    @property
    def row_passage(self) -> np.ndarray:
        """Passage index of each row, int64 ``(n_rows,)`` (computed once)."""
        if getattr(self, "_row_passage", None) is None:
            self._row_passage = np.repeat(np.arange(len(self.ids), dtype=np.int64), np.diff(self.offsets))
        return self._row_passage


def _discard(folder: Path) -> None:
    """Remove a damaged store entry: renamed aside first (the entry's path is free at once), then
    deleted; left alone when it holds anything but the store's files. Never raises."""
    import secrets
    import shutil

    try:
        if not {e.name for e in folder.iterdir()} <= {_VECTORS, _OFFSETS, _IDS, _META}:
            return
        aside = folder.parent / f".tmp-{folder.name[:16]}-damaged-{secrets.token_hex(4)}"
        os.replace(folder, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def faiss_info() -> tuple[object | None, str]:
    """``(faiss module or None, description)``: FAISS when importable, with GPU count."""
    try:
        import faiss
    except ImportError:
        return None, "numpy (faiss not installed)"
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    return faiss, f"faiss {faiss.__version__} IndexFlatIP ({'gpu' if gpus else 'cpu'})"


#: The scores :class:`ExactSearcher` computes: sentence-transformers' ``dot_score`` (cosine when the
#: rows and queries are unit vectors), ``euclidean_sim`` and ``manhattan_sim`` (minus the distance).
SEARCH_SIMILARITIES = ("dot", "euclidean", "manhattan")


def similarity_scores(Q: np.ndarray, P: np.ndarray, similarity: str) -> np.ndarray:
    """Scores of queries ``Q`` ``(nq, dim)`` against rows ``P`` ``(n, dim)``: ``(nq, n)`` in the
    inputs' dtype (float64 inputs for exact scores), as sentence-transformers' ``dot_score``,
    ``euclidean_sim`` (``-||q - p||_2``) and ``manhattan_sim`` (``-||q - p||_1``) define them.

    Raises:
        InputError: an unknown ``similarity``.
    """
    if similarity == "dot":
        return Q @ P.T
    if similarity == "euclidean":
        return -np.sqrt(np.maximum(((Q[:, None, :] - P[None, :, :]) ** 2).sum(axis=2), 0))
    if similarity == "manhattan":
        return -np.abs(Q[:, None, :] - P[None, :, :]).sum(axis=2)
    raise InputError(f"similarity must be one of {', '.join(SEARCH_SIMILARITIES)}, got {similarity!r}")


class ExactSearcher:
    """Exact search of a :class:`VectorStore`, a passage scored by its best row: maximum inner
    product, or the smallest Euclidean or Manhattan distance (:func:`similarity_scores`).

    Args:
        store: the store.
        engine: ``"auto"`` (FAISS when importable, else NumPy), ``"faiss"`` or ``"numpy"``;
            FAISS serves ``"dot"`` only (the distances are scored by NumPy).
        chunk_rows: rows per float32 chunk (memory: ``chunk_rows x dim x 4`` bytes per chunk).
        resident_bytes: when the whole store in float32 takes at most this, its chunks (and FAISS
            indexes) are kept between searches (repeated small searches, rewards); else every search
            streams the store from disk.
        similarity: ``"dot"`` (default), ``"euclidean"`` or ``"manhattan"``.

    Raises:
        InputError: an unknown engine or similarity, or ``"faiss"`` without faiss installed or
            with a distance.
    """

    def __init__(self, store: VectorStore, engine: str = "auto", chunk_rows: int = 65536, resident_bytes: int = 512 << 20,
                 similarity: str = "dot") -> None:
        if engine not in ("auto", "faiss", "numpy"):
            raise InputError(f"search engine must be 'auto', 'faiss' or 'numpy', got {engine!r}")
        if similarity not in SEARCH_SIMILARITIES:
            raise InputError(f"similarity must be one of {', '.join(SEARCH_SIMILARITIES)}, got {similarity!r}")
        if engine == "faiss" and similarity != "dot":
            raise InputError(f"search engine 'faiss' scores inner products only; similarity {similarity!r} needs search='numpy' or 'auto'")
        self.similarity = similarity
        faiss, desc = faiss_info() if engine != "numpy" and similarity == "dot" else (None, "numpy")
        if engine == "faiss" and faiss is None:
            raise InputError("search engine 'faiss' needs faiss-cpu (pip install faiss-cpu) or faiss-gpu")
        self.store, self._faiss, self.engine = store, faiss, desc
        self.chunk_rows = max(1, int(chunk_rows))
        n, dim = store.vectors.shape
        self._resident = n * dim * 4 <= resident_bytes
        self._chunks: dict[int, object] = {}
        self._gpu = None
        counts = np.diff(store.offsets)
        self.max_rows_per_passage = int(counts.max()) if len(counts) else 1
        self._order: np.ndarray | None = None

    def _chunk(self, start: int):
        """Rows ``start : start + chunk_rows`` as float32 (a FAISS index on the FAISS engine)."""
        if start in self._chunks:
            return self._chunks[start]
        block = np.ascontiguousarray(self.store.vectors[start : start + self.chunk_rows], dtype=np.float32)
        if self._faiss is not None:
            index = self._faiss.IndexFlatIP(block.shape[1])
            if getattr(self._faiss, "get_num_gpus", lambda: 0)() > 0 and hasattr(self._faiss, "StandardGpuResources"):
                if self._gpu is None:
                    self._gpu = self._faiss.StandardGpuResources()
                index = self._faiss.index_cpu_to_gpu(self._gpu, 0, index)
            index.add(block)
            item = index
        else:
            item = block
        if self._resident:
            self._chunks[start] = item
        return item

    def _candidates(self, start: int, Q: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidates of every query in one chunk: passage indices int64 ``(nq, c)`` (``-1`` = none)
        and their float32 scores (``-inf`` for none)."""
        item = self._chunk(start)
        rp = self.store.row_passage
        if self._faiss is not None:
            kk = min(item.ntotal, depth * self.max_rows_per_passage + 16)
            D, I = item.search(Q, kk)
            keep = (I >= 0) & np.isfinite(D) & (D > -1e38)  # FAISS sentinels: id -1, score -3.4e38
            return np.where(keep, rp[start + np.maximum(I, 0)], -1), np.where(keep, D, -np.inf).astype(np.float32)
        seg = rp[start : start + item.shape[0]]
        first = np.concatenate([[0], np.nonzero(np.diff(seg))[0] + 1])
        n_seg, windows = len(first), len(first) < item.shape[0]
        c = min(n_seg, depth + 16)
        P, V = np.empty((len(Q), c), dtype=np.int64), np.empty((len(Q), c), dtype=np.float32)
        width = item.shape[0] * (1 if self.similarity == "dot" else item.shape[1])  # a distance holds (block, rows, dim)
        step = max(1, (1 << 24) // width)  # queries per block: the score block stays <= 64 MiB
        for a in range(0, len(Q), step):
            S = similarity_scores(Q[a : a + step], item, self.similarity)  # (block, rows) float32
            best = np.maximum.reduceat(S, first, axis=1) if windows else S  # a passage's best row
            top = np.argpartition(best, n_seg - c, axis=1)[:, n_seg - c :] if c < n_seg else np.broadcast_to(np.arange(n_seg), best.shape)
            P[a : a + step], V[a : a + step] = seg[first][top], np.take_along_axis(best, top, axis=1)
        return P, V

    @staticmethod
    def _merge(acc: tuple | None, new: tuple[np.ndarray, np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray]:
        """Per query, the best ``width`` distinct passages of the candidates ``acc`` and ``new``
        (a passage met twice, as several windows or across chunks, keeps its best score), so memory
        stays ``(nq, width + c)`` whatever the number of chunks."""
        P, V = new if acc is None else (np.concatenate([acc[0], new[0]], axis=1), np.concatenate([acc[1], new[1]], axis=1))
        order = np.lexsort((-V, P), axis=-1)  # by passage, best score first
        P, V = np.take_along_axis(P, order, axis=1), np.take_along_axis(V, order, axis=1)
        dup = np.zeros(P.shape, dtype=bool)
        dup[:, 1:] = P[:, 1:] == P[:, :-1]
        P, V = np.where(dup, -1, P), np.where(dup, -np.inf, V).astype(np.float32)
        if P.shape[1] <= width:
            return P, V
        top = np.argpartition(-V, width - 1, axis=1)[:, :width]
        return np.take_along_axis(P, top, axis=1), np.take_along_axis(V, top, axis=1)

    def _rescore(self, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Best-row score of passages ``p`` with query ``q``, float64 (deterministic)."""
        off = self.store.offsets
        starts, ends = off[p], off[p + 1]
        lens = ends - starts
        rows = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        v, q64 = np.asarray(self.store.vectors[rows], dtype=np.float64), q.astype(np.float64)
        if self.similarity == "dot":
            s = (v * q64).sum(axis=1)
        elif self.similarity == "euclidean":
            s = -np.sqrt(((v - q64) ** 2).sum(axis=1))
        else:
            s = -np.abs(v - q64).sum(axis=1)
        return np.maximum.reduceat(s, np.concatenate([[0], np.cumsum(lens)[:-1]]))

    def search(self, Q: np.ndarray, depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The ``depth`` best passages of each query.

        Args:
            Q: float32 ``(nq, dim)`` query vectors (finite).
            depth: passages per query (>= 1); fewer when the store holds fewer.

        Returns:
            per query ``(passage indices int64, scores float64)``, best first; ties broken by
            corpus id descending (trec_eval order). Never a padding id or score.
        """
        Q = np.ascontiguousarray(Q, dtype=np.float32)
        n = self.store.vectors.shape[0]
        acc = None
        for start in range(0, n, self.chunk_rows):
            acc = self._merge(acc, self._candidates(start, Q, depth), depth + 16)
        if self._order is None:
            from ._common import id_order

            self._order = id_order(self.store.ids)
        cand = acc[0] if acc is not None else np.full((len(Q), 0), -1, dtype=np.int64)
        out = []
        for j in range(len(Q)):
            u = np.unique(cand[j][cand[j] >= 0])
            if not len(u):
                out.append((u, np.zeros(0)))
                continue
            s = self._rescore(u, Q[j])
            sel = np.lexsort((-self._order[u], -s))[:depth]
            out.append((u[sel], s[sel]))
        return out
