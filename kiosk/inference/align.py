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
    """2x3 similarity matrix M (float64) minimising ||M·src − dst||² (Umeyama, with scale)."""
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    n = src.shape[0]
    src_mean = src.mean(axis=0)
    dst_mean = dst.mean(axis=0)
    src_c = src - src_mean
    dst_c = dst - dst_mean
    cov = dst_c.T @ src_c / n
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[1] = -1.0
    u, s, vt = np.linalg.svd(cov)
    rank = np.linalg.matrix_rank(cov)
    if rank == 0:
        raise ValueError("degenerate landmarks: all points coincide")
    if rank == 1:
        flip = np.linalg.det(u) * np.linalg.det(vt) <= 0
        r = u @ np.diag([1.0, -1.0]) @ vt if flip else u @ vt
    else:
        r = u @ np.diag(d) @ vt
    var_src = src_c.var(axis=0).sum()
    scale = (s @ d) / var_src
    m = np.empty((2, 3), dtype=np.float64)
    m[:, :2] = scale * r
    m[:, 2] = dst_mean - scale * (r @ src_mean)
    return m


def align_matrix(kps: NDArray[np.floating], template: str, size_px: int) -> Affine2x3:
    """Frame→crop matrix that puts the five keypoints ``kps`` on ``template`` in a ``size_px`` crop."""
    return estimate_similarity(kps, template_for(template, size_px))


def warp_crop(frame_bgr: FrameBGR, matrix: Affine2x3, size_px: int, out: FrameBGR | None = None) -> FrameBGR:
    """Warp ``frame_bgr`` into a ``size_px`` square crop with ``matrix`` (bilinear, black border)."""
    warped: FrameBGR = cv2.warpAffine(frame_bgr, matrix, (size_px, size_px), dst=out, borderValue=0.0)  # type: ignore[call-overload,assignment]
    return warped
