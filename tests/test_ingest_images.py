"""Page images (vdr.ingest.images): every PIL mode to RGB with its tonal range, dataset image
values decoded like datasets' Image feature, the page checks shared by every ingest path."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from vdr.ingest.images import ImageProblem, decode_image, fit_budget, pixel_sha256, size_problem, to_rgb

RAMP = np.arange(256, dtype=np.uint8).reshape(1, 256)


def _levels(im) -> list[int]:
    """Sorted distinct values of the red channel (R = G = B for gray inputs)."""
    a = np.asarray(im)
    assert im.mode == "RGB" and (a[..., 0] == a[..., 1]).all() and (a[..., 1] == a[..., 2]).all()
    return sorted(set(a[..., 0].ravel().tolist()))


def _alpha(color_mode: str):
    """Black with alpha 0..255 left to right, in ``color_mode`` + alpha."""
    la = Image.merge("LA", [Image.new("L", (256, 1), 0), Image.fromarray(RAMP)])
    return la if color_mode == "LA" else la.convert(color_mode)


def test_mode_1_black_and_white():
    im = Image.fromarray(RAMP).convert("1", dither=Image.Dither.NONE)
    assert _levels(to_rgb(im)) == [0, 255]
    assert np.asarray(to_rgb(im))[0, 0, 0] == 0 and np.asarray(to_rgb(im))[0, 255, 0] == 255


def test_mode_L_keeps_256_levels():
    out = to_rgb(Image.fromarray(RAMP))
    assert _levels(out) == list(range(256)) and np.asarray(out)[0, 17].tolist() == [17, 17, 17]


@pytest.mark.parametrize("mode", ["LA", "RGBA"])
def test_alpha_is_composited_on_white(mode):
    out = np.asarray(to_rgb(_alpha(mode)))[0, :, 0]
    assert out[0] == 255  # fully transparent -> white
    assert out[255] == 0  # opaque black stays black
    assert out[128] == 127  # 255 * (1 - 128/255)
    assert len(set(out.tolist())) == 256


def test_mode_P_with_transparency():
    p = Image.fromarray(RAMP).convert("P")
    p.info["transparency"] = int(np.asarray(p)[0, 0])  # the palette entry of the first pixel
    out = np.asarray(to_rgb(p))[0, :, 0]
    assert out[0] == 255 and out[1] == 1 and out[200] == 200
    plain = Image.fromarray(RAMP).convert("P")
    assert np.asarray(to_rgb(plain))[0, 0, 0] == 0  # no transparency: black stays black


def test_mode_CMYK():
    k = Image.fromarray(255 - RAMP)
    im = Image.merge("CMYK", [Image.new("L", (256, 1), 0)] * 3 + [k])
    assert _levels(to_rgb(im)) == list(range(256))
    cyan = Image.new("CMYK", (1, 1), (255, 0, 0, 0))
    assert to_rgb(cyan).getpixel((0, 0)) == (0, 255, 255)


@pytest.mark.parametrize("mode", ["I;16", "I;16B"])
def test_mode_I16_keeps_its_tonal_range(mode):
    # the bug: PIL's convert("L") clips 16-bit values at 255 -> 2 gray levels
    im = Image.fromarray(RAMP.astype(np.uint16) * 257)
    if mode == "I;16B":
        im = Image.frombytes("I;16B", im.size, (RAMP.astype(">u2") * 257).tobytes())
    assert im.mode == mode
    assert len(set(np.asarray(im.convert("L")).ravel().tolist())) <= 2  # what PIL alone does
    assert _levels(to_rgb(im)) == list(range(256))


def test_mode_I():
    assert _levels(to_rgb(Image.fromarray(RAMP.astype(np.int32) * 257))) == list(range(256))  # 16-bit values
    assert _levels(to_rgb(Image.fromarray(RAMP.astype(np.int32)))) == list(range(256))  # 8-bit values kept
    wide = Image.fromarray((RAMP.astype(np.int32) - 128) * 1000)  # negative/large: stretched min..max
    assert _levels(to_rgb(wide)) == list(range(256))


def test_mode_F():
    assert _levels(to_rgb(Image.fromarray(RAMP.astype(np.float32) / 255))) == list(range(256))  # [0, 1]
    assert _levels(to_rgb(Image.fromarray(RAMP.astype(np.float32)))) == list(range(256))  # [0, 255]
    f = RAMP.astype(np.float32).copy()
    f[0, 0] = np.nan
    assert np.asarray(to_rgb(Image.fromarray(f)))[0, 0, 0] == 1  # non-finite -> the minimum (1 here)


def test_rgb_is_returned_as_is_and_hash_ignores_encoding():
    im = Image.new("RGB", (30, 40), (1, 2, 3))
    assert to_rgb(im) is im
    buf1, buf9 = io.BytesIO(), io.BytesIO()
    im.save(buf1, "PNG", compress_level=1)
    im.save(buf9, "PNG", compress_level=9)
    h = pixel_sha256(Image.open(buf1))
    assert h == pixel_sha256(Image.open(buf9)) == pixel_sha256(im) and len(h) == 64
    assert h != pixel_sha256(Image.new("RGB", (40, 30), (1, 2, 3)))


def _png(mode="RGB", size=(40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 90).save(buf, "PNG")
    return buf.getvalue()


def test_decode_struct_binary_and_path(tmp_path):
    png = _png()
    assert decode_image({"bytes": png, "path": None}).size == (40, 30)
    assert decode_image({"bytes": png, "path": "ignored.png"}).size == (40, 30)  # bytes first
    assert decode_image(png).size == (40, 30)
    assert decode_image(memoryview(png)).size == (40, 30)
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "p.png").write_bytes(_png("L", (50, 60)))
    assert decode_image({"bytes": None, "path": "img/p.png"}, base=tmp_path).size == (50, 60)
    assert decode_image(str(tmp_path / "img" / "p.png")).mode == "L"
    pil = Image.new("RGB", (3, 3))
    assert decode_image(pil) is pil


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "no decodable image"),
        (123, "no decodable image"),
        ({"bytes": None, "path": None}, "neither bytes nor path"),
        (b"not an image", "cannot decode image from 12 bytes"),
        ({"bytes": b"", "path": "missing.png"}, "not found"),
        ({"bytes": None, "path": "../outside.png"}, "leaves the dataset folder"),
        ({"path": "rel.png"}, "no dataset folder"),
    ],
)
def test_decode_errors_are_one_line_reasons(tmp_path, value, words):
    base = None if value == {"path": "rel.png"} else tmp_path
    with pytest.raises(ImageProblem, match=words):
        decode_image(value, base=base)


def test_size_checks_and_budget():
    assert size_problem(70, 14400) == "extreme aspect ratio 206:1 (models accept at most 200:1)"
    assert size_problem(72, 14400) is None  # exactly 200:1 is accepted
    assert size_problem(27, 500) == "page too small: 27 px on its short side (models need >= 28 px)"
    assert size_problem(0, 10) == "page size is 0 x 10 px"
    im = Image.new("RGB", (4000, 3000))
    out, note = fit_budget(im, 2048 * 2048)
    assert out.width * out.height <= 2048 * 2048 and out.size == (2364, 1773)
    assert note == "downscaled from 4000 x 3000 to 2364 x 1773 px to fit the pixel budget of 4194304 px"
    same, none = fit_budget(im, 12_000_000)
    assert same is im and none is None
