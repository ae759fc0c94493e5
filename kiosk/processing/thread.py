"""The inference thread: newest captured frame → processor → processing triple buffer.

Errors climb a ladder (ARCHITECTURE.md, "Ownership and failure"):

1. A stage call that raises costs that frame only: nothing is published for it, so the screen
   keeps the last good result (its frame and its crops) instead of flashing the visitor's face.
2. ``rebuild_after_errors`` failures in a row, or half of the last :data:`ERROR_WINDOW` calls,
   drop the stage and rebuild it; rebuilds back off exponentially (``restart_initial_s`` doubling
   up to ``restart_max_s``), and the back-off resets only after a stage ran :data:`HEALTHY_S`.
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

Every field of the thread's own state (``_processor``, ``_fallback``, ``_restart_delay``, the build
bookkeeping) is written by the inference thread only. A build runs on a short-lived loader thread
that hands its result over through one :class:`_BuildJob` object (an atomic reference plus an
event); other threads ask for a rebuild through a queue (:meth:`reconfigure`). Its meters
(:class:`InferenceMeters`) are the kind's, handed in by the wiring and shared with the threads
before and after it; it writes them only until it is abandoned (:class:`kiosk.stats.MeterWriter`).
"""

from __future__ import annotations

import gc
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kiosk.booth.controls import ControlState
from kiosk.capture.live import AnchorSlot, LiveAnchor
from kiosk.processing.stage import PassThrough, Processor, StageUnavailable
from kiosk.stats import LatencyRecorder, MeterWriter, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult
from kiosk.util import heartbeat, limits
from kiosk.util.errors import one_line
from kiosk.util.heartbeat import Bounds, Heartbeat

log = logging.getLogger(__name__)

#: The window of recent calls for the failure-rate rule (rebuild when half of them failed).
ERROR_WINDOW = 20
#: A stage that ran this long resets the rebuild back-off.
HEALTHY_S = 30.0
#: How often watched model files are stat()ed while a failed build waits for its retry.
WATCH_INTERVAL_S = 0.25
#: A new stage's first frames get ``load_stall_s`` instead of ``stall_s`` between two beats (lazy
#: engine builds; each model's first calls get it too, see :mod:`kiosk.util.heartbeat`).
WARM_CALLS = 3


def new_swap_result() -> SwapResult:
    return SwapResult(frame_bgr=np.zeros((1, 1, 3), np.uint8))


@dataclass(frozen=True)
class ErrorPolicy:
    """The ladder's bounds (``processing.*`` in the config)."""

    rebuild_after_errors: int = 5
    stall_s: float = 5.0
    load_stall_s: float = 120.0

    @classmethod
    def of(cls, proc: object) -> ErrorPolicy:
        return cls(
            rebuild_after_errors=int(getattr(proc, "rebuild_after_errors", 5)),
            stall_s=float(getattr(proc, "stall_s", 5.0)),
            load_stall_s=float(getattr(proc, "load_stall_s", 120.0)),
        )

    @property
    def bounds(self) -> Bounds:
        return Bounds(stall_s=self.stall_s, load_stall_s=self.load_stall_s)


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


class _BuildJob:
    """One build on a loader thread; ``result``/``error`` are final once ``done`` is set."""

    def __init__(self, build: Callable[[], Processor], generation: int) -> None:
        self.generation = generation
        self.started = time.perf_counter()
        self.result: Processor | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(build,), name="processor-loader", daemon=True)
        self.thread.start()

    def _run(self, build: Callable[[], Processor]) -> None:
        try:
            self.result = build()
        except BaseException as exc:  # handed to the inference thread, which logs and retries
            self.error = exc
        finally:
            self.done.set()


def _file_signature(paths: tuple[str, ...]) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _why(exc: BaseException) -> str:
    """One line for the staff notice and the stats: a resource limit (out of memory or descriptors)
    named with its fix, else the exception's first line with its type."""
    return limits.limit_problem(exc, fds=0) or one_line(exc, 160, with_type=True)


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
        self._inp = inp
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
        self._requests: queue.SimpleQueue[tuple[Callable[[], Processor], ErrorPolicy | None]] = (
            queue.SimpleQueue()
        )
        # This thread's own state (single writer: run()):
        self._build = build_processor
        self._generation = 0
        self._restart_initial_s = restart_initial_s
        self._restart_max_s = restart_max_s
        self._restart_delay = restart_initial_s
        self._processor: Processor | None = None
        self._provider: tuple[str, str | None, bool] = ("", None, False)  # see provider_info
        self._anchors = anchors
        #: New input and anchor buffers asked for by another thread (:meth:`rewire`), taken by run().
        self._wiring: queue.SimpleQueue[
            tuple[TripleBuffer[CapturedFrame], TripleBuffer[AnchorSlot] | None]
        ] = queue.SimpleQueue()
        self._loaders: list[threading.Thread] = []  # build threads, joined at shutdown
        self._fallback = PassThrough("loading the face models…")
        self._bypass = PassThrough()
        self._job: _BuildJob | None = None
        self._retry_at = 0.0  # perf_counter of the next build attempt; 0: none scheduled
        self._watch: tuple[str, ...] = ()
        self._watch_sig: tuple[tuple[int, int, int] | None, ...] = ()
        self._next_watch = 0.0
        self._consecutive = 0
        self._recent: deque[bool] = deque(maxlen=ERROR_WINDOW)
        self._installed_at = 0.0
        self._logged_burst = False
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
        return self._inp

    @property
    def anchors(self) -> TripleBuffer[AnchorSlot] | None:
        """Live display: each result's crops also go, as an immutable snapshot, to the capture
        thread's keypoint tracker through this buffer (None: synced display, nothing extra is
        copied). Replaced only by this thread, see :meth:`rewire`."""
        return self._anchors

    def rewire(self, inp: TripleBuffer[CapturedFrame], anchors: TripleBuffer[AnchorSlot] | None) -> None:
        """Read frames from ``inp`` and hand live anchors to ``anchors`` from the next iteration on
        (a fresh capture thread, a display-mode switch). Other threads only ask: the request goes
        through a queue and this thread applies it, so each buffer reference has one writer. Before
        the thread runs, the change is applied at once."""
        if not self.is_alive():
            self._inp, self._anchors = inp, anchors
            return
        self._wiring.put((inp, anchors))

    def _take_wiring(self) -> None:
        while True:
            try:
                self._inp, self._anchors = self._wiring.get_nowait()
            except queue.Empty:
                return

    def abandon(self) -> None:
        """Give up on this thread (its call hangs): it never publishes again and exits when (if)
        the call returns. The caller starts a fresh thread with a fresh output buffer; the live
        anchor buffer is shared with the fresh thread, which becomes its producer, and so are the
        meters: this thread writes them no more once this returns, even if its call returns."""
        self._metering.revoke()
        self._abandoned.set()
        anchors = self.anchors
        if anchors is not None:
            anchors.release_producer()

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def loader_alive(self) -> bool:
        return any(t.is_alive() for t in self._loaders)

    def join_loaders(self, timeout_s: float) -> bool:
        """After stop: join the loader threads (they check the stop event between builds).
        Returns False if a loader is still inside a build after ``timeout_s``."""
        deadline = time.perf_counter() + timeout_s
        for t in list(self._loaders):
            t.join(max(0.0, deadline - time.perf_counter()))
        return not self.loader_alive()

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
        self._requests.put((build_processor, policy))

    # -- the thread's own state ---------------------------------------------------------------
    def _next_delay(self) -> float:
        delay = self._restart_delay
        self._restart_delay = min(self._restart_delay * 2.0, self._restart_max_s)
        return delay

    def _start_build(self) -> None:
        self._retry_at = 0.0
        self._job = _BuildJob(self._build, self._generation)
        self._loaders = [t for t in self._loaders if t.is_alive()] + [self._job.thread]

    def _schedule_build(self, delay_s: float) -> None:
        self._retry_at = time.perf_counter() + delay_s

    def _housekeeping(self, now: float) -> None:
        requested = False
        while True:
            try:
                self._build, policy = self._requests.get_nowait()
            except queue.Empty:
                break
            if policy is not None:
                self.policy = policy
                self.heartbeat.bounds = policy.bounds
            requested = True
        if requested:
            self._generation += 1
            self._restart_delay = self._restart_initial_s
            if self._job is None:
                self._start_build()
            # else: the running build is stale; a new one starts when it ends
        job = self._job
        if job is not None:
            if job.done.is_set():
                self._job = None
                if job.generation != self._generation:
                    self._start_build()
                elif job.error is None and job.result is not None:
                    self._install(job.result, now)
                else:
                    self._build_failed(job.error or RuntimeError("build returned nothing"))
            elif now - job.started > self.policy.load_stall_s:
                self._job = None  # its thread is left to finish or hang; its result is ignored
                self._build_failed(
                    TimeoutError(f"building the stage took over {self.policy.load_stall_s:g} s")
                )
            return
        if self._retry_at:
            if now >= self._retry_at:
                self._start_build()
            elif self._watch and now >= self._next_watch:
                self._next_watch = now + WATCH_INTERVAL_S
                if _file_signature(self._watch) != self._watch_sig:
                    log.info("a model file changed: rebuilding the processing stage now")
                    self._start_build()

    def _install(self, processor: Processor, now: float) -> None:
        self._set_processor(processor)
        self.processor_name = processor.name
        self.problem = ""
        self._watch = ()
        self._consecutive = 0
        self._recent.clear()
        self.heartbeat.warm(WARM_CALLS)
        self.heartbeat.last_frame_s = 0.0  # how slow the previous stage was says nothing of this one
        self._installed_at = now
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
        if isinstance(exc, StageUnavailable):
            why = exc.notice
            self._watch = exc.watch
        else:
            why = f"face pipeline failed to start: {_why(exc)}"
            self._watch = ()
            log.error("processing stage failed to start", exc_info=exc)
        self._watch_sig = _file_signature(self._watch)
        self.last_error = why
        delay = self._next_delay()
        if self._processor is not None:
            self.problem = f"keeping the previous face swap: {why}; retrying"
        else:
            self._fallback = PassThrough(f"{why}; retrying")
            self.processor_name = self._fallback.name
        log.warning("%s (retry in %.1f s or when a model file changes)", why, delay)
        self._schedule_build(delay)

    def _succeeded(self, now: float) -> None:
        self.ok_calls += 1
        self._consecutive = 0
        self._recent.append(False)
        self._logged_burst = False
        if self._restart_delay != self._restart_initial_s and now - self._installed_at > HEALTHY_S:
            self._restart_delay = self._restart_initial_s

    def _failed(self, exc: Exception, frame: CapturedFrame, out: SwapResult) -> bool:
        """Count a failed call of the installed stage; True if ``out`` now holds a result to publish."""
        self._count(errors=1)
        self.last_error = _why(exc)
        self._consecutive += 1
        self._recent.append(True)
        if not self._logged_burst:
            log.warning("processing stage raised; skipping the frame", exc_info=exc)
            self._logged_burst = True
        limit = self.policy.rebuild_after_errors
        if self._consecutive < limit and (
            len(self._recent) < ERROR_WINDOW or sum(self._recent) * 2 < ERROR_WINDOW
        ):
            return False  # transient: the screen keeps the last good result
        self._count(restarts=1)
        self._set_processor(None)
        self.heartbeat.last_frame_s = 0.0  # the pass-through meanwhile is not slow
        delay = self._next_delay()
        self._fallback = PassThrough(
            f"face swap paused after repeated errors ({self.last_error}); rebuilding in {delay:.1f} s"
        )
        self.processor_name = self._fallback.name
        log.error("processing stage failed %d times: rebuilding it in %.1f s", self._consecutive, delay)
        self._consecutive = 0
        self._recent.clear()
        self._watch = ()
        self._schedule_build(delay)
        self._fallback.process(frame.frame_bgr, out)
        return True

    def run(self) -> None:
        heartbeat.bind(self.heartbeat)  # the stage's model calls tick it
        self._start_build()
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
                anchors.write_slot().anchor = LiveAnchor.from_result(out, swapping)
                anchors.publish()
            self.out.publish()
            with self._metering as m:
                if m is not None:
                    m.process_ms.add((t1 - t0) * 1000.0)
                    m.rate.tick(t1)
                    if own and failure is None:
                        m.swap_rate.tick(t1)
