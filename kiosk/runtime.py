"""The inference thread: newest captured frame → processor → processing triple buffer.

The thread never gives up: while the processor is being built (models load for seconds),
or after it raised, frames pass through unchanged with a notice, and the processing stage
is rebuilt with back-off by a short-lived loader thread.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from kiosk.booth.controls import ControlState
from kiosk.processing import PassThrough, Processor
from kiosk.stats import LatencyRecorder, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult

log = logging.getLogger(__name__)


def new_swap_result() -> SwapResult:
    return SwapResult(frame_bgr=np.zeros((1, 1, 3), np.uint8))


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
    ) -> None:
        super().__init__(name="inference", daemon=True)
        self._build = build_processor
        self.inp = inp
        self.out = out
        self._stop_event = stop
        self.rate = RateMeter()
        self.process_ms = LatencyRecorder(1024)
        self.errors = 0
        self.restarts = 0
        self.last_error = ""
        self._restart_initial_s = restart_initial_s
        self._restart_max_s = restart_max_s
        self._restart_delay = restart_initial_s
        self._processor: Processor | None = None  # set by the loader thread
        self._installed_generation = -1
        self._build_generation = 0  # bumped by reconfigure(); the loader rebuilds until it is current
        self.controls = controls
        self._bypass = PassThrough()
        self._loading = threading.Lock()
        self._loaders: list[threading.Thread] = []
        self._fallback = PassThrough("loading the face models…")
        self._load_async(delay_s=0.0)

    @property
    def processor_name(self) -> str:
        p = self._processor
        return p.name if p is not None else self._fallback.name

    def provider_info(self) -> tuple[str, str | None, bool]:
        """(ONNX Runtime provider the models run on, GPU provider requested or None, whether that GPU
        provider fell back to the CPU) for the installed stage; ("", None, False) while no stage with
        models is installed (loading, pass-through, after an error)."""
        pipe = getattr(self._processor, "pipe", None)
        if pipe is None:
            return "", None, False
        return str(pipe.provider), pipe.gpu_requested, bool(pipe.gpu_fallback)

    def _load_async(self, delay_s: float) -> None:
        """Build the processor on a short-lived thread, retrying with back-off until it works."""
        if not self._loading.acquire(blocking=False):
            return  # a loader is already at work; it will install a processor

        def load() -> None:
            try:
                delay = delay_s
                while not self._stop_event.wait(delay):
                    generation = self._build_generation
                    try:
                        processor = self._build()
                    except Exception as exc:
                        log.exception("processing stage failed to start")
                        self.last_error = f"face pipeline failed to start: {exc}"
                        self._fallback = PassThrough(f"{self.last_error}; retrying")
                        delay = self._next_delay()
                        continue
                    if generation != self._build_generation:
                        delay = 0.0  # reconfigured while building: build again
                        continue
                    self._processor = processor
                    self._installed_generation = generation
                    log.info("processing stage ready: %s", processor.name)
                    break
            finally:
                self._loading.release()
            if self._installed_generation != self._build_generation and not self._stop_event.is_set():
                self._load_async(0.0)  # reconfigured just as this build finished

        loader = threading.Thread(target=load, name="processor-loader", daemon=True)
        self._loaders = [t for t in self._loaders if t.is_alive()] + [loader]
        loader.start()

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

    def reconfigure(self, build_processor: Callable[[], Processor]) -> None:
        """Swap in a new processing stage built in the background; frames keep flowing through
        the old one until the new one is ready."""
        self._build = build_processor
        self._build_generation += 1
        self._restart_delay = self._restart_initial_s
        self._load_async(0.0)

    def _next_delay(self) -> float:
        delay = self._restart_delay
        self._restart_delay = min(self._restart_delay * 2.0, self._restart_max_s)
        return delay

    def run(self) -> None:
        while not self._stop_event.is_set():
            if not self.inp.wait(0.05):
                continue
            frame = self.inp.read()
            if frame is None:
                continue
            out = self.out.write_slot()
            if out.frame_bgr.shape != frame.frame_bgr.shape:
                out.frame_bgr = np.empty_like(frame.frame_bgr)
            t0 = time.perf_counter()
            processor = self._processor
            if self.controls is not None and not self.controls.swap_enabled:
                processor = None
                stage: Processor = self._bypass  # staff turned swapping off: the visitor's real face
            else:
                stage = processor or self._fallback
            try:
                stage.process(frame.frame_bgr, out)
            except Exception as exc:
                self._on_error(processor, exc)
                PassThrough(
                    f"face swap paused after an error ({exc.__class__.__name__}); restarting"
                ).process(frame.frame_bgr, out)
            else:
                if processor is not None:
                    self._restart_delay = self._restart_initial_s
            t1 = time.perf_counter()
            self.process_ms.add((t1 - t0) * 1000.0)
            out.seq = frame.seq
            out.t_capture = frame.t_capture
            out.t_processed = t1
            self.out.publish()
            self.rate.tick(t1)

    def _on_error(self, processor: Processor | None, exc: Exception) -> None:
        self.errors += 1
        self.last_error = f"{exc.__class__.__name__}: {exc}"
        log.exception("processing stage raised; passing frames through and restarting it")
        if processor is not None and processor is self._processor:
            self._processor = None
            self._fallback = PassThrough("face swap paused after an error; restarting")
            self.restarts += 1
            self._load_async(self._next_delay())
