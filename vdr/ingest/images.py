"""Page images: the checks every ingest path applies, decoding of dataset image values, RGB conversion.

One set of rules for PDF pages and dataset images (ViDoRe or any other), so that a page which a
model's image processor would reject never reaches the corpus and one bad page never aborts a run:

* :func:`size_problem`: a page is **skipped** (with a reason) when its aspect ratio exceeds
  :data:`MAX_ASPECT` (200:1) or its short side is below :data:`MIN_SIDE_PX` (28 px): Qwen2-VL-family
  processors raise on such images ("absolute aspect ratio must be smaller than 200").
* :func:`fit_budget`: a page over the pixel budget is **adapted**: PDF pages are rendered at a lower
  DPI (:func:`vdr.ingest.pdf.effective_dpi`), dataset images are downscaled (Lanczos, aspect kept);
  the reason is recorded per page.
* :func:`decode_image`: dataset image values are decoded as ``datasets``' ``Image`` feature does: a
  decoded PIL image, a struct ``{"bytes", "path"}`` (bytes first), raw encoded bytes, or a path.
* :func:`upright`: EXIF orientation (tag 274, values 1-8) is applied once, as ``datasets``'
  ``Image`` feature and image viewers apply it, whatever the value's form (decoded image, struct,
  bytes, file); the tag is then removed, so applying it again changes nothing. Every dataset path
  decodes undecoded values itself (:func:`decode_image` then :func:`upright`), so the orientation
  is known and recorded per page.
* :func:`to_rgb`: every PIL mode becomes 8-bit RGB with its tonal range kept (see there).
"""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

from ..errors import VdrError

__all__ = [
    "ImageProblem", "MIN_SIDE_PX", "MAX_ASPECT", "size_problem", "fit_budget", "decode_image", "to_rgb", "pixel_sha256",
    "upright", "EXIF_ORIENTATION_TAG", "EXIF_TRANSFORMS",
]

#: Qwen2-VL-family processors reject images with a side below 28 px or an aspect ratio above 200.
MIN_SIDE_PX = 28
MAX_ASPECT = 200.0


class ImageProblem(VdrError):
    """One page image cannot be used; ``str(e)`` is the one-line reason recorded for the page."""


def size_problem(width: float, height: float) -> str | None:
    """The reason a ``width x height`` px page must be skipped, or ``None`` when it is usable.

    Args:
        width, height: the page's size in pixels (floats allowed: a planned render size).

    Returns:
        ``None``, or a one-line reason: non-positive/non-finite size, aspect ratio above
        :data:`MAX_ASPECT` (``max/min > 200``) or a short side below :data:`MIN_SIDE_PX`.

    >>> size_problem(70, 14400)
    'extreme aspect ratio 206:1 (models accept at most 200:1)'
    >>> size_problem(20, 100)
    'page too small: 20 px on its short side (models need >= 28 px)'
    >>> size_problem(596, 842) is None
    True
    """
    if not (width > 0 and height > 0) or not (math.isfinite(width) and math.isfinite(height)):
        return f"page size is {width:g} x {height:g} px"
    aspect = max(width, height) / min(width, height)
    if aspect > MAX_ASPECT:
        return f"extreme aspect ratio {aspect:.0f}:1 (models accept at most {MAX_ASPECT:.0f}:1)"
    if min(width, height) < MIN_SIDE_PX:
        return f"page too small: {min(width, height):.0f} px on its short side (models need >= {MIN_SIDE_PX} px)"
    return None


def fit_budget(im, max_pixels: int):
    """Downscale ``im`` (Lanczos, aspect ratio kept) so that ``width * height <= max_pixels``.

    Returns:
        ``(image, note)``: ``im`` itself and ``None`` when it fits, else a new image and a note
        ``"downscaled from W x H to w x h px to fit the pixel budget of N px"``.

    Raises:
        ValueError: ``max_pixels`` < 1.
    """
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be positive, got {max_pixels}")
    w, h = im.size
    if w * h <= max_pixels:
        return im, None
    from PIL import Image

    s = math.sqrt(max_pixels / (w * h))
    nw, nh = max(1, math.floor(w * s)), max(1, math.floor(h * s))
    while nw * nh > max_pixels:  # float rounding
        nw, nh = max(1, nw - 1), max(1, math.floor(nh * (nw - 1) / nw))
    out = im.resize((nw, nh), Image.Resampling.LANCZOS)
    return out, f"downscaled from {w} x {h} to {nw} x {nh} px to fit the pixel budget of {max_pixels} px"


def decode_image(value, *, base: str | Path | None = None):
    """Decode one dataset image value into a loaded ``PIL.Image.Image`` (any mode).

    Accepted, as ``datasets.Image`` decodes them: a PIL image; a dict ``{"bytes": ..., "path": ...}``
    (``bytes`` used when present, else ``path``) as plain pyarrow structs are read; raw encoded bytes
    (PNG, JPEG, TIFF, ...); a path ``str``. A relative path is resolved under ``base`` (a local
    dataset folder) and must stay inside it.

    Raises:
        ImageProblem: no image in the value, an unreadable file, undecodable bytes, or an image
            above PIL's decompression-bomb limit (the message says which).
    """
    from PIL import Image, UnidentifiedImageError

    if isinstance(value, Image.Image):
        return value
    data, path = None, None
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = value
    elif isinstance(value, (str, Path)):
        path = value
    else:
        raise ImageProblem(f"no decodable image (a {type(value).__name__} value)")
    if data is not None and len(data) > 0:
        src, what = io.BytesIO(bytes(data)), f"{len(data)} bytes"
    elif path:
        src, what = _resolve(str(path), base), f"file {str(path)!r}"
    else:
        raise ImageProblem("no decodable image (neither bytes nor path)")
    try:
        im = Image.open(src)
        before = _orientation(im)
        im.load()
        if before is not None and _orientation(im) is None:  # the decoder applied it while loading (Pillow's TIFF reader)
            im.info[_APPLIED_ON_LOAD] = before
    except Image.DecompressionBombError as e:
        raise ImageProblem(f"image above PIL's decompression-bomb limit ({e})") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise ImageProblem(f"cannot decode image from {what}: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    return im


#: The EXIF (TIFF) tag that says how the stored pixels are turned: 0x0112.
EXIF_ORIENTATION_TAG = 274
#: What each EXIF orientation value asks for to show the stored pixels upright (EXIF 2.32, tag 274;
#: the transforms of ``PIL.ImageOps.exif_transpose``). 1: stored upright.
EXIF_TRANSFORMS = {
    1: "none",
    2: "mirror left-right",
    3: "turn 180 degrees",
    4: "mirror top-bottom",
    5: "transpose (mirror along the top-left to bottom-right diagonal)",
    6: "turn 90 degrees clockwise",
    7: "transverse (mirror along the top-right to bottom-left diagonal)",
    8: "turn 90 degrees counter-clockwise",
}


#: ``info`` key where :func:`decode_image` notes an EXIF orientation the decoder applied on load.
_APPLIED_ON_LOAD = "vdr_exif_orientation_applied_on_load"


def _orientation(im) -> int | None:
    """The image's EXIF orientation value, or ``None`` (no tag, or an unreadable EXIF block)."""
    try:
        value = im.getexif().get(EXIF_ORIENTATION_TAG)
    except Exception:  # a malformed EXIF block: the pixels are used as stored
        return None
    return value if isinstance(value, int) else None


def upright(im):
    """``im`` with its EXIF orientation applied (``PIL.ImageOps.exif_transpose``), and the value.

    Returns:
        ``(image, orientation)``: ``orientation`` is the EXIF value found (1-8), or ``None`` when
        the image has no orientation tag (or a value outside 1-8, which is ignored as viewers
        ignore it). For 2-8 the image is a new, transformed image without the tag (so a second
        call finds none); for 1 or ``None`` it is ``im`` itself. Pillow's TIFF reader applies the
        orientation itself while loading: :func:`decode_image` notes the value then, and it is
        returned here without a second transform.
    """
    from PIL import ImageOps

    loaded = im.info.get(_APPLIED_ON_LOAD)
    if loaded in EXIF_TRANSFORMS:  # already applied by the decoder (decode_image noted it): not again
        return im, loaded
    value = _orientation(im)
    if value not in EXIF_TRANSFORMS:
        return im, None
    if value == 1:
        return im, 1
    out = ImageOps.exif_transpose(im)
    return (out if out is not None else im), value


def _resolve(path: str, base: str | Path | None) -> Path:
    p = Path(path)
    if not p.is_absolute():
        if base is None:
            raise ImageProblem(f"image given only by the relative path {path!r} and no dataset folder to resolve it")
        root = Path(base).resolve()
        p = (root / p).resolve()
        if root not in p.parents:
            raise ImageProblem(f"image path {path!r} leaves the dataset folder")
    if not p.is_file():
        raise ImageProblem(f"image file {path!r} not found")
    return p


def _gray_to_u8(arr):
    """float array of gray values -> uint8, keeping the tonal range (see :func:`to_rgb`)."""
    import numpy as np

    a = np.asarray(arr, dtype=np.float64)
    finite = a[np.isfinite(a)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if lo >= 0 and hi <= 255:
        scale, off = 1.0, 0.0
    elif lo >= 0 and hi <= 65535:
        scale, off = 255 / 65535, 0.0
    else:
        scale, off = (255 / (hi - lo) if hi > lo else 0.0), lo
    a = np.where(np.isfinite(a), a, lo)
    return np.clip(np.rint((a - off) * scale), 0, 255).astype(np.uint8)


def to_rgb(im):
    """``im`` as an 8-bit RGB image with its tonal range kept.

    Rules per PIL mode:

    * ``RGB``: returned as is (the same object).
    * ``1``, ``L``, ``CMYK``, ``YCbCr``, ``P`` without transparency, other 8-bit modes: PIL's
      conversion (``1`` -> 0/255, ``CMYK`` -> ``255 - C - K`` per channel...).
    * With alpha (``LA``, ``La``, ``PA``, ``RGBA``, ``RGBa``, ``P``/``L``/``RGB`` with a transparency
      key): alpha-composited on **white** (a transparent pixel becomes white, 50 % black becomes
      mid gray).
    * ``I;16`` (any byte order): 16-bit full scale mapped to 8 bits (``round(v * 255 / 65535)``).
    * ``I`` (32-bit int) and ``F`` (float): values in [0, 255] kept; else values in [0, 65535]
      taken as 16-bit; else (negative or larger values) stretched linearly from [min, max] to
      [0, 255]. ``F`` values in [0, 1] are taken as normalised (x 255). Non-finite values -> min.

    Returns:
        A ``PIL.Image.Image`` in mode ``RGB``; a new object unless ``im`` was already RGB.

    Raises:
        ImageProblem: a mode PIL cannot convert to RGB.
    """
    from PIL import Image

    mode = im.mode
    if mode == "RGB" and "transparency" not in im.info:
        return im
    if mode in ("I", "F") or mode.startswith("I;16"):
        import numpy as np

        arr = np.asarray(im)
        if mode == "F":
            finite = arr[np.isfinite(arr)]
            if finite.size and finite.min() >= 0 and finite.max() <= 1 and finite.max() > 0:
                arr = arr * 255.0
        elif mode.startswith("I;16"):
            arr = arr.astype(np.float64) * (255 / 65535)
        return Image.fromarray(_gray_to_u8(arr), "L").convert("RGB")
    if mode in ("LA", "La", "PA", "RGBA", "RGBa") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        out = Image.alpha_composite(white, rgba).convert("RGB")
        rgba.close()
        white.close()
        return out
    try:
        return im.convert("RGB")
    except (ValueError, OSError) as e:
        raise ImageProblem(f"cannot convert image mode {mode!r} to RGB ({e})") from None


def pixel_sha256(im) -> str:
    """Hex SHA-256 of an image's content: mode, size and raw pixel bytes (independent of the file
    format and PNG compression, so equal pixels give equal hashes).

    ``im`` is a PIL image, or a uint8 array ``(height, width, 3)`` taken as mode ``RGB`` (hashed
    without a copy when C-contiguous; the same hash as ``Image.fromarray(im)`` gives).
    """
    if hasattr(im, "mode"):
        h = hashlib.sha256(f"{im.mode} {im.width}x{im.height}\n".encode())
        h.update(im.tobytes())
        return h.hexdigest()
    import numpy as np

    a = np.ascontiguousarray(im)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"pixel_sha256 needs a PIL image or 8-bit RGB pixels (height, width, 3), got {a.dtype} {a.shape}")
    h = hashlib.sha256(f"RGB {a.shape[1]}x{a.shape[0]}\n".encode())
    h.update(a.data)
    return h.hexdigest()
