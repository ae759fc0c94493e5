"""The One-Euro filter (Casiez et al. 2012) that smooths each track's keypoints and box corners: a
low cutoff (steady) when the face is still, a cutoff that rises with speed (no lag) when it moves."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

_TWO_PI = 2.0 * math.pi


class OneEuroFilter:
    """The 1€ filter (Casiez, Roussel, Vogel, CHI 2012), vectorised over an array of values.

    Each update low-passes the values with a cutoff ``min_cutoff + beta * speed`` (Hz), where
    ``speed`` is the low-passed (``d_cutoff``) rate of change in units per second. Slow or still
    values get a low cutoff (little jitter), fast ones a high cutoff (little lag).

    ``speed_axis``: when set, the speed is the Euclidean norm of the rate over that axis (e.g. -1
    for ``(N, 2)`` points, so x and y of a point share one cutoff and a moving point is not
    smoothed more along one axis than the other); ``None`` uses each element's own speed.
    """

    def __init__(
        self,
        min_cutoff: float = 1.0,
        beta: float = 0.0,
        d_cutoff: float = 1.0,
        speed_axis: int | None = -1,
    ) -> None:
        if min_cutoff <= 0 or d_cutoff <= 0 or beta < 0:
            raise ValueError("min_cutoff and d_cutoff must be > 0 and beta >= 0")
        self.min_cutoff = float(min_cutoff)
        self.beta = float(beta)
        self.d_cutoff = float(d_cutoff)
        self.speed_axis = speed_axis
        self._x: NDArray[np.float64] | None = None
        self._dx: NDArray[np.float64] | None = None
        self._t = 0.0

    @staticmethod
    def _alpha(cutoff: NDArray[np.float64] | float, dt: float) -> NDArray[np.float64]:
        tau = 1.0 / (_TWO_PI * np.asarray(cutoff, np.float64))
        return 1.0 / (1.0 + tau / dt)

    def reset(self) -> None:
        """Forget the state; the next update passes its value through unchanged."""
        self._x = None
        self._dx = None

    def restart(
        self, x: NDArray[np.floating], t: float, velocity: NDArray[np.floating] | None = None
    ) -> NDArray[np.float64]:
        """Start again from ``x`` at ``t`` (passed through unchanged), with ``velocity`` (units per
        second, default 0) as the speed estimate: a value measured long after the last one, or far
        from where the filter expected it, is not blended with the old state."""
        self._x = np.array(x, dtype=np.float64)
        self._dx = np.zeros_like(self._x) if velocity is None else np.array(velocity, dtype=np.float64)
        self._t = float(t)
        return self._x.copy()

    @property
    def value(self) -> NDArray[np.float64] | None:
        """The current filtered value (``None`` before the first update)."""
        return self._x

    @property
    def velocity(self) -> NDArray[np.float64] | None:
        """The current low-passed rate of change, units per second (``None`` before the first update)."""
        return self._dx

    def __call__(self, x: NDArray[np.floating] | Sequence[float], t: float) -> NDArray[np.float64]:
        """Filter ``x`` observed at time ``t`` (seconds); returns a new array.

        A first update, or one after :meth:`reset`, returns ``x`` as is. An update whose ``t`` is
        not after the previous one (a repeated frame) changes nothing and returns the current value.
        """
        xv = np.array(x, dtype=np.float64)
        if self._x is None or self._dx is None or self._x.shape != xv.shape:
            self._x = xv
            self._dx = np.zeros_like(xv)
            self._t = float(t)
            return xv.copy()
        dt = float(t) - self._t
        if dt <= 0.0:
            return self._x.copy()
        self._t = float(t)
        rate = (xv - self._x) / dt
        self._dx = self._dx + self._alpha(self.d_cutoff, dt) * (rate - self._dx)
        if self.speed_axis is None:
            speed = np.abs(self._dx)
        else:
            speed = np.sqrt(np.sum(self._dx**2, axis=self.speed_axis, keepdims=True))
        a = self._alpha(self.min_cutoff + self.beta * speed, dt)
        self._x = self._x + a * (xv - self._x)
        return self._x.copy()

    update = __call__
