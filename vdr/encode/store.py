"""The embedding store: page multi-vectors on disk, fingerprinted, resumable, atomic, pickle-free.

Layout::

    STORE_DIR/
      <key[:16]>/                 one folder per (encoder fingerprint, stored dtype)
        store.json                format, key, encoder fingerprint and settings, dtype, dim
        journal.jsonl             one line per committed shard: {"shard", "pages": [[id, offset, length, hash]]}
                                  or {"remove": [ids]}; later lines override earlier ones
        shards/000001-<rand>.safetensors   one tensor "embeddings" (n_tokens, dim), pages back to back
        .lock                     held (flock) by the one writer
        journal.rank-<r>.jsonl    rank r's own journal while a distributed run writes (torchrun)
        shards/r<r>-000001-<rand>.safetensors   rank r's shards
        .lock.rank-<r>            held by rank r's writer

Commit protocol: a shard is written to a temporary name, fsynced and ``os.replace``-d into place
(and the folder fsynced) *before* its journal line is appended with one ``write`` and fsynced. A
kill -9 can therefore leave (a) a temporary file, (b) a complete shard that no journal line names,
or (c) a torn last journal line (no trailing newline or invalid JSON). Readers ignore all three;
the next writer deletes them and re-encodes those pages, so a resumed run ends with exactly the
vectors of an uninterrupted one. Temporary names never appear in the journal.

Several writers at once (``torchrun -m vdr embed``, see :mod:`vdr.distributed`): rank 0 first
opens the main writer (which cleans up and plans the work) and closes it; then each rank opens a
*rank writer* (``open_for_writing(..., rank=r)``) that takes only its own lock, names its shards
``r<r>-...`` and appends to its own ``journal.rank-<r>.jsonl`` with the same commit protocol; after
a barrier rank 0 opens the main writer again, which **merges** the rank journals: under each rank's
lock, the valid lines of ``journal.rank-<r>.jsonl`` (ranks in ascending order) are appended to
``journal.jsonl`` with one write and fsync, then the rank journal is deleted. The shards stay where
they are. Readers fold the rank journals in after the main one (same order), so a store is the same
before and after the merge, and a crash between the append and the delete only replays identical
lines. A rank killed mid-run leaves its committed shards in its journal; the next writer (distributed
or not) merges them and re-encodes only what is missing. With contiguous sharding the merged journal
lists pages in the order a single process writes them.

A different encoder *page* fingerprint (:attr:`vdr.encode.LateInteractionEncoder.page_fingerprint`:
checkpoint files and weights, resolution, compute dtype, ...) or stored dtype gets a different
folder (key), so vectors are never reused across models or page settings; the query template is not
part of the key (it does not change page vectors), so a new query prefix reuses every stored page.
A page whose content hash changed is re-encoded (its new journal line supersedes the old entry).

Key schemes: ``store.json`` records ``key_scheme`` (:data:`KEY_SCHEME`, 2). Folders written before
it (no ``key_scheme``) were keyed by a fingerprint that also covered the query template; no current
encoder computes their key, so they are never reused (the pages are encoded once more into a new
folder). :func:`legacy_folders` lists them; :func:`vdr.encode.embed` warns about them and names them
in its report so that they can be deleted; :meth:`EmbeddingStore.open` without a fingerprint skips
them when a current folder is there.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import struct
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError
from .settings import store_key as _settings_store_key

__all__ = ["EmbeddingStore", "store_key", "legacy_folders", "STORE_FORMAT", "KEY_SCHEME"]

STORE_FORMAT = 1
#: How key folders are keyed: 2 = the encoder's page fingerprint + stored dtype (the query template
#: is not part of it). Folders without ``key_scheme`` in ``store.json`` used scheme 1.
KEY_SCHEME = 2
META_FILE = "store.json"
JOURNAL_FILE = "journal.jsonl"
SHARDS_DIR = "shards"
TENSOR_NAME = "embeddings"
_ST_DTYPES = {}  # safetensors dtype name -> torch dtype, filled on first use


def _init_dtypes() -> None:
    import torch

    _ST_DTYPES.update({"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32})


LOCK_FILE = ".lock"
_RANK_JOURNAL = re.compile(r"^journal\.rank-(\d+)\.jsonl$")
_DTYPES = ("float16", "float32")


def store_key(encoder_fingerprint: str, dtype: str) -> str:
    """sha256 hex of the encoder's page fingerprint and the stored dtype: the store's folder key.

    Raises:
        StoreError: a dtype other than float16 / float32.
    """
    if dtype not in _DTYPES:
        raise StoreError(f"stored dtype must be one of {_DTYPES}, got {dtype!r}")
    return _settings_store_key(encoder_fingerprint, dtype)


def _is_legacy(meta: dict) -> bool:
    return meta.get("key_scheme") != KEY_SCHEME


def legacy_folders(store_dir: str | Path) -> list[Path]:
    """Key folders under ``store_dir`` written with an older key scheme (see the module docstring):
    their vectors are never reused by :func:`vdr.encode.embed`. Unreadable folders are skipped.

    Returns:
        The folders, sorted by name (empty when ``store_dir`` does not exist).
    """
    root = Path(store_dir)
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if (p / META_FILE).is_file():
            try:
                if _is_legacy(_load_meta(p)):
                    out.append(p)
            except StoreError:
                continue
    return out


@dataclass(frozen=True)
class _Entry:
    shard: str
    offset: int
    length: int
    hash: str


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _rank_journal_name(rank: int) -> str:
    return f"journal.rank-{int(rank)}.jsonl"


def _rank_journals(path: Path) -> list[tuple[int, Path]]:
    """``(rank, path)`` of every rank journal in a key folder, ranks ascending."""
    if not path.is_dir():
        return []
    out = []
    for p in path.iterdir():
        m = _RANK_JOURNAL.match(p.name)
        if m:
            out.append((int(m.group(1)), p))
    return sorted(out)


def _read_all_journals(path: Path) -> OrderedDict[str, _Entry]:
    """Entries of the main journal, then each rank journal folded in (ranks ascending)."""
    entries, _, _ = _read_journal(path / JOURNAL_FILE)
    for _, jp in _rank_journals(path):
        _read_journal(jp, entries)
    return entries


def _truncate_torn(jpath: Path) -> None:
    _, good, torn = _read_journal(jpath)
    if torn:
        with open(jpath, "r+b") as f:
            f.truncate(good)
            f.flush()
            os.fsync(f.fileno())


def _append_bytes(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _merge_rank_journals(path: Path) -> int:
    """Fold every ``journal.rank-<r>.jsonl`` into ``journal.jsonl`` (caller holds the main lock).

    For each rank (ascending), under that rank's lock: append the journal's valid lines (a torn tail
    is dropped; its shard becomes garbage) to the main journal in one write + fsync, then delete the
    rank journal. Returns the number of rank journals merged.

    Raises:
        StoreError: a rank writer still holds its lock.
    """
    merged = 0
    for r, jp in _rank_journals(path):
        fd = _lock(path, f"{LOCK_FILE}.rank-{r}", f"rank {r} of a distributed run is still writing this embedding store")
        try:
            _, good, _ = _read_journal(jp)
            data = jp.read_bytes()[:good]
            if data:
                _append_bytes(path / JOURNAL_FILE, data)
            jp.unlink()
            _fsync_dir(path)
            merged += 1
        finally:
            _unlock(fd)
    return merged


def _read_journal(path: Path, entries: OrderedDict[str, _Entry] | None = None) -> tuple[OrderedDict[str, _Entry], int, bool]:
    """Entries (folded into ``entries`` when given), the byte length of the valid prefix, and whether
    a torn tail was found."""
    if entries is None:
        entries = OrderedDict()
    if not path.is_file():
        return entries, 0, False
    data = path.read_bytes()
    good = 0
    torn = False
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            torn = True
            break
        line = data[pos:nl]
        try:
            rec = json.loads(line.decode("utf-8"))
            if not isinstance(rec, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            torn = True  # only the tail can be torn (append-only, one write per line)
            break
        if "remove" in rec:
            for pid in rec["remove"]:
                entries.pop(pid, None)
        else:
            shard = rec["shard"]
            for pid, off, n, h in rec["pages"]:
                entries[pid] = _Entry(shard, int(off), int(n), h)
        pos = nl + 1
        good = pos
    return entries, good, torn


class EmbeddingStore:
    """Page multi-vectors of one encoder configuration (one key folder of a store).

    Open one with :meth:`open` (read-only) or :meth:`open_for_writing` (used by :func:`vdr.embed`).

    Attributes:
        path: the key folder.
        key: sha256 hex of (encoder fingerprint, stored dtype).
        meta: the parsed ``store.json`` (``encoder`` holds the encoder's settings).
    """

    def __init__(self, path: Path, meta: dict, entries: OrderedDict[str, _Entry], *, writable: bool = False) -> None:
        self.path = path
        self.meta = meta
        self.key = meta["key"]
        self._entries = entries
        self._writable = writable
        self._handles: OrderedDict[str, object] = OrderedDict()
        self._pending: list[tuple[str, str, object]] = []  # (id, hash, tensor)
        self._pending_tokens = 0
        self._lock_fd: int | None = None
        self._seq = 0
        self.rank: int | None = None  # set on a rank writer
        self._journal_name = JOURNAL_FILE
        self._shard_prefix = ""

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, store_dir: str | Path, fingerprint: str | None = None) -> "EmbeddingStore":
        """Open a store for reading.

        Args:
            store_dir: a store folder (``vdr embed --store``) or one of its key folders.
            fingerprint: a prefix of the key (folder name) or of the encoder's page fingerprint;
                needed when the store holds vectors of several encoders/settings (folders of an older
                key scheme are left out when a current one is there).

        Raises:
            StoreError: no store there, several candidates and no (matching) ``fingerprint``, or an
                unknown format.
        """
        root = Path(store_dir)
        if (root / META_FILE).is_file():
            cand = [root]
        else:
            if not root.is_dir():
                raise StoreError(f"{root}: no embedding store here (run `vdr embed` first)")
            cand = sorted(p for p in root.iterdir() if (p / META_FILE).is_file())
        if fingerprint is not None:
            cand = [p for p in cand if p.name.startswith(fingerprint[:16]) or
                    _load_meta(p).get("encoder_fingerprint", "").startswith(fingerprint)]
        elif len(cand) > 1 and any(not _is_legacy(_load_meta(p)) for p in cand):
            cand = [p for p in cand if not _is_legacy(_load_meta(p))]  # older key scheme: see the module docstring
        if not cand:
            raise StoreError(f"{root}: no embedding store{'' if fingerprint is None else f' with fingerprint {fingerprint!r}'}")
        if len(cand) > 1:
            desc = "; ".join(f"{p.name} ({_load_meta(p).get('encoder', {}).get('model') or 'local model'},"
                             f" {_load_meta(p).get('dtype')}{', older key scheme' if _is_legacy(_load_meta(p)) else ''})"
                             for p in cand)
            raise StoreError(f"{root} holds vectors of {len(cand)} encoder settings ({desc}); pass fingerprint= (a folder name)")
        path = cand[0]
        meta = _load_meta(path)
        return cls(path, meta, _read_all_journals(path))

    @classmethod
    def open_for_writing(cls, store_dir: str | Path, *, encoder_fingerprint: str, encoder_settings: dict, dtype: str = "float16",
                         dim: int, rank: int | None = None) -> "EmbeddingStore":
        """Open (creating when needed) the key folder of ``(encoder_fingerprint, dtype)`` under ``store_dir``
        (``encoder_fingerprint``: the encoder's page fingerprint)
        for writing; take its lock; merge rank journals left by a distributed run; remove leftovers of
        an interrupted run (temporary files, shards no journal line names, a torn journal tail).

        Args:
            rank: open a *rank writer* instead (distributed runs, see the module docstring): it takes
                only the lock ``.lock.rank-<rank>``, appends to ``journal.rank-<rank>.jsonl``, names its
                shards ``r<rank>-...``, and only ever deletes its own leftovers. The key folder must
                already exist (the main writer creates it).

        Raises:
            StoreError: bad dtype, another writer holds the lock (or a rank writer is still active when
                the main writer merges), or the folder's ``store.json`` disagrees with the key (dim,
                fingerprint).
        """
        key = store_key(encoder_fingerprint, dtype)
        path = Path(store_dir) / key[:16]
        if rank is not None:
            return cls._open_rank_writer(path, key, dim, int(rank))
        (path / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(path)
        try:
            meta_path = path / META_FILE
            if meta_path.is_file():
                meta = _load_meta(path)
                if meta.get("key") != key or meta.get("dim") != dim:
                    raise StoreError(f"{path}: store.json (key {meta.get('key')}, dim {meta.get('dim')}) does not match"
                                     f" this encoder (key {key}, dim {dim})")
            else:
                meta = {"format": STORE_FORMAT, "key_scheme": KEY_SCHEME, "key": key, "encoder_fingerprint": encoder_fingerprint,
                        "dtype": dtype, "dim": int(dim), "encoder": encoder_settings, "tensor": TENSOR_NAME}
                from ..io.atomic import write_text_atomic

                write_text_atomic(meta_path, json.dumps(meta, indent=1, sort_keys=True) + "\n")
                _fsync_dir(path)
            _truncate_torn(path / JOURNAL_FILE)
            _merge_rank_journals(path)
            entries, _, _ = _read_journal(path / JOURNAL_FILE)
            st = cls(path, meta, entries, writable=True)
            st._lock_fd = lock_fd
            st._collect_garbage()
            st._seq = max([int(m.group(1)) for n in st._shard_names() if (m := re.match(r"^(\d+)-", n))] + [0])
            return st
        except BaseException:
            _unlock(lock_fd)
            raise

    @classmethod
    def _open_rank_writer(cls, path: Path, key: str, dim: int, rank: int) -> "EmbeddingStore":
        if rank < 0:
            raise StoreError(f"rank must be >= 0, got {rank}")
        if not (path / META_FILE).is_file():
            raise StoreError(f"{path}: no store.json; the main writer must create the store before rank writers open it")
        meta = _load_meta(path)
        if meta.get("key") != key or meta.get("dim") != dim:
            raise StoreError(f"{path}: store.json (key {meta.get('key')}, dim {meta.get('dim')}) does not match"
                             f" this encoder (key {key}, dim {dim})")
        lock_fd = _lock(path, f"{LOCK_FILE}.rank-{rank}", f"another process is writing rank {rank} of this embedding store")
        try:
            _truncate_torn(path / _rank_journal_name(rank))
            st = cls(path, meta, _read_all_journals(path), writable=True)
            st._lock_fd = lock_fd
            st.rank = rank
            st._journal_name = _rank_journal_name(rank)
            st._shard_prefix = f"r{rank}-"
            st._collect_garbage()
            pat = re.compile(rf"^r{rank}-(\d+)-")
            st._seq = max([int(m.group(1)) for n in st._shard_names() if (m := pat.match(n))] + [0])
            return st
        except BaseException:
            _unlock(lock_fd)
            raise

    # ------------------------------------------------------------------ reading
    def ids(self) -> list[str]:
        """Stored page ids (first-stored order)."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._entries

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self.meta["dim"])

    @property
    def dtype(self):
        """Stored dtype as a ``torch.dtype`` (``torch.float16`` or ``torch.float32``)."""
        import torch

        return getattr(torch, self.meta["dtype"])

    @property
    def encoder_fingerprint(self) -> str:
        """The page fingerprint of the encoder whose vectors these are."""
        return self.meta["encoder_fingerprint"]

    def lengths(self) -> list[int]:
        """Tokens per page, aligned with :meth:`ids` (the :class:`vdr.retrieve.maxsim.PageSource` contract)."""
        return [e.length for e in self._entries.values()]

    def length(self, page_id: str) -> int:
        """Tokens of one page. Raises KeyError: not stored."""
        e = self._entries.get(page_id)
        if e is None:
            raise KeyError(f"page {page_id!r} is not in the embedding store at {self.path}")
        return e.length

    def content_hash(self, page_id: str) -> str | None:
        """The content hash recorded for ``page_id`` (``None`` when not stored)."""
        e = self._entries.get(page_id)
        return None if e is None else e.hash

    def _handle(self, shard: str) -> tuple[int, int, str]:
        """``(file descriptor, byte offset of the tensor's first row, safetensors dtype)`` of a shard.

        Shards are read with ``os.pread`` rather than memory-mapped, so pages already scored do not
        stay resident and count towards the process's memory (streaming over a store larger than RAM).
        """
        h = self._handles.get(shard)
        if h is None:
            p = self.path / SHARDS_DIR / shard
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError as e:
                raise StoreError(f"{p}: cannot read shard ({e.strerror})") from None
            try:
                (n,) = struct.unpack("<Q", os.pread(fd, 8, 0))
                header = json.loads(os.pread(fd, n, 8))
                info = header[TENSOR_NAME]
                h = (fd, 8 + n + int(info["data_offsets"][0]), str(info["dtype"]))
            except (struct.error, ValueError, KeyError, TypeError) as e:
                os.close(fd)
                raise StoreError(f"{p}: not a vdr safetensors shard ({e})") from None
            self._handles[shard] = h
            while len(self._handles) > 16:
                os.close(self._handles.popitem(last=False)[1][0])
        else:
            self._handles.move_to_end(shard)
        return h

    def _slice(self, e: _Entry):
        import torch

        if not _ST_DTYPES:
            _init_dtypes()
        fd, start, dt = self._handle(e.shard)
        dtype = self.dtype
        if _ST_DTYPES.get(dt) != dtype:
            raise StoreError(f"{self.path / SHARDS_DIR / e.shard}: dtype {dt}, expected {self.meta['dtype']}")
        row = self.dim * torch.empty((), dtype=dtype).element_size()
        nbytes = e.length * row
        buf = os.pread(fd, nbytes, start + e.offset * row)
        if len(buf) != nbytes:
            raise StoreError(f"{self.path / SHARDS_DIR / e.shard}: truncated shard (page needs {nbytes} bytes)")
        return torch.frombuffer(bytearray(buf), dtype=dtype).view(e.length, self.dim)

    def get(self, page_id: str):
        """The page's vectors: tensor ``(n_tokens, dim)`` in the stored dtype (CPU).

        Raises:
            KeyError: the page is not stored. StoreError: its shard is missing or unreadable.
        """
        e = self._entries.get(page_id)
        if e is None:
            raise KeyError(f"page {page_id!r} is not in the embedding store at {self.path}")
        return self._slice(e)

    def iter_blocks(self, max_tokens: int, ids: Sequence[str] | None = None):
        """Stream pages in blocks of at most ``max_tokens`` tokens, read lazily from memory-mapped shards.

        Args:
            max_tokens: token budget per block (> 0). A page longer than the budget forms a block alone.
            ids: pages to stream, in this order (default :meth:`ids`).

        Yields:
            ``(page_ids, tokens, lengths)``: ``tokens`` is ``(sum(lengths), dim)`` in the stored dtype,
            pages back to back in ``page_ids`` order; ``lengths`` is int64 ``(len(page_ids),)``. Every
            page appears exactly once over all blocks. Peak memory is about one block.

        Raises:
            ValueError: ``max_tokens`` < 1. KeyError: an id that is not stored.
        """
        import torch

        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        order = self.ids() if ids is None else list(ids)
        block: list[tuple[str, _Entry]] = []
        total = 0

        def emit():
            out = torch.empty((total, self.dim), dtype=self.dtype)
            pos = 0
            for _, e in block:
                out[pos:pos + e.length] = self._slice(e)
                pos += e.length
            return [pid for pid, _ in block], out, torch.tensor([e.length for _, e in block], dtype=torch.int64)

        for pid in order:
            e = self._entries.get(pid)
            if e is None:
                raise KeyError(f"page {pid!r} is not in the embedding store at {self.path}")
            if block and total + e.length > max_tokens:
                yield emit()
                block, total = [], 0
            block.append((pid, e))
            total += e.length
        if block:
            yield emit()

    # ------------------------------------------------------------------ writing
    def _shard_names(self) -> list[str]:
        d = self.path / SHARDS_DIR
        return sorted(p.name for p in d.iterdir() if p.name.endswith(".safetensors") and not p.name.startswith("."))

    def _collect_garbage(self) -> None:
        """Delete temporary files and shards no journal names. A rank writer only touches its own
        (``r<rank>-``) names: other ranks may be writing theirs at the same moment."""
        live = {e.shard for e in self._entries.values()}
        d = self.path / SHARDS_DIR
        mine = self._shard_prefix
        for p in d.iterdir():
            if mine and not (p.name.startswith(mine) or p.name.startswith("." + mine)):
                continue
            if p.name.startswith(".") or (p.name.endswith(".safetensors") and p.name not in live):
                try:
                    p.unlink()
                except FileNotFoundError:  # pragma: no cover
                    pass

    def _need_writable(self) -> None:
        if not self._writable:
            raise StoreError(f"{self.path}: store opened read-only")

    def add(self, page_id: str, content_hash: str, vectors) -> None:
        """Queue one page's vectors ``(n_tokens, dim)`` (any float dtype; cast to the stored dtype).
        They are committed by :meth:`commit` (or :meth:`close`).

        Raises:
            StoreError: read-only store, wrong dim, empty or non-finite vectors.
        """
        import torch

        self._need_writable()
        if vectors.ndim != 2 or vectors.shape[1] != self.dim or vectors.shape[0] < 1:
            raise StoreError(f"page {page_id!r}: vectors of shape {tuple(vectors.shape)}, expected (n_tokens >= 1, {self.dim})")
        v = vectors.detach().to("cpu", self.dtype).contiguous()
        if not torch.isfinite(v).all():
            raise StoreError(f"page {page_id!r}: non-finite vectors (in {self.meta['dtype']})")
        self._pending.append((page_id, content_hash, v))
        self._pending_tokens += int(v.shape[0])

    def discard_pending(self) -> int:
        """Drop the queued, uncommitted pages (after an error: what was committed stays, the rest is
        encoded again on resume). Returns how many were dropped."""
        n = len(self._pending)
        self._pending, self._pending_tokens = [], 0
        return n

    @property
    def pending(self) -> int:
        """Pages queued but not yet committed."""
        return len(self._pending)

    def commit(self) -> str | None:
        """Write the queued pages as one shard (temp file, fsync, rename, fsync folder), then append its
        journal line (one write, fsync). Returns the shard name (``None`` when nothing was queued)."""
        import torch
        from safetensors.torch import save

        self._need_writable()
        if not self._pending:
            return None
        self._seq += 1
        name = f"{self._shard_prefix}{self._seq:06d}-{secrets.token_hex(4)}.safetensors"
        tokens = torch.cat([v for _, _, v in self._pending], dim=0)
        pages, off = [], 0
        for pid, h, v in self._pending:
            pages.append([pid, off, int(v.shape[0]), h])
            off += int(v.shape[0])
        data = save({TENSOR_NAME: tokens}, metadata={"format": str(STORE_FORMAT), "key": self.key})
        from ..io.atomic import write_bytes_atomic

        shards = self.path / SHARDS_DIR
        self._before_shard_hook(name)
        write_bytes_atomic(shards / name, data)
        _fsync_dir(shards)
        self._after_shard_hook(name)
        self._append_journal({"shard": name, "pages": pages})
        for pid, off, n, h in pages:
            self._entries[pid] = _Entry(name, off, n, h)
        self._pending, self._pending_tokens = [], 0
        self._after_commit_hook(name)
        return name

    def remove(self, page_ids: Sequence[str]) -> None:
        """Forget pages (a journal line ``{"remove": [...]}``); their shard space is reclaimed when a
        shard holds no live page any more (at :meth:`close`)."""
        self._need_writable()
        gone = [p for p in page_ids if p in self._entries]
        if not gone:
            return
        self._append_journal({"remove": gone})
        for p in gone:
            del self._entries[p]

    def _append_journal(self, rec: dict) -> None:
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path / self._journal_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._journal_write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    # test hooks (overridden in tests to simulate a kill at precise points)
    def _before_shard_hook(self, name: str) -> None:
        pass

    def _after_shard_hook(self, name: str) -> None:
        pass

    def _after_commit_hook(self, name: str) -> None:
        pass

    def _journal_write(self, fd: int, line: bytes) -> None:
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def close(self) -> None:
        """Commit queued pages, delete shards without live pages, release the lock (idempotent).
        A rank writer only commits (its shards are merged by the main writer)."""
        if self._writable:
            try:
                self.commit()
                if self.rank is None:
                    self._collect_garbage()
            finally:
                self._writable = False
                _unlock(self._lock_fd)
                self._lock_fd = None
        for fd, _, _ in self._handles.values():
            os.close(fd)
        self._handles.clear()

    def __enter__(self) -> "EmbeddingStore":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and self._writable:
            self.discard_pending()  # keep what was committed; the queue is re-encoded on resume
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddingStore({len(self)} pages, dim {self.meta.get('dim')}, {self.meta.get('dtype')}, at {str(self.path)!r})"


def _load_meta(path: Path) -> dict:
    p = path / META_FILE
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise StoreError(f"{p}: unreadable store metadata ({e})") from None
    if meta.get("format") != STORE_FORMAT:
        raise StoreError(f"{p}: unknown store format {meta.get('format')!r} (this vdr reads format {STORE_FORMAT})")
    return meta


def _lock(path: Path, name: str = LOCK_FILE, busy: str = "another process is writing this embedding store") -> int | None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory lock
        return None
    fd = os.open(path / name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreError(f"{path}: {busy}") from None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is None:
        return
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
