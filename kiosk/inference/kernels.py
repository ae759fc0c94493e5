"""Fused per-pixel conversions of the hot path, compiled with numba (one pass, no temporaries).

numpy would express each of these as three to six passes over the image with a float temporary
the size of the image per pass; here each pixel is read once and written once, into buffers the
caller preallocated. The kernels release the GIL, so the capture and render threads keep running.

- :func:`hwc_to_planar`: BGR uint8 (H, W, 3) → normalised planar float32 (3, H, W), optionally
  swapping R and B: ``(x - mean) * inv_std`` (detector, embedder, swapper, enhancer inputs); the
  mean may be one value or one per channel (RetinaFace subtracts the BGR means 104, 117, 123).
- :func:`planar_to_bgr`: model output planar RGB float32 (3, H, W) → BGR uint8 (H, W, 3) as
  ``clip((x + add) * mul, 0, 255)`` truncated (insightface's swapper) or rounded (GFPGAN).
- :func:`crop_to_tiles` / :func:`tiles_to_bgr`: swap resolution 256/512: a (k·128)² BGR crop →
  its k² sub-pixel shifted 128 samplings as normalised planar RGB tiles, and the swapped tiles
  back into one BGR crop, interleaved (one pass each instead of a planar copy and a transpose).
- :func:`blend_rgba`: the paste-back blend in place, ``roi += (rgb - roi) * a / 255`` rounded half
  to even, with the same float32 arithmetic as the numpy expression it replaces.
- :func:`similarity`: the five-point similarity transform of the alignment, without numpy's
  per-call overhead (25 us a face in numpy).
- :func:`nms_sorted`: the detector's greedy NMS in one compiled loop (numpy: one pass per kept box).
- :func:`set_rgb`: a crop into the colour channels of its cached RGBA paste buffer.
- :func:`scrfd_decode`: SCRFD's candidates above the threshold → boxes and keypoints, one loop.
- :func:`resize_planar`: the detector's letterbox of a frame that is an odd multiple of the
  input (1920x1080 → 640x360 is 3×) in one pass instead of ``cv2.resize`` (INTER_LINEAR) and then
  :func:`hwc_to_planar`, with the same floats: at an odd factor ``k`` OpenCV's bilinear sample
  points fall exactly on source pixels (``src = k·x + (k − 1)/2``), so the kernel reads those
  pixels and writes the normalised planes straight into the detector input.
- :func:`paste_geometry`: the paste-back's face box and crop→box matrix in one compiled call.

Compiled on first use and cached on disk (``cache=True``); :func:`warm_up` compiles them all.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.jit import kernel


@kernel(nogil=True, fastmath=False)
def _hwc_to_planar(
    src: NDArray[np.uint8], dst: NDArray[np.float32], swap_rb: bool, mean: float, inv_std: float
) -> None:  # pragma: no cover - compiled
    h, w = src.shape[0], src.shape[1]
    m = np.float32(mean)
    s = np.float32(inv_std)
    # The 256 possible results of (x - mean) * inv_std, each computed as before: a table look-up
    # per sample instead of two float operations, one plane row at a time.
    lut = np.empty(256, np.float32)
    for i in range(256):
        lut[i] = (np.float32(i) - m) * s
    for y in range(h):
        row = src[y]
        for c in range(3):
            sc = 2 - c if swap_rb else c
            plane = dst[c, y]
            for x in range(w):
                plane[x] = lut[row[x, sc]]


@kernel(nogil=True, fastmath=False)
def _hwc_to_planar3(
    src: NDArray[np.uint8],
    dst: NDArray[np.float32],
    swap_rb: bool,
    m0: float,
    m1: float,
    m2: float,
    inv_std: float,
) -> None:  # pragma: no cover - compiled
    h, w = src.shape[0], src.shape[1]
    a0, a1, a2 = np.float32(m0), np.float32(m1), np.float32(m2)
    s = np.float32(inv_std)
    for y in range(h):
        for x in range(w):
            b = np.float32(src[y, x, 0])
            g = np.float32(src[y, x, 1])
            r = np.float32(src[y, x, 2])
            if swap_rb:
                dst[0, y, x] = (r - a0) * s
                dst[2, y, x] = (b - a2) * s
            else:
                dst[0, y, x] = (b - a0) * s
                dst[2, y, x] = (r - a2) * s
            dst[1, y, x] = (g - a1) * s


@kernel(nogil=True, fastmath=False)
def _planar_to_bgr(
    src: NDArray[np.float32], dst: NDArray[np.uint8], add: float, mul: float, rounding: bool
) -> None:  # pragma: no cover - compiled
    h, w = dst.shape[0], dst.shape[1]
    a = np.float32(add)
    k = np.float32(mul)
    lo = np.float32(0.0)
    hi = np.float32(255.0)
    row = np.empty(w, np.float32)
    for c in range(3):
        for y in range(h):
            plane = src[c, y]
            # Scale and clip a row first (branch-free, so it vectorises), then convert and store.
            for x in range(w):
                row[x] = min(max((plane[x] + a) * k, lo), hi)
            if rounding:
                for x in range(w):
                    dst[y, x, 2 - c] = np.uint8(np.rint(row[x]))
            else:
                for x in range(w):
                    dst[y, x, 2 - c] = np.uint8(row[x])


@kernel(nogil=True, fastmath=False)
def _crop_to_tiles(
    src: NDArray[np.uint8], dst: NDArray[np.float32], k: int, mean: float, inv_std: float
) -> None:  # pragma: no cover - compiled
    n = dst.shape[2]
    m = np.float32(mean)
    s = np.float32(inv_std)
    for i in range(k):
        for j in range(k):
            t = i * k + j
            for y in range(n):
                sy = y * k + i
                for x in range(n):
                    sx = x * k + j
                    dst[t, 0, y, x] = (np.float32(src[sy, sx, 2]) - m) * s
                    dst[t, 1, y, x] = (np.float32(src[sy, sx, 1]) - m) * s
                    dst[t, 2, y, x] = (np.float32(src[sy, sx, 0]) - m) * s


@kernel(nogil=True, fastmath=False)
def _tiles_to_bgr(
    src: NDArray[np.float32], dst: NDArray[np.uint8], k: int, mul: float
) -> None:  # pragma: no cover - compiled
    n = src.shape[2]
    f = np.float32(mul)
    for i in range(k):
        for j in range(k):
            t = i * k + j
            for c in range(3):
                for y in range(n):
                    dy = y * k + i
                    for x in range(n):
                        v = src[t, c, y, x] * f
                        if v < 0:
                            v = np.float32(0.0)
                        elif v > 255:
                            v = np.float32(255.0)
                        dst[dy, x * k + j, 2 - c] = np.uint8(v)


@kernel(nogil=True, fastmath=False)
def _blend_rgba(roi: NDArray[np.uint8], rgba: NDArray[np.uint8]) -> None:  # pragma: no cover - compiled
    h, w = roi.shape[0], roi.shape[1]
    inv = np.float32(1.0 / 255.0)
    for y in range(h):
        # One row view each and unsigned column indices: no stride or wraparound arithmetic per
        # pixel for the (non-contiguous) frame box.
        r = roi[y]
        s = rgba[y]
        for x in range(w):
            u = np.uintp(x)
            a8 = s[u, 3]
            if a8 == 0:
                continue
            if a8 == 255:  # the opaque inside of the face: the formula gives the crop exactly
                r[u, 0] = s[u, 0]
                r[u, 1] = s[u, 1]
                r[u, 2] = s[u, 2]
                continue
            a = np.float32(a8) * inv
            for c in range(3):
                f = np.float32(r[u, c])
                r[u, c] = np.uint8(np.rint(f + (np.float32(s[u, c]) - f) * a))


@kernel(nogil=True)
def _set_rgb(rgba: NDArray[np.uint8], bgr: NDArray[np.uint8]) -> None:  # pragma: no cover - compiled
    for y in range(bgr.shape[0]):
        for x in range(bgr.shape[1]):
            rgba[y, x, 0] = bgr[y, x, 0]
            rgba[y, x, 1] = bgr[y, x, 1]
            rgba[y, x, 2] = bgr[y, x, 2]


@kernel(nogil=True, fastmath=False)
def _similarity(
    src: NDArray[np.floating], dst: NDArray[np.float64], m: NDArray[np.float64]
) -> bool:  # pragma: no cover - compiled
    n = src.shape[0]
    sx = sy = dx = dy = 0.0
    peak = 0.0
    for i in range(n):
        x, y = float(src[i, 0]), float(src[i, 1])
        sx += x
        sy += y
        dx += dst[i, 0]
        dy += dst[i, 1]
        peak = max(peak, abs(x), abs(y))
    sx /= n
    sy /= n
    dx /= n
    dy /= n
    norm = dot = cross = 0.0
    for i in range(n):
        px, py = float(src[i, 0]) - sx, float(src[i, 1]) - sy
        qx, qy = dst[i, 0] - dx, dst[i, 1] - dy
        norm += px * px + py * py
        dot += px * qx + py * qy
        cross += px * qy - py * qx
    if norm <= 1e-12 * max(1.0, peak) ** 2:
        return False
    a = dot / norm
    b = cross / norm
    m[0, 0] = a
    m[0, 1] = -b
    m[1, 0] = b
    m[1, 1] = a
    m[0, 2] = dx - (a * sx - b * sy)
    m[1, 2] = dy - (b * sx + a * sy)
    return True


def similarity(src: NDArray[np.floating], dst: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The closed-form 2-D Umeyama similarity (see :func:`~kiosk.inference.align.estimate_similarity`)
    of the (N, 2) points ``src`` onto ``dst`` (float64) as a new 2x3 float64 matrix; None when the
    points coincide."""
    m = np.empty((2, 3), np.float64)
    return m if _similarity(src, dst, m) else None


@kernel(nogil=True, fastmath=False)
def _nms(
    boxes: NDArray[np.float32], order: NDArray[np.int64], iou: float, keep: NDArray[np.int64]
) -> int:  # pragma: no cover - compiled
    n = order.shape[0]
    one = np.float32(1.0)
    zero = np.float32(0.0)
    thr = np.float32(iou)
    areas = np.empty(boxes.shape[0], np.float32)
    for i in range(boxes.shape[0]):
        areas[i] = (boxes[i, 2] - boxes[i, 0] + one) * (boxes[i, 3] - boxes[i, 1] + one)
    alive = np.ones(n, np.bool_)
    count = 0
    for a in range(n):
        if not alive[a]:
            continue
        i = order[a]
        keep[count] = i
        count += 1
        for b in range(a + 1, n):
            if not alive[b]:
                continue
            j = order[b]
            w = max(zero, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]) + one)
            h = max(zero, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]) + one)
            inter = w * h
            if not (inter / (areas[i] + areas[j] - inter) <= thr):
                alive[b] = False
    return count


def nms_sorted(boxes: NDArray[np.float32], order: NDArray[np.int64], iou: float) -> list[int]:
    """Greedy NMS over ``boxes`` (N, 4) float32 x1, y1, x2, y2 visited in ``order`` (best first):
    the indices kept, in that order. float32 arithmetic as the numpy loop it replaces."""
    boxes = np.ascontiguousarray(boxes, np.float32)
    order = np.ascontiguousarray(order, np.int64)
    keep = np.empty(order.shape[0], np.int64)
    count = _nms(boxes, order, float(iou), keep)
    return [int(k) for k in keep[:count]]


def hwc_to_planar(
    src_bgr: NDArray[np.uint8],
    dst: NDArray[np.float32],
    *,
    rgb: bool,
    mean: float | tuple[float, float, float] = 0.0,
    std: float = 1.0,
) -> None:
    """Write ``(src - mean) / std`` of the (H, W, 3) BGR image into ``dst`` (3, H', W') with
    H' >= H, W' >= W (top-left), as RGB planes when ``rgb``. ``dst`` may be a view. A 3-tuple
    ``mean`` is one value per plane of ``dst`` (in its order: R, G, B when ``rgb``, else B, G, R)."""
    h, w = src_bgr.shape[:2]
    if dst.shape[0] != 3 or dst.shape[1] < h or dst.shape[2] < w:
        raise ValueError(f"planar buffer {dst.shape} too small for image {src_bgr.shape}")
    if isinstance(mean, tuple):
        m0, m1, m2 = (float(v) for v in mean)
        _hwc_to_planar3(src_bgr, dst, bool(rgb), m0, m1, m2, float(1.0 / std))
        return
    _hwc_to_planar(src_bgr, dst, bool(rgb), float(mean), float(1.0 / std))


def planar_to_bgr(
    src_rgb: NDArray[np.float32],
    dst_bgr: NDArray[np.uint8],
    *,
    add: float = 0.0,
    mul: float = 255.0,
    rounding: bool = False,
) -> NDArray[np.uint8]:
    """``dst = clip((src + add) * mul, 0, 255)`` as BGR uint8; truncated, or rounded when ``rounding``."""
    if src_rgb.shape != (3, dst_bgr.shape[0], dst_bgr.shape[1]):
        raise ValueError(f"planar {src_rgb.shape} does not match {dst_bgr.shape}")
    _planar_to_bgr(src_rgb, dst_bgr, float(add), float(mul), bool(rounding))
    return dst_bgr


def crop_to_tiles(
    src_bgr: NDArray[np.uint8], dst: NDArray[np.float32], k: int, *, mean: float = 0.0, std: float = 1.0
) -> None:
    """Tile ``i*k + j`` of ``dst`` (k², 3, n, n) = RGB planes of ``src_bgr[i::k, j::k]`` (k·n, k·n, 3),
    normalised ``(x - mean) / std``."""
    n = dst.shape[2]
    if dst.shape != (k * k, 3, n, n) or src_bgr.shape != (k * n, k * n, 3):
        raise ValueError(f"tiles {dst.shape} do not split a crop {src_bgr.shape} {k}x{k}")
    _crop_to_tiles(src_bgr, dst, int(k), float(mean), float(1.0 / std))


def tiles_to_bgr(
    src: NDArray[np.float32], dst_bgr: NDArray[np.uint8], k: int, *, mul: float = 255.0
) -> NDArray[np.uint8]:
    """``dst_bgr[i::k, j::k]`` = BGR of ``clip(tile(i*k + j) * mul, 0, 255)`` truncated (the
    swapper's conversion, as :func:`planar_to_bgr` with ``add=0``)."""
    n = src.shape[2]
    if src.shape != (k * k, 3, n, n) or dst_bgr.shape != (k * n, k * n, 3):
        raise ValueError(f"tiles {src.shape} do not fill a crop {dst_bgr.shape} {k}x{k}")
    _tiles_to_bgr(src, dst_bgr, int(k), float(mul))
    return dst_bgr


def blend_rgba(roi_bgr: NDArray[np.uint8], rgba: NDArray[np.uint8]) -> None:
    """Blend ``rgba`` (h, w, 4; colour in BGR, alpha 0..255) into the ``roi_bgr`` view in place."""
    if roi_bgr.shape[:2] != rgba.shape[:2]:
        raise ValueError(f"roi {roi_bgr.shape} and rgba {rgba.shape} differ")
    _blend_rgba(roi_bgr, rgba)


def set_rgb(rgba: NDArray[np.uint8], bgr: NDArray[np.uint8]) -> None:
    """``rgba[:, :, :3] = bgr`` (same h, w), leaving the alpha channel as it is; numpy's strided
    copy of a 128 px crop costs eight times as much."""
    if rgba.shape[:2] != bgr.shape[:2] or rgba.shape[2] != 4 or bgr.shape[2] != 3:
        raise ValueError(f"rgba {rgba.shape} and bgr {bgr.shape} differ")
    _set_rgb(rgba, bgr)


@kernel(nogil=True, fastmath=False, inline="always")
def _invert(m: NDArray[np.float64], out: NDArray[np.float64]) -> None:  # pragma: no cover - compiled
    """2x3 affine inverse in float64 with the operations of ``cv2.invertAffineTransform`` (and of
    ``warpAffine``'s own inversion, which is the same formula)."""
    d = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / d if d != 0.0 else 0.0
    a11 = m[1, 1] * d
    a22 = m[0, 0] * d
    a12 = -m[0, 1] * d
    a21 = -m[1, 0] * d
    out[0, 0] = a11
    out[0, 1] = a12
    out[1, 0] = a21
    out[1, 1] = a22
    out[0, 2] = -a11 * m[0, 2] - a12 * m[1, 2]
    out[1, 2] = -a21 * m[0, 2] - a22 * m[1, 2]


@kernel(nogil=True, fastmath=False)
def _resize_planar(
    src: NDArray[np.uint8], dst: NDArray[np.float32], k: int, swap_rb: bool, lut: NDArray[np.float32]
) -> None:  # pragma: no cover - compiled
    nh, nw = src.shape[0] // k, src.shape[1] // k
    o = (k - 1) // 2
    # The planes in the order of the source bytes (B, G, R): where each goes in ``dst``.
    pb, pr = (2, 0) if swap_rb else (0, 2)
    lb, lg, lr = lut[pb], lut[1], lut[pr]
    for y in range(nh):
        db, dg, dr = dst[pb, y], dst[1, y], dst[pr, y]
        row = src[k * y + o]
        for x in range(nw):
            u = np.uintp(k * x + o)
            db[x] = lb[row[u, 0]]
            dg[x] = lg[row[u, 1]]
            dr[x] = lr[row[u, 2]]


def planar_lut(mean: float | tuple[float, float, float], std: float) -> NDArray[np.float32]:
    """(3, 256) float32: ``(i − mean_c) · (1/std)`` per plane, the float32 operations of
    :func:`hwc_to_planar`."""
    means = mean if isinstance(mean, tuple) else (mean,) * 3
    inv = np.float32(float(1.0 / std))
    i = np.arange(256, dtype=np.float32)
    return np.stack([(i - np.float32(float(m))) * inv for m in means]).astype(np.float32)


def resize_factor(h: int, w: int, new_h: int, new_w: int) -> int:
    """The odd integer factor ``k`` (3, 5, ...) when ``cv2.resize`` of (h, w) to (new_h, new_w) is
    what :func:`resize_planar` reproduces exactly, else 0. (An even factor averages pixels; at 2x
    OpenCV's own SIMD average is faster than a scalar kernel, measured, so it keeps that path.)"""
    if new_w <= 0 or new_h <= 0 or w % new_w or h % new_h:
        return 0
    k = w // new_w
    if h // new_h != k or k < 3 or k % 2 == 0:
        return 0
    return k


def resize_planar(
    src_bgr: NDArray[np.uint8], dst: NDArray[np.float32], k: int, *, rgb: bool, lut: NDArray[np.float32]
) -> None:
    """``hwc_to_planar(cv2.resize(src, (W/k, H/k)))`` into the top-left of ``dst`` (3, H', W'), in
    one pass; ``k`` from :func:`resize_factor`, ``lut`` from :func:`planar_lut`."""
    h, w = src_bgr.shape[:2]
    if k < 3 or k % 2 == 0 or h % k or w % k:
        raise ValueError(f"no exact {k}x resize of a {w}x{h} image (k must be odd and divide both)")
    if dst.shape[0] != 3 or dst.shape[1] < h // k or dst.shape[2] < w // k:
        raise ValueError(f"planar buffer {dst.shape} too small for {w // k}x{h // k}")
    _resize_planar(src_bgr, dst, int(k), bool(rgb), lut)


@kernel(nogil=True, fastmath=False)
def _region(
    m: NDArray[np.float64], lo: float, hi: float, fh: int, fw: int, box: NDArray[np.int64]
) -> bool:  # pragma: no cover - compiled
    """The frame box (clipped) covering the crop-space square [lo, hi]² under frame→crop ``m``:
    :func:`kiosk.inference.paste.face_region` for lo = 0, hi = the crop size."""
    inv = np.empty((2, 3), np.float64)
    _invert(m, inv)
    xmin = ymin = np.inf
    xmax = ymax = -np.inf
    for cy in (lo, hi):
        for cx in (lo, hi):
            px = cx * inv[0, 0] + cy * inv[0, 1] + inv[0, 2]
            py = cx * inv[1, 0] + cy * inv[1, 1] + inv[1, 2]
            xmin, xmax = min(xmin, px), max(xmax, px)
            ymin, ymax = min(ymin, py), max(ymax, py)
    box[0] = max(int(math.floor(xmin)) - 1, 0)
    box[1] = max(int(math.floor(ymin)) - 1, 0)
    box[2] = min(int(math.ceil(xmax)) + 2, fw)
    box[3] = min(int(math.ceil(ymax)) + 2, fh)
    return box[2] > box[0] and box[3] > box[1]


@kernel(nogil=True, fastmath=False)
def _support(alpha: NDArray[np.uint8]) -> int:  # pragma: no cover - compiled
    """How many rings of ``alpha`` (square) from the edge are entirely 0."""
    s = alpha.shape[0]
    for k in range(s // 2):
        e = s - 1 - k
        for i in range(k, e + 1):
            if alpha[k, i] or alpha[e, i] or alpha[i, k] or alpha[i, e]:
                return k
    return s // 2


def zero_rings(alpha: NDArray[np.uint8]) -> int:
    """How many rings of crop pixels from the edge of the square ``alpha`` are entirely 0."""
    if alpha.ndim != 2 or alpha.shape[0] != alpha.shape[1]:
        raise ValueError(f"alpha must be square, got {alpha.shape}")
    return int(_support(alpha))


def paste_geometry(
    affine: NDArray[np.float64],
    size_px: int,
    frame_hw: tuple[int, int],
    box_out: NDArray[np.int64],
    inv_out: NDArray[np.float64],
    inset: int = 0,
) -> tuple[int, int, int, int] | None:
    """The frame box a ``size_px`` crop under frame→crop ``affine`` covers (as
    :func:`kiosk.inference.paste.face_region`), and into ``inv_out`` (2x3 float64) the crop→box
    matrix ``warpAffine`` pastes with (``cv2.invertAffineTransform(affine)`` moved to the box
    origin); None when the crop misses the frame. ``box_out``: a reused (4,) int64 buffer. One
    compiled call instead of two inversions and a corner product in numpy.

    ``inset`` > 0: only the part of the crop ``inset - 1`` pixels in from each edge, where an
    alpha with ``inset`` zero rings (:func:`zero_rings`) can be non-zero: a bilinear sample farther
    out reads only zero-alpha pixels."""
    m = np.ascontiguousarray(affine, np.float64)
    box = box_out
    lo = float(max(inset - 1, 0))
    hi = float(size_px) - lo
    if not _paste_geometry(m, lo, hi, int(frame_hw[0]), int(frame_hw[1]), box, inv_out):
        return None
    return int(box[0]), int(box[1]), int(box[2]), int(box[3])


@kernel(nogil=True, fastmath=False)
def _paste_geometry(
    m: NDArray[np.float64],
    lo: float,
    hi: float,
    fh: int,
    fw: int,
    box: NDArray[np.int64],
    inv: NDArray[np.float64],
) -> bool:  # pragma: no cover - compiled
    if not _region(m, lo, hi, fh, fw, box):
        return False
    _invert(m, inv)
    inv[0, 2] -= box[0]
    inv[1, 2] -= box[1]
    return True


def warm_up() -> None:
    """Compile (or load from the cache) every kernel once, for each layout the pipeline uses."""
    img = np.zeros((4, 4, 3), np.uint8)
    planar = np.zeros((1, 3, 6, 6), np.float32)
    hwc_to_planar(img, planar[0], rgb=True, mean=127.5, std=128.0)
    hwc_to_planar(img[:, :3], planar[0, :, :4, :3], rgb=False)
    hwc_to_planar(img, planar[0], rgb=False, mean=(104.0, 117.0, 123.0))
    hwc_to_planar(img[:, :3], planar[0, :, :4, :3], rgb=False, mean=(104.0, 117.0, 123.0))
    out = np.zeros((4, 4, 3), np.uint8)
    planar_to_bgr(np.zeros((1, 3, 4, 4), np.float32)[0], out)
    blend_rgba(img[:2, :2], np.zeros((2, 2, 4), np.uint8))
    tiles = np.zeros((4, 3, 2, 2), np.float32)
    crop_to_tiles(img, tiles, 2)
    tiles_to_bgr(tiles, out, 2)
    set_rgb(np.zeros((4, 4, 4), np.uint8), img)
    pts = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 2]], np.float64)
    similarity(pts.astype(np.float32), pts)
    similarity(pts, pts)
    nms_sorted(np.array([[0, 0, 4, 4], [1, 1, 5, 5]], np.float32), np.array([0, 1]), 0.4)
    blend_rgba(np.zeros((2, 2, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)[:2, :2])
    outs = [np.zeros((1, 32, 1), np.float32) for _ in range(3)]
    outs += [np.zeros((1, 32, 4), np.float32) for _ in range(3)]
    outs += [np.zeros((1, 32, 10), np.float32) for _ in range(3)]
    scrfd_decode(
        outs,
        32,
        (8, 16, 32),
        0.5,
        np.zeros(96, np.float32),
        np.zeros((96, 4), np.float32),
        np.zeros((96, 10), np.float32),
    )
    lut = planar_lut(0.0, 255.0)
    resize_planar(np.zeros((6, 6, 3), np.uint8), planar[0], 3, rgb=False, lut=lut)
    eye = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    paste_geometry(eye, 4, (8, 8), np.zeros(4, np.int64), np.zeros((2, 3), np.float64))
    zero_rings(np.zeros((4, 4), np.uint8))


@kernel(nogil=True, fastmath=False)
def _scrfd_decode(
    scores: NDArray[np.float32],
    dist: NDArray[np.float32],
    kdist: NDArray[np.float32],
    cols: int,
    stride: int,
    threshold: float,
    out_scores: NDArray[np.float32],
    out_boxes: NDArray[np.float32],
    out_kps: NDArray[np.float32],
    start: int,
) -> int:  # pragma: no cover - compiled
    s = np.float32(stride)
    thr = np.float32(threshold)
    n = start
    for i in range(scores.shape[0]):
        if not scores[i] >= thr:
            continue
        cell = i // 2  # two anchors per cell
        ax = np.float32(cell % cols) * s
        ay = np.float32(cell // cols) * s
        out_scores[n] = scores[i]
        out_boxes[n, 0] = ax - dist[i, 0] * s
        out_boxes[n, 1] = ay - dist[i, 1] * s
        out_boxes[n, 2] = ax + dist[i, 2] * s
        out_boxes[n, 3] = ay + dist[i, 3] * s
        for p in range(5):
            out_kps[n, 2 * p] = kdist[i, 2 * p] * s + ax
            out_kps[n, 2 * p + 1] = kdist[i, 2 * p + 1] * s + ay
        n += 1
    return n


def scrfd_decode(
    outs: list[NDArray[np.float32]],
    input_size: int,
    strides: tuple[int, ...],
    threshold: float,
    out_scores: NDArray[np.float32],
    out_boxes: NDArray[np.float32],
    out_kps: NDArray[np.float32],
) -> int:
    """SCRFD's decode (two anchors a cell, distances × stride) of the candidates scoring at least
    ``threshold``, stride by stride in index order, into the preallocated ``out_*`` arrays (as
    many rows as anchors); returns how many. The float32 operations of the numpy decode."""
    n = 0
    k = len(strides)
    for i, stride in enumerate(strides):
        cols = input_size // stride
        n = _scrfd_decode(
            outs[i].reshape(-1),
            outs[i + k].reshape(-1, 4),
            outs[i + 2 * k].reshape(-1, 10),
            cols,
            stride,
            float(threshold),
            out_scores,
            out_boxes,
            out_kps,
            n,
        )
    return n
