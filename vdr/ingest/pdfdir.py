"""Ingest a folder of PDFs into a corpus folder, in parallel, incrementally.

See :func:`ingest_pdfs`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..corpus import IMAGES_DIR, PAGES_FILE, REPORT_FILE, Corpus, Page, page_id, write_pages
from ..errors import InputError, VdrWarning
from ..options import with_keywords
from ..io.atomic import atomic_write
from . import pdf as _pdf
from .pdf import DEFAULT_DPI, DEFAULT_MAX_PIXELS, OCR_MODES, RASTERIZERS, RenderOptions

__all__ = ["ingest_pdfs", "IngestOptions", "IngestReport", "DocumentReport", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 300.0
_CHUNK = 8  # pages per worker task


@dataclass(frozen=True)
class DocumentReport:
    """The outcome for one PDF (one entry of ``ingest-report.json``'s ``documents``).

    Attributes:
        source: path relative to the ingested folder, ``/``-separated.
        status: ``"ok"`` (every page ingested), ``"partial"`` (some pages skipped, see
            ``page_issues``) or ``"failed"`` (nothing ingested; see ``reason``).
        pages: number of pages of this document now in the corpus.
        page_count: number of pages the document has (0 when it could not be opened).
        reason: one-line reason for ``failed``/``partial``, else ``None``.
        sha256: hex SHA-256 of the file.
        rasterizer: ``"pdfium"`` or ``"poppler"``; rasterizer_version: its version string.
        page_issues: ``[{"page": n, "reason": ...}]`` for skipped pages, adapted pages (rendered at
            a lower DPI to fit the pixel budget) and OCR problems.
        skipped: ``True`` when the file was unchanged since the last run and not re-rendered.
        password: which password opened the file: ``"empty"`` (the empty user password, e.g. a
            permissions-only file), ``"given"`` (the one ``--password``), ``"from map"`` (the
            password map's entry), or ``None`` (not encrypted, or not opened). Never the password.
        page_decisions: how each ingested page's text was read, in page order (empty with ``--ocr never``):
            ``{"page", "ocr": bool, "reason", ...}`` with the text layer's coverage
            (``text_chars``, ``text_share``, ``image_share``; ``--ocr auto``), the orientation
            detected before OCR (``orientation``) and what text was kept (``text``); see
            :mod:`vdr.ingest.ocr`.
    """

    source: str
    status: str
    pages: int
    page_count: int
    reason: str | None
    sha256: str
    rasterizer: str
    rasterizer_version: str
    page_issues: tuple = ()
    skipped: bool = False
    password: str | None = None
    page_decisions: tuple = ()

    def to_json(self) -> dict:
        """The document's entry in ``ingest.json``: source, status, pages, page count, reason, sha256, rasterizer..."""
        return {
            "source": self.source,
            "status": self.status,
            "pages": self.pages,
            "page_count": self.page_count,
            "reason": self.reason,
            "sha256": self.sha256,
            "rasterizer": self.rasterizer,
            "rasterizer_version": self.rasterizer_version,
            "page_issues": list(self.page_issues),
            "skipped": self.skipped,
            "password": self.password,
            "page_decisions": list(self.page_decisions),
        }


@dataclass(frozen=True)
class IngestReport:
    """What :func:`ingest_pdfs` did (also written to ``CORPUS_DIR/ingest-report.json``).

    Attributes:
        corpus_dir: the corpus folder.
        documents: one :class:`DocumentReport` per PDF found, in path order.
        settings: the rendering settings used.
        pages: total pages in the corpus.
        seconds: wall-clock time of the run.
        image_encoding: how the page images were written (:data:`vdr.ingest.pdf.IMAGE_ENCODING`:
            lossless PNG, its filter and deflate level).
    """

    corpus_dir: Path
    documents: tuple[DocumentReport, ...]
    settings: Mapping
    pages: int
    seconds: float = 0.0
    extra: Mapping = field(default_factory=dict)
    image_encoding: Mapping = field(default_factory=lambda: dict(_pdf.IMAGE_ENCODING))

    @property
    def failed(self) -> list[DocumentReport]:
        """Documents with status ``failed``."""
        return [d for d in self.documents if d.status == "failed"]

    @property
    def ok(self) -> bool:
        """``True`` when every document has status ``ok``."""
        return all(d.status == "ok" for d in self.documents)

    def by_source(self) -> dict[str, DocumentReport]:
        """``{source: DocumentReport}``."""
        return {d.source: d for d in self.documents}

    def counts(self) -> dict[str, int]:
        """Number of documents per status."""
        out = {"ok": 0, "partial": 0, "failed": 0}
        for d in self.documents:
            out[d.status] += 1
        return out

    def to_json(self) -> dict:
        """The report as written to ``ingest.json`` (``kind: "pdf"``, settings, counts per status, one entry per document)."""
        return {
            "kind": "pdf",
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "settings": dict(self.settings),
            "counts": self.counts(),
            "pages": self.pages,
            "seconds": round(self.seconds, 3),
            "documents": [d.to_json() for d in self.documents],
            "image_encoding": dict(self.image_encoding),
            **dict(self.extra),
        }


def _find_pdfs(pdf_dir: Path, out_dir: Path) -> list[tuple[str, Path]]:
    out_res = out_dir.resolve()
    found = []
    for p in pdf_dir.rglob("*"):
        if p.suffix.lower() != ".pdf" or not p.is_file():
            continue
        try:
            p.resolve().relative_to(out_res)
            continue  # never ingest files inside the corpus folder
        except ValueError:
            pass
        found.append((p.relative_to(pdf_dir).as_posix(), p))
    found.sort(key=lambda t: t[0])
    return found


def _password_for(password: str | Mapping[str, str] | None, rel: str) -> tuple[str | None, str]:
    """(the password to try after the empty one, how it was supplied: ``"given"``/``"from map"``)."""
    if password is None or isinstance(password, str):
        return password, "given"
    return password.get(rel), "from map"


def _limit_omp_threads(threads: int) -> None:
    """Worker initializer: Tesseract (OpenMP) in this worker uses at most ``threads`` threads."""
    os.environ["OMP_THREAD_LIMIT"] = str(threads)


#: What worker processes import; a forkserver imports it once, before forking the workers.
_WORKER_MODULES = ["vdr.ingest.pdf"]


def _pool_context():
    """The multiprocessing context for the worker pool: ``"fork"`` when this process runs a single
    thread (not counting tqdm's progress-bar monitor, which sleeps and which workers never touch),
    else ``"forkserver"`` (with :data:`_WORKER_MODULES` preloaded).

    Fork starts a worker in milliseconds with everything already imported, where a forkserver
    costs a fresh interpreter plus the imports (~0.5 s on 2 idle cores, several seconds on a busy
    machine; measured with ``benchmarks/rasterize.py``). Forking is safe only while no other thread
    can hold a lock the child needs, so a process that already runs threads (a notebook with
    torch's thread pools, a server) gets the forkserver. Pebble forks replacement workers (after
    a timeout) from its own threads, which it supports.
    """
    import multiprocessing as mp
    import threading

    others = [t for t in threading.enumerate() if t is not threading.main_thread() and type(t).__name__ != "TMonitor"]
    if not others and threading.current_thread() is threading.main_thread() and "fork" in mp.get_all_start_methods():
        return mp.get_context("fork")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_WORKER_MODULES)
    return ctx


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def ocr_threads(workers: int, cores: int | None = None) -> int:
    """OpenMP threads allowed to Tesseract in each of ``workers`` processes: ``cores // workers``,
    at least 1, so that ``workers x threads <= cores``. With ``cores=None``: the available cores,
    and at most an ``OMP_THREAD_LIMIT`` the user already set.

    >>> ocr_threads(2, 2), ocr_threads(1, 8), ocr_threads(3, 8), ocr_threads(16, 2)
    (1, 8, 2, 1)
    """
    user = os.environ.get("OMP_THREAD_LIMIT", "") if cores is None else ""
    threads = max(1, (cores or available_cores()) // max(1, workers))
    return min(threads, int(user)) if user.isdigit() and int(user) > 0 else threads


def load_password_map(path: str | Path) -> dict[str, str]:
    """Read a JSON object ``{"relative/path.pdf": "password", ...}``.

    Raises:
        InputError: missing file, invalid JSON, or not an object of strings.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("password map not found", path=path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"password map is not valid JSON ({e})", path=path) from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InputError('password map must be a JSON object {"relative/path.pdf": "password"}', path=path)
    return data


def _load_previous(out_dir: Path) -> tuple[dict, dict[str, list[Page]]]:
    rp = out_dir / REPORT_FILE
    if not rp.is_file() or not (out_dir / PAGES_FILE).is_file():
        return {}, {}
    try:
        report = json.loads(rp.read_text(encoding="utf-8"))
        corpus = Corpus.load(out_dir)
    except (InputError, json.JSONDecodeError, UnicodeDecodeError, OSError) as e:
        warnings.warn(f"{out_dir}: previous corpus unreadable ({e}); re-ingesting everything", VdrWarning, stacklevel=3)
        return {}, {}
    if report.get("kind") != "pdf":
        return {}, {}
    by_src: dict[str, list[Page]] = {}
    for p in corpus.pages():
        by_src.setdefault(p.source, []).append(p)
    return report, by_src


def cli_field(default, flag: str, type_: type, help: str, *, choices: tuple[str, ...] | None = None, panel: str = "rendering"):
    """A dataclass field that is also a command-line option: its ``metadata`` holds ``flags``
    (option names), ``type`` (``str``/``int``/``float``), ``choices`` (or ``None``), ``negative``
    (``None``: not a bool switch), ``panel`` (the ``--help`` group: ``"rendering"``, ``"inputs"``)
    and ``help``; the option's default is the field's. ``vdr ingest`` builds its options from these
    fields (the same schema as :meth:`vdr.encode.settings.EncoderSettings.cli_fields`)."""
    return field(default=default, metadata={"flags": (flag,), "type": type_, "choices": choices, "negative": None, "panel": panel,
                                            "help": help})


@dataclass(frozen=True)
class IngestOptions:
    """Every option of :func:`ingest_pdfs` (all but ``pdf_dir`` and ``out``), with its default.

    ``vdr.ingest(pdf_dir, out, dpi=100)`` builds one from its keywords;
    ``vdr.ingest(pdf_dir, out, options=IngestOptions(...), dpi=100)`` starts from a given one (the
    keywords override its fields).

    Attributes:
        dpi: requested resolution, dots per inch (> 0).
        max_pixels: per-page pixel budget (width x height); larger pages are rendered at a lower
            DPI, recorded per page. Must not exceed PIL's ``Image.MAX_IMAGE_PIXELS``.
        rasterizer: ``"pdfium"`` (pypdfium2, default) or ``"poppler"`` (pdf2image + poppler-utils).
        ocr: ``"auto"`` (Tesseract on pages without a text layer), ``"always"`` or ``"never"``.
        ocr_lang: Tesseract language(s).
        password: one open password for every encrypted PDF, or ``{relative path: password}``.
        workers: worker processes (default: number of CPUs).
        timeout: seconds allowed to each step of one document (opening it; each batch of up to 8
            pages); a document exceeding it is reported ``failed``/``partial`` and the run goes on.
        progress: show a progress bar (pages/s) on stderr.

    The fields with ``metadata`` (all but ``progress``) are ``vdr ingest``'s PDF options
    (:func:`cli_field`).
    """

    dpi: float = cli_field(DEFAULT_DPI, "--dpi", float, "Rendering resolution in dots per inch.")
    max_pixels: int = cli_field(DEFAULT_MAX_PIXELS, "--max-pixels", int,
                                "Pixel budget per page; larger pages render at a lower, recorded DPI.")
    rasterizer: str = cli_field("pdfium", "--rasterizer", str, "pdfium (pypdfium2) or poppler (pdf2image + poppler-utils).",
                                choices=RASTERIZERS)
    ocr: str = cli_field("auto", "--ocr", str, "auto (Tesseract for pages without a text layer), always or never.", choices=OCR_MODES)
    ocr_lang: str = cli_field("eng", "--ocr-lang", str, "Tesseract language(s), e.g. eng+deu.")
    password: str | Mapping[str, str] | None = cli_field(None, "--password", str, "Open password for encrypted PDFs.", panel="inputs")
    workers: int | None = cli_field(None, "--workers", int, "Worker processes (default: number of CPUs).")
    timeout: float = cli_field(DEFAULT_TIMEOUT, "--timeout", float, "Seconds allowed to each step of one document.")
    progress: bool = True

    @classmethod
    def build(cls, options: "IngestOptions | None", kwargs: Mapping, where: str) -> "IngestOptions":
        """``options`` (default: all defaults) with ``kwargs`` applied.

        Raises:
            TypeError: a keyword that is no field (named, with the known ones), as for any
                Python function called with an unknown keyword; ``options`` of another type.
        """
        return with_keywords(cls, options, dict(kwargs), where)

    @classmethod
    def cli_fields(cls) -> list[dataclasses.Field]:
        """The fields that are ``vdr ingest`` options (see :func:`cli_field`), in ``--help`` order."""
        return [f for f in dataclasses.fields(cls) if f.metadata]

    def render_options(self) -> RenderOptions:
        """The rendering part (:class:`~vdr.ingest.pdf.RenderOptions`: dpi, max_pixels, rasterizer, ocr, ocr_lang)."""
        return RenderOptions(float(self.dpi), int(self.max_pixels), self.rasterizer, self.ocr, self.ocr_lang)


def ingest_pdfs(pdf_dir: str | Path, out: str | Path, *, options: IngestOptions | None = None, **kwargs) -> IngestReport:
    """Turn every PDF under ``pdf_dir`` (recursively) into corpus pages under ``out``.

    Writes ``out/pages.jsonl`` (see :class:`vdr.corpus.Page`), one RGB PNG per page under
    ``out/images/`` and ``out/ingest-report.json``, each atomically. Page ids are
    ``<relative path>#<page>`` (see :func:`vdr.corpus.page_id`). A re-run skips PDFs whose SHA-256
    and settings are unchanged and did not fail, ingests new and changed ones, and drops pages
    (and images) of PDFs that disappeared.

    Args:
        pdf_dir: folder searched recursively for ``*.pdf`` (any case).
        out: corpus folder (created).
        options: an :class:`IngestOptions` to start from (default: its defaults).
        **kwargs: any field of :class:`IngestOptions` (``dpi``, ``max_pixels``, ``rasterizer``,
            ``ocr``, ``ocr_lang``, ``password``, ``workers``, ``timeout``, ``progress``); they
            override ``options``' fields.

    Returns:
        :class:`IngestReport`. Bad documents (empty, not a PDF, truncated, damaged, zero pages,
        encrypted without password, timed out) are reported with status ``failed`` and a reason,
        never raised.

    Raises:
        InputError: ``pdf_dir`` is not a folder, or an invalid option.
        TypeError: an unknown keyword.
    """
    o = IngestOptions.build(options, kwargs, "ingest_pdfs")
    t0 = time.perf_counter()
    pdf_dir, out_dir = Path(pdf_dir), Path(out)
    _check_options(pdf_dir, o.rasterizer, o.ocr, o.dpi, o.max_pixels, o.timeout)
    o = dataclasses.replace(o, workers=max(1, o.workers or os.cpu_count() or 1))
    opts = o.render_options()
    settings = opts.settings()
    version = _pdf.rasterizer_version(o.rasterizer)
    docs = _find_pdfs(pdf_dir, out_dir)
    if not docs:
        raise InputError(_no_pdfs(pdf_dir, out_dir), path=pdf_dir)
    renamed = _nfc_sources(docs, pdf_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    orientation = _orientation_status(o.ocr)
    prev_report, prev_pages = _load_previous(out_dir)
    prev_docs = {d["source"]: d for d in prev_report.get("documents", []) if isinstance(d, dict) and "source" in d}
    same_settings = prev_report.get("settings") == settings
    results, pages_of, todo = _reuse_unchanged(docs, prev_docs if same_settings else {}, prev_pages, out_dir, o.rasterizer, version)

    threads = ocr_threads(o.workers)
    start_method = None
    if todo:
        job = _Job(o, opts, threads, out_dir, version)
        start_method = _run(todo, job, results, pages_of)

    ordered = [results[rel] for rel, _ in docs]
    all_pages = [p for rel, _ in docs for p in pages_of.get(rel, [])]
    write_pages(out_dir / PAGES_FILE, all_pages)
    _remove_orphan_images(out_dir, {p.image for p in all_pages})
    extra = {"pdf_dir": str(pdf_dir), "rasterizer_version": version, "workers": o.workers,
             "worker_start_method": start_method, "timeout": o.timeout,
             "ocr_threads": {"workers": o.workers, "omp_thread_limit_per_worker": threads, "cores": available_cores()},
             "ocr_orientation": orientation, "ocr_summary": ocr_summary(ordered), "exif_orientation": PDF_EXIF_POLICY,
             "nfc_ids": renamed}
    _warn_no_tesseract(orientation, extra["ocr_summary"])
    extra.update(_page_findings(ordered, all_pages))
    report = IngestReport(out_dir, tuple(ordered), settings, len(all_pages), time.perf_counter() - t0, extra)
    write_report(out_dir, report.to_json())
    return report


#: How EXIF orientation is handled for PDF pages (recorded in the report as ``exif_orientation``).
PDF_EXIF_POLICY = ("not applied: PDF pages are rendered as PDF viewers show them; a JPEG embedded in a PDF is drawn as"
                   " its stored samples (the PDF format has no EXIF orientation; viewers ignore the tag)")


def _no_pdfs(pdf_dir: Path, out_dir: Path) -> str:
    """The message for a folder without PDFs: what it holds instead (up to five names)."""
    out_res = out_dir.resolve()
    other = []
    for p in sorted(pdf_dir.rglob("*")):
        if p.is_file() and out_res not in p.resolve().parents:
            other.append(p.relative_to(pdf_dir).as_posix())
    held = (f"; it holds {len(other)} other file(s), e.g. {', '.join(other[:5])}" if other else "; it is empty")
    return f"no PDF (*.pdf, searched recursively) in the folder{held}: nothing to ingest"


def _nfc_sources(docs: list[tuple[str, Path]], pdf_dir: Path) -> list[dict]:
    """The sources whose page ids differ from their file names by Unicode normalisation:
    ``[{"source": name on disk, "id": the NFC name in the page ids, "form": "NFD" or "other"}]``
    (:func:`vdr.corpus.page_id` writes ids in NFC).

    Raises:
        InputError: two files whose names normalise to the same NFC name (both named): their
            pages would share ids.
    """
    import unicodedata

    seen: dict[str, str] = {}
    out = []
    for rel, _path in docs:
        nfc = unicodedata.normalize("NFC", rel)
        if nfc in seen:
            raise InputError(
                f"two files have names that differ only in Unicode normalisation: {seen[nfc]!r} ({ascii(seen[nfc])}) and"
                f" {rel!r} ({ascii(rel)}); page ids are written in NFC, so both would get the ids {nfc!r}#N: rename one",
                path=pdf_dir,
            )
        seen[nfc] = rel
        if nfc != rel:
            out.append({"source": rel, "id": nfc, "form": "NFD" if unicodedata.normalize("NFD", rel) == rel else "other"})
    if out:
        warnings.warn(f"{len(out)} PDF file name(s) are not in Unicode NFC (e.g. {ascii(out[0]['source'])}, as macOS writes"
                      " names); their page ids are written in NFC (listed in the report as nfc_ids)", VdrWarning, stacklevel=3)
    return out


def _orientation_status(ocr: str) -> dict | None:
    """The report's ``ocr_orientation``: whether pages are turned upright before OCR (Tesseract's
    OSD); warns when OCR is on and OSD is unavailable. ``None`` with ``--ocr never``."""
    if ocr == "never":
        return None
    from .ocr import NO_TESSERACT, osd_status

    missing = osd_status()
    if missing is None:
        return {"osd": "available", "reason": "pages are turned upright before OCR (tesseract --psm 0)"}
    if not missing.startswith(NO_TESSERACT):  # without Tesseract at all: said once a page needs OCR (_warn_no_tesseract)
        warnings.warn(f"orientation detection before OCR is unavailable: {missing}", VdrWarning, stacklevel=3)
    return {"osd": "unavailable", "reason": missing}


def _warn_no_tesseract(orientation: dict | None, summary: dict) -> None:
    """Name a missing Tesseract once, with what it disables, when some page needed OCR (``summary``:
    :func:`ocr_summary`); a corpus whose pages all have a text layer needs none."""
    from .ocr import NO_TESSERACT

    reason = str((orientation or {}).get("reason", ""))
    if summary["ocr"] and reason.startswith(NO_TESSERACT):
        warnings.warn(f"OCR is unavailable for {summary['ocr']} page(s) that need it: {reason}", VdrWarning, stacklevel=3)


def ocr_summary(documents) -> dict:
    """Counts over every page decision of ``documents`` (:attr:`DocumentReport.page_decisions`):
    ``{"ocr": pages OCRed, "no_text_layer", "thin_text_layer", "turned": pages turned before OCR,
    "layer_kept_after_ocr": thin layers kept because OCR read less}``."""
    out = {"ocr": 0, "no_text_layer": 0, "thin_text_layer": 0, "turned": 0, "layer_kept_after_ocr": 0}
    for d in documents:
        for dec in d.page_decisions:
            if not isinstance(dec, dict) or not dec.get("ocr"):
                continue
            out["ocr"] += 1
            reason = str(dec.get("reason", ""))
            out["no_text_layer"] += reason == "no text layer"
            out["thin_text_layer"] += reason.startswith("thin text layer")
            out["turned"] += bool((dec.get("orientation") or {}).get("turned"))
            out["layer_kept_after_ocr"] += str(dec.get("text", "")).startswith("text layer kept")
    return out


@dataclass(frozen=True)
class _Job:
    """What every document of one :func:`ingest_pdfs` run shares: its options (``workers``
    resolved), the rendering options, OpenMP threads per worker, the corpus folder and the
    rasterizer version."""

    options: IngestOptions
    render: RenderOptions
    threads: int
    out_dir: Path
    version: str


MIN_BUDGET = _pdf.MIN_SIDE_PX * _pdf.MIN_SIDE_PX


def _check_options(pdf_dir: Path, rasterizer: str, ocr: str, dpi: float, max_pixels: int, timeout: float) -> None:
    """Validate :func:`ingest_pdfs`' folder and options.

    Raises:
        InputError: ``pdf_dir`` is not a folder, or an invalid option (the message names it).
    """
    from PIL import Image

    if not pdf_dir.is_dir():
        raise InputError("not a folder of PDFs", path=pdf_dir)
    if rasterizer not in RASTERIZERS:
        raise InputError(f"unknown rasterizer {rasterizer!r}; use one of {', '.join(RASTERIZERS)}")
    if ocr not in OCR_MODES:
        raise InputError(f"unknown OCR mode {ocr!r}; use one of {', '.join(OCR_MODES)}")
    if not (dpi > 0 and math.isfinite(dpi)):
        raise InputError(f"dpi must be a positive number, got {dpi!r}")
    if max_pixels < MIN_BUDGET:
        raise InputError(f"max_pixels must be at least {MIN_BUDGET}, got {max_pixels}")
    if Image.MAX_IMAGE_PIXELS is not None and max_pixels > Image.MAX_IMAGE_PIXELS:
        raise InputError(
            f"max_pixels {max_pixels} exceeds PIL's decompression-bomb limit ({Image.MAX_IMAGE_PIXELS} px); choose a smaller budget"
        )
    if timeout <= 0:
        raise InputError(f"timeout must be positive, got {timeout}")


def _reuse_unchanged(docs, prev_docs: dict, prev_pages: dict[str, list[Page]], out_dir: Path, rasterizer: str, version: str):
    """Split ``docs`` (``[(rel, path)]``) into those the previous run already ingested and the rest.

    A document is reused when ``prev_docs`` (the previous report's entries by source, empty when
    the settings changed) has it with the same SHA-256, status ``ok``/``partial``, and all of its
    pages and their images are still there. Returns ``(results, pages_of, todo)``: the reused
    documents' :class:`DocumentReport` (``skipped=True``) and pages by source, and
    ``[(rel, path, sha256)]`` to ingest.
    """
    results: dict[str, DocumentReport] = {}
    pages_of: dict[str, list[Page]] = {}
    todo: list[tuple[str, Path, str]] = []
    for rel, path in docs:
        sha = _pdf.sha256_file(path)
        old = prev_docs.get(rel)
        if (
            old is not None
            and old.get("sha256") == sha
            and old.get("status") in ("ok", "partial")
            and len(prev_pages.get(rel, [])) == old.get("pages")
            and all((out_dir / p.image).is_file() and p.page is not None and p.corpus_id == page_id(rel, p.page) for p in prev_pages.get(rel, []))
        ):
            results[rel] = DocumentReport(
                rel, old["status"], old["pages"], old.get("page_count", old["pages"]), old.get("reason"), sha,
                rasterizer, old.get("rasterizer_version", version), tuple(old.get("page_issues", ())), True,
                old.get("password"), tuple(old.get("page_decisions", ())),
            )
            pages_of[rel] = prev_pages[rel]
        else:
            todo.append((rel, path, sha))
    return results, pages_of, todo


def write_report(out_dir: Path, data: dict) -> None:
    """Write ``data`` as ``out_dir/ingest-report.json`` (indented UTF-8 JSON), atomically."""
    with atomic_write(out_dir / REPORT_FILE) as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def _page_findings(documents, pages: list[Page]) -> dict:
    """The report's ``unavailable_pages`` (pages of opened documents that are not in the corpus,
    with their reason), ``failed_documents`` (sources that could not be opened: every page id of
    theirs is unavailable) and ``duplicate_pages`` (equal pixels, see :func:`duplicate_summary`)."""
    have = {p.corpus_id for p in pages}
    unavailable = []
    for d in documents:
        reasons = {}
        for issue in d.page_issues:
            reasons.setdefault(issue["page"], issue["reason"])
        for n in range(1, d.page_count + 1):
            cid = page_id(d.source, n)
            if cid not in have:
                unavailable.append({"corpus-id": cid, "reason": reasons.get(n) or d.reason or "not ingested"})
    failed_docs = [d.source for d in documents if d.status == "failed" and d.page_count == 0]
    return {"unavailable_pages": unavailable, "failed_documents": failed_docs, "duplicate_pages": duplicate_summary(pages)}


def duplicate_summary(pages: list[Page], max_groups: int = 50) -> dict:
    """``{"num_groups", "num_pages", "groups"}`` of pages whose images have equal pixels
    (``Page.image_sha256``); ``num_pages`` counts every page of a group, ``groups`` lists at most
    ``max_groups`` groups of corpus ids (file order). Warns (:class:`VdrWarning`) when any."""
    by_hash: dict[str, list[str]] = {}
    for p in pages:
        if p.image_sha256:
            by_hash.setdefault(p.image_sha256, []).append(p.corpus_id)
    groups = [g for g in by_hash.values() if len(g) > 1]
    if groups:
        warnings.warn(
            f"{sum(map(len, groups))} pages have a duplicate image ({len(groups)} group(s) of equal pixels), e.g. {groups[0][:3]}",
            VdrWarning, stacklevel=3,
        )
    return {"num_groups": len(groups), "num_pages": sum(map(len, groups)), "groups": groups[:max_groups]}


def _remove_orphan_images(out_dir: Path, keep: set[str]) -> None:
    img_dir = out_dir / IMAGES_DIR
    if not img_dir.is_dir():
        return
    for p in img_dir.glob("*.png"):
        if f"{IMAGES_DIR}/{p.name}" not in keep and p.is_file():
            p.unlink()


def _short(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__


def _run(todo, job: _Job, results: dict, pages_of: dict) -> str:
    """Probe every document, then render its pages in batches, all in one process pool.

    ``job.options.workers`` processes; each runs with ``OMP_THREAD_LIMIT`` set to ``job.threads``
    (Tesseract's threads, see :func:`ocr_threads`). Fills ``results`` and ``pages_of`` (by relative
    path). Returns the workers' start method (``"fork"`` or ``"forkserver"``, see :func:`_pool_context`).
    """
    from pebble import ProcessPool

    from ..progress import log_bar

    o, opts, out_dir, version = job.options, job.render, job.out_dir, job.version
    workers, threads, password, timeout = o.workers, job.threads, o.password, o.timeout
    state: dict[str, dict] = {}
    ctx = _pool_context()  # before the progress bar starts its monitor thread
    bar = log_bar(total=0, unit="page", desc="ingest", disable=not o.progress, dynamic_ncols=True)
    try:
        with ProcessPool(max_workers=workers, context=ctx, initializer=_limit_omp_threads, initargs=(threads,)) as pool:
            probes = {
                rel: pool.schedule(_pdf.probe, args=(str(path), _password_for(password, rel)[0], opts.rasterizer), timeout=timeout)
                for rel, path, _ in todo
            }
            chunks: list[tuple[str, list[int], object]] = []
            for rel, path, sha in todo:
                st = state[rel] = {"sha": sha, "error": None, "issues": [], "records": [], "password": None, "decisions": []}
                try:
                    info = probes[rel].result()
                except FutureTimeout:
                    st["error"] = f"timed out after {timeout:g} s opening the document"
                    continue
                except _pdf.DocumentError as e:
                    st["error"] = str(e)
                    continue
                except Exception as e:  # a crash of the worker or of the PDF library
                    st["error"] = f"could not open: {type(e).__name__}: {_short(e)}"
                    continue
                pw, how = _password_for(password, rel)
                st["password"] = {"empty": "empty", "password": how}.get(info.opened_with)
                pw = pw if info.opened_with == "password" else None
                n = len(info.page_sizes)
                st["page_count"] = n
                bar.total += n
                bar.refresh()
                size = max(1, min(_CHUNK, math.ceil(n / workers)))
                for a in range(0, n, size):
                    nums = list(range(a + 1, min(n, a + size) + 1))
                    fut = pool.schedule(
                        _pdf.render_pages,
                        args=(str(path), rel, nums, info.page_sizes[a : a + size], pw, opts, str(out_dir)),
                        timeout=timeout,
                    )
                    chunks.append((rel, nums, fut))
            for rel, nums, fut in chunks:
                _collect(state[rel], nums, fut, timeout)
                bar.update(len(nums))
    finally:
        bar.close()
    for rel, _, sha in todo:
        results[rel], pages_of[rel] = _conclude(rel, state[rel], sha, opts, version)
    return ctx.get_start_method()


def _collect(st: dict, nums: list[int], fut, timeout: float) -> None:
    """Add one batch's page records and issues to the document state ``st``."""
    try:
        recs = fut.result()
    except FutureTimeout:
        st["issues"].extend(
            {"page": n, "reason": f"timed out after {timeout:g} s rendering pages {nums[0]}-{nums[-1]}"} for n in nums
        )
        return
    except Exception as e:
        reason = f"{type(e).__name__}: {_short(e)}"
        st["issues"].extend({"page": n, "reason": f"rendering failed: {reason}"} for n in nums)
        return
    for r in recs:
        if "corpus-id" in r:
            for note in r.pop("notes", []):
                st["issues"].append({"page": r["page"], "reason": note})
            decision = r.pop("decision", None)
            if decision is not None:
                st["decisions"].append(decision)
            st["records"].append(Page.from_json(r))
        else:
            st["issues"].append(r)


def _conclude(rel: str, st: dict, sha: str, opts, version: str) -> tuple[DocumentReport, list[Page]]:
    """The document's report (status, reason) and its pages, from its collected state."""
    if st["error"] is not None:
        return DocumentReport(rel, "failed", 0, 0, st["error"], sha, opts.rasterizer, version, (), False), []
    recs = sorted(st["records"], key=lambda p: p.page)
    issues = sorted(st["issues"], key=lambda i: i["page"])
    done = {p.page for p in recs}
    skipped = [i for i in issues if i["page"] not in done]
    skipped_pages = st["page_count"] - len(recs)
    if not recs:
        status = "failed"
        reason = "no page could be ingested: " + _summarise(skipped or issues)
    elif skipped_pages:
        status = "partial"
        reason = f"{skipped_pages} of {st['page_count']} pages skipped: " + _summarise(skipped or issues)
    else:
        status, reason = "ok", None
    decisions = tuple(sorted(st["decisions"], key=lambda d: d["page"]))
    report = DocumentReport(rel, status, len(recs), st["page_count"], reason, sha, opts.rasterizer, version, tuple(issues), False,
                            st["password"], decisions)
    return report, recs


def _summarise(issues: list[dict]) -> str:
    groups: dict[str, list[int]] = {}
    for i in issues:
        if not i["reason"].startswith("OCR failed"):
            groups.setdefault(i["reason"], []).append(i["page"])
    if not groups:  # only OCR failures (e.g. an unknown --ocr-lang): they are the reason
        for i in issues:
            groups.setdefault(i["reason"], []).append(i["page"])
    if not groups:
        return "no page could be rendered (no reason recorded)"
    parts = []
    for reason, pages in groups.items():
        where = f"page {pages[0]}" if len(pages) == 1 else f"pages {', '.join(map(str, pages[:5]))}{' ...' if len(pages) > 5 else ''}"
        parts.append(f"{reason} ({where})")
    return "; ".join(parts)[:500]
