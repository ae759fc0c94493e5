"""The classic swap v2's warp: the source face moved onto the visitor's mesh, triangle by triangle.

:class:`MeshWarp` takes the source crop with its mesh (468 points in that crop) and the visitor's
mesh in the visitor's aligned crop, and in one pass:

1. :func:`_mesh_maps` (numba) rasterises the visitor's 852 triangles once at the crop's
   resolution: for each pixel centre inside a triangle, its barycentric coordinates give the same
   point of the source's triangle, written into a ``cv2.remap`` map (a piecewise-affine warp; where
   triangles fold over each other on a turned head the nearer one wins, by the mesh's depth);
2. one ``cv2.remap`` of the source crop through that map;
3. the pixels no triangle covers (outside the face, the eye openings, the inside of the mouth)
   are the visitor's own aligned crop, so the crop itself never holds the photo's background;
4. the face's alpha (:attr:`MeshWarp.alpha`): the mesh's outline (the face oval) filled, eroded
   and feathered by :data:`OUTER_FEATHER` of the crop side, times one minus the eye openings and
   the inside of the lips, feathered by :data:`HOLE_FEATHER`. So the visitor's eyes (they blink,
   they look where the visitor looks) and the visitor's teeth and tongue show, and the seam is a
   soft ramp inside the face's outline. The pipeline multiplies it into the configured mask, so
   ``mask.shape: box`` pastes the face, not a square.

About 0.3 ms a 128 px crop on one core (``benchmarks/classic_cost.py``); the mesh model is the rest.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import estimate_similarity
from kiosk.inference.face_mesh import FACE_OVAL, LEFT_EYE, LIPS_INNER, RIGHT_EYE, triangles
from kiosk.inference.jit import kernel
from kiosk.inference.mesh_expression import EYE_PART, LEFT_EYE_RING, MOUTH_HOLE_FIT, RIGHT_EYE_RING
from kiosk.types import FrameBGR

__all__ = ["HOLE_FEATHER", "OUTER_FEATHER", "MeshWarp"]

#: The outline's inward erosion and feather, as fractions of the crop side.
OUTER_ERODE = 0.03
OUTER_FEATHER = 0.04
#: With the photo's shape as the target: the outline grown outward by this fraction of the crop
#: side (``benchmarks/classic_identity.py``: eroded by 0.03, the recognizer found the visitor closer
#: on 2 of 12 faces; exactly the outline: 12 of 12, smallest margin 0.02; grown by 0.03: 12 of 12,
#: margin 0.16, mean to the source 0.50; by 0.06: 0.17, 0.50).
OUTER_GROW = 0.03
#: The eye openings' and the mouth's feather (fraction of the crop side).
HOLE_FEATHER = 0.012


#: Per hole of the mesh: the points the visitor's part is fitted on, and the part's rim: this share
#: of the way from the hole's own loop to a ring of points around it.
_HOLES = (
    (MOUTH_HOLE_FIT, LIPS_INNER, LIPS_INNER, 0.0),
    (RIGHT_EYE + RIGHT_EYE_RING, RIGHT_EYE, RIGHT_EYE_RING, EYE_PART),
    (LEFT_EYE + LEFT_EYE_RING, LEFT_EYE, LEFT_EYE_RING, EYE_PART),
)


@kernel(nogil=True, fastmath=False)
def _mesh_maps(
    dst: NDArray[np.float32],
    dst_z: NDArray[np.float32],
    src: NDArray[np.float32],
    tris: NDArray[np.int32],
    map_x: NDArray[np.float32],
    map_y: NDArray[np.float32],
    cover: NDArray[np.uint8],
    zbuf: NDArray[np.float32],
) -> None:  # pragma: no cover - compiled
    h, w = map_x.shape[0], map_x.shape[1]
    for y in range(h):
        for x in range(w):
            map_x[y, x] = -1.0
            map_y[y, x] = -1.0
            cover[y, x] = 0
            zbuf[y, x] = np.inf
    eps = -1e-4
    for t in range(tris.shape[0]):
        i0, i1, i2 = tris[t, 0], tris[t, 1], tris[t, 2]
        x0, y0 = dst[i0, 0], dst[i0, 1]
        x1, y1 = dst[i1, 0], dst[i1, 1]
        x2, y2 = dst[i2, 0], dst[i2, 1]
        det = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
        if abs(det) < 1e-6:
            continue
        inv = 1.0 / det
        bx0 = max(int(math.floor(min(x0, x1, x2) - 0.5)), 0)
        by0 = max(int(math.floor(min(y0, y1, y2) - 0.5)), 0)
        bx1 = min(int(math.ceil(max(x0, x1, x2) - 0.5)), w - 1)
        by1 = min(int(math.ceil(max(y0, y1, y2) - 0.5)), h - 1)
        z0, z1, z2 = dst_z[i0], dst_z[i1], dst_z[i2]
        sx0, sy0 = src[i0, 0], src[i0, 1]
        sx1, sy1 = src[i1, 0], src[i1, 1]
        sx2, sy2 = src[i2, 0], src[i2, 1]
        for py in range(by0, by1 + 1):
            v = py + 0.5 - y0
            for px in range(bx0, bx1 + 1):
                u = px + 0.5 - x0
                l1 = (u * (y2 - y0) - (x2 - x0) * v) * inv
                l2 = ((x1 - x0) * v - u * (y1 - y0)) * inv
                l0 = 1.0 - l1 - l2
                if l0 < eps or l1 < eps or l2 < eps:
                    continue
                z = l0 * z0 + l1 * z1 + l2 * z2
                if z >= zbuf[py, px]:
                    continue
                zbuf[py, px] = z
                map_x[py, px] = l0 * sx0 + l1 * sx1 + l2 * sx2 - 0.5
                map_y[py, px] = l0 * sy0 + l1 * sy1 + l2 * sy2 - 0.5
                cover[py, px] = 255


def _odd(n: float) -> int:
    k = max(int(round(n)), 1)
    return k if k % 2 else k + 1


class MeshWarp:
    """Reused maps and masks per crop size; one instance per swapper (not thread-safe)."""

    def __init__(self) -> None:
        self._tris = np.ascontiguousarray(triangles(), np.int32)
        self._bufs: dict[int, tuple[NDArray[np.float32], ...]] = {}
        self._masks: dict[int, tuple[NDArray[np.uint8], ...]] = {}
        self._images: dict[int, FrameBGR] = {}
        #: The last warp's visitor parts, not yet pasted: (y0, y1, x0, x1, patch, alpha) each.
        self.parts: list[tuple[int, int, int, int, FrameBGR, NDArray[np.float32]]] = []
        #: The last warp's alpha (uint8, crop-sized), valid until the next :meth:`warp` of that size.
        self.alpha: NDArray[np.uint8] = np.zeros((1, 1), np.uint8)

    def _buffers(self, size: int) -> tuple[NDArray[np.float32], ...]:
        bufs = self._bufs.get(size)
        if bufs is None:
            bufs = self._bufs[size] = tuple(np.zeros((size, size), np.float32) for _ in range(3))
            self._masks[size] = tuple(np.zeros((size, size), np.uint8) for _ in range(5))
        return bufs

    def warp(
        self,
        src_bgr: FrameBGR,
        src_xy: NDArray[np.float32],
        visitor_bgr: FrameBGR,
        dst_xy: NDArray[np.float32],
        dst_z: NDArray[np.float32],
        out_bgr: FrameBGR,
        visitor_xy: NDArray[np.float32] | None = None,
    ) -> FrameBGR:
        """``src_bgr`` (its mesh ``src_xy`` in its pixels) warped onto the target mesh ``dst_xy`` /
        ``dst_z`` (pixels of ``visitor_bgr``, the aligned crop), into ``out_bgr`` (the visitor's
        size); the face's alpha in :attr:`alpha`.

        Without ``visitor_xy`` the target is the visitor's own mesh: the pixels no triangle covers
        are the visitor's crop, and the alpha has holes where the visitor's eyes and mouth show.

        With ``visitor_xy`` (the visitor's own mesh in that crop; the target is
        :func:`~kiosk.inference.mesh_expression.expression_target`'s): ``out_bgr`` already holds
        the source crop moved by the faces' similarity, which the triangles' warp continues (it
        is the same map wherever the expression moved nothing) and which stays where no triangle
        is; the visitor's eyes and the inside of its mouth are moved onto the target's holes (one
        similarity per hole, fitted on its rim) and blended in, so the alpha has no holes."""
        size = int(visitor_bgr.shape[0])
        map_x, map_y, zbuf = self._buffers(size)
        cover, outline, holes, alpha, uncovered = self._masks[size]
        dst = np.ascontiguousarray(dst_xy, np.float32)
        _mesh_maps(dst, np.ascontiguousarray(dst_z, np.float32), np.ascontiguousarray(src_xy, np.float32),
                   self._tris, map_x, map_y, cover, zbuf)  # fmt: skip
        self.parts = []
        if visitor_xy is None:
            cv2.remap(src_bgr, map_x, map_y, cv2.INTER_LINEAR, dst=out_bgr, borderMode=cv2.BORDER_REPLICATE)
            cv2.bitwise_not(cover, dst=uncovered)  # no per-call allocation: the visitor where no triangle is
            cv2.copyTo(visitor_bgr, uncovered, dst=out_bgr)
            self._alpha(dst, size, outline, holes, alpha, with_holes=True)
        else:
            warped = self._warped(size)
            cv2.remap(src_bgr, map_x, map_y, cv2.INTER_LINEAR, dst=warped, borderMode=cv2.BORDER_REPLICATE)
            cv2.copyTo(warped, cover, dst=out_bgr)
            self._paste_holes(visitor_bgr, np.asarray(visitor_xy, np.float32), dst, out_bgr, holes)
            self._alpha(dst, size, outline, holes, alpha, with_holes=False)
        self.alpha = alpha
        return out_bgr

    def _warped(self, size: int) -> FrameBGR:
        buf = self._images.get(size)
        if buf is None:
            buf = self._images[size] = np.zeros((size, size, 3), np.uint8)
        return buf

    def _paste_holes(
        self,
        visitor_bgr: FrameBGR,
        visitor_xy: NDArray[np.float32],
        dst: NDArray[np.float32],
        out_bgr: FrameBGR,
        mask: NDArray[np.uint8],
    ) -> None:
        """The visitor's mouth and eyes moved onto the target's holes (into :attr:`parts`, blended
        into ``out_bgr`` by :meth:`paste_parts`) through each hole's outline, grown by a pixel and
        feathered by :data:`HOLE_FEATHER`."""
        size = int(out_bgr.shape[0])
        hs = max(HOLE_FEATHER * size / 2, 0.5)
        pad = int(math.ceil(hs * 3)) + 2
        grow = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        self.parts = []
        for fit_idx, loop, ring, share in _HOLES:
            rim = dst[list(loop)] * (1.0 - share) + dst[list(ring)] * share
            lo = np.floor(rim.min(0)).astype(int) - pad
            hi = np.ceil(rim.max(0)).astype(int) + pad
            x0, y0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
            x1, y1 = min(int(hi[0]), size), min(int(hi[1]), size)
            if x1 - x0 < 2 or y1 - y0 < 2:
                continue
            m = estimate_similarity(visitor_xy[list(fit_idx)], dst[list(fit_idx)])
            m[:, 2] -= (x0, y0)  # into the hole's box
            patch = cv2.warpAffine(
                visitor_bgr, m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
            )
            h = mask[y0:y1, x0:x1]
            h.fill(0)
            pts = np.rint((rim - (x0, y0) - 0.5) * 16).astype(np.int32).reshape(-1, 1, 2)
            cv2.fillPoly(h, [pts], 255, cv2.LINE_AA, 4)
            cv2.dilate(h, grow, dst=h)
            cv2.GaussianBlur(h, (_odd(hs * 6), _odd(hs * 6)), hs, dst=h)
            a = h.astype(np.float32)[:, :, None] * np.float32(1 / 255)
            self.parts.append((y0, y1, x0, x1, np.asarray(patch, np.uint8), a))

    def paste_parts(self, out_bgr: FrameBGR) -> None:
        """Blend the last :meth:`warp`'s visitor parts (its eyes, the inside of its mouth) into
        ``out_bgr`` (that warp's crop, e.g. after the colour correction, which is the photo's
        and must not change the visitor's own pixels); then forgets them."""
        for y0, y1, x0, x1, patch, a in self.parts:
            roi = out_bgr[y0:y1, x0:x1]
            blend = roi + (patch.astype(np.float32) - roi) * a
            np.copyto(roi, np.clip(blend + 0.5, 0, 255).astype(np.uint8))
        self.parts = []

    @staticmethod
    def _alpha(
        dst: NDArray[np.float32],
        size: int,
        outline: NDArray[np.uint8],
        holes: NDArray[np.uint8],
        alpha: NDArray[np.uint8],
        *,
        with_holes: bool,
    ) -> None:
        shift = 4  # fillPoly's sub-pixel bits: pixel centres at +0.5
        scale = float(1 << shift)

        def poly(idx: tuple[int, ...]) -> NDArray[np.int32]:
            return np.rint((dst[list(idx)] - 0.5) * scale).astype(np.int32).reshape(-1, 1, 2)

        outline.fill(0)
        cv2.fillPoly(outline, [poly(FACE_OVAL)], 255, cv2.LINE_AA, shift)
        if with_holes:  # on the visitor's own outline: inside it, so no edge of the photo shows
            erode = _odd(OUTER_ERODE * size * 2)
            cv2.erode(outline, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (erode, erode)), dst=outline)
        else:  # the photo's own outline: a little past it, the recognizer's forehead and cheeks
            grow = _odd(OUTER_GROW * size * 2)
            cv2.dilate(outline, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow)), dst=outline)
        sigma = OUTER_FEATHER * size / 2
        cv2.GaussianBlur(outline, (_odd(sigma * 6), _odd(sigma * 6)), sigma, dst=outline)
        if not with_holes:
            np.copyto(alpha, outline)
            return
        holes.fill(0)
        cv2.fillPoly(holes, [poly(LIPS_INNER), poly(LEFT_EYE), poly(RIGHT_EYE)], 255, cv2.LINE_AA, shift)
        hs = max(HOLE_FEATHER * size / 2, 0.5)
        cv2.GaussianBlur(holes, (_odd(hs * 6), _odd(hs * 6)), hs, dst=holes)
        # alpha = outline * (1 - holes), in 0..255, rounded
        cv2.multiply(outline, cv2.bitwise_not(holes), dst=alpha, scale=1.0 / 255.0)
