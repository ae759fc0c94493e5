"""The inference thread: newest captured frame → processor → processing triple buffer.

Errors climb a ladder (ARCHITECTURE.md, "Ownership and failure"):

1. A stage call that raises costs that frame only: nothing is published for it, so the screen
   keeps the last good result (its frame and its crops) instead of flashing the visitor's face.
2. ``rebuild_after_errors`` failures in a row, or half of the last
   :data:`~kiosk.processing.ladder.ERROR_WINDOW` calls, drop the stage and rebuild it; rebuilds
   back off exponentially (``restart_initial_s`` doubling up to ``restart_max_s``), and the
   back-off resets only after a stage ran :data:`~kiosk.processing.ladder.HEALTHY_S`.
3. A stage that cannot be built (a model file missing or corrupt, a live reload to a broken
   config) keeps the last working stage where there is one, with a notice saying why; the build
   is retried after the back-off, and at once when a watched model file changes (mtime, size or
   inode), so copying the right file in heals the booth without a restart.
4. A call that never returns is the supervisor's business (:mod:`kiosk.app.supervisor`): it reads
   :meth:`InferenceThread.hung_for`, calls :meth:`InferenceThread.abandon` and starts a fresh
   thread with its own output buffer; the abandoned thread never publishes again. What is bounded
   is one unit of work, not a frame: every model call ticks the thread's heartbeat
   (:mod:`kiosk.util.heartbeat`), so a stage that is slow but progressing (six faces at 1.5 s a
   swapper call) is never taken for a hung one.

Every field of the thread's own state (``_processor``, ``_fallback``, the ladder's counters) is
written by the inference thread only. The thread composes what it runs from:

- :class:`~kiosk.processing.loader.StageLoader`: the builds, each on a short-lived loader thread
  that hands its result over through one :class:`~kiosk.processing.loader.BuildJob` (an atomic
  reference plus an event), their retries and the watched model files; other threads ask for a
  rebuild through its queue (:meth:`InferenceThread.reconfigure`);
- :class:`~kiosk.processing.ladder.FailureWindow` and :class:`~kiosk.processing.ladder.Backoff`:
  rule 2 and the rebuild delays of the ladder (:class:`~kiosk.processing.ladder.ErrorPolicy` holds
  its bounds; it is re-exported here);
- :class:`BufferWiring`: the input and live-anchor buffers, which other threads change only by
  asking (:meth:`InferenceThread.rewire`);
- the :class:`~kiosk.util.heartbeat.Heartbeat` its model calls tick, which bounds each call;
- :class:`InferenceMeters`: the kind's, handed in by the wiring and shared with the threads before
  and after it; it writes them only until it is abandoned (:class:`kiosk.stats.MeterWriter`).
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kiosk.booth.controls import ControlState
from kiosk.capture.live import AnchorSlot, LiveAnchor
from kiosk.processing.ladder import Backoff, ErrorPolicy, FailureWindow
from kiosk.processing.loader import StageLoader
from kiosk.processing.stage import PassThrough, Processor, StageUnavailable
from kiosk.stats import LatencyRecorder, MeterWriter, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult
from kiosk.util import heartbeat, limits
from kiosk.util.errors import one_line
from kiosk.util.heartbeat import Heartbeat

__all__ = ["ErrorPolicy", "InferenceMeters", "InferenceThread", "new_swap_result"]

log = logging.getLogger(__name__)

#: A new stage's first frames get ``load_stall_s`` instead of ``stall_s`` between two beats (lazy
#: engine builds; each model's first calls get it too, see :mod:`kiosk.util.heartbeat`).
WARM_CALLS = 3


def new_swap_result() -> SwapResult:
    return SwapResult(frame_bgr=np.zeros((1, 1, 3), np.uint8))


@dataclass
class InferenceMeters:
    """The inference threads' meters: created once (by the supervisor) and handed to every
    inference thread the wiring builds, so a fresh thread counts on where the one it replaced
    stopped. Written by the current thread only (through its :class:`~kiosk.stats.MeterWriter`),
    read by the counters."""

    rate: RateMeter = field(default_factory=RateMeter)  # results published (pass-through too)
    #: Results of the installed swapping stage only (not the pass-through while models load or
    #: swapping is off, which runs at camera rate): the rate the swap is refreshed at.
    swap_rate: RateMeter = field(default_factory=RateMeter)
    process_ms: LatencyRecorder = field(default_factory=lambda: LatencyRecorder(1024))
    errors: int = 0  # failed stage calls
    restarts: int = 0  # stage rebuilds after repeated failures
    build_failures: int = 0  # stage builds that failed (missing or broken models, a stalled build)


def _why(exc: BaseException) -> str:
    """One line for the staff notice and the stats: a resource limit (out of memory or descriptors)
    named with its fix, else the exception's first line with its type."""
    return limits.limit_problem(exc, fds=0) or one_line(exc, 160, with_type=True)


class BufferWiring:
    """The buffers an inference thread reads frames from and hands live anchors to.

    Each reference has one writer, the inference thread (:meth:`take`): another thread only asks
    for new ones (:meth:`ask`, a queue), except before the inference thread runs (:meth:`set`)."""

    def __init__(self, inp: TripleBuffer[CapturedFrame], anchors: TripleBuffer[AnchorSlot] | None) -> None:
        self._inp, self._anchors = inp, anchors
        self._asked: queue.SimpleQueue[
            tuple[TripleBuffer[CapturedFrame], TripleBuffer[AnchorSlot] | None]
        ] = queue.SimpleQueue()

    @property
    def inp(self) -> TripleBuffer[CapturedFrame]:
        return self._inp

    @property
    def anchors(self) -> TripleBuffer[AnchorSlot] | None:
        return self._anchors

    def ask(self, inp: TripleBuffer[CapturedFrame], anchors: TripleBuffer[AnchorSlot] | None) -> None:
        self._asked.put((inp, anchors))

    def set(self, inp: TripleBuffer[CapturedFrame], anchors: TripleBuffer[AnchorSlot] | None) -> None:
        self._inp, self._anchors = inp, anchors

    def take(self) -> None:
        """Apply what was asked for since the last call (the newest request wins)."""
        while True:
            try:
                self._inp, self._anchors = self._asked.get_nowait()
            except queue.Empty:
                return


class InferenceThread(threading.Thread):
    def __init__(
        self,
        build_processor: Callable[[], Processor],
        inp: TripleBuffer[CapturedFrame],
        out: TripleBuffer[SwapResult],
        stop: threading.Event,
        restart_initial_s: float = 1.0,
        restart_max_s: float = 30.0,
        controls: ControlState | None = None,
        policy: ErrorPolicy | None = None,
        anchors: TripleBuffer[AnchorSlot] | None = None,
        meters: InferenceMeters | None = None,
    ) -> None:
        """``meters``: the kind's meters to count on (the wiring's); fresh ones when None."""
        super().__init__(name="inference", daemon=True)
        #: The input and anchor buffers (:attr:`inp`, :attr:`anchors`; changed by :meth:`rewire`).
        self._wiring = BufferWiring(inp, anchors)
        self.out = out
        self._stop_event = stop
        self.policy = policy or ErrorPolicy()
        self.controls = controls
        #: Read by other threads, written only by this one until it is abandoned (then by the next).
        self.meters = meters if meters is not None else InferenceMeters()
        self._metering = MeterWriter(self.meters)
        # Read by other threads, written only by this one:
        self.last_error = ""
        self.problem = ""  # why the stage on screen is not the one asked for ("" when it is)
        self.ok_calls = 0  # successful calls of a built stage (not the loading pass-through)
        #: Progress of this thread's stage calls: ticked by every model call, read by the supervisor.
        self.heartbeat = Heartbeat(self.policy.bounds)
        self.processor_name = "passthrough"
        self._abandoned = threading.Event()  # set by the supervisor: never publish again
        #: Builds the stage on loader threads; other threads ask it for a new one (reconfigure).
        self._loader = StageLoader(build_processor)
        # This thread's own state (single writer: run()):
        self._backoff = Backoff(restart_initial_s, restart_max_s)
        self._window = FailureWindow()
        self._processor: Processor | None = None
        self._provider: tuple[str, str | None, bool] = ("", None, False)  # see provider_info
        self._fallback = PassThrough("loading the face models…")
        self._bypass = PassThrough()
        self.processor_name = self._fallback.name

    # -- read by other threads ----------------------------------------------------------------
    def provider_info(self) -> tuple[str, str | None, bool]:
        """(ONNX Runtime provider the models run on, GPU provider requested or None, whether that GPU
        provider fell back to the CPU) for the installed stage; ("", None, False) while no stage with
        models is installed (loading, pass-through, after an error)."""
        return self._provider  # published whole by this thread when it installs or drops a stage

    def _set_processor(self, processor: Processor | None) -> None:
        """Install (or drop) the stage, and publish its provider facts for other threads in one
        reference (they never read the stage itself)."""
        self._processor = processor
        pipe = getattr(processor, "pipe", None)
        self._provider = (
            ("", None, False)
            if pipe is None
            else (str(pipe.provider), pipe.gpu_requested, bool(pipe.gpu_fallback))
        )

    def hung_for(self, now: float) -> float:
        """Seconds the current unit of the stage call (a model call, or the stage's own work since
        its last beat) has run once over its bound; 0 otherwise (idle, or slow but progressing)."""
        return self.heartbeat.hung_for(now)

    @property
    def inp(self) -> TripleBuffer[CapturedFrame]:
        """The captured frames this thread reads (replaced only by this thread, see :meth:`rewire`)."""
        return self._wiring.inp

    @property
    def anchors(self) -> TripleBuffer[AnchorSlot] | None:
        """Live display: each result's crops also go, as an immutable snapshot, to the capture
        thread's keypoint tracker through this buffer (None: synced display, nothing extra is
        copied). Replaced only by this thread, see :meth:`rewire`."""
        return self._wiring.anchors

    def rewire(self, inp: TripleBuffer[CapturedFrame], anchors: TripleBuffer[AnchorSlot] | None) -> None:
        """Read frames from ``inp`` and hand live anchors to ``anchors`` from the next iteration on
        (a fresh capture thread, a display-mode switch). Other threads only ask: the request goes
        through a queue and this thread applies it, so each buffer reference has one writer. Before
        the thread runs, the change is applied at once."""
        if not self.is_alive():
            self._wiring.set(inp, anchors)
        else:
            self._wiring.ask(inp, anchors)

    def _take_wiring(self) -> None:
        self._wiring.take()

    def abandon(self) -> None:
        """Give up on this thread (its call hangs): it never publishes again and exits when (if)
        the call returns. The caller starts a fresh thread with a fresh output buffer; the live
        anchor buffer is shared with the fresh thread, which becomes its producer, and so are the
        meters: this thread writes neither once this returns, even if its call returns."""
        self._metering.revoke()
        self._abandoned.set()
        anchors = self.anchors
        if anchors is not None:
            anchors.release_producer()

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def loader_alive(self) -> bool:
        return self._loader.alive()

    def join_loaders(self, timeout_s: float) -> bool:
        """After stop: join the loader threads (they check the stop event between builds).
        Returns False if a loader is still inside a build after ``timeout_s``."""
        return self._loader.join(timeout_s)

    def release(self) -> None:
        """Drop the processing stage once this thread and the loaders have stopped, so its ONNX
        Runtime sessions are released on the calling thread before the interpreter exits."""
        if self.is_alive() or self.loader_alive():
            return
        processor, self._processor = self._processor, None
        del processor
        gc.collect()

    def reconfigure(
        self, build_processor: Callable[[], Processor], policy: ErrorPolicy | None = None
    ) -> None:
        """Swap in a new processing stage built in the background; frames keep flowing through
        the old one until the new one is ready, and the old one stays if the new one fails."""
        self._loader.request(build_processor, policy)

    # -- the thread's own state ---------------------------------------------------------------
    def _housekeeping(self, now: float) -> None:
        requested, policy = self._loader.take_requests()
        if policy is not None:
            self.policy = policy
            self.heartbeat.bounds = policy.bounds
        if requested:
            self._backoff.reset()
        built = self._loader.poll(now, self.policy.load_stall_s)
        if isinstance(built, BaseException):
            self._build_failed(built)
        elif built is not None:
            self._install(built, now)

    def _install(self, processor: Processor, now: float) -> None:
        self._set_processor(processor)
        self.processor_name = processor.name
        self.problem = ""
        self._window.clear()
        self.heartbeat.warm(WARM_CALLS)
        self.heartbeat.last_frame_s = 0.0  # how slow the previous stage was says nothing of this one
        self._backoff.installed(now)
        log.info("processing stage ready: %s", processor.name)

    def _count(self, *, errors: int = 0, restarts: int = 0, build_failures: int = 0) -> None:
        """Add to the kind's meters (nothing once this thread is abandoned: see :meth:`abandon`)."""
        with self._metering as m:
            if m is not None:
                m.errors += errors
                m.restarts += restarts
                m.build_failures += build_failures

    def _build_failed(self, exc: BaseException) -> None:
        self._count(build_failures=1)
        watch: tuple[str, ...] = ()
        if isinstance(exc, StageUnavailable):
            why = exc.notice
            watch = exc.watch
        else:
            why = f"face pipeline failed to start: {_why(exc)}"
            log.error("processing stage failed to start", exc_info=exc)
        self.last_error = why
        delay = self._backoff.next()
        if self._processor is not None:
            self.problem = f"keeping the previous face swap: {why}; retrying"
        else:
            self._fallback = PassThrough(f"{why}; retrying")
            self.processor_name = self._fallback.name
        log.warning("%s (retry in %.1f s or when a model file changes)", why, delay)
        self._loader.retry_in(delay, watch)

    def _succeeded(self, now: float) -> None:
        self.ok_calls += 1
        self._window.succeeded()
        self._backoff.ran(now)

    def _failed(self, exc: Exception, frame: CapturedFrame, out: SwapResult) -> bool:
        """Count a failed call of the installed stage; True if ``out`` now holds a result to publish."""
        self._count(errors=1)
        self.last_error = _why(exc)
        if self._window.failed():
            log.warning("processing stage raised; skipping the frame", exc_info=exc)
        if not self._window.exceeded(self.policy.rebuild_after_errors):
            return False  # transient: the screen keeps the last good result
        self._count(restarts=1)
        self._set_processor(None)
        self.heartbeat.last_frame_s = 0.0  # the pass-through meanwhile is not slow
        delay = self._backoff.next()
        self._fallback = PassThrough(
            f"face swap paused after repeated errors ({self.last_error}); rebuilding in {delay:.1f} s"
        )
        self.processor_name = self._fallback.name
        log.error(
            "processing stage failed %d times: rebuilding it in %.1f s", self._window.consecutive, delay
        )
        self._window.clear()
        self._loader.retry_in(delay)
        self._fallback.process(frame.frame_bgr, out)
        return True

    def run(self) -> None:
        heartbeat.bind(self.heartbeat)  # the stage's model calls tick it
        self._loader.start()
        prev_frame = (0, 0.0)  # seq and capture time of the frame before this one
        while not self._stop_event.is_set() and not self._abandoned.is_set():
            self._take_wiring()
            self._housekeeping(time.perf_counter())
            if not self.inp.wait(0.05):
                continue
            frame = self.inp.read()
            if frame is None:
                continue
            before, prev_frame = prev_frame, (frame.seq, frame.t_capture)
            out = self.out.write_slot()
            if out.frame_bgr.shape != frame.frame_bgr.shape:
                out.frame_bgr = np.empty_like(frame.frame_bgr)
            processor = self._processor
            if self.controls is not None and not self.controls.swap_enabled:
                stage: Processor = self._bypass  # staff turned swapping off: the visitor's real face
            else:
                stage = processor or self._fallback
            own = stage is processor
            t0 = time.perf_counter()
            self.heartbeat.begin_frame(t0, warm=own)
            lag = 0
            try:
                stage.process(frame.frame_bgr, out)
                failure: Exception | None = None
                # A pipelined stage (processing.pipelined) returns the previous frame's result.
                lag = getattr(stage, "result_lag", 0)
            except Exception as exc:
                failure = exc
            finally:
                self.heartbeat.end_frame(counted=own)
            if self._abandoned.is_set():
                return  # the supervisor gave up on this call: a fresh thread owns the screen now
            t1 = time.perf_counter()
            if failure is None:
                if own:
                    self._succeeded(t1)
                if self.problem and own:
                    out.notice = f"{out.notice} · {self.problem}" if out.notice else self.problem
            elif not own:
                self._count(errors=1)
                self.last_error = _why(failure)
                log.warning("pass-through failed; skipping the frame", exc_info=failure)
                continue
            elif not self._failed(failure, frame, out):
                continue
            out.seq, out.t_capture = before if lag else (frame.seq, frame.t_capture)
            out.t_processed = t1
            anchors = self.anchors
            if anchors is not None:
                # A pass-through result (swapping off, models loading or failed) swaps nothing:
                # the live display drops the faces it carries instead of keeping them over it.
                swapping = own and failure is None and out.faces_detected >= 0
                anchor = LiveAnchor.from_result(out, swapping)
                # The anchor buffer is shared with the thread that replaces this one: published
                # under the right to write (revoked by abandon()), so once abandon() returns this
                # thread publishes no anchor, even if it was abandoned just after its check above.
                with self._metering as m:
                    if m is None:
                        return
                    anchors.write_slot().anchor = anchor
                    anchors.publish()
            self.out.publish()  # this thread's own buffer: a replacement gets a fresh one
            with self._metering as m:
                if m is not None:
                    m.process_ms.add((t1 - t0) * 1000.0)
                    m.rate.tick(t1)
                    if own and failure is None:
                        m.swap_rate.tick(t1)
