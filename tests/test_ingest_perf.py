"""The fast ingest path (issue 17.2) gives exactly what the PIL path gave: pixels, hashes, page sizes.

* pages are rendered by PDFium straight into an RGB numpy buffer; the PNGs `vdr ingest` writes
  decode to exactly the pixels of the previous path (``page.render(...).to_pil()``, BGR -> RGB),
  and ``image_sha256`` is the hash of that PIL image;
* page sizes are read without loading pages: the same numbers as ``page.get_size()``, rotated and
  cropped pages included;
* worker processes are forked from a single-threaded process, else started by a forkserver; both
  give the same corpus.
"""

from __future__ import annotations

import importlib
import json
import threading

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw

from vdr.ingest import ingest_pdfs
from vdr.ingest.images import pixel_sha256

pdf_mod = importlib.import_module("vdr.ingest.pdf")
pdfdir_mod = importlib.import_module("vdr.ingest.pdfdir")

#: (rotation in degrees, CropBox or None) of each page of the generated PDF
LAYOUT = [(0, None), (90, None), (180, (20, 30, 400, 700)), (270, (-40, -40, 650, 830)), (90, (100, 50, 300, 500))]


@pytest.fixture(scope="module")
def pdf_path(tmp_path_factory):
    """A PDF with noise, flat colour, text and line art on pages of every rotation, some cropped."""
    folder = tmp_path_factory.mktemp("perf") / "in"
    folder.mkdir()
    g = np.random.default_rng(17)
    pic = np.full((330, 260, 3), 245, np.uint8)
    pic[20:180, 20:240] = g.integers(0, 256, size=(160, 220, 3), dtype=np.uint8)
    pic[200:240, 30:230] = (12, 99, 201)
    im = Image.fromarray(pic)
    draw = ImageDraw.Draw(im)
    draw.text((30, 260), "Pixels stay the same", fill=(0, 0, 0))
    draw.line((10, 320, 250, 250), fill=(200, 10, 10), width=3)
    src = folder / "src.pdf"
    im.save(src, "PDF", resolution=40)  # 260 x 330 px at 40 dpi: 468 x 594 pt
    doc = pdfium.PdfDocument(str(src))
    out = pdfium.PdfDocument.new()
    out.import_pages(doc, [0] * len(LAYOUT))
    for i, (rot, crop) in enumerate(LAYOUT):
        page = out[i]
        page.set_rotation(rot)
        if crop is not None:
            page.set_cropbox(*crop)
        page.close()
    path = folder / "pages.pdf"
    out.save(str(path))
    out.close()
    doc.close()
    src.unlink()
    return path


def _old_render(path, dpi: float) -> list[Image.Image]:
    """Every page as the previous ingest path rendered it: ``to_pil()`` of PDFium's BGR bitmap."""
    doc = pdfium.PdfDocument(str(path))
    try:
        doc.init_forms()
        ims = []
        for i in range(len(doc)):
            page = doc[i]
            bitmap = page.render(scale=dpi / 72, may_draw_forms=True)
            ims.append(bitmap.to_pil().copy())
            bitmap.close()
            page.close()
        return ims
    finally:
        doc.close()


def test_page_sizes_without_loading_pages_equal_loaded_sizes(pdf_path):
    doc = pdfium.PdfDocument(str(pdf_path))
    try:
        loaded = []
        for i in range(len(doc)):
            page = doc[i]
            loaded.append(tuple(float(x) for x in page.get_size()))
            page.close()
        fast = [pdf_mod._pdfium_page_size(doc, i) for i in range(len(doc))]
    finally:
        doc.close()
    assert fast == loaded
    # rotated by 90/270: width and height swap; the first page is 468 x 594 pt
    assert loaded[0] == pytest.approx((468, 594)) and loaded[1] == pytest.approx((594, 468))
    assert loaded[2] == pytest.approx((380, 564))  # CropBox 20..400 x 30..594 (clipped to the MediaBox)
    assert loaded[3] == pytest.approx((594, 468))  # a CropBox larger than the MediaBox is clipped to it
    assert pdf_mod.probe(pdf_path, None).page_sizes == fast


@pytest.mark.parametrize("dpi", [72, 101])
def test_ingested_pixels_and_hashes_equal_the_previous_pil_path(pdf_path, tmp_path, dpi):
    report = ingest_pdfs(pdf_path.parent, tmp_path / "out", dpi=dpi, ocr="never", workers=2, progress=False)
    assert report.ok and report.documents[0].pages == len(LAYOUT)
    records = [json.loads(line) for line in (tmp_path / "out" / "pages.jsonl").read_text().splitlines()]
    old = _old_render(pdf_path, dpi)
    assert [r["page"] for r in records] == list(range(1, len(LAYOUT) + 1))
    for rec, im in zip(records, old):
        with Image.open(tmp_path / "out" / rec["image"]) as stored:
            assert stored.mode == "RGB" and stored.size == im.size == (rec["width"], rec["height"])
            assert np.array_equal(np.asarray(stored), np.asarray(im))
        assert rec["image_sha256"] == pixel_sha256(im)
    # what rasterize() yields is the same image too
    for (n, im, _d), ref in zip(pdf_mod.rasterize(pdf_path, dpi=dpi), old):
        assert im.mode == "RGB" and np.array_equal(np.asarray(im), np.asarray(ref)), n


def test_pixel_sha256_of_an_array_is_the_hash_of_its_image():
    a = np.random.default_rng(3).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    assert pixel_sha256(a) == pixel_sha256(Image.fromarray(a, "RGB"))
    assert pixel_sha256(a[:, ::-1]) == pixel_sha256(Image.fromarray(np.ascontiguousarray(a[:, ::-1]), "RGB"))
    assert pixel_sha256(a) != pixel_sha256(a[:, :4])
    with pytest.raises(ValueError, match="8-bit RGB"):
        pixel_sha256(np.zeros((2, 2, 4), np.uint8))


def _single_threaded() -> bool:
    return all(t is threading.main_thread() or type(t).__name__ == "TMonitor" for t in threading.enumerate())


def test_workers_are_forked_only_from_a_single_threaded_process():
    if not _single_threaded():
        pytest.skip(f"the test process runs other threads: {threading.enumerate()}")
    assert pdfdir_mod._pool_context().get_start_method() == "fork"
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert pdfdir_mod._pool_context().get_start_method() == "forkserver"
    finally:
        stop.set()
        t.join()
    assert pdfdir_mod._pool_context().get_start_method() == "fork"


def test_forkserver_workers_give_the_same_corpus(pdf_path, tmp_path):
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        ingest_pdfs(pdf_path.parent, tmp_path / "fs", dpi=72, ocr="never", workers=2, progress=False)
    finally:
        stop.set()
        t.join()
    ingest_pdfs(pdf_path.parent, tmp_path / "fork", dpi=72, ocr="never", workers=2, progress=False)
    reports = {k: json.loads((tmp_path / k / "ingest-report.json").read_text()) for k in ("fs", "fork")}
    assert reports["fs"]["worker_start_method"] == "forkserver"
    assert reports["fork"]["worker_start_method"] == ("fork" if _single_threaded() else "forkserver")
    assert (tmp_path / "fs" / "pages.jsonl").read_text() == (tmp_path / "fork" / "pages.jsonl").read_text()
