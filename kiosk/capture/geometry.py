"""2-D affine helpers of the live tracker: composition, application, inversion and the least-squares
similarity of two point sets (all in numpy on a few points, or the pipeline's compiled Umeyama)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.kernels import similarity as umeyama


def homogeneous(m: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.vstack([m, [0.0, 0.0, 1.0]])


def compose(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``a ∘ b`` for 2x3 affines (apply ``b`` first)."""
    return (homogeneous(a) @ homogeneous(b))[:2]


def apply_affine(m: NDArray[np.float64], pts: NDArray[np.floating]) -> NDArray[np.float64]:
    p = np.asarray(pts, np.float64)
    return p @ m[:, :2].T + m[:, 2]


def invert(m: NDArray[np.float64]) -> NDArray[np.float64]:
    """Inverse of a 2x3 affine, in numpy (no C call: no GIL hand-over in the capture thread)."""
    a = m[:, :2]
    det = a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    inv = np.array([[a[1, 1], -a[0, 1]], [-a[1, 0], a[0, 0]]]) / det
    return np.hstack([inv, -(inv @ m[:, 2:])])


def similarity(src: NDArray[np.float64], dst: NDArray[np.float64]) -> NDArray[np.float64]:
    """Least-squares similarity (rotation, uniform scale, shift) mapping ``src`` to ``dst`` (N, 2):
    the pipeline's own compiled Umeyama (:func:`kiosk.inference.kernels.similarity`, which releases
    the GIL); points that all coincide give the shift between their means."""
    m = umeyama(src, dst)
    if m is None:
        ms, md = src.mean(axis=0), dst.mean(axis=0)
        return np.array([[1.0, 0.0, md[0] - ms[0]], [0.0, 1.0, md[1] - ms[1]]])
    return m
