"""Pipelined processing (``processing.pipelined``): detect frame N+1 while frame N's faces are swapped.

The processor's thread (the kiosk's inference thread) hands each new frame to a detection worker
and swaps the faces of the frame before it, whose detection the worker finished meanwhile. The
worker has its own face search (:class:`~kiosk.processing.face_search.FaceFinder`): its own
detector session(s) and the face tracker, so the tracker sees every frame in order. Frame rate
becomes ``1 / max(detect, swap)`` instead of ``1 / (detect + swap)`` where the two stages can run
at once (two free cores, or a GPU with one stream per session); the price is one frame of
latency: a call returns the result of the previous frame (:attr:`PipelinedDetection.result_lag`
says so; the inference thread labels the result with that frame's sequence number and capture
time).

A failure of the detector in the worker is raised by :meth:`DetectionJob.wait` on the
processor's thread, as an error of that frame; a worker that does not answer within
``timeout_s`` is an error too, never a hang.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref

import numpy as np

from kiosk.config import KioskConfig
from kiosk.processing.face_search import FaceFinder
from kiosk.processing.models import open_detector
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.timing import Detection
from kiosk.types import FrameBGR

log = logging.getLogger(__name__)

#: Seconds :meth:`DetectionJob.wait` waits for the worker before it calls the frame failed.
WAIT_TIMEOUT_S = 30.0
#: A frame left in flight longer than this (swapping was paused) is not shown any more.
STALE_S = 1.0


class DetectionJob:
    """One frame handed to the worker: its private copy, and the detection once done."""

    def __init__(self, frame_bgr: FrameBGR, t: float) -> None:
        self.frame_bgr = frame_bgr
        self.t = t
        self.result: Detection | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.submitted = time.monotonic()

    def wait(self, timeout_s: float = WAIT_TIMEOUT_S) -> Detection:
        """The detection; re-raises the worker's exception for this frame."""
        if not self.done.wait(timeout_s):
            raise TimeoutError(f"face detection worker gave no answer in {timeout_s:.0f} s")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def _worker(jobs: queue.Queue[DetectionJob | None], finder: FaceFinder) -> None:
    """The worker thread's loop (a function, so the thread keeps no reference to its owner)."""
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            job.result = finder.find_faces(job.frame_bgr, job.t)
        except BaseException as exc:  # handed to the frame's waiter, the worker carries on
            job.error = exc
        finally:
            job.done.set()


def _stop(jobs: queue.Queue[DetectionJob | None], thread: threading.Thread) -> None:
    jobs.put(None)
    if thread is not threading.current_thread():
        thread.join(timeout=5.0)


class PipelinedDetection:
    """The detection worker of a pipelined processor.

    ``finder`` is the worker's face search (its own detector session, and the tracker when tracking
    is on): only :meth:`FaceFinder.find_faces` is called, on the worker thread only.
    """

    def __init__(self, finder: FaceFinder, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        self.finder = finder
        self.timeout_s = float(timeout_s)
        #: 1 when the last :meth:`next` returned the previous frame, 0 for the first frame.
        self.result_lag = 0
        self._jobs: queue.Queue[DetectionJob | None] = queue.Queue()
        self._buffers: list[FrameBGR] = [np.zeros((1, 1, 3), np.uint8), np.zeros((1, 1, 3), np.uint8)]
        self._turn = 0
        self._pending: DetectionJob | None = None
        self._thread = threading.Thread(
            target=_worker, args=(self._jobs, finder), name="face-detection", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, _stop, self._jobs, self._thread)

    @classmethod
    def from_config(cls, cfg: KioskConfig, pipe: SwapPipeline) -> PipelinedDetection:
        """A worker with a second session of the configured detector, tracking as ``pipe``'s."""
        finder = FaceFinder(
            open_detector(cfg),
            max_faces=pipe.max_faces,
            face_policy=pipe.face_policy,
            tracking=pipe.tracking_options,
        )
        if cfg.models.providers.warmup:
            finder.warm_up()
        return cls(finder)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def next(self, frame_bgr: FrameBGR, t: float | None = None) -> DetectionJob:
        """Hand in a new frame (copied; detection starts on the worker) and get the job to swap
        now: the previous frame's (``result_lag`` 1), or this frame's when nothing was in flight
        (the first frame, ``result_lag`` 0; the next call returns it again, so the pipeline fills
        without showing an unswapped frame). Its ``frame_bgr`` stays valid until the next call but
        one; :meth:`DetectionJob.wait` gives its faces."""
        if not self._thread.is_alive():
            raise RuntimeError("the face detection worker has stopped")
        buf = self._buffers[self._turn]
        if buf.shape != frame_bgr.shape:
            buf = self._buffers[self._turn] = np.empty_like(frame_bgr)
        np.copyto(buf, frame_bgr)
        self._turn ^= 1
        job = DetectionJob(buf, time.perf_counter() if t is None else t)
        self._jobs.put(job)
        prev, self._pending = self._pending, job
        if prev is not None and job.submitted - prev.submitted > STALE_S:
            prev = None  # handed in long ago (swapping was off meanwhile): start afresh
        if prev is None:
            # The first frame: swapped now (waiting for its detection) and once more by the next
            # call, from when on every call swaps the frame before the one it hands in.
            self.result_lag = 0
            return job
        self.result_lag = 1
        return prev

    def drain(self) -> DetectionJob | None:
        """The frame still in flight (its detection running or done), and forget it: the caller
        swaps it to flush the pipeline (end of a clip). None when nothing is in flight."""
        prev, self._pending = self._pending, None
        return prev

    def close(self) -> None:
        """Stop the worker thread (also done when this object is garbage-collected)."""
        self._pending = None
        self._finalizer()


def open_pipelined(cfg: KioskConfig, pipe: SwapPipeline) -> PipelinedDetection | None:
    """The detection worker for ``pipe`` when ``processing.pipelined`` is on, else None. Raises
    :class:`~kiosk.inference.errors.ModelError` like the pipeline's own model loading."""
    return PipelinedDetection.from_config(cfg, pipe) if cfg.processing.pipelined else None
