"""OCR of page images: when ``--ocr auto`` reads a page, how the page is turned upright first.

Two decisions, both recorded per page in the ingest report (``page_decisions``):

* **Whether to OCR** (:func:`ocr_decision`). ``always``/``never`` decide alone. ``auto`` OCRs a page
  without a text layer, and a page whose text layer is *thin*: raster images cover at least
  :data:`SCAN_MIN_IMAGE_SHARE` of the visible page while the text layer's boxes cover less than
  :data:`THIN_TEXT_SHARE` of the image area (a scanned page carrying only a page number, a footer or
  a Bates stamp; OCRmyPDF#1563). A searchable scan (an invisible OCR text layer over the image)
  keeps its text layer: its boxes cover the body. The measure comes from :class:`TextCover`
  (:func:`vdr.ingest.pdf.page_cover`). A thin layer is replaced by the OCR text only when the OCR
  reads more characters than the layer holds; the layer is kept otherwise (recorded).
* **Which way is up** (:func:`read_page`). Before OCR, Tesseract's orientation and script detection
  (OSD, ``--psm 0``, needs ``osd.traineddata``: Debian ``tesseract-ocr-osd``) says by how much the
  page is turned. The page is turned back before it is read when OSD is sure (confidence >=
  :data:`OSD_SURE_CONFIDENCE`, OCRmyPDF's default ``--rotate-pages-threshold``); below that, both
  readings are made and the one Tesseract is more confident of is kept (:func:`reading_score`), so
  an uncertain detection never makes an upright page worse. Without ``osd.traineddata`` (or when
  OSD finds too few characters) the page is read as it is and the reason is recorded. The page
  *image* is never turned: it stays as a PDF viewer shows the page.

Orientation in Tesseract's terms: OSD's ``Rotate: r`` is the clockwise turn (degrees) that makes the
page upright; PIL turns counter-clockwise, so the page is turned with ``image.rotate(-r, expand=True)``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

__all__ = [
    "TextCover", "ocr_decision", "read_page", "osd_status", "reading_score", "THIN_TEXT_SHARE", "SCAN_MIN_IMAGE_SHARE",
    "OSD_SURE_CONFIDENCE", "OSD_PACKAGE", "NO_TESSERACT",
]

#: ``auto``: a text layer whose boxes cover less than this share of the page's image area is thin.
#: Measured with pdfium's text rectangles (glyph-tight) on generated A4 scans: a Bates stamp or page
#: number covers 0.02-0.05 % of the image area, a full-width 9 pt footer line 0.45 %; the invisible
#: text layer of a searchable scan (7 lines of 22 pt) 11 %, a page with a half-page figure and four
#: lines of 10 pt text 3 % (kept).
THIN_TEXT_SHARE = 0.02
#: ``auto``: a page is scan-like when raster images cover at least this share of its visible box
#: (a text page with a figure of less than a quarter of the page keeps its text layer whatever it holds).
SCAN_MIN_IMAGE_SHARE = 0.25
#: OSD confidence from which the detected turn is applied without reading both ways (OCRmyPDF's
#: default ``--rotate-pages-threshold``: "quite conservative").
OSD_SURE_CONFIDENCE = 14.0
#: The Debian package that holds ``osd.traineddata``.
OSD_PACKAGE = "tesseract-ocr-osd"
#: How :func:`osd_status` begins when Tesseract itself is missing (no OCR at all, not only no OSD).
NO_TESSERACT = "Tesseract is not installed"


@dataclass(frozen=True)
class TextCover:
    """How much of a page's visible box its text layer and its raster images cover.

    Attributes:
        chars: non-whitespace characters of the page's text layer (inside the visible box).
        text_share: area of the text layer's boxes / area of the visible box, in [0, 1].
        image_share: area covered by raster images (union) / area of the visible box, in [0, 1].
    """

    chars: int
    text_share: float
    image_share: float

    def to_json(self) -> dict:
        """``{"text_chars", "text_share", "image_share"}`` (shares rounded to 5 decimals)."""
        return {"text_chars": self.chars, "text_share": round(self.text_share, 5), "image_share": round(self.image_share, 5)}


def ocr_decision(mode: str, text: str, cover: TextCover | None) -> tuple[bool, str]:
    """Whether a page is OCRed, and why (module docstring).

    Args:
        mode: ``"auto"``, ``"always"`` or ``"never"``.
        text: the page's text-layer text (already cleaned).
        cover: the page's :class:`TextCover`; ``None`` when it could not be measured (then a page
            with any text keeps it).

    Returns:
        ``(ocr, reason)``: ``reason`` is a short sentence recorded per page.

    >>> ocr_decision("auto", "", None)
    (True, 'no text layer')
    >>> ocr_decision("auto", "Bates 000123", TextCover(11, 0.002, 0.98))[0]
    True
    >>> ocr_decision("auto", "body text", TextCover(900, 0.31, 0.0))
    (False, 'text layer kept (no raster image covers 25% of the page)')
    """
    if mode == "never":
        return False, "--ocr never"
    if mode == "always":
        return True, "--ocr always"
    if not text.strip():
        return True, "no text layer"
    if cover is None:
        return False, "text layer kept (its coverage could not be measured)"
    if cover.image_share < SCAN_MIN_IMAGE_SHARE:
        return False, f"text layer kept (no raster image covers {SCAN_MIN_IMAGE_SHARE:.0%} of the page)"
    ratio = cover.text_share / cover.image_share
    if ratio < THIN_TEXT_SHARE:
        return True, (f"thin text layer: {cover.chars} characters whose boxes cover {ratio:.2%} of the image area"
                      f" ({cover.image_share:.0%} of the page), under {THIN_TEXT_SHARE:.0%}: a stamp, page number or footer"
                      " over a scan")
    return False, f"text layer kept (its boxes cover {ratio:.0%} of the image area)"


@functools.lru_cache(maxsize=8)
def _osd_status(tessdata: str | None) -> str | None:
    import pytesseract

    try:
        langs = pytesseract.get_languages(config="")
    except Exception as e:  # TesseractNotFoundError, OSError
        return (f"{NO_TESSERACT} ({type(e).__name__}): pages that need OCR (no text layer, or a thin one over a scan)"
                " keep what their text layer holds (Debian: apt-get install tesseract-ocr; macOS: brew install tesseract;"
                " --ocr never: no OCR asked)")
    if "osd" not in langs:
        return f"Tesseract's osd.traineddata is not installed (Debian: apt-get install {OSD_PACKAGE}): pages are read as they are"
    return None


def osd_status() -> str | None:
    """``None`` when Tesseract can detect page orientation (``osd`` is among its languages), else the
    reason it cannot (recorded and said once per ingest). Cached per ``TESSDATA_PREFIX``."""
    return _osd_status(os.environ.get("TESSDATA_PREFIX"))


def _ocr(image, lang: str) -> str:
    import pytesseract

    return pytesseract.image_to_string(image, lang=lang)


def reading_score(tsv: str) -> float:
    """How well Tesseract read a page, from its TSV output (``image_to_data``): the sum over the
    words it found of ``len(word) x confidence / 100`` (confidence 0-100). Sideways or upside-down
    text is read as few, low-confidence words and scores a fraction of the upright reading
    (measured: 37 vs 159 for a 5-line page turned by 90 degrees).

    >>> reading_score("level\\tconf\\ttext\\n5\\t96.5\\tThe\\n5\\t50\\tcat\\n4\\t-1\\t\\n")
    4.4
    """
    lines = tsv.splitlines()
    if not lines:
        return 0.0
    head = lines[0].split("\t")
    try:
        ci, ti = head.index("conf"), head.index("text")
    except ValueError:
        return 0.0
    total = 0.0
    for line in lines[1:]:
        cols = line.split("\t")
        if len(cols) <= max(ci, ti):
            continue
        word = cols[ti].strip()
        try:
            c = float(cols[ci])
        except ValueError:
            continue
        if c > 0 and word:
            total += len(word) * c / 100
    return round(total, 1)


def _read_scored(image, lang: str) -> tuple[str, float]:
    """``(text, reading_score)`` of ``image`` from one Tesseract run (text and TSV outputs)."""
    import pytesseract

    text, tsv = pytesseract.run_and_get_multiple_output(image, ["txt", "tsv"], lang=lang)
    return text, reading_score(tsv)


def _osd(image, dpi: float | None) -> dict:
    """Tesseract's OSD of ``image``: ``{"rotate": r, "confidence": c}``, or ``{"failed": reason}``."""
    import pytesseract

    config = "--psm 0" + (f" --dpi {round(dpi)}" if dpi else "")
    try:
        o = pytesseract.image_to_osd(image, config=config, output_type=pytesseract.Output.DICT)
    except Exception as e:  # TesseractError: "Too few characters", ...
        msg = " ".join(str(e).split())
        why = "too few characters to detect the orientation" if "Too few characters" in msg else f"{type(e).__name__}: {msg[:200]}"
        return {"failed": why}
    return {"rotate": int(o["rotate"]) % 360, "confidence": float(o["orientation_conf"])}


def read_page(image, lang: str, *, dpi: float | None = None) -> tuple[str, dict]:
    """OCR one page image, turned upright first when Tesseract's OSD says so (module docstring).

    Args:
        image: a ``PIL.Image.Image`` (any mode Tesseract reads: RGB, L).
        lang: Tesseract language(s), e.g. ``"eng"`` or ``"eng+deu"``.
        dpi: the image's resolution when known (passed to OSD; PDF pages), else ``None``.

    Returns:
        ``(text, orientation)``: the raw OCR text (not cleaned) and the orientation record:
        ``{"osd": "unavailable" | "failed", "reason"}`` (read as it is), or ``{"osd": "ok",
        "rotate": r, "confidence": c, "turned": t, "reason"}`` with ``t`` the clockwise turn
        applied before reading (0, 90, 180 or 270) and, when both readings were made,
        ``"scores": {"as is", "turned"}``.

    Raises:
        whatever ``pytesseract.image_to_string`` raises (TesseractNotFoundError, TesseractError).
    """
    missing = osd_status()
    if missing is not None:
        return _ocr(image, lang), {"osd": "unavailable", "reason": missing}
    o = _osd(image, dpi)
    if "failed" in o:
        return _ocr(image, lang), {"osd": "failed", "reason": o["failed"] + "; read as it is"}
    r, conf = o["rotate"], o["confidence"]
    rec = {"osd": "ok", "rotate": r, "confidence": round(conf, 2)}
    if r == 0:
        return _ocr(image, lang), {**rec, "turned": 0, "reason": "upright"}
    turned = image.rotate(-r, expand=True, fillcolor="white")
    try:
        if conf >= OSD_SURE_CONFIDENCE:
            return _ocr(turned, lang), {**rec, "turned": r, "reason": f"OSD confidence >= {OSD_SURE_CONFIDENCE:g}"}
        (text0, as_is), (text1, after) = _read_scored(image, lang), _read_scored(turned, lang)
        scores = {"as is": as_is, "turned": after}
        if after > as_is:
            return text1, {**rec, "turned": r, "scores": scores,
                           "reason": f"OSD confidence below {OSD_SURE_CONFIDENCE:g}: read both ways, the turned page reads better"}
        return text0, {**rec, "turned": 0, "scores": scores,
                       "reason": f"OSD confidence below {OSD_SURE_CONFIDENCE:g}: read both ways, the page as it is reads no worse"}
    finally:
        turned.close()
