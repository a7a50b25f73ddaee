"""Page images are lossless: the PNG that `vdr ingest` writes decodes to exactly the rendered bitmap."""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from vdr.corpus import Corpus
from vdr.ingest import ingest_pdfs
from vdr.ingest.pdf import IMAGE_ENCODING, rasterize, write_png

pdf_mod = importlib.import_module("vdr.ingest.pdf")  # `vdr.ingest` the attribute is the ingest function


def _png(a) -> bytes:
    f = io.BytesIO()
    write_png(f, a)
    return f.getvalue()


def _decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "PNG" and im.mode == "RGB"
        return np.asarray(im.convert("RGB"))


@pytest.fixture(params=["isal", "zlib"])
def deflate(request, monkeypatch):
    """Each deflate library write_png may use."""
    if request.param == "isal":
        isal_zlib = pytest.importorskip("isal.isal_zlib")
        monkeypatch.setattr(pdf_mod, "_deflate", lambda: (isal_zlib.compress, "isal"))
    else:
        monkeypatch.setattr(pdf_mod, "_deflate", lambda: (zlib.compress, "zlib"))
    return request.param


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 1), (3, 4), (64, 33)])
def test_png_round_trips_every_pixel_value(shape, deflate):
    g = np.random.default_rng(sum(shape))
    a = g.integers(0, 256, size=(*shape, 3), dtype=np.uint8)  # noise: every wrap-around of the Up filter
    a[0, 0] = (0, 128, 255)
    assert np.array_equal(_decode(_png(a)), a)
    assert np.array_equal(_decode(_png(Image.fromarray(a))), a)  # a PIL image works too


def test_png_layout_is_the_recorded_encoding(deflate):
    a = np.zeros((2, 2, 3), np.uint8)
    a[0], a[1] = 200, 100  # Up filter: first row as is (the row above is zeros), second 100 - 200 mod 256
    data = _png(a)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    n, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and struct.unpack(">IIBBBBB", data[16:16 + n]) == (2, 2, 8, 2, 0, 0, 0)
    assert zlib.crc32(data[12:16 + n]) == struct.unpack(">I", data[16 + n:20 + n])[0]
    pos = 20 + n
    n2, kind2 = struct.unpack(">I4s", data[pos:pos + 8])
    assert kind2 == b"IDAT"
    raw = zlib.decompress(data[pos + 8:pos + 8 + n2])
    assert raw == bytes([2] + [200] * 6 + [2] + [156] * 6)  # filter byte 2 ("Up") on each row
    assert data.endswith(b"IEND\xaeB`\x82")


def test_recorded_encoding_names_the_deflate_library_in_use():
    expected = "isal" if importlib.util.find_spec("isal") is not None else "zlib"
    assert IMAGE_ENCODING == {"format": "png", "lossless": True, "png_filter": "up", "deflate": expected, "deflate_level": 1}


def test_png_rejects_what_is_not_8bit_rgb():
    for bad in (np.zeros((2, 2, 4), np.uint8), np.zeros((2, 2, 3), np.uint16), np.zeros((0, 2, 3), np.uint8), Image.new("L", (2, 2))):
        with pytest.raises(ValueError, match="8-bit RGB"):
            _png(bad)


def test_ingested_page_images_decode_to_the_rendered_bitmap(tmp_path):
    # a page with photographic noise, flat colour and anti-aliased text
    g = np.random.default_rng(7)
    pic = np.full((300, 400, 3), 250, np.uint8)
    pic[40:200, 30:330] = g.integers(0, 256, size=(160, 300, 3), dtype=np.uint8)
    pic[220:260, 50:350] = (12, 99, 201)
    (tmp_path / "in").mkdir()
    pages = [Image.fromarray(pic), Image.fromarray(pic[::-1].copy())]
    pages[0].save(tmp_path / "in" / "noise.pdf", "PDF", resolution=100, save_all=True, append_images=pages[1:])
    report = ingest_pdfs(tmp_path / "in", tmp_path / "out", dpi=130, ocr="never", workers=1, progress=False)
    assert report.ok
    on_disk = json.loads((tmp_path / "out" / "ingest-report.json").read_text())
    assert on_disk["image_encoding"] == IMAGE_ENCODING
    corpus = Corpus.load(tmp_path / "out")
    for n, im, _dpi in rasterize(tmp_path / "in" / "noise.pdf", dpi=130):
        page = corpus[f"noise.pdf#{n}"]
        assert page.image.endswith(".png")
        with Image.open(tmp_path / "out" / page.image) as stored:
            assert stored.format == "PNG" and stored.mode == "RGB"
            assert np.array_equal(np.asarray(stored), np.asarray(im))
        im.close()
