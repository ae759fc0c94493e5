"""Face alignment: five-point templates and the similarity transform that maps a face onto them.

numpy, a small compiled kernel and one cv2.warpAffine. The estimate is Umeyama's least-squares
similarity (rotation, uniform scale, translation), the same as scikit-image's ``SimilarityTransform.estimate`` used by
insightface, without the scikit-image dependency.
"""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.kernels import similarity
from kiosk.types import Affine2x3, FrameBGR

#: ArcFace 112x112 five-point template (eyes, nose tip, mouth corners), insightface's ``arcface_dst``.
ARCFACE_112 = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]],
    dtype=np.float32,
)

#: FFHQ 512x512 five-point template used by GFPGAN (facexlib's ``face_template`` for 512 crops).
FFHQ_512 = np.array(
    [
        [192.98138, 239.94708],
        [318.90277, 240.19366],
        [256.63416, 314.01935],
        [201.26117, 371.41043],
        [313.08905, 371.15118],
    ],
    dtype=np.float32,
)


def arcface_template(size_px: int) -> NDArray[np.float32]:
    """The ArcFace template for a square crop of ``size_px``, as insightface's ``estimate_norm``:
    sizes that are multiples of 112 scale the template; multiples of 128 scale it by size/128 and
    shift it right by 8*size/128 px (so 128 → the 112 template shifted +8 px in x)."""
    if size_px % 112 == 0:
        ratio, dx = size_px / 112.0, 0.0
    elif size_px % 128 == 0:
        ratio, dx = size_px / 128.0, 8.0 * size_px / 128.0
    else:
        raise ValueError(f"ArcFace crops must be a multiple of 112 or 128 px, got {size_px}")
    dst = ARCFACE_112 * np.float32(ratio)
    dst[:, 0] += np.float32(dx)
    return dst


def template_for(name: str, size_px: int) -> NDArray[np.float32]:
    """Template points for a spec's ``template`` name and crop size."""
    if name in ("arcface_112", "arcface_128"):
        return arcface_template(size_px)
    if name == "ffhq_512":
        return FFHQ_512 * np.float32(size_px / 512.0)
    raise ValueError(f"unknown alignment template {name!r}")


def estimate_similarity(src: NDArray[np.floating], dst: NDArray[np.floating]) -> Affine2x3:
    """2x3 similarity matrix M (float64) minimising ||M·src − dst||² (Umeyama, with scale).

    In two dimensions Umeyama's rotation + uniform scale has a closed form: with centred points
    ``p = (x, y)`` and ``q = (u, v)``, ``M = [[a, −b], [b, a]]`` where ``a = Σ(xu + yv) / Σ|p|²`` and
    ``b = Σ(xv − yu) / Σ|p|²``: the same optimum as the SVD route (a proper rotation, reflections
    excluded), without an SVD per face per frame.
    """
    src = np.asarray(src).reshape(-1, 2)
    if src.dtype not in (np.float32, np.float64):
        src = src.astype(np.float64)
    dst = np.asarray(dst, dtype=np.float64).reshape(-1, 2)
    if src.shape[0] == 0 or dst.shape != src.shape:
        raise ValueError(f"expected two (N, 2) point sets, got {src.shape} and {dst.shape}")
    m = similarity(src, dst)  # one compiled pass over the points (sums in float64)
    if m is None:
        raise ValueError("degenerate landmarks: all points coincide")
    return m


@lru_cache(maxsize=32)
def _template64(name: str, size_px: int) -> NDArray[np.float64]:
    """:func:`template_for` as float64, computed once per template and crop size (read-only)."""
    dst = template_for(name, size_px).astype(np.float64)
    dst.setflags(write=False)
    return dst


def align_matrix(kps: NDArray[np.floating], template: str, size_px: int) -> Affine2x3:
    """Frame→crop matrix that puts the five keypoints ``kps`` on ``template`` in a ``size_px`` crop."""
    return estimate_similarity(kps, _template64(template, size_px))


def warp_crop(frame_bgr: FrameBGR, matrix: Affine2x3, size_px: int, out: FrameBGR | None = None) -> FrameBGR:
    """Warp ``frame_bgr`` into a ``size_px`` square crop with ``matrix`` (bilinear, black border)."""
    warped: FrameBGR = cv2.warpAffine(frame_bgr, matrix, (size_px, size_px), dst=out, borderValue=0.0)  # type: ignore[call-overload,assignment]
    return warped
