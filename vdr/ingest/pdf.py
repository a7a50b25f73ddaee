"""One PDF at a time: open it, read its page boxes, rasterize pages, extract their text (or OCR it).

These functions run inside worker processes (see :mod:`vdr.ingest.pdfdir`); they never share
state, open each document themselves and close documents, pages, text pages and bitmaps
explicitly so that memory stays flat over thousands of PDFs.

Two rasterizers give the same image size for the same DPI (``ceil``/``round`` of
``page size in pt x dpi / 72``, within 1 px), of the visible box (the CropBox clipped to the
MediaBox), upright for pages with ``/Rotate``, always RGB, and read the text inside that box only:

* ``"pdfium"`` (default): pypdfium2, no system package needed.
* ``"poppler"``: pdf2image driving poppler's ``pdftoppm`` (Debian ``poppler-utils``); text from
  ``pdftotext``.

Failures of a whole document raise :class:`DocumentError` with a one-line reason; problems of a
single page (the checks of :mod:`vdr.ingest.images`) are returned as that page's ``reason`` so the
rest of the document is kept. The empty password is always tried before the one given (see
:func:`probe`); page text is normalised by :func:`vdr.text.normalize_text`.
"""

from __future__ import annotations

import html
import math
import re
import subprocess
from dataclasses import dataclass, replace
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

from ..corpus import IMAGES_DIR, image_name, page_id
from ..errors import VdrError
from ..io.atomic import atomic_write
from ..text import normalize_text
from .images import MAX_ASPECT, MIN_SIDE_PX, pixel_sha256, size_problem, to_rgb
from .ocr import TextCover, ocr_decision, read_page

__all__ = [
    "RenderOptions",
    "DocumentError",
    "DocInfo",
    "effective_dpi",
    "probe",
    "rasterize",
    "write_png",
    "IMAGE_ENCODING",
    "render_pages",
    "rasterizer_version",
    "sha256_file",
    "DEFAULT_DPI",
    "DEFAULT_MAX_PIXELS",
    "MIN_SIDE_PX",
    "MAX_ASPECT",
    "page_cover",
]

DEFAULT_DPI = 144.0
#: 2048 x 2048 px. A3 at 144 dpi (2382 x 1684 = 4.0 MP) fits; ColPali resizes to 448 x 448 and
#: ColQwen2 caps pages at ~0.6-1.3 MP, so more pixels buy nothing but memory, while 4 MP keeps
#: text legible for OCR. Kept far below PIL's decompression-bomb limit (~89 MP).
DEFAULT_MAX_PIXELS = 2048 * 2048
RASTERIZERS = ("pdfium", "poppler")
OCR_MODES = ("auto", "always", "never")
#: The OCR rules of :mod:`vdr.ingest.ocr` (recorded in the settings: a corpus read under other rules is read again):
#: ``auto`` OCRs thin text layers; pages are turned upright by Tesseract's OSD before OCR.
OCR_POLICY = "text-cover+osd/1"
def _deflate():
    """``(compress, library name)``: ISA-L's deflate (python-isal, a vdr dependency) when it imports,
    else zlib's. Both write standard zlib streams (RFC 1950) that every PNG decoder reads."""
    try:
        from isal import isal_zlib

        return isal_zlib.compress, "isal"
    except ImportError:  # isal is a dependency; vdr keeps working without it
        import zlib

        return zlib.compress, "zlib"


#: How page images are written (recorded as ``image_encoding`` in ``ingest-report.json``): lossless
#: PNG, 8-bit RGB, every row with PNG filter 2 ("Up"), deflated at level 1 into one IDAT chunk (see
#: :func:`write_png`). Measured on GeoTopo (144 dpi, 1191 x 1684 px pages, 2-core machine), per page:
#: PIL's PNG writer 200-250 ms at ``compress_level=1`` (its adaptive per-row filter search cannot be
#: turned off and costs more than the deflate) and 380 ms at its default level 6; Up filter + zlib
#: level 1: 90 ms; Up filter + ISA-L level 1: 10 ms + 7 ms filtering, files ~280 kB (PIL level 1:
#: ~200 kB). Pixels are identical whatever the deflate library.
IMAGE_ENCODING = {"format": "png", "lossless": True, "png_filter": "up", "deflate": _deflate()[1], "deflate_level": 1}


class DocumentError(VdrError):
    """A whole document cannot be ingested; ``str(e)`` is the one-line reason."""


class PagePlan(NamedTuple):
    """How one page is to be rendered (a tuple, so that ``n, w, h, d, problem = plan`` works).

    Attributes:
        n: 1-based page number.
        w, h: upright page size in PDF points (1/72 inch).
        d: the effective DPI (:func:`effective_dpi`); ``None`` when the page is not rendered.
        problem: why the page is not rendered, or ``None``.
    """

    n: int
    w: float
    h: float
    d: float | None
    problem: str | None


@dataclass(frozen=True)
class RenderOptions:
    """How pages are rendered.

    Attributes:
        dpi: requested resolution in dots per inch (> 0).
        max_pixels: pixel budget per page (width x height); the DPI of a larger page is lowered.
        rasterizer: ``"pdfium"`` or ``"poppler"``.
        ocr: ``"auto"`` (OCR pages without a text layer), ``"always"`` or ``"never"``.
        ocr_lang: Tesseract language(s), e.g. ``"eng"`` or ``"eng+deu"``.
    """

    dpi: float = DEFAULT_DPI
    max_pixels: int = DEFAULT_MAX_PIXELS
    rasterizer: str = "pdfium"
    ocr: str = "auto"
    ocr_lang: str = "eng"

    def settings(self) -> dict:
        """The options as a JSON-able dict (recorded in the report; a change re-renders everything).
        With OCR on, ``ocr_policy`` names the rules of :mod:`vdr.ingest.ocr`, so that a corpus
        read under older rules is read again."""
        out = {
            "dpi": self.dpi,
            "max_pixels": self.max_pixels,
            "rasterizer": self.rasterizer,
            "ocr": self.ocr,
            "ocr_lang": self.ocr_lang,
        }
        if self.ocr != "never":
            out["ocr_policy"] = OCR_POLICY
        return out


@dataclass(frozen=True)
class DocInfo:
    """What opening a document tells: its upright page sizes in PostScript points (1/72 inch).

    Attributes:
        page_sizes: ``[(width_pt, height_pt), ...]`` per page: the visible box (CropBox clipped to
            the MediaBox; the MediaBox when there is no CropBox) after ``/Rotate`` (a page rotated
            by 90 degrees reports its box's height as width).
        encrypted: the file has an ``/Encrypt`` dictionary (a user or an owner password).
        opened_with: ``None`` (not encrypted), ``"empty"`` (opened with the empty user password,
            e.g. a permissions-only file) or ``"password"`` (opened with the password given).
    """

    page_sizes: list[tuple[float, float]]
    encrypted: bool = False
    opened_with: str | None = None


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (:func:`vdr.io.digest.file_sha256`)."""
    from ..io.digest import file_sha256

    return file_sha256(path)


def effective_dpi(width_pt: float, height_pt: float, dpi: float, max_pixels: int) -> float:
    """The DPI at which a ``width_pt x height_pt`` page fits ``max_pixels``.

    Returns ``dpi`` when ``ceil(w*dpi/72) * ceil(h*dpi/72) <= max_pixels``, otherwise the largest
    DPI (rounded down to 1/1000) that fits.

    >>> effective_dpi(595.276, 841.89, 144, 4_194_304)
    144
    >>> effective_dpi(14400, 14400, 144, 2048 * 2048)
    10.24

    Raises:
        ValueError: non-positive sizes, dpi or budget.
    """
    if width_pt <= 0 or height_pt <= 0 or dpi <= 0 or max_pixels <= 0:
        raise ValueError(f"sizes, dpi and max_pixels must be positive: {width_pt} x {height_pt} pt, {dpi} dpi, {max_pixels} px")

    def npx(d: float) -> int:
        return math.ceil(width_pt * d / 72 - 1e-9) * math.ceil(height_pt * d / 72 - 1e-9)

    if npx(dpi) <= max_pixels:
        return dpi
    d = math.floor(72 * math.sqrt(max_pixels / (width_pt * height_pt)) * 1000) / 1000
    while d > 0.001 and npx(d) > max_pixels:
        d = math.floor(d * 999) / 1000
    return d


def _header_checks(path: Path) -> None:
    size = path.stat().st_size
    if size == 0:
        raise DocumentError("empty file (0 bytes)")
    with open(path, "rb") as f:
        head = f.read(1024)
        f.seek(max(0, size - 2048))
        tail = f.read()
    if b"%PDF-" not in head:
        raise DocumentError("not a PDF (no %PDF- header in the first 1024 bytes)")
    if b"%%EOF" not in tail:
        raise DocumentError("truncated PDF (no %%EOF marker at the end of the file)")


def _pdfium_open(path: Path, password: str | None):
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(str(path), password=password)
    except pdfium.PdfiumError as e:
        msg = str(e)
        # PDFium's error code can be left over from an earlier failure in the same process, so the
        # file's own structure decides first: an empty page tree, then an /Encrypt dictionary.
        if _zero_pages(path):
            raise DocumentError("zero pages (the page tree is empty)") from None
        if "password" in msg.lower() and _has_encrypt_dict(path):
            if password:
                raise DocumentError("encrypted: the password given is wrong") from None
            raise DocumentError("encrypted: a password is needed (pass --password or a password map)") from None
        raise DocumentError(f"damaged or invalid PDF: {msg}") from None


def _has_encrypt_dict(path: Path) -> bool:
    """True when the file mentions an ``/Encrypt`` dictionary in its first or last 16 MiB."""
    with open(path, "rb") as f:
        head = f.read(16 << 20)
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - (16 << 20)))
        tail = f.read()
    return b"/Encrypt" in head or b"/Encrypt" in tail


_COUNT = re.compile(rb"/Type\s*/Pages\b.{0,200}?/Count\s+(\d+)|/Count\s+(\d+).{0,200}?/Type\s*/Pages\b", re.S)


def _zero_pages(path: Path) -> bool:
    """True when every page-tree node in the first 16 MiB declares ``/Count 0`` (PDFium refuses such files)."""
    with open(path, "rb") as f:
        data = f.read(16 << 20)
    counts = [int(a or b) for a, b in _COUNT.findall(data)]
    return bool(counts) and not any(counts)


def _poppler_info(path: Path, password: str | None, first: int | None = None, last: int | None = None) -> dict:
    from pdf2image import pdfinfo_from_path
    from pdf2image.exceptions import PDFInfoNotInstalledError, PDFPageCountError, PDFPopplerTimeoutError

    try:
        return pdfinfo_from_path(str(path), userpw=password, first_page=first, last_page=last, timeout=600)
    except PDFInfoNotInstalledError:
        raise DocumentError("poppler is not installed (Debian: apt-get install poppler-utils)") from None
    except PDFPopplerTimeoutError:
        raise DocumentError("pdfinfo timed out") from None
    except PDFPageCountError as e:
        msg = " ".join(str(e).split())[:300]
        if "password" in msg.lower():
            if password:
                raise DocumentError("encrypted: the password given is wrong") from None
            raise DocumentError("encrypted: a password is needed (pass --password or a password map)") from None
        if "Invalid page count 0" in msg or "can not be after the last page (0)" in msg:
            raise DocumentError("zero pages") from None
        raise DocumentError(f"damaged or invalid PDF: {msg}") from None


_SIZE = re.compile(r"([0-9.]+)\s*x\s*([0-9.]+)\s*pts")


def probe(path: str | Path, password: str | None, rasterizer: str = "pdfium") -> DocInfo:
    """Open a PDF and read its page boxes (no rendering).

    The empty password is tried first (it opens unencrypted and permissions-only files, whatever
    password was given), then ``password`` when one is given. :attr:`DocInfo.opened_with` tells
    which one opened the file; the password itself is never recorded.

    Args:
        path: the PDF file.
        password: the open (user) or owner password of an encrypted PDF, or ``None``.
        rasterizer: ``"pdfium"`` or ``"poppler"`` (the engine whose view of the document counts).

    Returns:
        :class:`DocInfo` with one upright ``(width_pt, height_pt)`` per page (visible box).

    Raises:
        DocumentError: empty file, not a PDF, truncated, damaged, encrypted without (the right)
            password, or zero pages.
        ValueError: an unknown rasterizer.
    """
    path = Path(path)
    _header_checks(path)
    if rasterizer not in RASTERIZERS:
        raise ValueError(f"unknown rasterizer {rasterizer!r}; use one of {RASTERIZERS}")
    attempts = [("empty", None)] + ([("password", password)] if password else [])
    for label, pw in attempts:
        try:
            info = _probe_pdfium(path, pw) if rasterizer == "pdfium" else _probe_poppler(path, pw)
        except DocumentError as e:
            if str(e).startswith("encrypted:"):
                continue
            raise
        if not info.page_sizes:
            raise DocumentError("zero pages")
        return replace(info, opened_with=label if info.encrypted else None)
    if password:
        raise DocumentError("encrypted: the password given is wrong (the empty password was tried too)")
    raise DocumentError("encrypted: a password is needed (pass --password or a password map)")


def _probe_pdfium(path: Path, password: str | None) -> DocInfo:
    import pypdfium2.raw as pdfium_c

    pdf = _pdfium_open(path, password)
    sizes: list[tuple[float, float]] = []
    try:
        encrypted = pdfium_c.FPDF_GetSecurityHandlerRevision(pdf.raw) != -1
        for i in range(len(pdf)):
            sizes.append(_pdfium_page_size(pdf, i))
    finally:
        pdf.close()
    return DocInfo(sizes, encrypted)


def _pdfium_page_size(pdf, i: int) -> tuple[float, float]:
    """Upright ``(width_pt, height_pt)`` of page ``i`` (0-based): the CropBox within the MediaBox,
    ``/Rotate`` applied. Read from the page dictionary without loading the page (loading parses its
    content streams, ~6 ms a page on GeoTopo); the same numbers as ``pdf[i].get_size()`` (tested),
    which is the fallback when PDFium cannot read the size that way."""
    import pypdfium2 as pdfium

    try:
        return tuple(float(x) for x in pdf.get_page_size(i))
    except pdfium.PdfiumError:
        page = pdf[i]
        try:
            return tuple(float(x) for x in page.get_size())
        finally:
            page.close()


def _probe_poppler(path: Path, password: str | None) -> DocInfo:
    first = _poppler_info(path, password)
    n = int(first.get("Pages", 0))
    encrypted = str(first.get("Encrypted", "no")).strip().lower().startswith("yes")
    sizes: list[tuple[float, float]] = []
    if n:
        info = _poppler_info(path, password, 1, n)
        for i in range(1, n + 1):
            # pdfinfo's "size" is the CropBox clipped to the MediaBox, before /Rotate
            m = _SIZE.search(str(info.get(f"Page {i:4d} size", info.get("Page size", ""))))
            rot = int(float(info.get(f"Page {i:4d} rot", info.get("Page rot", 0)) or 0)) % 360
            w, h = (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
            sizes.append((h, w) if rot in (90, 270) else (w, h))
    return DocInfo(sizes, encrypted)


def rasterizer_version(rasterizer: str) -> str:
    """Version string of a rasterizer, recorded in the ingest report (``"unknown"`` parts if absent)."""
    from importlib.metadata import PackageNotFoundError, version

    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "unknown"

    if rasterizer == "pdfium":
        try:
            import pypdfium2

            return f"pypdfium2 {v('pypdfium2')} (pdfium {pypdfium2.version.PDFIUM_INFO})"
        except Exception:  # pragma: no cover - version attribute layout changed
            return f"pypdfium2 {v('pypdfium2')}"
    try:
        out = subprocess.run(["pdftoppm", "-v"], capture_output=True, text=True, timeout=30)
        pv = (out.stderr or out.stdout).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pv = "pdftoppm not found"
    return f"pdf2image {v('pdf2image')} ({pv})"


_LINE = re.compile(r"<line\b.*?</line>", re.S)
_WORD = re.compile(r"<word\b[^>]*>(.*?)</word>", re.S)


def _pdftotext(path: Path, password: str | None, first: int, last: int) -> list[str]:
    """Text of pages ``first..last`` from poppler, limited to each page's visible box.

    ``pdftotext -cropbox -bbox-layout`` keeps only the characters inside the CropBox (clipped to
    the MediaBox, ``/Rotate`` applied), as pdfium's bounded text extraction does; plain
    ``pdftotext`` would also print text outside the CropBox. Words of a line are joined by a space,
    lines by a newline, blocks by an empty line.
    """
    cmd = ["pdftotext", "-q", "-enc", "UTF-8", "-cropbox", "-bbox-layout", "-f", str(first), "-l", str(last)]
    if password:
        cmd += ["-upw", password]
    n = last - first + 1
    try:
        out = subprocess.run(cmd + [str(path), "-"], capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return [""] * n
    texts = []
    for page in out.stdout.decode("utf-8", "replace").split("<page ")[1:]:
        blocks = []
        for block in page.split("<block ")[1:]:
            lines = _dehyphenate([[html.unescape(w) for w in _WORD.findall(ln)] for ln in _LINE.findall(block)])
            if lines:
                blocks.append("\n".join(lines))
        texts.append("\n\n".join(blocks))
    return (texts + [""] * n)[:n]


_HYPHENS = ("-", "\u00ad", "\u2010")


def _dehyphenate(lines: list[list[str]]) -> list[str]:
    """Lines of words -> lines of text, a word hyphenated at a line end joined to the next line's
    first word without its hyphen (``"taki-"`` + ``"mata"`` -> ``"takimata"``), as plain
    ``pdftotext`` and pdfium's text extraction do."""
    out: list[str] = []
    carry = ""
    for i, words in enumerate(lines):
        words = list(words)
        if carry:
            words = [carry + words[0], *words[1:]] if words else [carry]
            carry = ""
        last = words[-1] if words else ""
        nxt = lines[i + 1] if i + 1 < len(lines) else []
        if len(last) > 1 and last.endswith(_HYPHENS) and last[-2].isalpha() and nxt and nxt[0][:1].isalpha():
            carry = words.pop()[:-1]
        if words:
            out.append(" ".join(words))
    return out


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean(text: str) -> str:
    """Normalise newlines, drop control characters (PDFium marks soft hyphens with \\x02) and apply
    the Unicode policy of :func:`vdr.text.normalize_text` (NFKC)."""
    return normalize_text(_CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))).strip()


def _page_problem(w_pt: float, h_pt: float, dpi: float) -> str | None:
    """Why a ``w_pt x h_pt`` page rendered at ``dpi`` must be skipped (the checks of
    :func:`vdr.ingest.images.size_problem` on the planned pixel size), or ``None``."""
    if not (w_pt > 0 and h_pt > 0) or not (math.isfinite(w_pt) and math.isfinite(h_pt)):
        return f"page box is {w_pt:g} x {h_pt:g} pt"
    problem = size_problem(w_pt * dpi / 72, h_pt * dpi / 72)
    return f"{problem} at {dpi:g} dpi" if problem and problem.startswith("page too small") else problem


def rasterize(
    path: str | Path,
    *,
    dpi: float = DEFAULT_DPI,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    rasterizer: str = "pdfium",
    password: str | None = None,
    pages: Sequence[int] | None = None,
):
    """Render the pages of one PDF, one at a time (in this process; no files written).

    Args:
        pages: 1-based page numbers to render (default: all), e.g. one worker's share.

    Yields:
        ``(page_number, image, effective_dpi)``: 1-based page number, an RGB ``PIL.Image.Image``
        of ``ceil/round(page size in pt x effective_dpi / 72)`` pixels, and the DPI used (``dpi``
        lowered to fit ``max_pixels``). Pages whose box is degenerate, too small or of extreme
        aspect ratio are skipped. The caller should close each image.

    Raises:
        DocumentError: the document cannot be opened.
    """
    path = Path(path)
    info = probe(path, password, rasterizer)
    password = password if info.opened_with == "password" else None
    render = _render_pdfium if rasterizer == "pdfium" else _render_poppler
    wanted = sorted(set(range(1, len(info.page_sizes) + 1) if pages is None else pages))
    for start in range(0, len(wanted), _CHUNK):
        plans = []
        for n in wanted[start : start + _CHUNK]:
            if not 1 <= n <= len(info.page_sizes):
                raise DocumentError(f"page {n} does not exist (the document has {len(info.page_sizes)} pages)")
            w, h = info.page_sizes[n - 1]
            problem = _page_problem(w, h, dpi)
            d = effective_dpi(w, h, dpi, max_pixels) if problem is None else None
            plans.append((n, w, h, d, problem or (d is not None and _page_problem(w, h, d)) or None))
        for (n, _w, _h, d, _p), (im, _text, _cover) in zip(plans, render(path, password, plans, text=False)):
            if im is not None:
                yield n, _as_pil(im), d


#: Side of the grid on which the union of a page's image areas is measured (:func:`page_cover`).
_COVER_GRID = 256


def page_cover(page, textpage, text: str) -> TextCover:
    """How much of one pdfium page's visible box its text layer and its raster images cover.

    Args:
        page: a ``pypdfium2.PdfPage``.
        textpage: its ``PdfTextPage``.
        text: the page's (bounded) text-layer text; its non-whitespace characters are counted.

    Returns:
        :class:`~vdr.ingest.ocr.TextCover`: ``text_share`` is the summed area of the text layer's
        rectangles (``FPDFText_GetRect``: one per run of characters on a line; they do not
        overlap), clipped to the visible box (``get_bbox``: CropBox clipped to the MediaBox);
        ``image_share`` the union of the image objects' bounds on a
        :data:`_COVER_GRID` x :data:`_COVER_GRID` grid over that box (an image inside a Form
        XObject counts with the bounds of its top-level form). Both are in unrotated page space,
        so ``/Rotate`` does not change them.
    """
    import numpy as np
    import pypdfium2.raw as pdfium_c

    x0, y0, x1, y1 = page.get_bbox()
    w, h = x1 - x0, y1 - y0
    if not (w > 0 and h > 0):
        return TextCover(sum(not c.isspace() for c in text), 0.0, 0.0)

    def clip(l, b, r, t):
        return max(l, x0), max(b, y0), min(r, x1), min(t, y1)

    text_area = 0.0
    for i in range(textpage.count_rects()):
        l, b, r, t = clip(*textpage.get_rect(i))
        text_area += max(0.0, r - l) * max(0.0, t - b)
    grid = np.zeros((_COVER_GRID, _COVER_GRID), dtype=bool)
    top = None
    wanted = [pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_FORM]
    for obj in page.get_objects(filter=wanted):
        if obj.level == 0:
            top = obj
        if obj.type != pdfium_c.FPDF_PAGEOBJ_IMAGE:
            continue
        try:
            l, b, r, t = clip(*(obj if obj.level == 0 or top is None else top).get_bounds())
        except Exception:  # PdfiumError: an object pdfium cannot place
            continue
        if r <= l or t <= b:
            continue
        c0, c1 = (int(round((v - x0) / w * _COVER_GRID)) for v in (l, r))
        r0, r1 = (int(round((v - y0) / h * _COVER_GRID)) for v in (b, t))
        grid[r0:max(r1, r0 + 1), c0:max(c1, c0 + 1)] = True
    return TextCover(sum(not c.isspace() for c in text), min(1.0, text_area / (w * h)), float(grid.mean()))


def _covers_pdfium(path: Path, password: str | None, pages: list[int]) -> dict[int, TextCover]:
    """``{page: TextCover}`` of ``pages`` measured with pdfium (for the poppler rasterizer);
    ``{}`` when pdfium cannot open the document (the decision then keeps any text layer)."""
    try:
        pdf = _pdfium_open(path, password)
    except DocumentError:
        return {}
    out = {}
    try:
        for n in pages:
            page = pdf[n - 1]
            try:
                tp = page.get_textpage()
                try:
                    out[n] = page_cover(page, tp, tp.get_text_bounded())
                finally:
                    tp.close()
            except Exception:  # a page pdfium cannot read: no measure, the decision says so
                pass
            finally:
                page.close()
    finally:
        pdf.close()
    return out


def _as_pil(im):
    """A PIL image of ``im`` (a PIL image, returned as is, or a uint8 array ``(h, w, 3)``)."""
    if hasattr(im, "mode"):
        return im
    from PIL import Image

    return Image.fromarray(im, "RGB")


_CHUNK = 8


def render_pages(
    path: str | Path,
    relative: str,
    pages: list[int],
    page_sizes: list[tuple[float, float]],
    password: str | None,
    opts: RenderOptions,
    out_dir: str | Path,
) -> list[dict]:
    """Render ``pages`` of one PDF to PNGs under ``out_dir/images/`` and read their text.

    Args:
        path: the PDF file.
        relative: its ``/``-separated path relative to the ingested folder (gives the page ids).
        pages: 1-based page numbers to render, ascending.
        page_sizes: upright ``(width_pt, height_pt)`` of each of ``pages`` (from :func:`probe`).
        password: open password or ``None``.
        opts: rendering options.
        out_dir: the corpus folder.

    Returns:
        One dict per page: either a ``pages.jsonl`` record (keys of :class:`vdr.corpus.Page` with
        ``corpus-id``) plus ``"notes"`` (list of str) and, unless ``opts.ocr == "never"``,
        ``"decision"`` (how its text was read:
        ``{"page", "ocr", "reason", "text_chars", "text_share", "image_share", "orientation",
        "text"}``, see :mod:`vdr.ingest.ocr`), or ``{"page": n, "reason": str}`` for a
        page that was not rendered (bad box, extreme aspect ratio, too small, size mismatch,
        failed OCR with ``ocr="always"``).

    Raises:
        DocumentError: the document cannot be opened.
    """
    path = Path(path)
    out_dir = Path(out_dir)
    (out_dir / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    plans: list[PagePlan] = []
    for n, (w, h) in zip(pages, page_sizes):
        problem = _page_problem(w, h, opts.dpi)
        d = None
        if problem is None:
            d = effective_dpi(w, h, opts.dpi, opts.max_pixels)
            problem = _page_problem(w, h, d)
        plans.append(PagePlan(n, w, h, d, problem))

    results: list[dict] = []
    measure = opts.ocr == "auto"
    if opts.rasterizer == "pdfium":
        rendered = _render_pdfium(path, password, plans, cover=measure)
    else:
        rendered = _render_poppler(path, password, plans)
        if measure:
            covers = _covers_pdfium(path, password, [p.n for p in plans if p.problem is None])
            rendered = [(im, text, covers.get(plan.n)) for plan, (im, text, _c) in zip(plans, rendered)]
    for plan, (im, text, cover) in zip(plans, rendered):
        if plan.problem is not None or im is None:
            results.append({"page": plan.n, "reason": plan.problem or "rendering failed"})
            continue
        try:
            results.append(_finish_page(im, (text, cover), plan, relative, opts, out_dir))
        finally:
            if hasattr(im, "close"):  # a PIL image (poppler); pdfium gives arrays
                im.close()
    return results


def _rgb_array(im):
    """``im`` (a uint8 array ``(h, w, 3)`` or a PIL image of any mode) as a C-contiguous uint8 RGB
    array ``(height, width, 3)``; an array that already is one is returned as is."""
    import numpy as np

    if hasattr(im, "mode"):
        rgb = to_rgb(im)
        try:
            return np.asarray(rgb)
        finally:
            if rgb is not im:
                rgb.close()
    return np.ascontiguousarray(im)


def _finish_page(im, layer: tuple[str, TextCover | None], plan: PagePlan, relative: str, opts: RenderOptions, out_dir: Path) -> dict:
    """Check one rendered page (``plan``: its number, size in points and DPI), read its text
    (``layer``: its text-layer text and :class:`~vdr.ingest.ocr.TextCover`; OCR as
    :func:`~vdr.ingest.ocr.ocr_decision` decides), write its PNG; a ``pages.jsonl`` record plus
    ``"notes"`` and ``"decision"``, or ``{"page", "reason"}`` (see :func:`render_pages`)."""
    n, w, h, d = plan.n, plan.w, plan.h, plan.d
    a = _rgb_array(im)
    height, width = a.shape[:2]
    exp_w, exp_h = w * d / 72, h * d / 72
    if abs(width - exp_w) > 1 or abs(height - exp_h) > 1:
        return {
            "page": n,
            "reason": f"rendered image is {width} x {height} px, expected {exp_w:.1f} x {exp_h:.1f} px"
            f" (page {w:g} x {h:g} pt at {d:g} dpi)",
        }
    problem = size_problem(width, height)  # the same checks as every ingest path, on the real pixels
    if problem is not None:
        return {"page": n, "reason": problem}
    notes: list[str] = []
    if d < opts.dpi:
        notes.append(f"rendered at {d:g} dpi instead of {opts.dpi:g} to fit the pixel budget of {opts.max_pixels} px")
    text, cover = _clean(layer[0]), layer[1]
    source = "pdf" if text else "none"
    do_ocr, why = ocr_decision(opts.ocr, text, cover)
    decision = {"page": n, "ocr": do_ocr, "reason": why, **(cover.to_json() if cover is not None else {})}
    if do_ocr:
        try:
            raw, orientation = read_page(_as_pil(a), opts.ocr_lang, dpi=d)
            ocr_text = _clean(raw)
        except Exception as e:  # TesseractNotFoundError, TesseractError, OSError
            reason = f"OCR failed: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
            if opts.ocr == "always":
                return {"page": n, "reason": reason}
            notes.append(reason)
            decision["text"] = "OCR failed: " + ("text layer kept" if text else "no text")
        else:
            decision["orientation"] = orientation
            text, source, decision["text"] = _choose_text(text, ocr_text, opts.ocr, source)
    cid = page_id(relative, n)
    rel_img = image_name(cid)
    with atomic_write(out_dir / rel_img, "wb") as f:
        write_png(f, a)
    return {
        "corpus-id": cid,
        "source": relative,
        "page": n,
        "width": width,
        "height": height,
        "dpi": d,
        "image": rel_img,
        "text": text,
        "text_source": source,
        "image_sha256": pixel_sha256(a),
        "notes": notes,
        **({"decision": decision} if opts.ocr != "never" else {}),  # with OCR off there is nothing to decide per page
    }


def _choose_text(layer: str, ocr_text: str, mode: str, source: str) -> tuple[str, str, str]:
    """``(text, text_source, what was kept)`` after OCR. ``always``: the OCR text when it reads
    anything. ``auto``: the OCR text when it holds more non-whitespace characters than the text
    layer (a thin layer is kept when the OCR reads less, e.g. a blank scan with a page number)."""
    count = lambda t: sum(not c.isspace() for c in t)  # noqa: E731
    if not ocr_text:
        return layer, source, "OCR read nothing: " + ("text layer kept" if layer else "no text")
    if mode == "always" or count(ocr_text) > count(layer):
        return ocr_text, "ocr", "OCR text" + (f" ({count(ocr_text)} characters; the text layer had {count(layer)})" if layer else "")
    return layer, source, f"text layer kept: OCR read {count(ocr_text)} characters, the layer holds {count(layer)}"


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def write_png(f: BinaryIO, im) -> None:
    """Write an RGB image to ``f`` as a lossless PNG, as :data:`IMAGE_ENCODING` says.

    PNG (ISO/IEC 15948, RFC 2083): 8-bit truecolour, no interlace; each row is stored with filter
    type 2 ("Up": each byte minus the byte above it, mod 256), and the filtered rows are deflated at
    level 1 (ISA-L, else zlib: :func:`_deflate`) into one IDAT chunk. Decoding gives back exactly
    the pixels of ``im``.

    Args:
        f: binary file object to write to.
        im: ``PIL.Image.Image`` in mode ``"RGB"``, or a uint8 array ``(height, width, 3)``.

    Raises:
        ValueError: ``im`` is not 8-bit RGB, or is empty.
    """
    import struct

    import numpy as np

    a = np.asarray(im)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"write_png needs 8-bit RGB pixels (height, width, 3), got {a.dtype} {a.shape}")
    h, w, _ = a.shape
    rows = a.reshape(h, w * 3)
    filtered = np.empty((h, w * 3 + 1), dtype=np.uint8)
    filtered[:, 0] = 2  # filter type "Up" on every row; the row above the first is zeros
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # uint8 arithmetic wraps mod 256
    f.write(b"\x89PNG\r\n\x1a\n")
    f.write(_png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
    compress, _name = _deflate()
    f.write(_png_chunk(b"IDAT", compress(filtered.data, IMAGE_ENCODING["deflate_level"])))
    f.write(_png_chunk(b"IEND", b""))


def _render_pdfium(path: Path, password: str | None, plans, text: bool = True, cover: bool = False) -> list:
    """``[(pixels or None, text, TextCover or None)]`` per plan: pixels a uint8 array ``(h, w, 3)``,
    the bounded text layer when ``text``, its :func:`page_cover` when ``cover`` (and ``text``)."""
    pdf = _pdfium_open(path, password)
    out = []
    try:
        try:
            pdf.init_forms()  # draw AcroForm field contents
        except Exception:
            pass
        for n, _w, _h, d, problem in plans:
            if problem is not None:
                out.append((None, "", None))
                continue
            page = pdf[n - 1]
            try:
                page_text, measured = "", None
                if text:
                    tp = page.get_textpage()
                    try:
                        page_text = tp.get_text_bounded()
                        if cover:
                            measured = _measure(page, tp, page_text)
                    finally:
                        tp.close()
                im = _pdfium_pixels(page, d)
            finally:
                page.close()
            out.append((im, page_text, measured))
    finally:
        pdf.close()
    return out


def _measure(page, textpage, text: str) -> TextCover | None:
    """:func:`page_cover`, or ``None`` when pdfium cannot measure the page (recorded by the decision)."""
    try:
        return page_cover(page, textpage, text)
    except Exception:  # PdfiumError on a malformed page: no measure
        return None


def _pdfium_pixels(page, dpi: float):
    """One page rendered at ``dpi`` as a uint8 array ``(height, width, 3)``, RGB, on white.

    PDFium writes the pixels straight into a Python-owned buffer in RGB byte order
    (``rev_byteorder``); the array is a view of that buffer, which stays valid after the bitmap is
    closed, so no PIL image and no copy are made. The pixels are exactly those of
    ``page.render(...).to_pil()`` (the same bitmap, bytes in another order).
    """
    bitmap = page.render(scale=dpi / 72, may_draw_forms=True, rev_byteorder=True)
    try:
        if bitmap.mode == "RGB" and bitmap.n_channels == 3:
            return bitmap.to_numpy()
        import numpy as np  # pragma: no cover - another pixel format: convert through PIL

        im = bitmap.to_pil()  # pragma: no cover
        rgb = to_rgb(im)  # pragma: no cover
        try:  # pragma: no cover
            return np.array(rgb)
        finally:  # pragma: no cover
            rgb.close()
            im.close()
    finally:
        bitmap.close()


def _render_poppler(path: Path, password: str | None, plans, text: bool = True) -> list:
    """``[(PIL RGB image or None, text, None)]`` per plan (pdftoppm pixels, pdftotext text)."""
    from pdf2image import convert_from_path
    from pdf2image.exceptions import PDFInfoNotInstalledError, PDFPageCountError, PDFPopplerTimeoutError

    nums = [p[0] for p in plans if p[4] is None]
    texts: dict[int, str] = {}
    if nums and text:
        for n, t in zip(range(nums[0], nums[-1] + 1), _pdftotext(path, password, nums[0], nums[-1])):
            texts[n] = t
    out = []
    # consecutive pages with the same dpi go through one pdftoppm call
    i = 0
    while i < len(plans):
        n, _w, _h, d, problem = plans[i]
        if problem is not None:
            out.append((None, "", None))
            i += 1
            continue
        j = i
        while j + 1 < len(plans) and plans[j + 1][4] is None and plans[j + 1][3] == d and plans[j + 1][0] == plans[j][0] + 1:
            j += 1
        try:
            # use_cropbox: render the visible box (CropBox clipped to the MediaBox), as pdfium does
            ims = convert_from_path(
                str(path), dpi=d, first_page=n, last_page=plans[j][0], userpw=password, timeout=600, use_cropbox=True
            )
        except PDFInfoNotInstalledError:
            raise DocumentError("poppler is not installed (Debian: apt-get install poppler-utils)") from None
        except (PDFPageCountError, PDFPopplerTimeoutError) as e:
            raise DocumentError(f"poppler failed: {' '.join(str(e).split())[:300]}") from None
        for k in range(i, j + 1):
            im = ims[k - i] if k - i < len(ims) else None
            if im is not None:
                rgb = to_rgb(im)
                if rgb is not im:
                    im.close()
                    im = rgb
            out.append((im, texts.get(plans[k][0], ""), None))
        i = j + 1
    return out
