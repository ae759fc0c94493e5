"""Face alignment: five-point templates and the similarity transform that maps a face onto them.

Pure numpy + one cv2.warpAffine. The estimate is Umeyama's least-squares similarity (rotation,
uniform scale, translation), the same as scikit-image's ``SimilarityTransform.estimate`` used by
insightface, without the scikit-image dependency.
"""

from __future__ import annotations

import cv2
import numpy as np
from numpy.typing import NDArray

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
    src = np.asarray(src, dtype=np.float64).reshape(-1, 2)
    dst = np.asarray(dst, dtype=np.float64).reshape(-1, 2)
    src_mean = src.mean(axis=0)
    dst_mean = dst.mean(axis=0)
    p = src - src_mean
    q = dst - dst_mean
    norm = float(np.einsum("ij,ij->", p, p))
    if norm <= 1e-12 * max(1.0, float(np.abs(src).max(initial=0.0)) ** 2):
        raise ValueError("degenerate landmarks: all points coincide")
    a = float(np.einsum("ij,ij->", p, q)) / norm
    b = float(p[:, 0] @ q[:, 1] - p[:, 1] @ q[:, 0]) / norm
    m = np.empty((2, 3), dtype=np.float64)
    m[0, 0], m[0, 1], m[1, 0], m[1, 1] = a, -b, b, a
    m[0, 2] = dst_mean[0] - (a * src_mean[0] - b * src_mean[1])
    m[1, 2] = dst_mean[1] - (b * src_mean[0] + a * src_mean[1])
    return m


def align_matrix(kps: NDArray[np.floating], template: str, size_px: int) -> Affine2x3:
    """Frame→crop matrix that puts the five keypoints ``kps`` on ``template`` in a ``size_px`` crop."""
    return estimate_similarity(kps, template_for(template, size_px))


def warp_crop(frame_bgr: FrameBGR, matrix: Affine2x3, size_px: int, out: FrameBGR | None = None) -> FrameBGR:
    """Warp ``frame_bgr`` into a ``size_px`` square crop with ``matrix`` (bilinear, black border)."""
    warped: FrameBGR = cv2.warpAffine(frame_bgr, matrix, (size_px, size_px), dst=out, borderValue=0.0)  # type: ignore[call-overload,assignment]
    return warped
