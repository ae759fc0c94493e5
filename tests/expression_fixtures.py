"""Synthetic expressions of a real photo, with known amplitude: the jaw dropped (the mouth opens on a
painted mouth interior: teeth and a dark tongue) and the upper lids pulled down (a blink). Used by the
pixel tests of the classic swap v2 (tests/test_mesh_swap.py) and the expression benchmark
(benchmarks/classic_expression.py). Each takes the photo's own 468-point mesh (to place the mouth and eyes)
and returns a new image; nothing here runs a model."""

from __future__ import annotations

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.face_mesh import LEFT_EYE, RIGHT_EYE

__all__ = ["INTERIOR_BGR", "TEETH_BGR", "blink", "open_mouth"]

#: The painted inside of the mouth (dark red) and the band of upper teeth.
INTERIOR_BGR = (40, 25, 90)
TEETH_BGR = (225, 230, 235)


def _grid(shape: tuple[int, ...]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    h, w = shape[:2]
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return gx, gy


def open_mouth(
    image_bgr: NDArray[np.uint8], xy: NDArray[np.float32], opening_px: float
) -> tuple[NDArray[np.uint8], NDArray[np.bool_]]:
    """``image_bgr`` with the jaw dropped by ``opening_px`` below the line between the inner lips
    (mesh points 13, 14), a smooth bump across the face fading out under the chin; the gap is an
    ellipse between the mouth corners (61, 291) painted as a mouth's inside. Returns the image and
    the painted gap's mask."""
    gx, gy = _grid(image_bgr.shape)
    lip_y = float((xy[13, 1] + xy[14, 1]) / 2)
    xc = float((xy[61, 0] + xy[291, 0]) / 2)
    half_w = float((xy[291, 0] - xy[61, 0]) / 2) * 1.05
    chin_y = float(xy[152, 1])
    d = float(opening_px)
    t = np.clip(np.abs(gx - xc) / (half_w * 1.8), 0, 1)
    jaw = np.cos(t * np.pi / 2) ** 2
    tm = np.clip(np.abs(gx - xc) / half_w, 0, 1)
    mouth = np.sqrt(np.clip(1 - tm**2, 0, 1))
    tail = 0.6 * (chin_y - lip_y)
    fade = np.clip((chin_y + tail - gy) / tail, 0, 1)
    below = gy >= lip_y
    disp = d * np.where(below, np.maximum(mouth, jaw) * np.where(gy > chin_y, fade, 1.0), 0)
    gap = below & (gy < lip_y + d * mouth) & (tm < 1)
    src_y = np.where(gap, lip_y - 1, np.maximum(gy - disp, np.where(below, lip_y, 0)))
    out = cv2.remap(
        image_bgr, gx, src_y.astype(np.float32), cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    out[gap] = INTERIOR_BGR
    out[gap & (gy < lip_y + 0.25 * d * mouth)] = TEETH_BGR
    return out, gap


def blink(image_bgr: NDArray[np.uint8], xy: NDArray[np.float32], amount: float) -> NDArray[np.uint8]:
    """``image_bgr`` with both upper lids pulled down over the eyes: ``amount`` 0 leaves them, 1
    shuts them (the lid skin above each eye stretched over the opening, the opening squeezed out)."""
    gx, gy = _grid(image_bgr.shape)
    src_y = gy.copy()
    a = float(np.clip(amount, 0.0, 1.0))
    for loop in (LEFT_EYE, RIGHT_EYE):
        pts = xy[list(loop)]
        x0, x1 = float(pts[:, 0].min()), float(pts[:, 0].max())
        y0, y1 = float(pts[:, 1].min()), float(pts[:, 1].max())
        xc, half_w = (x0 + x1) / 2, (x1 - x0) / 2 * 1.25
        top = y0 - 1.2 * (y1 - y0)  # the lid above the opening
        bot = y1 + 0.15 * (y1 - y0)
        tx = np.clip(np.abs(gx - xc) / half_w, 0, 1)
        w = np.cos(tx * np.pi / 2) ** 2
        edge = y0 + a * (bot - y0) * w  # where the lid's margin goes
        s0 = y0 + (y1 - y0) * a * w  # the row of the photo that shows just below it
        inside = (gy >= top) & (gy <= bot) & (tx < 1)
        up, lo = inside & (gy <= edge), inside & (gy > edge)
        src_y[up] = (top + (gy - top) * (y0 - top) / np.maximum(edge - top, 1e-3))[up]
        src_y[lo] = (s0 + (gy - edge) * (bot - s0) / np.maximum(bot - edge, 1e-3))[lo]
    return cv2.remap(image_bgr, gx, src_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
