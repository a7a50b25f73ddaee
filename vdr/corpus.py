"""The corpus: the contract between ingestion and every retrieval backend, and its file layout.

Two kinds of corpus folder, both read by :func:`load_corpus`; both kinds satisfy the
:class:`CorpusLike` protocol (``kind``, ``root``, ``report``, ids, ``len``, ``in``, texts, streamed
texts, :meth:`~CorpusLike.unavailable_reason`), which is all that the backends, ``evaluate``,
``serve``, the results and the report rely on.

A page corpus (:class:`Corpus`, ``kind == "page"``) folder holds::

    CORPUS_DIR/
      pages.jsonl          one JSON object per page (the fields of :class:`Page`)      PAGES_FILE
      images/...           one RGB PNG per page, at the path named by the page's ``image`` field   IMAGES_DIR
      ingest-report.json   what ingestion did (documents, statuses, reasons, settings) REPORT_FILE
      queries.jsonl        (ViDoRe only) BEIR queries
      qrels.tsv            (ViDoRe only) BEIR qrels

A passage corpus (:class:`PassageCorpus`, ``kind == "passage"``; written by
:func:`vdr.ingest.passages.ingest_passages`) folder holds::

    CORPUS_DIR/
      passages.jsonl       {"id", "title", "text"} per line                           PASSAGES_FILE
      ids.txt              one passage id per line, in file order                     IDS_FILE
      empty_ids.txt        ids of the passages without title and text                 EMPTY_FILE
      offsets.npy          int64 byte offset of each line of passages.jsonl           OFFSETS_FILE
      corpus.json          the manifest (format, counts, fingerprint; kind "passage") MANIFEST_FILE

This module owns these names; the ingest code that writes the folders imports them from here.

Page ids of ingested PDFs are ``<path relative to PDF_DIR, '/'-separated>#<1-based page>``
in Unicode NFC, with whitespace and ``%`` percent-encoded (UTF-8 bytes, upper-case hex), so that every id is a
single whitespace-free token that TREC files can hold: ``reports/esg 2023.pdf`` page 12 has the id
``reports/esg%202023.pdf#12``. See :func:`page_id`. Users write qrels with these ids.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol, runtime_checkable

from .errors import InputError
from .io._lines import read_lines

__all__ = ["Page", "Corpus", "PassageCorpus", "CorpusLike", "CorpusKind", "load_corpus", "passage_text", "page_id", "image_name",
           "id_normalisation_hint",
           "PAGES_FILE", "REPORT_FILE", "IMAGES_DIR", "MANIFEST_FILE", "PASSAGES_FILE", "IDS_FILE", "EMPTY_FILE", "OFFSETS_FILE"]

# page corpus layout
PAGES_FILE = "pages.jsonl"
REPORT_FILE = "ingest-report.json"
IMAGES_DIR = "images"
# passage corpus layout
MANIFEST_FILE = "corpus.json"
PASSAGES_FILE = "passages.jsonl"
IDS_FILE = "ids.txt"
EMPTY_FILE = "empty_ids.txt"
OFFSETS_FILE = "offsets.npy"

CorpusKind = Literal["page", "passage"]
"""What a corpus holds: ``"page"`` (page images + page text) or ``"passage"`` (title + text)."""

TEXT_SOURCES = ("pdf", "ocr", "markdown", "dataset", "none")


def _encode_char(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode("utf-8"))


def page_id(relative_path: str, page: int) -> str:
    """The corpus id of page ``page`` (1-based) of the PDF at ``relative_path``.

    The path is normalised to Unicode NFC (a name macOS stored decomposed, ``e`` + U+0301, gives
    the same id as the composed ``é`` a user types in the qrels); whitespace (any Unicode
    whitespace) and ``%`` are then percent-encoded as their UTF-8 bytes; every other character is
    kept. ``'/'`` separates folders whatever the OS.

    >>> page_id("reports/esg 2023.pdf", 12)
    'reports/esg%202023.pdf#12'
    >>> page_id("a%b.pdf", 1)
    'a%25b.pdf#1'
    >>> page_id("re\u0301sume\u0301.pdf", 1) == "r\u00e9sum\u00e9.pdf#1"
    True

    Raises:
        InputError: ``page`` < 1 or an empty path.
    """
    if page < 1:
        raise InputError(f"page numbers are 1-based, got {page}", path=relative_path)
    if not relative_path:
        raise InputError("empty relative path")
    enc = "".join(_encode_char(c) if (c == "%" or c.isspace()) else c for c in unicodedata.normalize("NFC", relative_path))
    return f"{enc}#{page}"


def _form(s: str) -> str:
    return "NFC" if unicodedata.is_normalized("NFC", s) else "NFD" if unicodedata.is_normalized("NFD", s) else "neither NFC nor NFD"


def id_normalisation_hint(ids, known) -> str:
    r"""A sentence naming the ``ids`` that are not in ``known`` but match one of its ids after
    Unicode normalisation (NFC), with the fix; ``""`` when there are none.

    Such ids look identical when printed (``résumé.pdf#1`` composed or decomposed) but differ in
    code points, so they never match; the sentence shows both with :func:`ascii`. Call it on an
    error path only: it normalises every id of ``known``.

    Args:
        ids: the ids that were looked up (e.g. the qrels' corpus ids not found).
        known: the ids they were looked up in (e.g. the corpus' ids).

    >>> print(id_normalisation_hint(["résumé.pdf#1"], {"résumé.pdf#1"}).split(":")[0])
    1 of these ids match a corpus id only after Unicode normalisation, e.g. 'résumé.pdf#1' written 'résumé.pdf#1' (NFD) is the corpus' 'résumé.pdf#1' (NFC)
    >>> id_normalisation_hint(["p1"], {"p01"})
    ''
    """
    known = known if isinstance(known, (set, frozenset, dict, Mapping)) else set(known)
    missing = [i for i in ids if i not in known]
    if not missing:
        return ""
    by_nfc: dict[str, str] = {}
    for k in known:
        by_nfc.setdefault(unicodedata.normalize("NFC", k), k)
    pairs = [(i, by_nfc[n]) for i in missing if (n := unicodedata.normalize("NFC", i)) in by_nfc]
    if not pairs:
        return ""
    a, b = pairs[0]
    fix = "write these ids in NFC (Python: unicodedata.normalize('NFC', id))"
    if _form(b) != "NFC":
        fix += "; the corpus' ids are not NFC either: re-ingest it (vdr ingest writes page ids in NFC)"
    shown = unicodedata.normalize("NFC", a)
    return (f"{len(pairs)} of these ids match a corpus id only after Unicode normalisation, e.g. {shown!r} written {ascii(a)}"
            f" ({_form(a)}) is the corpus' {ascii(b)} ({_form(b)}): they look alike but differ in code points; {fix}")


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def image_name(corpus_id: str, suffix: str = ".png") -> str:
    """A safe relative image path (under ``images/``) for ``corpus_id``.

    The name is a readable, sanitised prefix of the id (only ``[A-Za-z0-9._-]``, no leading dot)
    plus 12 hex digits of the id's SHA-1, so distinct ids never collide and no id can produce
    ``..``, an absolute path or a folder separator.

    >>> image_name("reports/esg%202023.pdf#12")
    'images/reports_esg_202023.pdf_12-de00fffee322.png'
    """
    stem = _UNSAFE.sub("_", corpus_id).strip("._")[:80] or "page"
    digest = hashlib.sha1(corpus_id.encode("utf-8")).hexdigest()[:12]
    return f"{IMAGES_DIR}/{stem}-{digest}{suffix}"


@dataclass(frozen=True)
class Page:
    """One corpus page, as one line of ``pages.jsonl``.

    Attributes:
        corpus_id: the page's id (JSON key ``corpus-id``); see :func:`page_id`.
        source: the PDF's path relative to the ingested folder (``/``-separated), or for a
            ViDoRe dataset ``"<dataset>@<revision>"``.
        page: 1-based page number in ``source``; ``None`` for dataset images.
        width: image width in pixels.
        height: image height in pixels.
        dpi: effective rendering resolution in dots per inch (lowered from the requested one
            when the page would exceed the pixel budget); ``None`` for dataset images.
        image: path of the RGB PNG relative to the corpus folder (always under ``images/``).
        text: the page's text ("" when none).
        text_source: ``"pdf"`` (text layer), ``"ocr"`` (Tesseract), ``"markdown"`` (ViDoRe V3's page
            markdown), ``"dataset"`` (a dataset's page text: MTEB's OCR copies) or ``"none"``.
        image_sha256: hex SHA-256 of the page's RGB pixels (:func:`vdr.ingest.images.pixel_sha256`:
            mode, size and raw bytes, independent of PNG compression); equal hashes mean duplicate
            page images. ``None`` in corpora written before it was recorded.
    """

    corpus_id: str
    source: str
    page: int | None
    width: int
    height: int
    dpi: float | None
    image: str
    text: str = ""
    text_source: str = "none"
    image_sha256: str | None = None

    def to_json(self) -> dict:
        """The ``pages.jsonl`` object (keys ``corpus-id``, ``source``, ``page``, ...)."""
        d = asdict(self)
        d["corpus-id"] = d.pop("corpus_id")
        return {"corpus-id": d.pop("corpus-id"), **d}

    @classmethod
    def from_json(cls, obj: object, *, path: str | None = None, line: int | None = None) -> "Page":
        """Validate and build a page from one ``pages.jsonl`` object.

        Raises:
            InputError: a missing or mistyped field, an unknown ``text_source``, non-positive
                sizes, or an ``image`` path that is absolute or leaves ``images/``.
        """
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", path=path, line=line)
        cid = obj.get("corpus-id")
        if not isinstance(cid, str) or not cid:
            raise InputError("'corpus-id' must be a non-empty string", path=path, line=line)

        def need(key: str, types: tuple, optional: bool = False):
            if key not in obj:
                raise InputError(f"missing field {key!r}", path=path, line=line, id=cid)
            v = obj[key]
            if v is None and optional:
                return None
            if isinstance(v, bool) or not isinstance(v, types):
                raise InputError(f"field {key!r} has the wrong type ({type(v).__name__})", path=path, line=line, id=cid)
            return v

        source = need("source", (str,))
        page = need("page", (int,), optional=True)
        width = need("width", (int,))
        height = need("height", (int,))
        dpi = need("dpi", (int, float), optional=True)
        image = need("image", (str,))
        text = obj.get("text", "")
        if not isinstance(text, str):
            raise InputError("field 'text' must be a string", path=path, line=line, id=cid)
        ts = obj.get("text_source", "none")
        if ts not in TEXT_SOURCES:
            raise InputError(f"'text_source' must be one of {TEXT_SOURCES}, got {ts!r}", path=path, line=line, id=cid)
        if width < 1 or height < 1:
            raise InputError(f"image size must be positive, got {width} x {height}", path=path, line=line, id=cid)
        _check_image_path(image, path=path, line=line, id=cid)
        digest = obj.get("image_sha256")
        if digest is not None and not (isinstance(digest, str) and _SHA256.match(digest)):
            raise InputError("field 'image_sha256' must be 64 lower-case hex digits or null", path=path, line=line, id=cid)
        return cls(cid, source, page, width, height, None if dpi is None else float(dpi), image, text, ts, digest)


def _check_image_path(image: str, *, path=None, line=None, id=None) -> None:
    p = PurePosixPath(image)
    if p.is_absolute() or "\\" in image or ".." in p.parts or not p.parts or p.parts[0] != IMAGES_DIR:
        raise InputError(f"unsafe image path {image!r}: must be relative and under {IMAGES_DIR}/", path=path, line=line, id=id)


class Corpus(Mapping):
    """A read-only corpus: corpus id -> :class:`Page`, in ``pages.jsonl`` order.

    Build it with :meth:`load`. Images are not opened until asked for.

    Attributes:
        kind: ``"page"`` (a :class:`PassageCorpus` has ``"passage"``).
        root: the corpus folder.
        report: the parsed ``ingest-report.json`` (``{}`` when the file is absent).
    """

    kind: CorpusKind = "page"

    def __init__(self, pages: Mapping[str, Page], root: str | Path, report: Mapping | None = None) -> None:
        self._pages = dict(pages)
        self.root = Path(root)
        self.report = dict(report or {})

    @classmethod
    def load(cls, corpus_dir: str | Path) -> "Corpus":
        """Read ``corpus_dir/pages.jsonl`` (and ``ingest-report.json`` if present).

        Raises:
            InputError: a missing folder or ``pages.jsonl``, invalid JSON, a malformed record or a
                duplicate corpus id (naming file, line and id).
        """
        root = Path(corpus_dir)
        path = root / PAGES_FILE
        if not path.is_file():
            raise InputError(f"not a corpus folder: {PAGES_FILE} is missing (run `vdr ingest` first)", path=root)
        pages: dict[str, Page] = {}
        lines: dict[str, int] = {}
        for no, text in read_lines(path):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise InputError(f"invalid JSON ({e.msg}, column {e.colno})", path=path, line=no) from None
            page = Page.from_json(obj, path=str(path), line=no)
            if page.corpus_id in pages:
                raise InputError(
                    f"duplicate corpus id (first on line {lines[page.corpus_id]})", path=path, line=no, id=page.corpus_id
                )
            pages[page.corpus_id] = page
            lines[page.corpus_id] = no
        report: dict = {}
        rp = root / REPORT_FILE
        if rp.is_file():
            try:
                report = json.loads(rp.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise InputError(f"invalid JSON report ({e})", path=rp) from None
        return cls(pages, root, report)

    def __getitem__(self, corpus_id: str) -> Page:
        try:
            return self._pages[corpus_id]
        except KeyError:
            raise KeyError(f"corpus id {corpus_id!r} is not in the corpus at {self.root}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._pages)

    def __len__(self) -> int:
        return len(self._pages)

    def ids(self) -> list[str]:
        """All corpus ids in file order."""
        return list(self._pages)

    def pages(self) -> list[Page]:
        """All pages in file order."""
        return list(self._pages.values())

    def image_path(self, corpus_id: str) -> Path:
        """Absolute path of the page's PNG.

        Raises:
            KeyError: unknown id.
            InputError: the recorded path would leave the corpus' ``images/`` folder.
        """
        page = self[corpus_id]
        _check_image_path(page.image, path=str(self.root / PAGES_FILE), id=corpus_id)
        return (self.root / page.image).resolve()

    def open_image(self, corpus_id: str):
        """The page image as an RGB ``PIL.Image.Image`` (loaded into memory, file closed).

        Raises:
            KeyError: unknown id. InputError: missing or unreadable image file.
        """
        from PIL import Image, UnidentifiedImageError

        p = self.image_path(corpus_id)
        try:
            with Image.open(p) as im:
                return im.convert("RGB")
        except (OSError, UnidentifiedImageError) as e:
            raise InputError(f"cannot read page image ({e})", path=p, id=corpus_id) from None

    def texts(self) -> dict[str, str]:
        """``{corpus_id: text}`` for every page (``""`` where the page has no text)."""
        return {cid: p.text for cid, p in self._pages.items()}

    def iter_texts(self, batch_size: int = 8192) -> Iterator[tuple[list[str], list[str]]]:
        """``(ids, texts)`` batches of at most ``batch_size`` pages in file order (``""`` where a page
        has no text): the streaming form every corpus kind offers to the backends."""
        ids = list(self._pages)
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            yield chunk, [self._pages[i].text for i in chunk]

    def unavailable(self) -> dict[str, str]:
        """``{corpus id: reason}`` of the pages that ingest skipped or failed to render, as recorded
        in ``ingest-report.json`` (``unavailable_pages``; for older PDF reports, derived from each
        document's ``page_issues``). Ids of documents that could not be opened at all are not
        listed (their page count is unknown): see :meth:`unavailable_reason`."""
        listed = self.report.get("unavailable_pages")
        if isinstance(listed, list):
            return {str(u["corpus-id"]): str(u["reason"]) for u in listed if isinstance(u, dict) and "corpus-id" in u}
        out: dict[str, str] = {}
        for doc in self._documents():
            for issue in doc.get("page_issues") or ():
                if isinstance(issue, dict) and isinstance(issue.get("page"), int) and issue["page"] >= 1:
                    cid = page_id(doc["source"], issue["page"])
                    if cid not in self._pages:
                        out.setdefault(cid, str(issue.get("reason")))
        return out

    def unavailable_reason(self, corpus_id: str) -> str | None:
        """Why ``corpus_id`` is not a page of this corpus although ingest knew it, or ``None``.

        Returns the recorded reason for a skipped or failed page (see :meth:`unavailable`), or
        ``"<source>: <reason>"`` when the id names a page of a PDF that failed as a whole (its
        page number within the document's page count, or any page number when the document could
        not be opened). ``None`` for a page of the corpus and for an id of no ingested document.
        """
        if corpus_id in self._pages:
            return None
        reason = self.unavailable().get(corpus_id)
        if reason is not None:
            return reason
        prefix, sep, num = corpus_id.rpartition("#")
        if not sep or not num.isdigit() or int(num) < 1:
            return None
        for doc in self._documents():
            if doc.get("status") != "failed" or page_id(doc["source"], 1) != f"{prefix}#1":
                continue
            count = doc.get("page_count") or 0
            if count == 0 or int(num) <= count:
                return f"{doc['source']}: {doc.get('reason')}"
        return None

    def _documents(self) -> list[dict]:
        docs = self.report.get("documents") if self.report.get("kind") == "pdf" else None
        return [d for d in docs or () if isinstance(d, dict) and isinstance(d.get("source"), str) and d["source"]]

    def duplicate_images(self) -> list[list[str]]:
        """Groups of corpus ids whose page images have equal pixels (same ``image_sha256``), each
        group in file order, groups ordered by their first id; pages without a hash are ignored."""
        groups: dict[str, list[str]] = {}
        for cid, p in self._pages.items():
            if p.image_sha256 is not None:
                groups.setdefault(p.image_sha256, []).append(cid)
        return [g for g in groups.values() if len(g) > 1]

    def __repr__(self) -> str:
        return f"Corpus({len(self)} pages at {str(self.root)!r})"


def write_pages(path: str | Path, pages: list[Page]) -> None:
    """Write ``pages`` as ``pages.jsonl`` atomically."""
    from .io.atomic import atomic_write

    with atomic_write(path) as f:
        for p in pages:
            f.write(json.dumps(p.to_json(), ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------- passages


def passage_text(title: str, text: str) -> str:
    """The indexed text of a passage: ``title + " " + text`` (just one of them when the other is
    empty), with DPR's ``" [SEP] "`` in the title replaced by a space.

    >>> passage_text("Aaron [SEP] Introduction", "Aaron is a prophet")
    'Aaron Introduction Aaron is a prophet'
    >>> passage_text("", "")
    ''
    """
    title = title.replace(" [SEP] ", " ")
    return f"{title} {text}" if title and text else title or text


class PassageCorpus:
    """A passage corpus folder written by :func:`vdr.ingest.passages.ingest_passages`, read lazily.

    Layout: ``passages.jsonl`` (``{"id", "title", "text"}`` per line), ``ids.txt``,
    ``empty_ids.txt`` and the manifest ``corpus.json``. Only the ids are held in memory (on first
    use); texts are streamed from disk by :meth:`iter_texts`.

    Attributes:
        kind: ``"passage"``.
        root: the corpus folder.
        report: the manifest (reader format, quoting, counts, empty passages, fingerprint).
        fingerprint: ``"sha256:<hex>"`` of ``passages.jsonl`` (recorded at ingest).
    """

    kind: CorpusKind = "passage"

    def __init__(self, root: str | Path, report: Mapping) -> None:
        self.root = Path(root)
        self.report = dict(report)
        self.fingerprint: str = str(self.report.get("fingerprint") or "")
        self._ids: list[str] | None = None
        self._pos: dict[str, int] | None = None

    @classmethod
    def load(cls, corpus_dir: str | Path) -> "PassageCorpus":
        """Open ``corpus_dir`` (reads the manifest only).

        Raises:
            InputError: a missing or unreadable ``corpus.json`` or ``passages.jsonl``, or a
                ``passages.jsonl`` whose size differs from the one recorded (changed since ingest).
        """
        root = Path(corpus_dir)
        mp, pp = root / MANIFEST_FILE, root / PASSAGES_FILE
        if not mp.is_file() or not pp.is_file():
            raise InputError(f"not a passage corpus folder: {MANIFEST_FILE} or {PASSAGES_FILE} is missing (run `vdr ingest --passages`)", path=root)
        try:
            report = json.loads(mp.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"invalid JSON manifest ({e})", path=mp) from None
        if not isinstance(report, dict) or report.get("kind") != "passage":
            raise InputError("not a passage corpus manifest (kind != 'passage')", path=mp)
        size = report.get("passages_bytes")
        if isinstance(size, int) and pp.stat().st_size != size:
            raise InputError(f"{PASSAGES_FILE} has {pp.stat().st_size} bytes, the manifest records {size}: it changed since ingest"
                             " (re-run `vdr ingest --passages`)", path=pp)
        return cls(root, report)

    def ids(self) -> list[str]:
        """All passage ids in file order (read once from ``ids.txt``)."""
        if self._ids is None:
            p = self.root / IDS_FILE
            if p.is_file():
                with open(p, encoding="utf-8", newline="\n") as f:
                    self._ids = [line.rstrip("\n") for line in f]
            else:
                self._ids = [i for batch, _ in self.iter_texts() for i in batch]
        return self._ids

    def __len__(self) -> int:
        counts = self.report.get("counts") or {}
        return int(counts["passages"]) if "passages" in counts else len(self.ids())

    def _positions(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = {pid: i for i, pid in enumerate(self.ids())}
        return self._pos

    def __contains__(self, corpus_id: object) -> bool:
        return corpus_id in self._positions()

    def passage(self, corpus_id: str) -> tuple[str, str]:
        """``(title, text)`` of one passage, read from disk (random access through ``offsets.npy``;
        a scan when a corpus lacks it).

        Raises:
            KeyError: unknown id.
        """
        i = self._positions().get(corpus_id)
        if i is None:
            raise KeyError(f"passage id {corpus_id!r} is not in the corpus at {self.root}")
        op = self.root / OFFSETS_FILE
        if op.is_file():
            import numpy as np

            offset = int(np.load(op, mmap_mode="r", allow_pickle=False)[i])
            with open(self.root / PASSAGES_FILE, "rb") as f:
                f.seek(offset)
                obj = json.loads(f.readline())
            if obj.get("id") == corpus_id:
                return obj.get("title") or "", obj.get("text") or ""
        for pid, title, text in self.iter_passages():
            if pid == corpus_id:
                return title, text
        raise KeyError(f"passage id {corpus_id!r} is listed but not stored in {self.root}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def iter_passages(self) -> Iterator[tuple[str, str, str]]:
        """Stream ``(id, title, text)`` of every passage in file order (titles as stored).

        Raises:
            InputError: a line of ``passages.jsonl`` that is not valid JSON (file and line named).
        """
        path = self.root / PASSAGES_FILE
        decode = json.JSONDecoder().decode
        try:
            f = open(path, encoding="utf-8", newline="\n")
        except OSError as e:
            raise InputError(f"cannot read the passages ({e})", path=path) from None
        with f:  # written by vdr (UTF-8 JSON lines): read directly, without read_lines' checks
            for no, line in enumerate(f, start=1):
                try:
                    obj = decode(line)
                    yield obj["id"], obj["title"], obj["text"]
                except (ValueError, KeyError, TypeError) as e:
                    raise InputError(f"corrupt passage line ({type(e).__name__}: {e}); re-run `vdr ingest --passages`", path=path,
                                     line=no) from None

    def iter_texts(self, batch_size: int = 8192) -> Iterator[tuple[list[str], list[str]]]:
        """``(ids, texts)`` batches of at most ``batch_size`` passages in file order, read from disk
        (text: :func:`passage_text` of title and text; ``""`` for an empty passage)."""
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        ids: list[str] = []
        texts: list[str] = []
        for pid, title, text in self.iter_passages():
            ids.append(pid)
            if title:
                title = title.replace(" [SEP] ", " ")
                texts.append(f"{title} {text}" if text else title)
            else:
                texts.append(text)
            if len(ids) == batch_size:
                yield ids, texts
                ids, texts = [], []
        if ids:
            yield ids, texts

    def texts(self) -> dict[str, str]:
        """``{id: text}`` of every passage (small corpora only: every passage in memory)."""
        return {i: t for ids, texts in self.iter_texts() for i, t in zip(ids, texts)}

    def empty_ids(self) -> set[str]:
        """Ids of the empty passages (no title, no text), from ``empty_ids.txt``."""
        p = self.root / EMPTY_FILE
        if not p.is_file():
            return set(self.report.get("empty") or ())
        with open(p, encoding="utf-8", newline="\n") as f:
            return {line.rstrip("\n") for line in f if line.strip()}

    def unavailable_reason(self, corpus_id: str) -> str | None:
        """Always ``None``: a passage collection has no skipped items (absent ids are just absent)."""
        return None

    def __repr__(self) -> str:
        return f"PassageCorpus({len(self)} passages at {str(self.root)!r})"


@runtime_checkable
class CorpusLike(Protocol):
    """What every consumer of a corpus may rely on, whatever its kind: the protocol that
    :class:`Corpus` (pages) and :class:`PassageCorpus` (passages) both satisfy.

    Consumers branch on :attr:`kind` (typed: ``"page"`` or ``"passage"``), never on the class or
    on a missing attribute. Page-only members (``image_path``, ``open_image``, ``unavailable``,
    ``duplicate_images``) are used only where ``kind == "page"``; passage-only members
    (``fingerprint``, ``passage``, ``iter_passages``, ``empty_ids``) only where
    ``kind == "passage"``. (The text backends also index a plain ``{id: text}`` mapping, which is
    not a ``CorpusLike``: see :func:`vdr.retrieve.base.iter_corpus_texts`.)

    Attributes:
        kind: ``"page"`` or ``"passage"``; also the unit that results and reports count.
        root: the corpus folder.
        report: the ingest report (pages) or the manifest (passages), parsed (``{}`` when absent).
    """

    kind: CorpusKind
    root: Path
    report: dict

    def ids(self) -> list[str]:
        """Every corpus id, in file order."""

    def __len__(self) -> int:
        """The number of pages or passages."""

    def __contains__(self, corpus_id: object) -> bool:
        """Whether ``corpus_id`` is a page or passage of the corpus."""

    def __iter__(self) -> Iterator[str]:
        """The corpus ids in file order."""

    def texts(self) -> dict[str, str]:
        """``{corpus_id: text}`` of every item (all in memory; ``""`` where there is no text)."""

    def iter_texts(self, batch_size: int = 8192) -> Iterator[tuple[list[str], list[str]]]:
        """``(ids, texts)`` batches of at most ``batch_size`` items in file order (streamed)."""

    def unavailable_reason(self, corpus_id: str) -> str | None:
        """Why ``corpus_id`` is known to ingest but not in the corpus, or ``None``."""


def load_corpus(corpus_dir: str | Path) -> "Corpus | PassageCorpus":
    """The corpus in ``corpus_dir``: a :class:`PassageCorpus` when it holds ``corpus.json`` (and no ``pages.jsonl``) with
    ``kind: passage``, else a page :class:`Corpus`.

    Raises:
        InputError: as :meth:`Corpus.load` / :meth:`PassageCorpus.load`.
    """
    root = Path(corpus_dir)
    if (root / MANIFEST_FILE).is_file() and not (root / PAGES_FILE).is_file():
        return PassageCorpus.load(root)
    return Corpus.load(root)
