"""How a swapped face goes back: the per-face alpha of a crop, in crop space.

The one place the mask contract lives. The CPU paste-back (:mod:`kiosk.inference.paste`) and the
GPU composite (:mod:`kiosk.render.composite`, ``shaders/frame.frag``) both take the ``(S, S)``
uint8 alpha built here and sample it bilinearly with the crop, so they cannot disagree about the
mask. It imports nothing from the config, the renderer or the booth; :class:`MaskOptions` is built
from the ``mask:`` config section by :meth:`MaskOptions.of`.

With ``u, v`` the crop-space coordinates of a pixel centre (pixel ``x`` has ``u = x + 0.5``) in a
crop of side ``S``, ``kps`` the five keypoints mapped into the crop, and ``clamp01`` = clamp to
[0, 1]::

    box   = clamp01((min(u - S*left, v - S*top, S*(1-right) - u, S*(1-bottom) - v)) / (S*feather))
    face  = clamp01(-sd_face(u, v) / (S*feather))            shape: face only, else 1
    mouth = clamp01(1 - sd_mouth(u, v) / (MOUTH_FEATHER * nose_mouth))    mouth > 0 only
    alpha = box * face * (1 - mouth_amount * mouth) * occlusion(u, v)

``sd_*`` is the (first-order) signed distance to an ellipse in pixels, negative inside:

- face ellipse: axes along the eyes–mouth direction; it reaches ``FOREHEAD`` eyes–mouth
  distances above the eye midpoint and ``CHIN`` below the mouth midpoint, and is ``CHEEK`` eye
  distances wide on each side of the face's centre line;
- mouth ellipse: half width ``MOUTH_HALF_WIDTH`` mouth widths (corner to corner); centred
  ``MOUTH_DROP``, half height ``MOUTH_HALF_HEIGHT`` and feathered *outwards* by ``MOUTH_FEATHER``
  nose–mouth distances (nose tip to the corners' line), so the visitor's whole mouth (lips,
  teeth) is inside the fully kept part and the ramp ends below the nose.

``feather = 0`` gives hard edges. The outermost ring of crop pixels is always 0, so neither path
ever shows the crop's border. ``occlusion`` is an optional crop-space multiplier
``(S, S) float32`` in [0, 1] from a face parser (1: paste the swap, 0: keep the visitor's pixels,
e.g. a hand over the face); see :class:`OcclusionParser`.

The defaults (``shape="box"``, padding 0.02 on every side, feather 0.10, no mouth) are the
kiosk's original feathered square, bit for bit. That mask depends only on ``S``, so it is built
once per size and shared (:meth:`MaskBuilder.alpha` returns the cached, read-only array); the other
shapes cost one fused pass over the 128 px crop per face (a fraction of a millisecond, see README).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.jit import kernel
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5
from kiosk.util.options import copy_fields

MaskShape = Literal["box", "face"]

#: The original feathered square: 2 % of the crop fully transparent at each edge, then 10 % ramp.
MASK_MARGIN_FRAC = 0.02
MASK_FEATHER_FRAC = 0.10

#: Face ellipse: forehead extent above the eyes and chin extent below the mouth, in eyes–mouth
#: distances; half width in eye distances.
FOREHEAD = 1.05
CHIN = 0.80
CHEEK = 1.05
#: Mouth ellipse: half width in mouth widths (corner to corner); centre drop below the corners'
#: midpoint, half height and (outward) feather in nose–mouth distances (nose tip to the corners'
#: line), so the kept region covers both lips and stops short of the nose.
MOUTH_HALF_WIDTH = 0.62
MOUTH_DROP = 0.10
MOUTH_HALF_HEIGHT = 0.62
MOUTH_FEATHER = 0.22


@dataclass(frozen=True)
class MaskOptions:
    """How a crop is blended back (``mask:`` in the config). ``padding``: top, right, bottom, left
    insets of the box from the crop edge, fractions of the crop side; ``feather``: the ramp from 0
    to 1, fraction of the crop side; ``mouth``: 0..1, how much of the visitor's own mouth stays;
    ``occlusion``: ask the face parser for a per-face occlusion mask."""

    shape: MaskShape = "box"
    padding: tuple[float, float, float, float] = (MASK_MARGIN_FRAC,) * 4
    feather: float = MASK_FEATHER_FRAC
    mouth: float = 0.0
    occlusion: bool = False

    @classmethod
    def of(cls, section: Any) -> MaskOptions:
        """From the ``mask:`` config section (same field names)."""
        return copy_fields(cls, section)

    def __post_init__(self) -> None:
        if self.shape not in ("box", "face"):
            raise ValueError(f"mask shape must be box or face, got {self.shape!r}")
        if len(self.padding) != 4 or any(not 0.0 <= p < 0.5 for p in self.padding):
            raise ValueError(f"mask padding must be four fractions in [0, 0.5), got {self.padding}")
        if not 0.0 <= self.feather <= 0.5:
            raise ValueError(f"mask feather must be in [0, 0.5], got {self.feather}")
        if not 0.0 <= self.mouth <= 1.0:
            raise ValueError(f"mask mouth must be in [0, 1], got {self.mouth}")

    @property
    def per_face(self) -> bool:
        """True when the alpha depends on the face (keypoints), not only on the crop size."""
        return self.shape != "box" or self.mouth > 0.0


class OcclusionParser(Protocol):
    """What the pipeline asks for an occlusion mask (``kiosk.inference.parser.FaceParser``)."""

    def face_mask(self, frame_bgr: FrameBGR, face: Face, size_px: int) -> NDArray[np.float32]:
        """``(size_px, size_px)`` float32 in [0, 1], aligned like the swapper's crop of that size
        (1: paste the swap, 0: keep the visitor's pixels)."""
        ...


def crop_keypoints(kps: Landmarks5, affine: Affine2x3) -> NDArray[np.float32]:
    """The five frame keypoints mapped into crop space by the frame→crop ``affine``."""
    k = np.asarray(kps, np.float64).reshape(5, 2)
    a = np.asarray(affine, np.float64)
    return (k @ a[:, :2].T + a[:, 2]).astype(np.float32)


def ellipse_params(kps_crop: NDArray[np.float32]) -> NDArray[np.float64]:
    """Face and mouth ellipses from crop-space keypoints: (2, 6) rows of
    (centre x, centre y, axis-1 x, axis-1 y, half length 1, half length 2); axis 2 is axis 1 turned
    by +90°. Axis 1 runs across the face (from the left eye/mouth corner to the right one)."""
    k = np.asarray(kps_crop, np.float64)
    eyes = (k[0] + k[1]) / 2.0
    mouth = (k[3] + k[4]) / 2.0
    down = mouth - eyes
    d = max(float(np.hypot(*down)), 1e-3)
    down /= d
    across = np.array([-down[1], down[0]])  # +90° from "down" in image coordinates (y down): right
    if float(np.dot(across, k[1] - k[0])) < 0:
        across = -across
    eye_dist = max(float(np.hypot(*(k[1] - k[0]))), 1e-3)
    top, bottom = -FOREHEAD * d, d + CHIN * d  # along "down", from the eye midpoint
    centre = eyes + down * (top + bottom) / 2.0
    # keep the centre line of the face: shift across to the midpoint of eyes and mouth
    mid_line = (eyes + mouth) / 2.0
    centre = centre + across * float(np.dot(mid_line - centre, across))
    face = [centre[0], centre[1], across[0], across[1], CHEEK * eye_dist, (bottom - top) / 2.0]
    mw = max(float(np.hypot(*(k[4] - k[3]))), 1e-3)
    nm = nose_mouth_px(k)
    mc = mouth + down * MOUTH_DROP * nm
    mouth_row = [mc[0], mc[1], across[0], across[1], MOUTH_HALF_WIDTH * mw, MOUTH_HALF_HEIGHT * nm]
    return np.array([face, mouth_row], np.float64)


def nose_mouth_px(kps_crop: NDArray[np.floating]) -> float:
    """Distance from the nose tip to the line through the mouth corners (pixels, at least 1)."""
    k = np.asarray(kps_crop, np.float64)
    line = k[4] - k[3]
    n = float(np.hypot(*line))
    if n < 1e-6:
        return max(float(np.hypot(*(k[2] - k[3]))), 1.0)
    return max(abs(float(line[0] * (k[2, 1] - k[3, 1]) - line[1] * (k[2, 0] - k[3, 0]))) / n, 1.0)


@kernel(nogil=True, fastmath=False, inline="always")
def _ellipse_sd(
    u: float, v: float, cx: float, cy: float, ax: float, ay: float, a: float, b: float
) -> float:  # pragma: no cover - compiled
    """First-order signed distance (pixels, negative inside) from (u, v) to an ellipse."""
    dx, dy = u - cx, v - cy
    x = dx * ax + dy * ay  # along axis 1
    y = -dx * ay + dy * ax  # along axis 2 (axis 1 turned +90°)
    xa, yb = x / a, y / b
    k = math.sqrt(xa * xa + yb * yb)
    xa, yb = xa / a, yb / b
    g = math.sqrt(xa * xa + yb * yb)
    if g < 1e-9:
        return -min(a, b)
    return (k - 1.0) * k / g


@kernel(nogil=True, fastmath=False)
def _build_alpha(
    out: NDArray[np.uint8],
    box: NDArray[np.float64],
    ell: NDArray[np.float64],
    use_face: bool,
    mouth_amount: float,
    occlusion: NDArray[np.float32],
    use_occlusion: bool,
) -> None:  # pragma: no cover - compiled
    s = out.shape[0]
    x0, y0, x1, y1, inv_feather = box[0], box[1], box[2], box[3], box[4]
    face_feather = box[5]
    mouth_feather = box[6]
    mouth_reach = max(ell[1, 4], ell[1, 5]) + mouth_feather + 1.0  # beyond it the mouth term is 0
    for y in range(s):
        v = y + 0.5
        for x in range(s):
            if x == 0 or y == 0 or x == s - 1 or y == s - 1:
                out[y, x] = 0
                continue
            u = x + 0.5
            edge = min(min(u - x0, v - y0), min(x1 - u, y1 - v))
            if inv_feather > 0:
                a = edge * inv_feather
                a = 0.0 if a < 0.0 else (1.0 if a > 1.0 else a)
            else:
                a = 1.0 if edge > 0 else 0.0
            if a > 0.0 and use_face:
                sd = _ellipse_sd(u, v, ell[0, 0], ell[0, 1], ell[0, 2], ell[0, 3], ell[0, 4], ell[0, 5])
                if face_feather > 0:
                    f = -sd / face_feather
                    f = 0.0 if f < 0.0 else (1.0 if f > 1.0 else f)
                else:
                    f = 1.0 if sd < 0 else 0.0
                a *= f
            if (
                a > 0.0
                and mouth_amount > 0.0
                and abs(u - ell[1, 0]) < mouth_reach
                and abs(v - ell[1, 1]) < mouth_reach
            ):
                sd = _ellipse_sd(u, v, ell[1, 0], ell[1, 1], ell[1, 2], ell[1, 3], ell[1, 4], ell[1, 5])
                m = 1.0 - sd / mouth_feather
                m = 0.0 if m < 0.0 else (1.0 if m > 1.0 else m)
                a *= 1.0 - mouth_amount * m
            if a > 0.0 and use_occlusion:
                o = occlusion[y, x]
                o = 0.0 if o < 0.0 else (1.0 if o > 1.0 else o)
                a *= o
            out[y, x] = np.uint8(np.rint(a * 255.0))


def box_params(size_px: int, options: MaskOptions, nose_mouth: float = 1.0) -> NDArray[np.float64]:
    """The box (x0, y0, x1, y1 in crop pixels, 1 / feather px), face feather px, mouth feather px."""
    top, right, bottom, left = options.padding
    s = float(size_px)
    feather_px = options.feather * s
    return np.array(
        [
            left * s,
            top * s,
            s * (1.0 - right),
            s * (1.0 - bottom),
            1.0 / feather_px if feather_px > 0 else 0.0,
            feather_px,
            max(MOUTH_FEATHER * nose_mouth, 1e-3),
        ],
        np.float64,
    )


_NO_OCCLUSION = np.ones((1, 1), np.float32)


def build_alpha(
    size_px: int,
    options: MaskOptions,
    kps_crop: NDArray[np.float32] | None = None,
    occlusion: NDArray[np.float32] | None = None,
    out: NDArray[np.uint8] | None = None,
) -> NDArray[np.uint8]:
    """The crop-space alpha ``(size_px, size_px)`` uint8 (255 = the swap, 0 = the visitor) of a
    face whose keypoints in the crop are ``kps_crop`` (needed for ``shape="face"`` and the mouth),
    times ``occlusion`` when given. Written into ``out`` when given."""
    if out is None:
        out = np.empty((size_px, size_px), np.uint8)
    if out.shape != (size_px, size_px) or out.dtype != np.uint8:
        raise ValueError(f"alpha buffer must be ({size_px}, {size_px}) uint8, got {out.shape} {out.dtype}")
    if options.per_face and kps_crop is None:
        raise ValueError("a face-shaped or mouth mask needs the keypoints in crop space")
    if kps_crop is not None:
        ell = ellipse_params(kps_crop)
        nose_mouth = nose_mouth_px(kps_crop)
    else:
        ell = np.zeros((2, 6), np.float64)
        nose_mouth = 1.0
    occ = _NO_OCCLUSION
    if occlusion is not None:
        occ = np.asarray(occlusion, np.float32)
        if occ.shape != (size_px, size_px):
            raise ValueError(f"occlusion mask must be ({size_px}, {size_px}), got {occ.shape}")
    _build_alpha(
        out,
        box_params(size_px, options, nose_mouth),
        ell,
        options.shape == "face",
        float(options.mouth),
        occ,
        occlusion is not None,
    )
    return out


class MaskBuilder:
    """Builds each face's alpha; caches the face-independent one per crop size (read-only)."""

    def __init__(self, options: MaskOptions | None = None) -> None:
        self.options = options or MaskOptions()
        self._static: dict[int, NDArray[np.uint8]] = {}

    def static_alpha(self, size_px: int) -> NDArray[np.uint8]:
        """The alpha without face-dependent parts (box only), cached per size, read-only."""
        a = self._static.get(size_px)
        if a is None:
            opts = MaskOptions(padding=self.options.padding, feather=self.options.feather)
            a = build_alpha(size_px, opts)
            a.flags.writeable = False
            self._static[size_px] = a
        return a

    def needs_buffer(self, occlusion: bool) -> bool:
        """Whether :meth:`alpha` writes a per-face buffer (else it returns the shared static one)."""
        return self.options.per_face or occlusion

    def alpha(
        self,
        size_px: int,
        kps_crop: NDArray[np.float32] | None,
        occlusion: NDArray[np.float32] | None = None,
        out: NDArray[np.uint8] | None = None,
    ) -> NDArray[np.uint8]:
        """This face's alpha: the cached static one when nothing depends on the face, else
        written into ``out`` (a new array when ``out`` is None)."""
        if not self.needs_buffer(occlusion is not None):
            return self.static_alpha(size_px)
        return build_alpha(size_px, self.options, kps_crop, occlusion, out)


def warm_up() -> None:
    """Compile (or load from the cache) the alpha kernel."""
    kps = np.array([[5, 6], [10, 6], [8, 8], [6, 11], [10, 11]], np.float32)
    build_alpha(16, MaskOptions(shape="face", mouth=1.0), kps, np.ones((16, 16), np.float32))
