"""The synthetic camera of ``kiosk bench`` and the tests: a still or swaying frame of real faces
(insightface's ``t1.jpg``, or white squares for the stand-in detector) delivered at the camera rate,
the real files in ``../shared``, and a swapper made slow on purpose (``--swap-ms``)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from kiosk.processing.models import read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.types import FrameBGR

REPO = Path(__file__).resolve().parents[2]  # the checkout (kiosk/tools/bench_frames.py)


def _insightface_image(name: str) -> Path | None:
    try:
        import insightface
    except ImportError:
        return None
    p = Path(insightface.__file__).parent / "data" / "images" / name
    return p if p.is_file() else None


def shared_file(*parts: str) -> Path | None:
    """A file under ``../shared`` beside the checkout (or the working directory), if present."""
    for root in (REPO.parent / "shared", Path.cwd().parent / "shared", Path.cwd() / "shared"):
        p = root.joinpath(*parts)
        if p.is_file():
            return p
    return None


def faces_frame(width: int, height: int, white_squares: bool = False, photo: Path | None = None) -> FrameBGR:
    """The bench frame: ``photo`` (default insightface's t1.jpg, six faces) scaled to ``height``
    and centred; or, for the stand-in detector (or without insightface), grey texture with six
    white squares."""
    photo_path = None if white_squares else (photo or _insightface_image("t1.jpg"))
    if photo_path is None:
        from kiosk.tools.standins import white_square_frame

        side = max(height // 6, 48)
        xs = np.linspace(0.1 * width, 0.9 * width - side, 3).astype(int)
        ys = (int(0.2 * height), int(0.6 * height))
        squares = tuple((int(x), y, side) for y in ys for x in xs)
        return white_square_frame(height, width, squares)
    image = read_image(photo_path)
    scale = height / image.shape[0]
    new_w = min(width, int(round(image.shape[1] * scale)))
    big = cv2.resize(image, (new_w, height), interpolation=cv2.INTER_AREA)
    frame = np.zeros((height, width, 3), np.uint8)
    x0 = (width - new_w) // 2
    frame[:, x0 : x0 + new_w] = big
    return frame


class StillSource:
    """A :class:`~kiosk.capture.sources.Source` delivering one frame at a camera's rate."""

    def __init__(self, frame: FrameBGR, fps: float) -> None:
        self._frame = frame
        self._period = 1.0 / fps if fps > 0 else 0.0
        self._next = 0.0
        h, w = frame.shape[:2]
        self.description = f"bench {w}x{h}@{fps:g}"

    def open(self) -> None:
        self._next = 0.0

    def _pace(self) -> None:
        now = time.perf_counter()
        if self._next == 0.0 or now - self._next > 0.25:
            self._next = now
        if self._next > now:
            time.sleep(self._next - now)
        self._next += self._period

    def read(self, out: FrameBGR | None) -> FrameBGR:
        self._pace()
        if out is None or out.shape != self._frame.shape:
            return self._frame.copy()
        np.copyto(out, self._frame)
        return out

    def close(self) -> None:
        pass


class MovingSource(StillSource):
    """The bench frame moved at walking speed: x = A sin(2πt / 3 s), y = A/6 sin(2πt / 2 s) with
    A = 60 px per 640 px of width (peak speed about 125 px/s at 640 px, 0.2 frame widths a second)."""

    def __init__(self, frame: FrameBGR, fps: float) -> None:
        super().__init__(frame, fps)
        self._fps = fps
        self._n = 0
        self._amp = 60.0 * frame.shape[1] / 640.0
        self.description = self.description.replace("bench", "bench (sway)")

    def read(self, out: FrameBGR | None) -> FrameBGR:
        self._pace()
        t = self._n / self._fps
        self._n += 1
        dx = self._amp * math.sin(2 * math.pi * t / 3.0)
        dy = self._amp / 6.0 * math.sin(2 * math.pi * t / 2.0)
        m = np.array([[1.0, 0.0, dx], [0.0, 1.0, dy]])
        h, w = self._frame.shape[:2]
        if out is None or out.shape != self._frame.shape:
            out = np.empty_like(self._frame)
        cv2.warpAffine(self._frame, m, (w, h), dst=out, borderMode=cv2.BORDER_REFLECT_101)
        return out


def _swap_call(pipe: SwapPipeline) -> str:
    """The swapper method the pipeline calls once per face (the classic swap warps in infer_tiles)."""
    return "infer_tiles" if pipe.classic else "infer"


def slow_swapper(pipe: SwapPipeline, swap_ms: float) -> Any:
    """Make each swapper call take at least ``swap_ms`` (model, then sleep); returns the original."""
    swapper = pipe.swapper
    original = getattr(swapper, _swap_call(pipe))

    def call(*args: Any) -> Any:
        t0 = time.perf_counter()
        out = original(*args)
        rest = swap_ms / 1e3 - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)
        return out

    setattr(swapper, _swap_call(pipe), call)
    return original


# -- processing stage -------------------------------------------------------------------------------
