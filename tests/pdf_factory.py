"""Generate small PDFs for the ingest tests (pikepdf), so that no test needs ``../shared``.

Every function writes one file and returns its path. Text is drawn with the standard Helvetica
font; the codes 1-3 of that font are re-mapped (``/Differences`` for the glyph, ``/ToUnicode`` for
the text layer) to the ligature ``fi`` (U+FB01), ``é`` written decomposed (``e`` + U+0301) and
``é`` precomposed, so text-layer tests control exactly which code points a PDF reader gets.

>>> import tempfile, pathlib
>>> p = text_pdf(pathlib.Path(tempfile.mkdtemp()) / "a.pdf", ["hello"])
>>> p.read_bytes()[:5]
b'%PDF-'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pikepdf
from pikepdf import Array, Dictionary, Name

__all__ = [
    "text_pdf", "encrypted_pdf", "permissions_only_pdf", "image_pdf", "truncated_pdf", "zero_pages_pdf",
    "huge_page_pdf", "cropbox_pdf", "ligature_pdf", "not_a_pdf", "empty_file", "A4", "LIGATURE", "E_DECOMPOSED",
    "E_PRECOMPOSED", "scan_image", "scan_pdf", "jpeg_pdf", "BODY",
]

A4 = (595.276, 841.89)
#: Byte codes that :func:`text_pdf` maps to special text-layer strings (see the module docstring).
LIGATURE, E_DECOMPOSED, E_PRECOMPOSED = "\x01", "\x02", "\x03"
_TOUNICODE = b"""/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def
/CMapName /vdr-test def
/CMapType 2 def
1 begincodespacerange
<00> <FF>
endcodespacerange
3 beginbfchar
<01> <FB01>
<02> <00650301>
<03> <00E9>
endbfchar
endcmap
CMapName currentdict /CMap defineresource pop
end
end
"""


def _font(pdf: pikepdf.Pdf):
    enc = Dictionary(Type=Name.Encoding, BaseEncoding=Name.WinAnsiEncoding, Differences=Array([1, Name.fi, Name.eacute, Name.eacute]))
    return pdf.make_indirect(
        Dictionary(Type=Name.Font, Subtype=Name.Type1, BaseFont=Name.Helvetica, Encoding=enc, ToUnicode=pdf.make_stream(_TOUNICODE))
    )


def _escape(s: str) -> bytes:
    return s.encode("latin-1").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _text_ops(lines: Sequence[str], x: float, y: float, size: float) -> bytes:
    out = b""
    for i, line in enumerate(lines):
        out += b"BT /F1 %g Tf %g %g Td (" % (size, x, y - i * size * 1.4) + _escape(line) + b") Tj ET\n"
    return out


def _page(pdf: pikepdf.Pdf, font, *, size=A4, content: bytes = b"", rotate: int = 0, cropbox=None, xobjects=None):
    w, h = size
    d = Dictionary(
        Type=Name.Page,
        MediaBox=Array([0, 0, w, h]),
        Resources=Dictionary(Font=Dictionary(F1=font), XObject=Dictionary(xobjects or {})),
        Contents=pdf.make_stream(content),
    )
    if rotate:
        d.Rotate = rotate
    if cropbox is not None:
        d.CropBox = Array(list(cropbox))
    pdf.pages.append(pikepdf.Page(d))


def _save(pdf: pikepdf.Pdf, path: Path, encryption=None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.save(path, encryption=encryption or False, deterministic_id=encryption is None)
    return path


def text_pdf(path, pages: Sequence[str | Sequence[str]], *, size=A4, rotate: int | Sequence[int] = 0, font_size: float = 24,
             encryption=None) -> Path:
    """One page per item of ``pages`` (a line or a list of lines of Helvetica text, drawn from the
    top left), each ``size`` pt (``(width, height)``, or a list of one size per page) with
    ``/Rotate rotate`` (one value or one per page)."""
    pdf = pikepdf.new()
    font = _font(pdf)
    rots = [rotate] * len(pages) if isinstance(rotate, int) else list(rotate)
    sizes = [size] * len(pages) if isinstance(size[0], (int, float)) else list(size)
    for lines, rot, sz in zip(pages, rots, sizes):
        lines = [lines] if isinstance(lines, str) else list(lines)
        fs = min(font_size, sz[1] / 3)
        _page(pdf, font, size=sz, rotate=rot, content=_text_ops(lines, min(36, sz[0] / 10), sz[1] - 1.2 * fs, fs))
    return _save(pdf, path, encryption)


def encrypted_pdf(path, *, user: str = "u", owner: str = "owner-secret", text: str = "secret page") -> Path:
    """One page, AES-256 encrypted: opening needs ``user`` (or ``owner``)."""
    return text_pdf(path, [text], encryption=pikepdf.Encryption(user=user, owner=owner, R=6))


def permissions_only_pdf(path, *, owner: str = "owner-secret", text: str = "public page") -> Path:
    """One page, encrypted with an empty user password and an owner password (printing and copying
    forbidden): any reader opens it without a password."""
    perms = pikepdf.Permissions(extract=False, print_lowres=False, print_highres=False, modify_other=False)
    return text_pdf(path, [text], encryption=pikepdf.Encryption(user="", owner=owner, R=6, allow=perms))


def image_pdf(path, mode: str, *, size=(256, 64)) -> Path:
    """One page exactly ``size`` pt covered by a ``size`` px image: ``mode`` ``"L"`` (a left-to-right
    gray ramp, 0 -> 255), ``"CMYK"`` (a black ramp K 255 -> 0, so the left is black, the right white)
    or ``"RGB"`` (red ramp)."""
    w, h = size
    ramp = [round(255 * x / (w - 1)) for x in range(w)]
    if mode == "L":
        data, cs, n = bytes(ramp * h), Name.DeviceGray, 1
    elif mode == "CMYK":
        data, cs, n = b"".join(bytes((0, 0, 0, 255 - v)) for v in ramp) * h, Name.DeviceCMYK, 4
    elif mode == "RGB":
        data, cs, n = b"".join(bytes((v, 0, 0)) for v in ramp) * h, Name.DeviceRGB, 3
    else:
        raise ValueError(mode)
    assert len(data) == w * h * n
    pdf = pikepdf.new()
    im = pdf.make_stream(data, Type=Name.XObject, Subtype=Name.Image, Width=w, Height=h, ColorSpace=cs, BitsPerComponent=8)
    _page(pdf, _font(pdf), size=size, content=b"q %d 0 0 %d 0 0 cm /Im1 Do Q\n" % (w, h), xobjects={"/Im1": im})
    return _save(pdf, path)


def truncated_pdf(path) -> Path:
    """A valid 2-page PDF cut after 60 % of its bytes (no ``%%EOF``)."""
    path = Path(path)
    text_pdf(path, ["one", "two"])
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.6)])
    return path


def zero_pages_pdf(path) -> Path:
    """A well-formed PDF whose page tree is empty (``/Count 0``)."""
    return _save(pikepdf.new(), path)


def huge_page_pdf(path, *, side: float = 14400) -> Path:
    """One ``side`` x ``side`` pt page (14400 pt = 200 in, the PDF maximum) with the text "Huge page"."""
    pdf = pikepdf.new()
    _page(pdf, _font(pdf), size=(side, side), content=_text_ops(["Huge page"], side / 4, side / 2, side / 20))
    return _save(pdf, path)


def cropbox_pdf(path, *, media=(0, 0, 600, 800), crop=(100, 200, 400.5, 600.25), rotate: int = 0) -> Path:
    """One page with MediaBox ``media`` and a smaller CropBox ``crop``: the word "visible" inside
    the crop box, the word "hidden" outside it (bottom left of the media box), a black frame
    filling the crop box' left half. The visible page is ``crop``'s size (300.5 x 400.25 pt)."""
    x0, y0, x1, y1 = crop
    content = _text_ops(["visible"], x0 + 10, y1 - 40, 20) + _text_ops(["hidden"], media[0] + 5, media[1] + 5, 20)
    content += b"0 g %g %g %g %g re f\n" % (x0, y0, (x1 - x0) / 2, y1 - y0)
    pdf = pikepdf.new()
    _page(pdf, _font(pdf), size=(media[2], media[3]), content=content, rotate=rotate, cropbox=crop)
    pdf.pages[0].obj.MediaBox = Array(list(media))
    return _save(pdf, path)


def ligature_pdf(path) -> Path:
    """One page whose text layer says "ﬁnancial" (U+FB01), "Re\\u0301sume\\u0301" (decomposed) and
    "café" (precomposed), over three lines."""
    lines = [f"{LIGATURE}nancial report", f"R{E_DECOMPOSED}sum{E_DECOMPOSED} of the year", f"caf{E_PRECOMPOSED} owner"]
    return text_pdf(path, [lines])


def not_a_pdf(path) -> Path:
    """A text file named ``.pdf``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("this is not a PDF\n" * 10)
    return path


def empty_file(path) -> Path:
    """A 0-byte file named ``.pdf``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


#: Body text of the generated scans: ordinary English sentences that Tesseract reads reliably.
BODY = [
    "The quarterly report shows revenue growth",
    "in every region, led by strong demand",
    "for renewable energy storage systems.",
    "Operating costs fell while margins rose",
    "and the board approved a new dividend.",
    "Shareholders will vote on the proposal",
    "at the annual meeting in early spring.",
]


def scan_image(lines: Sequence[str] = tuple(BODY), *, size=(827, 1169), font_px: int = 34, turn: int = 0):
    """A gray "scanned page" (PIL mode ``L``): ``lines`` of black text on white, drawn with PIL's
    default font at ``font_px`` from the top left, then turned ``turn`` degrees clockwise (0, 90, 180,
    270; the image is ``size`` before turning), as a page fed sideways into a scanner."""
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("L", size, 255)
    draw, font = ImageDraw.Draw(im), ImageFont.load_default(size=font_px)
    for i, line in enumerate(lines):
        draw.text((size[0] * 0.06, size[1] * 0.06 + i * font_px * 1.6), line, fill=0, font=font)
    return im.rotate(-turn, expand=True) if turn else im


def _image_xobject(pdf: pikepdf.Pdf, im):
    im = im if im.mode in ("L", "RGB") else im.convert("RGB")
    cs = Name.DeviceGray if im.mode == "L" else Name.DeviceRGB
    return pdf.make_stream(im.tobytes(), Type=Name.XObject, Subtype=Name.Image, Width=im.width, Height=im.height, ColorSpace=cs,
                           BitsPerComponent=8)


def scan_pdf(path, image, *, size=A4, box=None, texts: Sequence[tuple] = (), form: bool = False, tiles: int = 1,
             rotate: int = 0, cropbox=None) -> Path:
    """One page of ``size`` pt (no ``/Rotate`` unless ``rotate``) drawing the PIL ``image`` (stored as
    raw gray/RGB samples) into ``box`` = ``(x, y, width, height)`` pt (default: the whole page), cut
    into ``tiles`` horizontal strips drawn as separate images (as some scanners write pages), inside
    a Form XObject when ``form``. Then ``texts``: ``(text, x, y, font_size[, render_mode])`` items in
    Helvetica over it (render mode 0: visible, 3: invisible, as OCR text layers are written)."""
    x, y, w, h = box or (0, 0, *size)
    pdf = pikepdf.new()
    font = _font(pdf)
    xobjects, ops = {}, b""
    bounds = [round(image.height * k / tiles) for k in range(tiles + 1)]
    for k in range(tiles):
        strip = image.crop((0, bounds[k], image.width, bounds[k + 1]))
        sh = h * (bounds[k + 1] - bounds[k]) / image.height
        sy = y + h - h * bounds[k + 1] / image.height
        xobjects[f"/Im{k}"] = _image_xobject(pdf, strip)
        ops += b"q %g 0 0 %g %g %g cm /Im%d Do Q\n" % (w, sh, x, sy, k)
    if form:
        fx = pdf.make_stream(ops, Type=Name.XObject, Subtype=Name.Form, BBox=Array([0, 0, *size]),
                             Resources=Dictionary(XObject=Dictionary(xobjects)))
        xobjects, ops = {"/Fm0": fx}, b"q /Fm0 Do Q\n"
    for item in texts:
        text, tx, ty, fs, mode = (*item, 0) if len(item) == 4 else item
        ops += b"BT %d Tr /F1 %g Tf %g %g Td (" % (mode, fs, tx, ty) + _escape(text) + b") Tj ET\n"
    _page(pdf, font, size=size, content=ops, rotate=rotate, cropbox=cropbox, xobjects=xobjects)
    return _save(pdf, path)


def jpeg_pdf(path, jpeg: bytes, *, size=None) -> Path:
    """One page drawing the encoded JPEG ``jpeg`` stored as it is (``/DCTDecode``, its EXIF segment
    kept) over the whole page; the page is ``size`` pt, default the JPEG's stored width x height."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as im:
        wpx, hpx, mode = im.width, im.height, im.mode
    w, h = size or (wpx, hpx)
    pdf = pikepdf.new()
    cs = Name.DeviceGray if mode == "L" else Name.DeviceRGB
    img = pdf.make_stream(jpeg, Type=Name.XObject, Subtype=Name.Image, Width=wpx, Height=hpx, ColorSpace=cs, BitsPerComponent=8,
                          Filter=Name.DCTDecode)
    _page(pdf, _font(pdf), size=(w, h), content=b"q %g 0 0 %g 0 0 cm /Im0 Do Q\n" % (w, h), xobjects={"/Im0": img})
    return _save(pdf, path)
