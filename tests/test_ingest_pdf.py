"""Ingestion of the shared real and broken PDFs (read in place from ../shared/pdfs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from vdr.corpus import Corpus, page_id
from vdr.errors import InputError
from vdr.ingest import ingest_pdfs
from vdr.ingest.pdf import DEFAULT_MAX_PIXELS, effective_dpi, probe

PDFS = Path(__file__).resolve().parents[2] / "shared" / "pdfs"
PASSWORD = "openpassword"

GOOD = {
    "minimal-document.pdf": 1,
    "pdflatex-4-pages.pdf": 4,
    "pdflatex-image.pdf": 1,
    "pdflatex-forms.pdf": 1,
    "google-doc-document.pdf": 1,
    "GeoTopo-komprimiert.pdf": 117,
    "habibi-rotated.pdf": 4,
    "grayscale-image.pdf": 1,
    "cmyk-image.pdf": 1,
    "libreoffice-writer-password.pdf": 1,
    "huge-page.pdf": 1,
}
BROKEN = {
    "empty-file.pdf": "empty file",
    "not-a-pdf.pdf": "not a PDF",
    "broken-truncated.pdf": "truncated",
    "zero-pages.pdf": "zero pages",
    "unreadablemetadata.pdf": "damaged",
}

pytestmark = pytest.mark.skipif(not PDFS.is_dir(), reason=f"shared test PDFs not found at {PDFS}")


def _link(folder: Path, names, rename=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        dst = folder / (rename or {}).get(n, n)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(PDFS / n, dst)
    return folder


@pytest.fixture(scope="module")
def shared_corpus(tmp_path_factory):
    """The whole shared folder at 72 dpi (GeoTopo included), OCR off, password map for the encrypted one."""
    out = tmp_path_factory.mktemp("corpus")
    report = ingest_pdfs(PDFS, out, dpi=72, ocr="never", password={"libreoffice-writer-password.pdf": PASSWORD}, workers=2, progress=False)
    return report, Corpus.load(out)


def test_every_good_file_has_its_page_count(shared_corpus):
    report, corpus = shared_corpus
    docs = report.by_source()
    for name, n in GOOD.items():
        assert docs[name].status == "ok", (name, docs[name].reason)
        assert docs[name].pages == n
        assert [p.page for p in corpus.pages() if p.source == name] == list(range(1, n + 1))
    assert len(corpus) == sum(GOOD.values()) == 133
    assert report.counts() == {"ok": 11, "partial": 0, "failed": 5}


def test_every_broken_file_is_reported_with_a_reason(shared_corpus):
    report, corpus = shared_corpus
    docs = report.by_source()
    for name, words in BROKEN.items():
        assert docs[name].status == "failed"
        assert docs[name].pages == 0
        assert words in docs[name].reason, docs[name].reason
        assert "\n" not in docs[name].reason
        assert not [p for p in corpus.pages() if p.source == name]
    on_disk = json.loads((corpus.root / "ingest-report.json").read_text())
    assert {d["source"]: d["status"] for d in on_disk["documents"]}["empty-file.pdf"] == "failed"
    assert on_disk["documents"][0]["sha256"] and on_disk["documents"][0]["rasterizer_version"].startswith("pypdfium2")


def test_image_sizes_match_page_size_times_dpi(shared_corpus):
    _, corpus = shared_corpus
    for name in ("minimal-document.pdf", "pdflatex-4-pages.pdf", "grayscale-image.pdf", "google-doc-document.pdf"):
        sizes = probe(PDFS / name, None).page_sizes
        for (w, h), page in zip(sizes, [p for p in corpus.pages() if p.source == name]):
            assert page.dpi == 72
            assert abs(page.width - w) <= 1 and abs(page.height - h) <= 1
            with Image.open(corpus.image_path(page.corpus_id)) as im:
                assert im.size == (page.width, page.height)
                assert im.mode == "RGB"
    # A4 at 72 dpi: 595.276 x 841.89 pt
    assert (corpus["minimal-document.pdf#1"].width, corpus["minimal-document.pdf#1"].height) == (596, 842)


def test_rotated_pages_are_upright(shared_corpus):
    _, corpus = shared_corpus
    # habibi-rotated: A4 portrait boxes with /Rotate 90, 180, 270, 0
    dims = [(corpus[f"habibi-rotated.pdf#{i}"].width, corpus[f"habibi-rotated.pdf#{i}"].height) for i in range(1, 5)]
    assert dims == [(842, 596), (596, 842), (842, 596), (596, 842)]


def test_grayscale_and_cmyk_become_rgb(shared_corpus):
    _, corpus = shared_corpus
    for cid in ("grayscale-image.pdf#1", "cmyk-image.pdf#1"):
        with Image.open(corpus.image_path(cid)) as im:
            assert im.mode == "RGB"
            lo, hi = im.convert("L").getextrema()
            assert hi - lo > 50  # a real picture, not a blank or 1x1 placeholder
    assert (corpus["grayscale-image.pdf#1"].width, corpus["grayscale-image.pdf#1"].height) == (243, 338)


def test_huge_page_stays_within_the_pixel_budget(shared_corpus):
    _, corpus = shared_corpus
    page = corpus["huge-page.pdf#1"]
    assert page.width * page.height <= DEFAULT_MAX_PIXELS
    assert page.dpi == pytest.approx(10.24) and page.dpi < 72
    assert page.width == page.height == 2048  # 14400 pt * 10.24 / 72
    assert page.text == "Huge page" and page.text_source == "pdf"


def test_text_layer_is_read(shared_corpus):
    _, corpus = shared_corpus
    assert "Geometrie und Topologie" in corpus["GeoTopo-komprimiert.pdf#1"].text
    assert corpus["GeoTopo-komprimiert.pdf#1"].text_source == "pdf"
    assert corpus["cmyk-image.pdf#1"].text_source == "none"  # image only, OCR off


def test_encrypted_needs_its_password(tmp_path):
    src = _link(tmp_path / "in", ["libreoffice-writer-password.pdf"])
    r = ingest_pdfs(src, tmp_path / "a", dpi=36, ocr="never", workers=1, progress=False)
    assert r.documents[0].status == "failed" and "password" in r.documents[0].reason
    r = ingest_pdfs(src, tmp_path / "b", dpi=36, ocr="never", password="wrong", workers=1, progress=False)
    assert r.documents[0].status == "failed" and "wrong" in r.documents[0].reason
    r = ingest_pdfs(src, tmp_path / "c", dpi=36, ocr="never", password=PASSWORD, workers=1, progress=False)
    assert r.documents[0].status == "ok" and r.pages == 1


def test_rerun_skips_unchanged_and_picks_up_new_and_changed(tmp_path):
    src = _link(tmp_path / "in", ["minimal-document.pdf", "grayscale-image.pdf"], rename={"grayscale-image.pdf": "sub dir/g 1%.pdf"})
    out = tmp_path / "out"
    r1 = ingest_pdfs(src, out, dpi=36, ocr="never", workers=1, progress=False)
    assert [d.skipped for d in r1.documents] == [False, False]
    assert Corpus.load(out).ids() == ["minimal-document.pdf#1", "sub%20dir/g%201%25.pdf#1"]
    first_text = Corpus.load(out)["minimal-document.pdf#1"].text
    r2 = ingest_pdfs(src, out, dpi=36, ocr="never", workers=1, progress=False)
    assert [d.skipped for d in r2.documents] == [True, True] and r2.pages == 2
    _link(src, ["pdflatex-4-pages.pdf"])
    r3 = ingest_pdfs(src, out, dpi=36, ocr="never", workers=1, progress=False)
    assert {d.source: d.skipped for d in r3.documents} == {"minimal-document.pdf": True, "pdflatex-4-pages.pdf": False, "sub dir/g 1%.pdf": True}
    assert len(Corpus.load(out)) == 6
    # same name, other content -> re-rendered; removed file -> its pages and images are gone
    (src / "minimal-document.pdf").unlink()
    os.symlink(PDFS / "google-doc-document.pdf", src / "minimal-document.pdf")
    (src / "pdflatex-4-pages.pdf").unlink()
    r4 = ingest_pdfs(src, out, dpi=36, ocr="never", workers=1, progress=False)
    assert {d.source: d.skipped for d in r4.documents} == {"minimal-document.pdf": False, "sub dir/g 1%.pdf": True}
    corpus = Corpus.load(out)
    assert len(corpus) == 2 and corpus["minimal-document.pdf#1"].text != first_text
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(Path(p.image).name for p in corpus.pages())
    # other settings -> everything re-rendered
    r5 = ingest_pdfs(src, out, dpi=40, ocr="never", workers=1, progress=False)
    assert not any(d.skipped for d in r5.documents)


def test_page_ids_are_percent_encoded_and_image_names_safe(tmp_path):
    assert page_id("reports/esg 2023.pdf", 12) == "reports/esg%202023.pdf#12"
    src = _link(tmp_path / "in", ["minimal-document.pdf"], rename={"minimal-document.pdf": "reports/esg 2023.pdf"})
    ingest_pdfs(src, tmp_path / "out", dpi=36, ocr="never", workers=1, progress=False)
    corpus = Corpus.load(tmp_path / "out")
    (cid,) = corpus.ids()
    assert cid == "reports/esg%202023.pdf#1" and corpus[cid].source == "reports/esg 2023.pdf"
    path = corpus.image_path(cid)
    assert path.parent == (tmp_path / "out" / "images").resolve() and " " not in path.name


def test_pdfium_and_poppler_agree(tmp_path):
    names = ["minimal-document.pdf", "habibi-rotated.pdf", "grayscale-image.pdf", "cmyk-image.pdf", "pdflatex-forms.pdf"]
    src = _link(tmp_path / "in", names)
    a = ingest_pdfs(src, tmp_path / "pdfium", dpi=100, ocr="never", workers=2, progress=False)
    b = ingest_pdfs(src, tmp_path / "poppler", dpi=100, rasterizer="poppler", ocr="never", workers=2, progress=False)
    assert a.ok and b.ok
    ca, cb = Corpus.load(tmp_path / "pdfium"), Corpus.load(tmp_path / "poppler")
    assert ca.ids() == cb.ids()
    for cid in ca:
        pa, pb = ca[cid], cb[cid]
        assert abs(pa.width - pb.width) <= 1 and abs(pa.height - pb.height) <= 1, cid
        with Image.open(ca.image_path(cid)) as ia, Image.open(cb.image_path(cid)) as ib:
            assert ia.mode == ib.mode == "RGB"
            ma = sum(ia.convert("L").resize((32, 32)).tobytes()) / 1024
            mb = sum(ib.convert("L").resize((32, 32)).tobytes()) / 1024
            assert abs(ma - mb) < 12, (cid, ma, mb)  # same picture: CMYK not inverted, gray not dark
    words = lambda t: set(t.split())  # noqa: E731
    assert words(ca["minimal-document.pdf#1"].text) == words(cb["minimal-document.pdf#1"].text) != set()


def test_poppler_reports_unreadable_pages(tmp_path):
    src = _link(tmp_path / "in", ["unreadablemetadata.pdf", "zero-pages.pdf"])
    r = ingest_pdfs(src, tmp_path / "out", dpi=36, rasterizer="poppler", ocr="never", workers=2, progress=False)
    docs = r.by_source()
    assert docs["unreadablemetadata.pdf"].status == "failed" and "0 x 0 pt" in docs["unreadablemetadata.pdf"].reason
    assert docs["zero-pages.pdf"].status == "failed" and "zero pages" in docs["zero-pages.pdf"].reason


def test_ocr_on_a_page_without_text_layer(tmp_path):
    from PIL import ImageDraw, ImageFont

    im = Image.new("RGB", (900, 300), "white")
    ImageDraw.Draw(im).text((40, 100), "HELLO OCR 42", fill="black", font=ImageFont.load_default(size=90))
    (tmp_path / "in").mkdir()
    im.save(tmp_path / "in" / "scan.pdf", "PDF", resolution=150)
    r = ingest_pdfs(tmp_path / "in", tmp_path / "out", dpi=150, ocr="auto", workers=1, progress=False)
    assert r.ok
    page = Corpus.load(tmp_path / "out")["scan.pdf#1"]
    assert page.text_source == "ocr" and "HELLO" in page.text and "42" in page.text
    assert abs(page.width - 900) <= 1 and page.height == 300
    ingest_pdfs(tmp_path / "in", tmp_path / "out2", dpi=150, ocr="never", workers=1, progress=False)
    assert Corpus.load(tmp_path / "out2")["scan.pdf#1"].text_source == "none"


def test_effective_dpi_and_bad_options(tmp_path):
    assert effective_dpi(595.276, 841.89, 144, DEFAULT_MAX_PIXELS) == 144
    d = effective_dpi(14400, 14400, 144, 1_000_000)
    assert d < 144 and (14400 * d / 72) ** 2 <= 1_000_000
    with pytest.raises(InputError, match="not a folder"):
        ingest_pdfs(tmp_path / "missing", tmp_path / "out", progress=False)
    (tmp_path / "in").mkdir()
    with pytest.raises(InputError, match="decompression-bomb"):
        ingest_pdfs(tmp_path / "in", tmp_path / "out", max_pixels=Image.MAX_IMAGE_PIXELS + 1, progress=False)
    with pytest.raises(InputError, match="rasterizer"):
        ingest_pdfs(tmp_path / "in", tmp_path / "out", rasterizer="ghostscript", progress=False)
    assert Image.MAX_IMAGE_PIXELS is not None  # the global limit is never switched off


def test_cli_ingest_strict_and_errors(tmp_path, capsys):
    from vdr.cli import main

    src = _link(tmp_path / "in", ["minimal-document.pdf", "empty-file.pdf"])
    args = ["ingest", str(src), "--out", str(tmp_path / "out"), "--dpi", "36", "--ocr", "never", "-q", "--workers", "1"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert "1 ok, 0 partial, 1 failed" in out.out and "failed: empty-file.pdf: empty file" in out.err
    assert main(args + ["--strict"]) == 1
    assert main(["ingest", str(tmp_path / "missing"), "--out", str(tmp_path / "o2")]) == 2
    assert "not a folder of PDFs" in capsys.readouterr().err


def test_stale_pdfium_error_code_does_not_mislabel_a_broken_file():
    # PDFium keeps its last error code per process: after an encrypted file fails, a file with an
    # empty page tree used to be reported as "encrypted". The file's structure must decide.
    from vdr.ingest.pdf import DocumentError

    with pytest.raises(DocumentError, match="password"):
        probe(PDFS / "libreoffice-writer-password.pdf", None)
    with pytest.raises(DocumentError, match="zero pages"):
        probe(PDFS / "zero-pages.pdf", None)
    with pytest.raises(DocumentError, match="password"):
        probe(PDFS / "libreoffice-writer-password.pdf", "wrong")
