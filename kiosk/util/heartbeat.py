"""Progress of a worker thread: a heartbeat its stage ticks per model call or unit of work.

The stall supervisor (:mod:`kiosk.app.supervisor`) decides that a stage hangs from this, not from
how long a whole frame takes: a frame of six faces at 1.5 s a swapper call takes 9 s and is slow,
not hung, because every call returns. What is bounded is one unit:

- a model call (:class:`kiosk.inference.sessions.SessionRunner` wraps every ``session.run`` in
  :func:`unit`): its bound is at least ``stall_s`` and :data:`SLOW_FACTOR` times the slowest of the
  last calls of the same model; the first :data:`WARM_UNITS` calls of a model get ``load_stall_s``
  (lazy engine builds, CUDA graph capture, first-run allocation);
- the stage's own work between two beats (Python: warps, paste-back, a library refresh step):
  bounded by ``stall_s`` (``load_stall_s`` during a new stage's first frames), measured from the
  last beat, so a stage that keeps ticking is never taken for a hung one.

The worker thread is the only writer; the supervisor reads. Every value the supervisor reads
together is one tuple (one reference assignment), so a reading is never torn.

Model calls find the heartbeat of the thread they run on (:func:`bind`): code that runs on a
thread without one (the CLI's ``kiosk swap``, benchmarks, the pipelined detector's worker) ticks
nothing and pays one thread-local lookup.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: A unit's bound is at least this many times the slowest recent unit of the same kind.
SLOW_FACTOR = 4.0
#: The first calls of each model are allowed ``load_stall_s`` (engine builds on first run).
WARM_UNITS = 2
#: How many recent durations of each kind of unit are kept.
HISTORY = 16
#: Frames slower than this (seconds) are reported as slow (overlay, STATUS, metrics).
SLOW_FRAME_S = 1.0


@dataclass(frozen=True)
class Bounds:
    """The heartbeat's policy (``processing.stall_s`` / ``processing.load_stall_s``)."""

    stall_s: float = 5.0
    load_stall_s: float = 120.0
    factor: float = SLOW_FACTOR
    warm_units: int = WARM_UNITS


@dataclass(frozen=True)
class _Busy:
    since: float  # when this frame (or unit) began
    allowance: float  # seconds it may take without a beat
    name: str = ""
    key: Hashable = None


@dataclass(frozen=True)
class Reading:
    """What the supervisor sees at ``now``: ``hung_s`` > 0 once the current unit (or the stage's
    own work since its last beat) ran past its bound; ``frame_s`` how long the current frame has
    run (0 when idle); ``quiet_s`` how long since the last sign of progress while busy."""

    hung_s: float
    frame_s: float
    quiet_s: float
    allowance_s: float
    unit: str
    in_unit: bool = False


class Heartbeat:
    """One worker thread's progress (see the module docstring)."""

    def __init__(self, bounds: Bounds | None = None) -> None:
        self.bounds = bounds or Bounds()
        self.beats = 0  # units ended and explicit beats
        self.units = 0  # model calls ended
        self.last_frame_s = 0.0  # how long the last finished frame took
        self._frame: _Busy | None = None
        self._unit: _Busy | None = None
        self._last_beat = 0.0
        self._history: dict[Hashable, deque[float]] = {}
        self._warm_frames = 0

    # -- the worker thread ----------------------------------------------------------------------
    def warm(self, frames: int) -> None:
        """The next ``frames`` frames (a new stage's first) get ``load_stall_s`` between beats."""
        self._warm_frames = frames

    def begin_frame(self, now: float | None = None, *, warm: bool = True) -> None:
        """A frame starts; ``warm=False``: a frame of a pass-through (never the long allowance)."""
        now = time.perf_counter() if now is None else now
        b = self.bounds
        allowance = b.load_stall_s if warm and self._warm_frames else b.stall_s
        self._last_beat = now
        self._frame = _Busy(now, allowance)

    def end_frame(self, now: float | None = None, *, counted: bool = True) -> float:
        """The frame ended (returned or raised); returns how long it took. ``counted``: a frame of
        the stage being warmed up (not of a pass-through while it loads)."""
        now = time.perf_counter() if now is None else now
        frame, self._frame = self._frame, None
        self._unit = None
        took = now - frame.since if frame is not None else 0.0
        if counted:
            self.last_frame_s = took
            if self._warm_frames:
                self._warm_frames -= 1
        return took

    def beat(self, now: float | None = None) -> None:
        """The stage made progress (a face done, a photo scanned): its own work is measured anew."""
        self._last_beat = time.perf_counter() if now is None else now
        self.beats += 1

    def unit_allowance(self, key: Hashable) -> float:
        b = self.bounds
        history = self._history.get(key)
        if history is None or len(history) < b.warm_units:
            return b.load_stall_s
        return min(max(b.stall_s, b.factor * max(history)), max(b.load_stall_s, b.stall_s))

    def begin_unit(self, key: Hashable, name: str = "", now: float | None = None) -> float:
        """A unit (one model call) starts; returns its start time for :meth:`end_unit`."""
        now = time.perf_counter() if now is None else now
        self._unit = _Busy(now, self.unit_allowance(key), name, key)
        self._last_beat = now
        return now

    def end_unit(self, key: Hashable, t0: float, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        history = self._history.get(key)
        if history is None:
            history = self._history[key] = deque(maxlen=HISTORY)
        history.append(now - t0)
        self._unit = None
        self._last_beat = now
        self.units += 1
        self.beats += 1

    # -- the supervisor ---------------------------------------------------------------------------
    def read(self, now: float) -> Reading:
        frame, unit, last = self._frame, self._unit, self._last_beat
        if frame is None and unit is None:
            return Reading(0.0, 0.0, 0.0, 0.0, "", False)
        frame_s = now - frame.since if frame is not None else 0.0
        if unit is not None:
            elapsed, allowance, name = now - unit.since, unit.allowance, unit.name
        else:
            assert frame is not None
            elapsed = now - max(frame.since, last)
            allowance, name = frame.allowance, ""
        hung = elapsed if elapsed > allowance else 0.0
        return Reading(hung, frame_s, elapsed, allowance, name, unit is not None)

    def hung_for(self, now: float) -> float:
        return self.read(now).hung_s

    def typical_s(self) -> float:
        """The slowest recent call of the model being called now (0: not in a call, or no history)."""
        unit = self._unit
        history = self._history.get(unit.key) if unit is not None else None
        return max(history) if history else 0.0

    @property
    def in_unit(self) -> bool:
        return self._unit is not None

    @property
    def busy(self) -> bool:
        return self._frame is not None or self._unit is not None


_local = threading.local()


def bind(heartbeat: Heartbeat | None) -> None:
    """Make ``heartbeat`` the calling thread's (None: none)."""
    _local.heartbeat = heartbeat


def current() -> Heartbeat | None:
    return getattr(_local, "heartbeat", None)


def beat() -> None:
    """Tick the calling thread's heartbeat, if it has one (stage code: a unit of work done)."""
    hb = getattr(_local, "heartbeat", None)
    if hb is not None:
        hb.beat()


@contextmanager
def unit(key: Hashable, name: str = "") -> Iterator[None]:
    """One bounded unit of work (a model call) on the calling thread's heartbeat, if any. Nested
    units count as the outer one."""
    hb: Heartbeat | None = getattr(_local, "heartbeat", None)
    if hb is None or hb.in_unit:
        yield
        return
    t0 = hb.begin_unit(key, name)
    try:
        yield
    finally:
        hb.end_unit(key, t0)
