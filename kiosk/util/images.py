"""Decoding images within a memory budget: the size comes from the header, before any pixel.

A photo's bytes say little about what decoding them costs: a 544-byte progressive JPEG whose
header claims 30000x30000 pixels made OpenCV's decoder allocate 2.7 GB and spend 9 s, even at
1/8 scale, because a progressive (multi-scan) JPEG keeps every DCT coefficient of the full-size
picture until its last scan (libjpeg's coefficient buffer: 2 bytes × 64 coefficients per 8x8
block of every component). :func:`probe_image` reads the header only (Pillow's lazy
``Image.open``: format, size, mode, components and their sampling, progressive or not);
:func:`decode_cost` turns it into the bytes the decode needs, and :func:`decode_image` refuses
what needs more than the budget, whatever the format, with one line that says why and what to do.

Large JPEGs are decoded reduced by the JPEG decoder itself (DCT scaling to 1/2, 1/4 or 1/8: the
full-size picture never exists in memory), down to at most :data:`JPEG_TARGET_PIXELS`, which also
bounds the time of one decode; other formats are decoded at their size or not at all.
"""

from __future__ import annotations

import io
import math
import threading
import warnings
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

#: What one decode may need, all buffers together.
DECODE_BUDGET_BYTES = 256 << 20
#: A JPEG larger than this is decoded reduced (1/2, 1/4, 1/8) to at most this many pixels.
JPEG_TARGET_PIXELS = 16_000_000
#: Pillow's names of what OpenCV decodes as a JPEG (a phone's MPO is a JPEG with more pictures after it).
JPEG_FORMATS = frozenset({"JPEG", "MPO"})
#: Beyond this a header is nonsense, whatever the format.
MAX_SIDE_PX = 100_000
_REDUCED = {
    1: cv2.IMREAD_COLOR,
    2: cv2.IMREAD_REDUCED_COLOR_2,
    4: cv2.IMREAD_REDUCED_COLOR_4,
    8: cv2.IMREAD_REDUCED_COLOR_8,
}
_PIL_LOCK = threading.Lock()  # Image.MAX_IMAGE_PIXELS is process-wide: lifted under this lock only


class ImageDecodeError(ValueError):
    """An image that is not decoded; the message is one line: why, and what to do."""


@dataclass(frozen=True)
class ImageInfo:
    """What an image's header says."""

    format: str  # Pillow's name: JPEG, PNG, WEBP, BMP, TIFF, ...
    width: int
    height: int
    mode: str  # Pillow's mode: RGB, L, RGBA, I;16, CMYK, ...
    bands: int
    #: JPEG only: progressive or otherwise multi-scan, so the decoder keeps the full coefficient buffer.
    progressive: bool = False
    #: JPEG only: (horizontal, vertical) sampling factor of each component.
    sampling: tuple[tuple[int, int], ...] = ()

    @property
    def pixels(self) -> int:
        return self.width * self.height

    def describe(self) -> str:
        return f"{self.width}x{self.height} {'progressive ' if self.progressive else ''}{self.format}"


def probe_image(data: bytes) -> ImageInfo:
    """The header of an image file's bytes; no pixel is decoded. :class:`ImageDecodeError` if
    Pillow does not recognise it."""
    from PIL import Image

    if not data:
        raise ImageDecodeError("empty file (0 bytes); copy the photo again")
    try:
        with _PIL_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # the size is checked by us
            try:
                with Image.open(io.BytesIO(data)) as im:  # header only: no pixels are decoded
                    width, height = im.size
                    fmt = im.format or "?"
                    mode = im.mode
                    bands = len(im.getbands())
                    progressive = bool(im.info.get("progressive") or im.info.get("progression"))
                    layer = getattr(im, "layer", None) if fmt in JPEG_FORMATS else None
            finally:
                Image.MAX_IMAGE_PIXELS = limit
    except Exception:  # UnidentifiedImageError, truncated headers, ...
        raise ImageDecodeError("not a readable image; use a JPEG or PNG") from None
    sampling: tuple[tuple[int, int], ...] = ()
    if fmt in JPEG_FORMATS and not progressive:
        progressive = jpeg_first_scan_partial(data)
    if layer:
        sampling = tuple((max(1, int(c[1])), max(1, int(c[2]))) for c in layer)
    return ImageInfo(fmt, int(width), int(height), mode, bands, progressive, sampling)


def jpeg_first_scan_partial(data: bytes) -> bool:
    """True when a sequential JPEG's first scan does not hold every component (separate scans per
    component): libjpeg then buffers every coefficient of the picture, as for a progressive one."""
    i, components = 2, 0
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and i + 10 <= len(data):
            components = data[i + 9]
        elif marker == 0xDA:
            return i + 4 < len(data) and components > 1 and data[i + 4] < components
        i += 2 + length
    return False


def _bytes_per_sample(mode: str) -> int:
    if mode in ("I", "F") or mode.startswith("I;32"):
        return 4
    if mode.startswith("I;16") or mode.endswith(";16"):
        return 2
    return 1


def jpeg_coefficient_bytes(info: ImageInfo) -> int:
    """The coefficient buffer of a progressive JPEG: every 8x8 block of every component at full
    size, 64 coefficients of 2 bytes each (libjpeg's ``JCOEF``), whatever the output scale."""
    sampling = info.sampling or ((1, 1),) * max(1, info.bands)
    hmax = max(h for h, _ in sampling)
    vmax = max(v for _, v in sampling)
    total = 0
    for h, v in sampling:
        blocks_w = math.ceil(math.ceil(info.width * h / hmax) / 8)
        blocks_h = math.ceil(math.ceil(info.height * v / vmax) / 8)
        total += blocks_w * blocks_h * 64 * 2
    return total


def jpeg_scale(info: ImageInfo, target_pixels: int = JPEG_TARGET_PIXELS) -> int:
    """The JPEG decoder's reduction (1, 2, 4 or 8) that brings the picture to at most
    ``target_pixels`` (8 when none does)."""
    return next((f for f in (1, 2, 4, 8) if info.pixels / (f * f) <= target_pixels), 8)


def decode_cost(info: ImageInfo, target_pixels: int = JPEG_TARGET_PIXELS) -> tuple[int, int]:
    """(bytes the decode needs, JPEG reduction factor; 1 for other formats).

    The BGR result (twice: OpenCV may rotate a copy by the EXIF orientation), plus for a JPEG the
    full-size coefficient buffer when progressive, plus for the other formats the decoder's own
    full-size picture in its native layout (bands × bytes per sample)."""
    if info.format in JPEG_FORMATS:
        scale = jpeg_scale(info, target_pixels)
        w, h = -(-info.width // scale), -(-info.height // scale)
        need = 2 * w * h * 3
        if info.progressive:
            need += jpeg_coefficient_bytes(info)
        return need, scale
    return info.pixels * (3 + max(1, info.bands) * _bytes_per_sample(info.mode)), 1


def check_decodable(info: ImageInfo, budget_bytes: int = DECODE_BUDGET_BYTES) -> int:
    """The JPEG reduction to decode ``info`` with, or :class:`ImageDecodeError` naming the size, the
    memory it would need and the fix when that is over ``budget_bytes`` (or the header is absurd)."""
    if info.width <= 0 or info.height <= 0 or max(info.width, info.height) > MAX_SIDE_PX:
        raise ImageDecodeError(
            f"claims {info.width}x{info.height} pixels, which is absurd; export the photo again"
        )
    need, scale = decode_cost(info)
    if need > budget_bytes:
        raise ImageDecodeError(
            f"{info.describe()} is too large to decode safely (needs about {need >> 20} MB, "
            f"over the {budget_bytes >> 20} MB budget); scale it down, e.g. to 2000 px wide"
            + (", saved as baseline (not progressive) JPEG" if info.progressive else "")
        )
    return scale


def decode_image(data: bytes, budget_bytes: int = DECODE_BUDGET_BYTES) -> NDArray[np.uint8]:
    """Decode an image file's bytes to BGR uint8 (H, W, 3) within ``budget_bytes``, or raise
    :class:`ImageDecodeError` (one line: why and what to do). A large JPEG comes back reduced
    (see :func:`jpeg_scale`)."""
    info = probe_image(data)
    scale = check_decodable(info, budget_bytes)
    flag = _REDUCED[scale] if info.format in JPEG_FORMATS else cv2.IMREAD_COLOR
    image = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
    if image is None or image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise ImageDecodeError("not a readable image (damaged or truncated?); use a JPEG or PNG")
    return np.ascontiguousarray(image, dtype=np.uint8)
