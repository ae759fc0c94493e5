"""Where the classic swap v2 puts the source face: its own shape, in the visitor's pose, with the
visitor's mouth and eyes (:func:`expression_target`).

Warping the photo onto the visitor's mesh point for point moves the mouth and the eyes, but it
also gives the photo's face the visitor's jaw, nose and proportions: measured by the independent
recognizer (``benchmarks/classic_identity.py``), that result was closer to the visitor than to
the photo on 4 of 12 faces. So the target mesh keeps the photo's shape and takes only the
visitor's expression, on the two meshes alone (no model runs here):

1. **Pose** (the caller, :class:`~kiosk.inference.classic.ClassicSwapper`): the photo's mesh is
   moved onto the visitor's face by the same 5-point similarity as the 5-point swap, so where the
   expression moves nothing, v2 is exactly the 5-point swap. (A 3-D similarity of the meshes over
   the points an expression leaves alone turned the head with the visitor but kept less of the
   photo: mean similarity to the source 0.47 vs 0.54 with a 2-D fit of the same points, 0.67 for
   the 5-point similarity, on the identity benchmark's 12 faces.)
2. **Mouth**: the gap between the inner lips (points 13 → 14, pixels of the crop) is set to the
   visitor's by moving the lower lip (:data:`LOWER_LIP`, an ellipse's profile between the mouth
   corners) and the chin and jaw below it (a cosine profile across the face, fading in below the
   corners) along the face's downward axis: the jaw drops with the visitor's. Then the photo's
   mouth corners move to where the visitor's are from its mouth's middle (scaled by the eyes'
   outer corners), the lips by their place between the corners and the skin about each corner by a
   Gaussian falloff: a smile widens and lifts the photo's mouth. (Measured: identity smallest
   margin 0.086 -> 0.116 of 12 faces, carphone eye r 0.70 -> 0.73, mouth r 0.97 either way; on
   the held-out Pexels clip the frames closer to the source 54 -> 66 %, mouth r 0.72 -> 0.73.)
3. **Eyes**: each upper lid margin is moved towards or away from the lower one so that the
   photo's lid gap over eye width is the visitor's, each eye on its own; the ring around the eye
   stays the photo's (the visitor's eye, pasted out to it, brings its own lids and creases).

The eye openings and the inside of the mouth are holes of the mesh: :class:`~kiosk.inference.
mesh_warp.MeshWarp` fills them with the visitor's own eyes (out to :data:`RIGHT_EYE_RING` /
:data:`LEFT_EYE_RING`, lids and lashes included) and the inside of its mouth, moved onto the
target's holes, so the visitor's gaze, blinks, teeth and tongue show in the photo's face.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.face_mesh import LEFT_EYE, LIPS_INNER, MESH_POINTS, RIGHT_EYE

__all__ = [
    "LEFT_EYE_RING",
    "LOWER_LIP",
    "MOUTH_HOLE_FIT",
    "EYE_PART",
    "RIGHT_EYE_RING",
    "eye_openness",
    "expression_target",
    "mouth_gap",
]

#: The lower lip, outer edge to inner edge (four rings of nine points each).
LOWER_LIP = (
    146, 91, 181, 84, 17, 314, 405, 321, 375,
    77, 90, 180, 85, 16, 315, 404, 320, 307,
    96, 89, 179, 86, 15, 316, 403, 319, 325,
    95, 88, 178, 87, 14, 317, 402, 318, 324,
)  # fmt: skip
#: Both lips (outer and inner edges): the visitor's mouth is moved onto the target's by a
#: similarity fitted on these.
MOUTH_HOLE_FIT = (
    61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 185, 40, 39, 37, 0, 267, 269, 270, 409,
) + LIPS_INNER  # fmt: skip
#: The ring of mesh points around each eye opening, point for point in the order of the eye's loop
#: (``RIGHT_EYE`` / ``LEFT_EYE``): the visitor's eye is pasted out to :data:`EYE_PART` of the way
#: from the lid margins to this ring, so its lids and lashes come with it.
RIGHT_EYE_RING = (130, 247, 30, 29, 27, 28, 56, 190, 243, 112, 26, 22, 23, 24, 110, 25)
LEFT_EYE_RING = (359, 467, 260, 259, 257, 258, 286, 414, 463, 341, 256, 252, 253, 254, 339, 255)
#: Measured (``benchmarks/classic_expression.py`` on carphone, eye r; ``classic_identity.py``,
#: smallest margin of 12 faces): 0.0 (the lid margins) 0.44; 0.5: 0.51; 0.8: 0.58 / 0.085 (with
#: the skin above the lids moved half as much as the lids); 1.0 with the ring kept: 0.70 / 0.086;
#: 1.3: 0.73 / 0.065.
EYE_PART = 1.0
#: Mouth corners, the inner lips' middle points (upper, lower) and the chin.
_CORNERS = (61, 291)
_INNER_UP, _INNER_LO = 13, 14
_CHIN = 152
#: The eyes' outer corners (the face's scale for the mouth corners).
_EYE_OUTER = (33, 263)
#: The share of the way the photo's mouth corners move to where the visitor's are.
_CORNER_SHARE = 1.0
#: The most the photo's upper lids are raised: this many times the photo's own lid gap.
_WIDEN_MAX = 2.5

#: Per eye: its corners, the upper lid margin's points and the lower lid point opposite each.
_EYES = (
    (RIGHT_EYE[0], RIGHT_EYE[8], RIGHT_EYE[1:8], tuple(reversed(RIGHT_EYE[9:16]))),
    (LEFT_EYE[0], LEFT_EYE[8], LEFT_EYE[1:8], tuple(reversed(LEFT_EYE[9:16]))),
)
_LOWER_SET = np.zeros(MESH_POINTS, bool)
_LOWER_SET[list(LOWER_LIP)] = True
_LIP_SET = _LOWER_SET.copy()
_LIP_SET[list(MOUTH_HOLE_FIT)] = True
_LIP_SET[[62, 76, 78, 292, 306, 308, 183, 42, 41, 38, 12, 268, 271, 272, 407]] = True
_LIP_SET[[184, 74, 73, 72, 11, 302, 303, 304, 408]] = True


def mouth_gap(xy: NDArray[np.floating]) -> float:
    """The gap between the inner lips' middle points (pixels)."""
    p = np.asarray(xy, np.float64)
    return float(np.hypot(*(p[_INNER_LO, :2] - p[_INNER_UP, :2])))


def _eye_ratio(p: NDArray[np.float64], eye: tuple[tuple[int, ...] | int, ...]) -> float:
    c0, c1, upper, lower = eye[0], eye[1], list(eye[2]), list(eye[3])  # type: ignore[arg-type]
    width = max(float(np.hypot(*(p[c1] - p[c0]))), 1e-6)
    return float(np.mean(np.hypot(*(p[upper] - p[lower]).T)[2:5])) / width


def _eye_span(p: NDArray[np.float64]) -> float:
    return float(np.hypot(*(p[_EYE_OUTER[1]] - p[_EYE_OUTER[0]])))


def eye_openness(xy: NDArray[np.floating]) -> float:
    """Both eyes' mean lid gap over eye width (three lid pairs about the middle of each eye)."""
    p = np.asarray(xy, np.float64)[:, :2]
    return float(np.mean([_eye_ratio(p, eye) for eye in _EYES]))


def expression_target(
    posed_xyz: NDArray[np.floating], visitor_xyz: NDArray[np.floating]
) -> NDArray[np.float32]:
    """The target mesh (468 x (x, y, z), float32, the visitor's crop pixels): the source's mesh
    already moved onto the visitor's face (``posed_xyz``, by the faces' similarity) with the
    visitor's mouth gap and eye openness (steps 2 and 3 above)."""
    vis = np.asarray(visitor_xyz, np.float64).reshape(MESH_POINTS, -1)
    t = np.array(posed_xyz, np.float64).reshape(MESH_POINTS, 3)
    xy = t[:, :2]
    # -- the mouth: the lower lip and the jaw along the face's downward axis --------------------
    c0, c1 = xy[_CORNERS[0]], xy[_CORNERS[1]]
    across = c1 - c0
    half = max(float(np.hypot(*across)) / 2, 1e-6)
    across = across / (2 * half)
    down = np.array([-across[1], across[0]])
    mid = (c0 + c1) / 2
    if float((xy[_CHIN] - mid) @ down) < 0:  # the mesh's winding: make "down" point at the chin
        down = -down
    rel = xy - mid
    u = (rel @ across) / half  # -1 .. 1 between the corners
    d = rel @ down  # below the corners' line, pixels
    chin = max(float(d[_CHIN]), 1e-6)
    now = max(float((xy[_INNER_LO] - xy[_INNER_UP]) @ down), 0.0)
    shift = float(np.clip(mouth_gap(vis) - now, -now, 0.8 * chin))
    if shift:
        lip = np.sqrt(np.clip(1.0 - u**2, 0.0, 1.0))
        jaw = np.cos(np.clip(np.abs(u) / 1.8, 0.0, 1.0) * np.pi / 2) ** 2
        ramp = np.clip(d / (0.35 * chin), 0.0, 1.0)
        ramp = ramp * ramp * (3 - 2 * ramp)
        w = np.where(_LOWER_SET, lip, np.where(_LIP_SET, 0.0, jaw * ramp))
        xy += (shift * w)[:, None] * down
    # -- the mouth corners: where the visitor's are, from its mouth's middle (a smile) ----------
    if _CORNER_SHARE:
        scale = _eye_span(xy) / max(_eye_span(vis[:, :2]), 1e-6)
        v0, v1 = vis[_CORNERS[0], :2], vis[_CORNERS[1], :2]
        vmid = (v0 + v1) / 2
        move0 = (mid + (v0 - vmid) * scale - xy[_CORNERS[0]]) * _CORNER_SHARE
        move1 = (mid + (v1 - vmid) * scale - xy[_CORNERS[1]]) * _CORNER_SHARE
        g0 = np.exp(-0.5 * (np.hypot(*(xy - xy[_CORNERS[0]]).T) / (0.5 * half)) ** 2)
        g1 = np.exp(-0.5 * (np.hypot(*(xy - xy[_CORNERS[1]]).T) / (0.5 * half)) ** 2)
        w0 = np.where(_LIP_SET, np.clip(-u, 0.0, 1.0), g0)
        w1 = np.where(_LIP_SET, np.clip(u, 0.0, 1.0), g1)
        xy += w0[:, None] * move0 + w1[:, None] * move1
    # -- the eyes: each upper lid towards or away from the lower one --------------------------------
    for eye in _EYES:  # each eye on its own: a wink is a wink
        up, lo = list(eye[2]), list(eye[3])
        k = float(np.clip(_eye_ratio(vis[:, :2], eye) / max(_eye_ratio(xy, eye), 1e-3), 0.0, _WIDEN_MAX))
        xy[up] += (xy[up] - xy[lo]) * (k - 1.0)
    return t.astype(np.float32)
