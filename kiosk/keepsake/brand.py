"""The exhibitor's brand frame on every keepsake (``keepsake.frame``, ``keepsake.frame_text``).

The frame is a PNG with an alpha channel, drawn over the kept photo: where it is opaque the photo
shows the frame's pixels, where it is clear the swapped picture. It may have any size: it is scaled
to *cover* the photo (the smaller scale that fills both sides) and centred, so a frame of the photo's
aspect (1920x1080 for a 16:9 camera) fits exactly and one of another aspect loses equal strips on
two opposite sides. ``keepsake.frame_text`` (the event's name, a date) is one line of white text on
a dark band along the photo's bottom, over the frame.

:func:`load_frame` reads and checks the file once (at start and at a reload); a frame that is
missing, not a PNG, corrupt, without alpha, or huge is one log line and the keepsakes run without it.
:class:`BrandFrame` applies it on the keepsake worker thread, never in the render loop; the scaled
frame is cached per photo size.
"""

from __future__ import annotations

import logging
import struct
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFont

from kiosk.types import FrameBGR

log = logging.getLogger(__name__)

#: A frame file larger than this is refused (a PNG of a 4K frame is a few MB).
MAX_FRAME_BYTES = 32 * 1024 * 1024
#: A frame with more pixels than this is refused (8K x 4K is 33 Mpx), as is a side over MAX_SIDE_PX.
MAX_FRAME_PIXELS = 40_000_000
MAX_SIDE_PX = 8192
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class FrameError(ValueError):
    """Why a frame file cannot be used (one line naming the file and the fix)."""


def _check_header(path: Path, head: bytes) -> tuple[int, int]:
    """(width, height) from the PNG header, before anything is decoded."""
    if len(head) < 24 or head[:8] != _PNG_MAGIC or head[12:16] != b"IHDR":
        raise FrameError(
            f"keepsake.frame {path} is not a PNG file; export the frame as PNG with transparency"
        )
    width, height = struct.unpack(">II", head[16:24])
    if width > MAX_SIDE_PX or height > MAX_SIDE_PX or width * height > MAX_FRAME_PIXELS:
        raise FrameError(
            f"keepsake.frame {path} is {width}x{height} pixels, too large (at most {MAX_SIDE_PX} px a "
            f"side and {MAX_FRAME_PIXELS // 1_000_000} Mpx); scale it to the camera's resolution"
        )
    return width, height


def read_frame(path: Path) -> NDArray[np.uint8]:
    """The frame's BGRA pixels; :class:`FrameError` (one line) when the file cannot be used."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise FrameError(
            f"keepsake.frame {path} cannot be read ({exc.strerror or exc}); fix the path (relative "
            "paths are from the config's folder) or set keepsake.frame: null"
        ) from None
    if size > MAX_FRAME_BYTES:
        raise FrameError(
            f"keepsake.frame {path} is {size / 2**20:.0f} MB, too large (at most "
            f"{MAX_FRAME_BYTES // 2**20} MB); save it smaller"
        )
    data = path.read_bytes()
    _check_header(path, data[:24])
    bgra = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    if bgra is None or bgra.ndim != 3 or bgra.shape[2] not in (3, 4):
        raise FrameError(f"keepsake.frame {path} is damaged (cannot be decoded); export the PNG again")
    if bgra.shape[2] == 3:
        raise FrameError(
            f"keepsake.frame {path} has no alpha channel, so it would hide the whole photo; export it "
            "with transparency where the photo shows"
        )
    if bgra.dtype != np.uint8:  # a 16-bit PNG
        bgra = (bgra / 257.0).round().astype(np.uint8)
    return np.ascontiguousarray(bgra)


def cover(bgra: NDArray[np.uint8], width: int, height: int) -> NDArray[np.uint8]:
    """``bgra`` scaled to cover ``width`` x ``height`` and centred (cropped on two sides if its
    aspect differs)."""
    fh, fw = bgra.shape[:2]
    scale = max(width / fw, height / fh)
    sw, sh = max(width, round(fw * scale)), max(height, round(fh * scale))
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    scaled = cv2.resize(bgra, (sw, sh), interpolation=interp) if (sw, sh) != (fw, fh) else bgra
    x0, y0 = (sw - width) // 2, (sh - height) // 2
    return np.asarray(scaled[y0 : y0 + height, x0 : x0 + width], np.uint8)


def _text_band(text: str, width: int, height: int) -> NDArray[np.uint8]:
    """A BGRA overlay of ``width`` x ``height``: ``text`` in white on a dark band at the bottom."""
    px = max(12, round(height * 0.045))
    font = ImageFont.load_default(size=px)
    img = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    pad = px // 2
    band_top = height - (bottom - top) - 2 * pad
    draw.rectangle((0, band_top, width, height), fill=(0, 0, 0, 150))
    draw.text(
        ((width - (right - left)) / 2 - left, band_top + pad - top),
        text,
        font=font,
        fill=(255, 255, 255, 255),
    )
    rgba = np.asarray(img)
    return np.ascontiguousarray(rgba[:, :, [2, 1, 0, 3]])


def _over(bgr: FrameBGR, premult: NDArray[np.uint8], inverse: NDArray[np.uint8]) -> None:
    """Alpha-composite over ``bgr`` in place: ``bgr * inverse / 255 + premult`` (the overlay's colour
    already multiplied by its alpha, and 255 - alpha), within one level."""
    cv2.add(cv2.multiply(bgr, inverse, scale=1.0 / 255.0), premult, dst=bgr)


def _ascii(text: str) -> str:
    """``text`` in the bundled font's letters: accents dropped, dashes as "-", others as "?"."""
    text = text.replace("\u2014", "-").replace("\u2013", "-")
    base = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return "".join(c if c.isascii() or c in "\u00b7\u00b0" else "?" for c in base)


@dataclass
class BrandFrame:
    """A loaded frame (None: text only) and the text line; :meth:`apply` draws them on a photo."""

    bgra: NDArray[np.uint8] | None = None
    text: str = ""
    source: str = ""  # the file, for the log
    _cache: dict[tuple[int, int], tuple[NDArray[np.uint8], NDArray[np.uint8]]] = field(
        default_factory=dict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def empty(self) -> bool:
        return self.bgra is None and not self.text

    def overlay(self, width: int, height: int) -> tuple[NDArray[np.uint8], NDArray[np.uint8]] | None:
        """The frame (and text) over a photo of this size as (colour x alpha, 255 - alpha), both
        BGR, made once per size."""
        if self.empty:
            return None
        with self._lock:
            cached = self._cache.get((width, height))
            if cached is not None:
                return cached
            if self.bgra is not None:
                over = np.array(cover(self.bgra, width, height), np.uint8)
            else:
                over = np.zeros((height, width, 4), np.uint8)
            if self.text:
                band = _text_band(_ascii(self.text), width, height)
                merged = over[:, :, :3].copy()
                a = over[:, :, 3:4].astype(np.float32) / 255.0
                b = band[:, :, 3:4].astype(np.float32) / 255.0
                out_a = b + a * (1 - b)
                rgb = band[:, :, :3] * b + merged * a * (1 - b)
                safe = np.where(out_a > 0, out_a, 1.0)
                over = np.dstack([(rgb / safe + 0.5).astype(np.uint8), (out_a * 255 + 0.5).astype(np.uint8)])
            alpha = over[:, :, 3:4].astype(np.uint16)
            premult = ((over[:, :, :3] * alpha + 127) // 255).astype(np.uint8)
            inverse = np.ascontiguousarray(np.repeat(255 - alpha, 3, axis=2).astype(np.uint8))
            self._cache = {(width, height): (premult, inverse)}  # one camera size at a time
            return premult, inverse

    def apply(self, bgr: FrameBGR) -> FrameBGR:
        """Draw the frame and text over ``bgr`` (in place) and return it."""
        over = self.overlay(int(bgr.shape[1]), int(bgr.shape[0]))
        if over is not None:
            _over(bgr, *over)
        return bgr


NO_FRAME = BrandFrame()


def load_frame(frame: str | None, text: str = "", resolve: Callable[[str], Path] = Path) -> BrandFrame:
    """The brand frame of ``keepsake.frame`` / ``frame_text``; a file that cannot be used is one
    error line (naming it and the fix) and the keepsakes run without it (the text line still shows)."""
    bgra = None
    path: Path | None = None
    if frame:
        path = Path(resolve(frame))
        try:
            bgra = read_frame(path)
        except FrameError as exc:
            log.error("%s; the keepsakes are made without a frame", exc)
        except OSError as exc:
            log.error(
                "keepsake.frame %s cannot be read (%s); the keepsakes are made without a frame", path, exc
            )
        else:
            log.info("keepsake: brand frame %s (%dx%d)", path, bgra.shape[1], bgra.shape[0])
    if bgra is None and not text:
        return NO_FRAME
    return BrandFrame(bgra, text, str(path or ""))
