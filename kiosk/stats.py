"""Small, lock-free-enough counters for per-thread rates and latency percentiles.

Each meter has one writer thread; readers (overlay, stats JSON) only read floats and ints,
which is safe in CPython. A worker kind's meters outlive its threads (Frigate-style: the
supervisor creates them once and every thread of that kind is handed the same ones, so a
replacement counts on where the thread it replaced stopped); :class:`MeterWriter` keeps the one
writer rule across that hand-over.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Generic, TypeVar

import numpy as np

M = TypeVar("M")


class RateMeter:
    """Counts events; ``fps`` is the rate over the last completed window, ``mean_fps`` over the run."""

    def __init__(self, window_s: float = 1.0) -> None:
        self.window_s = window_s
        self.count = 0
        self.fps = 0.0
        self._t0: float | None = None
        self._win_start = 0.0
        self._win_count = 0
        self._t_last = 0.0

    def tick(self, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        if self._t0 is None:
            self._t0 = self._win_start = now
        self.count += 1
        self._win_count += 1
        self._t_last = now
        elapsed = now - self._win_start
        if self.count <= self._win_count and self.count >= 2 and elapsed > 0:
            self.fps = (self.count - 1) / elapsed  # first window still filling: the rate so far
        if elapsed >= self.window_s:
            self.fps = self._win_count / elapsed
            self._win_start = now
            self._win_count = 0

    def fps_at(self, now: float | None = None) -> float:
        """``fps``, but falling once events stop: a window without any event caps the rate at
        1 / (time since the last event), so a stalled stage reads near 0 instead of its last rate."""
        if self.count == 0:
            return 0.0
        now = time.perf_counter() if now is None else now
        gap = now - self._t_last
        return self.fps if gap <= self.window_s else min(self.fps, 1.0 / gap)

    @property
    def mean_fps(self) -> float:
        if self._t0 is None or self.count < 2 or self._t_last <= self._t0:
            return 0.0
        return (self.count - 1) / (self._t_last - self._t0)


class LatencyRecorder:
    """Keeps the last ``capacity`` samples (milliseconds) in a preallocated ring."""

    def __init__(self, capacity: int = 4096) -> None:
        self._ring = np.zeros(capacity, np.float64)
        self._n = 0
        self.total = 0.0  # sum of every sample added (for a Prometheus summary's _sum)

    def add(self, ms: float) -> None:
        self._ring[self._n % len(self._ring)] = ms
        self._n += 1
        self.total += ms

    def percentile(self, q: float) -> float | None:
        n = min(self._n, len(self._ring))
        if n == 0:
            return None
        return float(np.percentile(self._ring[:n], q))

    @property
    def count(self) -> int:
        return self._n


class MeterWriter(Generic[M]):
    """One worker thread's right to write its kind's shared meters, until :meth:`revoke`.

    ``with writer as meters:`` holds the right for one write and gives the meters, or None once
    revoked: a thread abandoned inside a call that returns later (a hung native call) writes
    nothing more, so only the current thread of a kind ever writes its meters. Exact, not just
    likely: :meth:`revoke` takes the same lock as a write, so when it returns no write of the
    abandoned thread is in progress and none starts, and the replacement starts only after it.
    The lock is the thread's own (only it and the one revoking take it, for a few additions), so
    the current thread never waits on an abandoned one.
    """

    def __init__(self, meters: M) -> None:
        self._meters: M | None = meters
        self._lock = threading.Lock()

    def __enter__(self) -> M | None:
        self._lock.acquire()
        return self._meters

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()

    def revoke(self) -> None:
        """No write after this returns (the thread was abandoned; a fresh one takes its meters)."""
        with self._lock:
            self._meters = None
