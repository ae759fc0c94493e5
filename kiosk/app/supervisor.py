"""Hang supervision of the worker threads: progress, not frames, proves life.

The render loop asks :class:`Supervisor` (through :class:`kiosk.app.wiring.Workers`) once a frame
(:meth:`Supervisor.check_inference`) and once a second (:meth:`Supervisor.check_workers`). It

- abandons an inference thread whose current unit of work hangs (:mod:`kiosk.util.heartbeat`: one
  model call past ``stall_s`` and a few times what that model's recent calls took, or the stage's
  own work without a beat for ``stall_s``; ``load_stall_s`` while models load and engines build)
  and has the wiring start a fresh one on a fresh output buffer. A stage that is slow but
  progressing (every call returns) is never abandoned: it is reported as *slow (N s a frame)*;
- replaces a capture thread stuck in a source call, and restarts a worker thread that died;
- owns the worker kinds' meters (:class:`Meters`, Frigate-style): created once here and handed by
  the wiring to every thread it builds, so a replacement counts on where the thread it replaced
  stopped (frames, process time, errors, rebuilds, reconnects) and nothing is added up when a
  thread is replaced. Only the current thread of a kind writes them: an abandoned one writes no
  more, even if its hung call returns (:class:`kiosk.stats.MeterWriter`);
- keeps the clock of an unrecovered stall (exit 3 after ``processing.recovery_s``);
- never joins an abandoned thread: it may sit inside native code (ONNX Runtime) for good, and the
  exit leaves without it (:func:`kiosk.appliance.exit.leave`).

It never touches buffers or builds threads itself: :class:`kiosk.app.wiring.Workers` does (the
``replace`` callbacks, all through :func:`kiosk.app.wiring.wire`), so there is one place that
wires producers to buffers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kiosk.capture.thread import CaptureMeters, CaptureThread
from kiosk.processing.thread import InferenceMeters, InferenceThread
from kiosk.util.heartbeat import SLOW_FRAME_S

log = logging.getLogger(__name__)

#: No sign of progress for this long (and longer than twice what the current call usually takes)
#: while no frame reaches the screen: the overlay says "stalled" rather than "slow".
QUIET_S = 3.0


@dataclass(frozen=True)
class Health:
    """How processing is doing at one moment (read by the counters)."""

    #: Seconds processing has been unhealthy (a unit hung past its bound, or not working again yet
    #: after an abandon); 0 when healthy.
    stalled_for_s: float
    unrecovered_s: float
    #: Seconds a frame takes while the stage is slow but progressing (≥ SLOW_FRAME_S); else 0.
    slow_frame_s: float
    #: No sign of progress for long (a call that may be hung but is not past its bound yet).
    quiet: bool


@dataclass(frozen=True)
class Meters:
    """Every worker kind's meters, for the life of the kiosk (handed to each thread of that kind)."""

    capture: CaptureMeters = field(default_factory=CaptureMeters)
    inference: InferenceMeters = field(default_factory=InferenceMeters)


class Supervisor:
    """See the module docstring. ``stop``: the kiosk's stop event (nothing is replaced once set)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.meters = Meters()
        self.abandoned_threads = 0  # inference threads given up on after a hung call
        self.thread_restarts = 0
        self.t_unrecovered = 0.0  # perf_counter at which the unrecovered hang began; 0: healthy
        #: The inference meters' frame count when a thread was last abandoned (frames after it are
        #: the fresh thread's: the abandoned one counts no more).
        self._processed_at_abandon = 0

    # -- inference ------------------------------------------------------------------------------
    def check_inference(
        self,
        now: float,
        inf: InferenceThread,
        swap_enabled: bool,
        replace: Callable[[InferenceThread], None],
    ) -> float:
        """Abandon ``inf`` if its current unit hangs (``replace(inf)`` starts the fresh thread);
        returns how long processing has been unhealthy (0 when healthy)."""
        reading = inf.heartbeat.read(now)
        if reading.hung_s and not self.stop.is_set():
            if not self.t_unrecovered:
                self.t_unrecovered = now - reading.hung_s
            what = f"{reading.unit} call" if reading.unit else "processing call"
            log.error(
                "%s has not returned for %.1f s (bound %.1f s): abandoning it, a fresh inference "
                "thread and stage take over",
                what,
                reading.hung_s,
                reading.allowance_s,
            )
            inf.abandon()  # it writes the meters no more: from here on they count the fresh thread
            self.abandoned_threads += 1
            self._processed_at_abandon = inf.meters.rate.count
            replace(inf)
        elif self.t_unrecovered and (
            inf.ok_calls > 0 or (not swap_enabled and inf.meters.rate.count > self._processed_at_abandon)
        ):  # the fresh stage works (or staff turned swapping off and frames flow)
            log.info("processing recovered %.1f s after the stall", now - self.t_unrecovered)
            self.t_unrecovered = 0.0
        return now - self.t_unrecovered if self.t_unrecovered else 0.0

    def health(self, now: float, inf: InferenceThread) -> Health:
        reading = inf.heartbeat.read(now)
        unrecovered_s = now - self.t_unrecovered if self.t_unrecovered else 0.0
        stalled = unrecovered_s or reading.hung_s
        typical = inf.heartbeat.typical_s()
        quiet = reading.quiet_s > max(QUIET_S, 2.0 * typical)
        slow = 0.0
        if not stalled and not quiet:
            slow = max(inf.heartbeat.last_frame_s, reading.frame_s)
            if slow < SLOW_FRAME_S:
                slow = 0.0
        return Health(stalled, unrecovered_s, slow, quiet)

    def join_wait(self, now: float, inf: InferenceThread, remaining: float) -> float:
        """How long the exit should wait for ``inf``: inside a model call, about what that model's
        calls take that is still left (0.1 s at least, or 0.1 s without history: a hung or first
        call is not worth waiting for, the process leaves without it); else ``remaining``."""
        hb = inf.heartbeat
        reading = hb.read(now)
        if not reading.in_unit:
            return remaining
        left = 1.2 * hb.typical_s() - reading.quiet_s
        return min(remaining, max(0.1, left))

    # -- every worker ---------------------------------------------------------------------------
    def check_workers(
        self,
        now: float,
        capture: CaptureThread,
        inf: InferenceThread,
        replace_capture: Callable[[float], None],
        restart_capture: Callable[[], None],
        restart_inference: Callable[[InferenceThread], None],
    ) -> None:
        """Restart a worker thread that died (they catch everything, so this is a last resort), or
        replace a capture thread stuck in a source call. Never two producers on one buffer: a dead
        thread publishes nothing, a stuck one is abandoned with its buffers."""
        if self.stop.is_set():
            return
        stuck = capture.switch_stuck_for(now)
        if stuck:
            log.error(
                "capture thread stuck in a source call for %.1f s: a fresh capture thread takes over", stuck
            )
            capture.abandon()
            self.thread_restarts += 1
            replace_capture(stuck)
        elif not capture.is_alive():
            log.error("capture thread died; restarting it")
            self.thread_restarts += 1
            restart_capture()
        if not inf.is_alive():
            log.error("inference thread died; restarting it")
            self.thread_restarts += 1
            restart_inference(inf)
