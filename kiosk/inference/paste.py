"""Paste-back: blend a face crop into the frame, in place, touching only the face's own region.

The mask is the crop-space alpha of :mod:`kiosk.inference.mask` (uint8, the crop's size), the
same array the GL composite shader samples. Without one, the default feathered square is used::

    edge_dist = min(u, v, size - u, size - v)          # u, v: crop pixel centres (x + 0.5, y + 0.5)
    alpha     = clamp((edge_dist - margin) * inv_feather, 0, 1)
    margin    = MASK_MARGIN_FRAC * size,  inv_feather = 1 / (MASK_FEATHER_FRAC * size)

computed once per crop size and cached. For each face we warp the crop and its mask (one
4-channel ``cv2.warpAffine``) into a buffer the size of the face's bounding box in the frame (the
box of the part of the crop where the mask can be non-zero: its all-zero outer rings are left
out), then blend that box of the frame in place (one fused numba pass, no float temporaries). Inside the
fully opaque part the result equals the warped crop exactly (as insightface's
``INSwapper.get(paste_back=True)``); outside the box the frame is not touched. insightface
instead warps three full-frame images and erodes/blurs at full frame.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.kernels import blend_rgba, paste_geometry, set_rgb, zero_rings
from kiosk.inference.mask import MASK_FEATHER_FRAC, MASK_MARGIN_FRAC, MaskBuilder
from kiosk.types import Affine2x3, FrameBGR

__all__ = ["MASK_FEATHER_FRAC", "MASK_MARGIN_FRAC", "PasteBack", "face_region", "feather_mask"]


def feather_mask(
    size_px: int, margin_frac: float = MASK_MARGIN_FRAC, feather_frac: float = MASK_FEATHER_FRAC
) -> NDArray[np.float32]:
    """The crop-space alpha mask (size_px, size_px) float32 in [0, 1]."""
    c = np.arange(size_px, dtype=np.float32) + 0.5
    d1 = np.minimum(c, size_px - c)
    edge = np.minimum(d1[:, None], d1[None, :])
    alpha = (edge - margin_frac * size_px) * (1.0 / (feather_frac * size_px))
    return np.clip(alpha, 0.0, 1.0).astype(np.float32)


def face_region(
    affine: Affine2x3, size_px: int, frame_hw: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """Frame box (x0, y0, x1, y1), clipped, covered by a ``size_px`` crop under frame→crop ``affine``."""
    inv = cv2.invertAffineTransform(affine)
    corners = np.array([[0, 0, 1], [size_px, 0, 1], [0, size_px, 1], [size_px, size_px, 1]], np.float64)
    pts = corners @ inv.T
    h, w = frame_hw
    x0 = max(int(math.floor(pts[:, 0].min())) - 1, 0)
    y0 = max(int(math.floor(pts[:, 1].min())) - 1, 0)
    x1 = min(int(math.ceil(pts[:, 0].max())) + 2, w)
    y1 = min(int(math.ceil(pts[:, 1].max())) + 2, h)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


class PasteBack:
    """Reusable paste-back with cached masks and scratch buffers (one instance per thread)."""

    def __init__(self) -> None:
        self._rgba: dict[int, NDArray[np.uint8]] = {}
        self._alpha_of: dict[int, NDArray[np.uint8] | None] = {}
        self._default = MaskBuilder()
        self._warp = np.zeros((1, 1, 4), np.uint8)
        self._box = np.zeros(4, np.int64)
        self._rings: dict[int, int] = {}  # zero rings of each cached (read-only) static alpha
        self._inv = np.zeros((2, 3), np.float64)

    def _crop_rgba(self, size_px: int, alpha: NDArray[np.uint8] | None) -> NDArray[np.uint8]:
        buf = self._rgba.get(size_px)
        if buf is None:
            buf = np.zeros((size_px, size_px, 4), np.uint8)
            self._rgba[size_px] = buf
            self._alpha_of[size_px] = None
        if alpha is None:
            alpha = self._default.static_alpha(size_px)
        # The cached (read-only) static alpha is copied in once; a per-face alpha every time.
        if alpha is not self._alpha_of[size_px] or alpha.flags.writeable:
            if alpha.shape != (size_px, size_px):
                raise ValueError(f"alpha {alpha.shape} does not match the {size_px} px crop")
            buf[:, :, 3] = alpha
            self._alpha_of[size_px] = alpha
            self._rings.pop(size_px, None)
        return buf

    def _inset(self, size_px: int, alpha: NDArray[np.uint8] | None) -> int:
        """The zero rings of this face's alpha: cached for the shared read-only static alpha,
        counted (a few microseconds) for a per-face one."""
        if alpha is not None and alpha.flags.writeable:
            return zero_rings(alpha)
        rings = self._rings.get(size_px)
        if rings is None:
            rings = zero_rings(self._rgba[size_px][:, :, 3])
            self._rings[size_px] = rings
        return rings

    def _scratch(self, h: int, w: int) -> NDArray[np.uint8]:
        if self._warp.shape[0] < h or self._warp.shape[1] < w:
            hh, ww = max(h, self._warp.shape[0]), max(w, self._warp.shape[1])
            self._warp = np.zeros((hh, ww, 4), np.uint8)
        # A contiguous (h, w, 4) view of the buffer, so cv2 writes into it instead of reallocating.
        return self._warp.reshape(-1)[: h * w * 4].reshape(h, w, 4)

    def paste(
        self,
        frame_bgr: FrameBGR,
        crop_bgr: FrameBGR,
        affine: Affine2x3,
        alpha: NDArray[np.uint8] | None = None,
    ) -> tuple[int, int, int, int] | None:
        """Blend ``crop_bgr`` (square) into ``frame_bgr`` in place; ``affine`` maps frame→crop,
        ``alpha`` (crop-sized uint8, :mod:`kiosk.inference.mask`) is the mask, default the feathered
        square. Returns the frame box that was touched, or None if the face lies outside the frame."""
        size_px = crop_bgr.shape[0]
        rgba = self._crop_rgba(size_px, alpha)
        # Only the box where the mask can be non-zero (its all-zero outer rings left out: the
        # default mask's 2 % margin), and the crop→box matrix, in one compiled call.
        inv = self._inv
        box = paste_geometry(
            affine, size_px, frame_bgr.shape[:2], self._box, inv, self._inset(size_px, alpha)
        )
        if box is None:
            return None
        x0, y0, x1, y1 = box
        w, h = x1 - x0, y1 - y0
        set_rgb(rgba, crop_bgr)
        warped = self._scratch(h, w)
        cv2.warpAffine(
            rgba,
            inv,
            (w, h),
            dst=warped,
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )
        # roi += (warped_rgb - roi) * alpha, rounded, in one fused pass (float32 as numpy would).
        blend_rgba(frame_bgr[y0:y1, x0:x1], warped)
        return box
