"""Colour correction of the swapped crop towards the visitor's face (``processing.color_correction``).

``mean_std`` (Reinhard-style statistics transfer): per channel, the swapped crop's mean and
standard deviation inside the face's mask are moved onto those of the visitor's aligned crop
(the swapper's own input, so nothing extra is warped)::

    gain   = std_visitor / std_swap          offset = mean_visitor - gain * mean_swap
    pixel' = pixel + strength * ((gain - 1) * pixel + offset)

computed on the 128 px crops (every second pixel per axis) with the face's alpha as weights
(the pixels that are pasted),
in BGR: a per-channel affine map, applied as one lookup table per channel to the crop in place
before it is pasted or published, so the CPU paste-back and the GPU composite get the same
corrected crop. BGR was chosen over Lab by measurement (``benchmarks/color_space.py``: it
undoes a tint or white-balance change as well as or better, and costs a third).

The statistics of both crops are smoothed per tracked face (an exponential moving average with
time constant ``smoothing_s``, keyed by the tracker's face id), so the colour never pulses;
faces without an id (tracking off) are corrected from the current frame alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.jit import kernel
from kiosk.types import FrameBGR

ColorMethod = Literal["none", "mean_std"]
COLOR_METHODS: tuple[ColorMethod, ...] = ("none", "mean_std")

#: Gain limits (a flat or saturated crop must not blow up the other's contrast).
MIN_GAIN, MAX_GAIN = 0.25, 4.0
#: The statistics read every this many pixels per axis (a quarter of a 128 crop: 4096 pixels).
STATS_STEP = 2
#: Standard deviations below this many levels count as this many (flat crops).
MIN_STD = 2.0


@dataclass(frozen=True)
class ColorOptions:
    method: ColorMethod = "none"
    strength: float = 1.0
    smoothing_s: float = 0.25

    @classmethod
    def of(cls, processing: Any) -> ColorOptions:
        """From the ``processing:`` config section (``color_correction``, ``color_strength``)."""
        return cls(method=processing.color_correction, strength=processing.color_strength)

    def __post_init__(self) -> None:
        if self.method not in COLOR_METHODS:
            raise ValueError(
                f"colour correction must be one of {', '.join(COLOR_METHODS)}, got {self.method!r}"
            )
        if not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"colour strength must be in [0, 1], got {self.strength}")

    @property
    def enabled(self) -> bool:
        return self.method != "none" and self.strength > 0.0


@kernel(nogil=True, fastmath=False)
def _weighted_stats(
    visitor: NDArray[np.uint8], swap: NDArray[np.uint8], weight: NDArray[np.uint8], out: NDArray[np.float64]
) -> None:  # pragma: no cover - compiled
    """out[0]: sum of weights; out[1:4], out[4:7]: weighted sums of visitor x, x²; out[7:10],
    out[10:13]: the same of the swap (weights 0..255); every STATS_STEP-th pixel per axis."""
    n = 0.0
    v0 = v1 = v2 = vv0 = vv1 = vv2 = 0.0
    s0 = s1 = s2 = ss0 = ss1 = ss2 = 0.0
    h, w = weight.shape[0], weight.shape[1]
    for y in range(0, h, STATS_STEP):
        for x in range(0, w, STATS_STEP):
            wt = np.float64(weight[y, x])
            a0, a1, a2 = (
                np.float64(visitor[y, x, 0]),
                np.float64(visitor[y, x, 1]),
                np.float64(visitor[y, x, 2]),
            )
            b0, b1, b2 = np.float64(swap[y, x, 0]), np.float64(swap[y, x, 1]), np.float64(swap[y, x, 2])
            n += wt
            v0 += wt * a0
            v1 += wt * a1
            v2 += wt * a2
            vv0 += wt * a0 * a0
            vv1 += wt * a1 * a1
            vv2 += wt * a2 * a2
            s0 += wt * b0
            s1 += wt * b1
            s2 += wt * b2
            ss0 += wt * b0 * b0
            ss1 += wt * b1 * b1
            ss2 += wt * b2 * b2
    out[0] = n
    out[1], out[2], out[3] = v0, v1, v2
    out[4], out[5], out[6] = vv0, vv1, vv2
    out[7], out[8], out[9] = s0, s1, s2
    out[10], out[11], out[12] = ss0, ss1, ss2


def face_stats(
    visitor_bgr: FrameBGR,
    swap_bgr: FrameBGR,
    weight_u8: NDArray[np.uint8],
    scratch: NDArray[np.float64] | None = None,
) -> NDArray[np.float64] | None:
    """(4, 3): visitor mean, visitor std, swap mean, swap std per BGR channel, weighted by
    ``weight_u8``; None when the weights are all zero."""
    if visitor_bgr.shape != swap_bgr.shape or weight_u8.shape != swap_bgr.shape[:2]:
        raise ValueError(f"crops {visitor_bgr.shape}/{swap_bgr.shape} and weights {weight_u8.shape} differ")
    sums = np.empty(13, np.float64) if scratch is None else scratch
    _weighted_stats(visitor_bgr, swap_bgr, weight_u8, sums)
    n = sums[0]
    if n <= 0:
        return None
    mv = sums[1:4] / n
    sv = np.sqrt(np.maximum(sums[4:7] / n - mv * mv, 0.0))
    ms = sums[7:10] / n
    ss = np.sqrt(np.maximum(sums[10:13] / n - ms * ms, 0.0))
    return np.stack([mv, sv, ms, ss])


def gain_offset(
    stats: NDArray[np.float64], strength: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-channel (gain, offset) of ``pixel' = gain * pixel + offset`` from :func:`face_stats`,
    blended with the identity by ``strength``."""
    mv, sv, ms, ss = stats
    gain = np.clip(np.maximum(sv, MIN_STD) / np.maximum(ss, MIN_STD), MIN_GAIN, MAX_GAIN)
    offset = mv - gain * ms
    return 1.0 + strength * (gain - 1.0), strength * offset


class ColorCorrector:
    """Per-face colour correction with per-track smoothing. Not thread-safe (the pipeline's thread)."""

    def __init__(self, options: ColorOptions | None = None) -> None:
        self.options = options or ColorOptions()
        self._ema: dict[int, tuple[float, NDArray[np.float64]]] = {}
        self._sums = np.zeros(13, np.float64)
        self._lut = np.zeros((1, 256, 3), np.uint8)
        self._levels = np.arange(256, dtype=np.float64)
        self._lut_f = np.zeros((256, 3), np.float64)
        #: (gain, offset) per channel applied to the last crop (for tests and the debug view).
        self.last: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    def reset(self) -> None:
        self._ema.clear()

    @property
    def tracked_keys(self) -> set[int]:
        """The face ids whose statistics are being smoothed."""
        return set(self._ema)

    def forget_except(self, keys: set[int]) -> None:
        """Drop the smoothed statistics of faces no longer tracked."""
        for k in [k for k in self._ema if k not in keys]:
            del self._ema[k]

    def smoothed(self, key: int | None, stats: NDArray[np.float64], t: float) -> NDArray[np.float64]:
        """``stats`` averaged over time for face ``key`` (None: not smoothed)."""
        if key is None or self.options.smoothing_s <= 0:
            return stats
        prev = self._ema.get(key)
        if prev is None:
            self._ema[key] = (t, stats.copy())
            return stats
        t_prev, avg = prev
        dt = max(t - t_prev, 0.0)
        w = 1.0 - math.exp(-dt / self.options.smoothing_s)
        avg += w * (stats - avg)
        self._ema[key] = (t, avg)
        return avg

    def correct(
        self,
        visitor_bgr: FrameBGR,
        swap_bgr: FrameBGR,
        weight_u8: NDArray[np.uint8],
        key: int | None = None,
        t: float = 0.0,
    ) -> bool:
        """Correct ``swap_bgr`` in place towards ``visitor_bgr`` (same size, aligned alike) inside
        ``weight_u8``. ``key``: the tracked face's id (smoothing), ``t``: the frame time in seconds.
        Returns False when nothing was done (method none, strength 0, empty mask)."""
        if not self.options.enabled:
            return False
        stats = face_stats(visitor_bgr, swap_bgr, weight_u8, self._sums)
        if stats is None:
            return False
        gain, offset = gain_offset(self.smoothed(key, stats, t), self.options.strength)
        self.last = (gain, offset)
        lut = self._lut_f
        np.multiply(self._levels[:, None], gain[None, :], out=lut)
        lut += offset[None, :]
        np.clip(np.rint(lut, out=lut), 0, 255, out=lut)
        self._lut[0] = lut
        cv2.LUT(swap_bgr, self._lut, dst=swap_bgr)
        return True


def warm_up() -> None:
    z = np.zeros((4, 4, 3), np.uint8)
    face_stats(z, z, np.ones((4, 4), np.uint8))
