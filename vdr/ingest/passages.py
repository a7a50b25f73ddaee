"""Text-passage collections -> one passage corpus folder (see :class:`vdr.corpus.PassageCorpus`).

Readers (all streaming: a collection is read one line or one Arrow batch at a time, never held as
Python objects; only one 64-bit hash per passage id is kept, to find duplicate ids):

==========  ==========================================================  =====================
format      input                                                       quoting
==========  ==========================================================  =====================
``beir``    BEIR ``corpus.jsonl``: ``{"_id", "title", "text"}``          ``json``
``tsv``     DPR / TopiOCQA ``full_wiki_segments.tsv``: header           ``csv`` (fields that
            ``id<TAB>text<TAB>title`` (any order; ``title`` optional)    start with ``"`` are
                                                                        CSV-unquoted, ``""``
                                                                        -> ``"``)
``msmarco`` MS MARCO ``collection.tsv``: headerless ``pid<TAB>text``      ``none`` (a ``"`` is an
                                                                        ordinary character)
``jsonl``   Pyserini JsonCollection: ``{"id", "contents"}``; one        ``json``
            ``.jsonl``/``.json`` file or a folder of them (sorted)
``hf``      a local HF ``datasets`` folder (``save_to_disk``) or         ``arrow``
            parquet file(s) with ``id``/``_id``/``docid``, ``text``/
            ``contents`` and optionally ``title``
==========  ==========================================================  =====================

Every physical line of a text collection is one passage: a line that cannot be read as one
passage (an unclosed CSV quote, a missing tab, a blank line) is an :class:`~vdr.errors.InputError`
naming file and line, and the passage count must equal the line count (minus the header) -- the
check that catches Python's ``csv`` and pandas swallowing lines after an unclosed quote in MS MARCO.

Output: ``CORPUS_DIR/passages.jsonl`` (``{"id", "title", "text"}`` per line, titles as given),
``ids.txt`` (one id per line), ``empty_ids.txt``, ``offsets.npy`` (uint64 byte offset of each
line of ``passages.jsonl``, for random access) and the manifest ``corpus.json`` (format, source,
quoting, counts, empty passages, fingerprint), each written atomically.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..corpus import EMPTY_FILE, IDS_FILE, MANIFEST_FILE, OFFSETS_FILE, PASSAGES_FILE
from ..errors import InputError
from ..io._lines import json_object, read_lines
from ..io.atomic import atomic_write, write_text_atomic

__all__ = ["FORMATS", "QUOTING", "detect_format", "read_passages", "ingest_passages", "PassageIngestReport",
           "MANIFEST_FILE", "PASSAGES_FILE", "IDS_FILE", "EMPTY_FILE", "OFFSETS_FILE"]

FORMATS = ("beir", "tsv", "msmarco", "jsonl", "hf")
#: How each format's fields are unquoted (recorded in the manifest).
QUOTING = {"beir": "json", "tsv": "csv", "msmarco": "none", "jsonl": "json", "hf": "arrow"}
EMPTY_SHOWN = 20
_ID_KEYS = ("id", "_id", "docid", "doc_id", "pid")
_TEXT_KEYS = ("text", "contents")


@dataclass
class _Source:
    """What a reader counted while streaming: data lines (rows for ``hf``), header lines."""

    lines: int = 0
    header_lines: int = 0
    files: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- detection


def _first_line(path: Path) -> str:
    for _, line in read_lines(path):
        return line
    return ""


def _jsonl_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in (".jsonl", ".json"))


def detect_format(source: str | Path) -> str:
    """The format of ``source`` (one of :data:`FORMATS`), from its name and first line.

    Raises:
        InputError: ``source`` is missing or no rule applies (the message lists the formats).
    """
    p = Path(source)
    if p.is_dir():
        names = {c.name for c in p.iterdir()}
        if names & {"dataset_info.json", "state.json", "dataset_dict.json"} or any(n.endswith((".arrow", ".parquet")) for n in names):
            return "hf"
        if "corpus.jsonl" in names:
            return "beir"
        if _jsonl_files(p):
            return "jsonl"
        raise InputError(f"cannot tell the collection format of this folder; give --format ({', '.join(FORMATS)})", path=p)
    if not p.is_file():
        raise InputError("collection not found", path=p)
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return "hf"
    first = _first_line(p)
    if first.lstrip().startswith("{"):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON ({e.msg}, column {e.colno})", path=p, line=1) from None
        return "beir" if isinstance(obj, dict) and "_id" in obj else "jsonl"
    cols = first.split("\t")
    if "id" in [c.strip().lower() for c in cols] and "text" in [c.strip().lower() for c in cols]:
        return "tsv"
    if "\t" in first:
        return "msmarco"
    raise InputError(f"cannot tell the collection format from the first line; give --format ({', '.join(FORMATS)})", path=p, line=1)


# --------------------------------------------------------------------------------------------- readers


_WS = re.compile(r"\s")


def _check_id(raw: object, path, no) -> str:
    if type(raw) is str and raw and _WS.search(raw) is None:  # the common case, fast
        return raw
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise InputError(f"passage id must be a string or an integer, got {type(raw).__name__} {raw!r}", path=path, line=no)
    pid = str(raw).strip() if isinstance(raw, str) else str(int(raw))
    if not pid:
        raise InputError("empty passage id", path=path, line=no)
    if any(c.isspace() for c in pid):
        raise InputError(f"passage id {pid!r} contains whitespace (TREC runs cannot hold it)", path=path, line=no, id=pid)
    return pid


def _read_msmarco(path: Path, src: _Source) -> Iterator[tuple[int, str, str, str]]:
    """Headerless ``pid<TAB>text``; no quote processing (a ``"`` is an ordinary character)."""
    src.files.append(str(path))
    for no, line in read_lines(path):
        src.lines += 1
        if "\t" not in line:
            raise InputError("expected 'pid<TAB>text' (no tab found)" + (" -- a blank line" if not line.strip() else ""), path=path, line=no)
        pid, text = line.split("\t", 1)
        yield no, _check_id(pid, path, no), "", text


def _tsv_header(line: str, path: Path) -> tuple[int, int, int | None, int]:
    cols = [c.strip().lower() for c in line.split("\t")]
    if "id" not in cols or "text" not in cols:
        raise InputError(f"expected a header with 'id' and 'text' (and optionally 'title'), got {line!r}", path=path, line=1)
    return cols.index("id"), cols.index("text"), cols.index("title") if "title" in cols else None, len(cols)


def _split_csv(line: str, path: Path, no: int) -> list[str]:
    """One TSV line with CSV quoting (DPR's ``csv.reader(delimiter='\\t')``), read on its own so that
    an unclosed quote is an error on this line instead of swallowing the next ones."""
    if '"' not in line:
        return line.split("\t")
    try:
        rows = list(csv.reader([line], delimiter="\t", quotechar='"', doublequote=True, strict=True))
    except csv.Error as e:
        raise InputError(f"cannot CSV-unquote the line ({e}): an unclosed quote would swallow the following lines", path=path, line=no) from None
    if len(rows) != 1:
        raise InputError("cannot CSV-unquote the line (a quoted field continues past the end of the line)", path=path, line=no)
    return rows[0]


def _read_tsv(path: Path, src: _Source) -> Iterator[tuple[int, str, str, str]]:
    """``id<TAB>text<TAB>title`` with a header, CSV-unquoted per line."""
    src.files.append(str(path))
    layout = None
    for no, line in read_lines(path):
        if layout is None:
            layout = _tsv_header(line, path)
            src.header_lines = 1
            continue
        src.lines += 1
        i_id, i_text, i_title, n = layout
        fields = _split_csv(line, path, no)
        if len(fields) != n:
            raise InputError(f"expected {n} tab-separated fields as in the header, got {len(fields)}", path=path, line=no)
        pid = _check_id(fields[i_id], path, no)
        yield no, pid, fields[i_title] if i_title is not None else "", fields[i_text]


def _str_field(obj: dict, key: str, path: Path, no: int, pid: str, required: bool) -> str:
    if key not in obj or obj[key] is None:
        if required:
            raise InputError(f"missing field {key!r}", path=path, line=no, id=pid)
        return ""
    v = obj[key]
    if not isinstance(v, str):
        raise InputError(f"field {key!r} must be a string, got {type(v).__name__}", path=path, line=no, id=pid)
    return v


def _read_json_lines(files: list[Path], src: _Source, id_key: str, text_key: str, title_key: str | None):
    for path in files:
        src.files.append(str(path))
        for no, line in read_lines(path):
            src.lines += 1
            if not line.strip():
                raise InputError("blank line (every line must hold one passage)", path=path, line=no)
            obj = json_object(line, path, no)
            if id_key not in obj:
                raise InputError(f"missing field {id_key!r}", path=path, line=no)
            pid = _check_id(obj[id_key], path, no)
            title = _str_field(obj, title_key, path, no, pid, False) if title_key else ""
            yield no, pid, title, _str_field(obj, text_key, path, no, pid, True)


def _hf_dataset(path: Path):
    """The ``datasets.Dataset`` at ``path`` (``save_to_disk`` folder, parquet file or folder of them)."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is a dependency
        raise InputError("reading a HF dataset needs the 'datasets' package", path=path) from None
    if path.is_file() or (path.is_dir() and not ({c.name for c in path.iterdir()} & {"dataset_info.json", "state.json", "dataset_dict.json"})):
        files = [str(path)] if path.is_file() else sorted(str(p) for p in path.rglob("*.parquet"))
        if not files:
            raise InputError("no parquet files and no saved dataset in the folder", path=path)
        return datasets.Dataset.from_parquet(files)
    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        pick = "corpus" if "corpus" in splits else splits[0] if len(splits) == 1 else None
        if pick is None:
            raise InputError(f"the dataset has several splits {splits}; save the passage split alone", path=path)
        ds = ds[pick]
    return ds


def _read_hf(path: Path, src: _Source, batch_size: int = 4096):
    ds = _hf_dataset(path)
    src.files.append(str(path))
    cols = ds.column_names
    id_key = next((k for k in _ID_KEYS if k in cols), None)
    text_key = next((k for k in _TEXT_KEYS if k in cols), None)
    if id_key is None or text_key is None:
        raise InputError(f"the dataset needs an id column ({'/'.join(_ID_KEYS)}) and a text column ({'/'.join(_TEXT_KEYS)}); it has {cols}", path=path)
    title_key = "title" if "title" in cols else None
    row = 0
    for batch in ds.select_columns([c for c in (id_key, text_key, title_key) if c]).iter(batch_size=batch_size):
        titles = batch[title_key] if title_key else [""] * len(batch[id_key])
        for raw, text, title in zip(batch[id_key], batch[text_key], titles):
            row += 1
            src.lines += 1
            pid = _check_id(raw, path, row)
            for key, v in ((text_key, text), ("title", title)):
                if v is not None and not isinstance(v, str):
                    raise InputError(f"column {key!r} must hold strings, got {type(v).__name__} (row {row})", path=path, id=pid)
            yield row, pid, title or "", text or ""


def read_passages(source: str | Path, format: str = "auto", src: _Source | None = None) -> Iterator[tuple[int, str, str, str]]:
    """Stream ``(line, id, title, text)`` of every passage of ``source`` in file order (``line``: the
    1-based line of a text file, the 1-based row of a dataset).

    Args:
        source: the collection file or folder.
        format: one of :data:`FORMATS` or ``"auto"`` (:func:`detect_format`).
        src: receives the counts of lines read (for the count check).

    Raises:
        InputError: an unknown format; a line that is not one passage (file, line, id named).
    """
    p = Path(source)
    fmt = detect_format(p) if format == "auto" else format
    src = src if src is not None else _Source()
    if fmt == "msmarco":
        return _read_msmarco(p, src)
    if fmt == "tsv":
        return _read_tsv(p, src)
    if fmt == "beir":
        f = p / "corpus.jsonl" if p.is_dir() else p
        return _read_json_lines([f], src, "_id", "text", "title")
    if fmt == "jsonl":
        files = _jsonl_files(p) if p.is_dir() else [p]
        if not files:
            raise InputError("no .jsonl/.json files in the folder", path=p)
        return _read_json_lines(files, src, "id", "contents", None)
    if fmt == "hf":
        return _read_hf(p, src)
    raise InputError(f"unknown collection format {fmt!r}; choose auto or one of {', '.join(FORMATS)}", path=p)


# --------------------------------------------------------------------------------------------- ingest


@dataclass(frozen=True)
class PassageIngestReport:
    """What :func:`ingest_passages` did (also in ``corpus.json``).

    Attributes:
        out: the corpus folder.
        manifest: the ``corpus.json`` document (format, source, quoting, counts, empty, fingerprint).
    """

    out: Path
    manifest: dict

    @property
    def passages(self) -> int:
        """Number of passages written."""
        return self.manifest["counts"]["passages"]


def _find_duplicate(source: Path, fmt: str, dup_hashes: set[int]) -> None:
    """Second pass over the collection when two id hashes collided: raise on a true duplicate id."""
    first: dict[str, tuple[str, int]] = {}
    src = _Source()
    for no, pid, _, _ in read_passages(source, fmt, src):
        if hash(pid) in dup_hashes:
            where = src.files[-1]
            if pid in first:
                f0, l0 = first[pid]
                raise InputError(f"duplicate passage id (first in {f0} line {l0})", path=where, line=no, id=pid)
            first[pid] = (where, no)


def ingest_passages(source: str | Path, out: str | Path, *, format: str = "auto") -> PassageIngestReport:
    """Read a passage collection (any of :data:`FORMATS`) into the corpus folder ``out``.

    Writes ``passages.jsonl``, ``ids.txt``, ``empty_ids.txt`` and ``corpus.json`` atomically. The
    fingerprint is ``"sha256:"`` + the SHA-256 of ``passages.jsonl``'s bytes. Empty passages (title
    and text empty after stripping) are kept, counted and listed (first :data:`EMPTY_SHOWN`).

    Raises:
        InputError: an unreadable line (file, line named), a duplicate id (both places named), a
            passage count different from the number of data lines, an empty collection.
    """
    source, out = Path(source), Path(out)
    fmt = detect_format(source) if format == "auto" else format
    src = _Source()
    hashes = array("q")
    offsets = array("Q")
    pos = 0
    empty: list[str] = []
    digest = hashlib.sha256()
    from json.encoder import encode_basestring as q  # C JSON string quoting (ensure_ascii=False)
    n = 0
    with atomic_write(out / PASSAGES_FILE) as fp, atomic_write(out / IDS_FILE) as fi:
        for _, pid, title, text in read_passages(source, fmt, src):
            line = f'{{"id": {q(pid)}, "title": {q(title)}, "text": {q(text)}}}\n'  # == json.dumps(..., ensure_ascii=False)
            raw = line.encode("utf-8")
            digest.update(raw)
            fp.write(line)
            offsets.append(pos)
            pos += len(raw)
            fi.write(pid + "\n")
            hashes.append(hash(pid))
            if not text.strip() and not title.strip():
                empty.append(pid)
            n += 1
        if n != src.lines:  # a reader that merged or split lines: never write such a corpus
            raise InputError(f"{n} passages read from {src.lines} data lines: the collection's quoting is not {QUOTING[fmt]!r}", path=source)
        if n == 0:
            raise InputError("the collection holds no passages", path=source)
        dups = _duplicate_hashes(hashes)
        if dups:
            _find_duplicate(source, fmt, dups)
    write_text_atomic(out / EMPTY_FILE, "".join(e + "\n" for e in empty))
    _write_offsets(out / OFFSETS_FILE, offsets)
    manifest = {
        "kind": "passage",
        "format": fmt,
        "source": str(source.resolve()),
        "files": src.files,
        "quoting": QUOTING[fmt],
        "title_separator": "' [SEP] ' in titles is indexed as ' '",
        "counts": {"passages": n, "data_lines": src.lines, "header_lines": src.header_lines, "empty": len(empty)},
        "empty": empty[:EMPTY_SHOWN],
        "fingerprint": "sha256:" + digest.hexdigest(),
        "passages_bytes": pos,
    }
    write_text_atomic(out / MANIFEST_FILE, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return PassageIngestReport(out, manifest)


def _write_offsets(path: Path, offsets: array) -> None:
    """``offsets`` as a ``.npy`` uint64 array, shape ``(n_passages,)``, written atomically."""
    import numpy as np

    with atomic_write(path, "wb") as f:
        np.save(f, np.frombuffer(offsets, dtype=np.uint64) if len(offsets) else np.zeros(0, np.uint64), allow_pickle=False)


def _duplicate_hashes(hashes: array) -> set[int]:
    """Hash values that occur more than once (numpy sort: 8 bytes per passage)."""
    import numpy as np

    a = np.frombuffer(hashes, dtype=np.int64) if len(hashes) else np.zeros(0, np.int64)
    s = np.sort(a)
    return set(s[1:][s[1:] == s[:-1]].tolist())
