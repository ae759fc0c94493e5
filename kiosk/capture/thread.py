"""The capture thread: reads the source into triple-buffer slots, reconnects with back-off.

The thread is the only producer of its frame buffer (and, in live mode, of the live display
buffer). A source change never starts a second thread on those buffers: the render thread posts
:meth:`CaptureThread.switch` (it returns at once) and the capture thread itself closes the old
source and opens the new one between two reads. Only a thread stuck in a source call that does
not return (:meth:`CaptureThread.switch_stuck_for`) is replaced, by :meth:`CaptureThread.abandon`
and a fresh thread on fresh buffers, so the stuck one can never publish into what readers read.
Its meters (:class:`CaptureMeters`) are the kind's, handed in by the wiring: the fresh thread counts
on where the stuck or dead one stopped, and an abandoned thread writes them no more
(:class:`kiosk.stats.MeterWriter`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np

from kiosk.capture.live_feed import LiveFeed
from kiosk.capture.sources import Source, SourceError
from kiosk.config import SourceConfig
from kiosk.stats import MeterWriter, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, FrameBGR

log = logging.getLogger(__name__)

_ROTATE_CODES = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}


def new_captured_frame() -> CapturedFrame:
    return CapturedFrame(frame_bgr=np.zeros((1, 1, 3), np.uint8))


@dataclass
class CaptureMeters:
    """The capture threads' meters: created once (by the supervisor) and handed to every capture
    thread the wiring builds, so a replacement counts on. Written by the current thread only
    (through its :class:`~kiosk.stats.MeterWriter`), read by the counters."""

    rate: RateMeter = field(default_factory=RateMeter)  # frames published
    reconnects: int = 0  # source reopened after a failure
    live_errors: int = 0  # frames the live tracker failed on


@dataclass(frozen=True)
class SourceSwitch:
    """What :meth:`CaptureThread.switch` asks for: the settings, the source and the live feed."""

    cfg: SourceConfig
    open_source: Callable[[], Source]
    live: LiveFeed | None


class CaptureThread(threading.Thread):
    """Owns the source. Publishes each frame (mirrored/rotated as configured) without copying
    it again after the transform; failures switch to ``reconnecting`` and retry with
    exponential back-off, never raising out of the thread."""

    #: A posted switch not taken within this long: the thread is stuck in a source call.
    switch_timeout_s = 3.0

    def __init__(
        self,
        cfg: SourceConfig,
        open_source: Callable[[], Source],
        out: TripleBuffer[CapturedFrame],
        stop: threading.Event,
        live: LiveFeed | None = None,
        meters: CaptureMeters | None = None,
    ) -> None:
        """``meters``: the kind's meters to count on (the wiring's); fresh ones when None."""
        super().__init__(name="capture", daemon=True)
        self.cfg = cfg
        self._open_source = open_source
        self.out = out
        self._stop_event = stop
        #: Read by other threads, written only by this one until it is abandoned (then by the next).
        self.meters = meters if meters is not None else CaptureMeters()
        self._metering = MeterWriter(self.meters)
        self.state = "starting"  # starting | running | reconnecting | stopped
        self.last_error = ""
        self.description = ""
        self._scratch: FrameBGR | None = None
        #: Live display (``display.mode: live``): after each frame is published for processing,
        #: the keypoint tracker carries the newest swap onto it and it goes to the display.
        self.live = live
        self.live_last_error = ""
        self.switches = 0  # source switches taken
        self._switch_lock = threading.Lock()
        self._switch: SourceSwitch | None = None  # posted by another thread, taken by this one
        self._switch_posted = 0.0  # perf_counter of the oldest switch not taken yet; 0: none
        self._abandoned = threading.Event()

    # -- called by other threads -------------------------------------------------------------
    def switch(
        self, cfg: SourceConfig, open_source: Callable[[], Source], live: LiveFeed | None = None
    ) -> None:
        """Ask this thread to close its source and open ``open_source()`` with ``cfg`` (and
        ``live`` as its live feed); returns at once. The thread takes it after the read in
        progress (or the open, or the back-off wait); a newer request replaces one not taken."""
        with self._switch_lock:
            self._switch = SourceSwitch(cfg, open_source, live)
            if not self._switch_posted:
                self._switch_posted = time.perf_counter()

    @property
    def switch_pending(self) -> SourceSwitch | None:
        """The switch posted and not taken yet, if any."""
        return self._switch

    def switch_stuck_for(self, now: float) -> float:
        """Seconds a posted switch has waited, once over :attr:`switch_timeout_s` (the thread is
        stuck in a source call that does not return); 0 otherwise."""
        posted = self._switch_posted
        if not posted:
            return 0.0
        waited = now - posted
        return waited if waited > self.switch_timeout_s else 0.0

    def abandon(self) -> None:
        """Give up on this thread (stuck in a source call): it never publishes again and exits,
        closing its source, when (if) the call returns. The caller starts a fresh thread with
        fresh buffers and these meters, which this thread writes no more once this returns."""
        self._metering.revoke()
        self._abandoned.set()
        self._stop_event.set()

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    @property
    def transforms(self) -> bool:
        return self.cfg.mirror or self.cfg.rotate != 0

    # -- the thread ----------------------------------------------------------------------------
    def _take_switch(self) -> bool:
        with self._switch_lock:
            req = self._switch
            if req is None:
                return False
            self.cfg, self._open_source, self.live = req.cfg, req.open_source, req.live
            self._switch, self._switch_posted = None, 0.0  # taken: seen by others after the above
        self._scratch = None
        self.state, self.last_error, self.description = "starting", "", ""
        self.switches += 1
        log.info("capture: switching source")
        return True

    def _wait(self, delay: float) -> None:
        """The back-off wait; a stop or a switch ends it early."""
        end = time.perf_counter() + delay
        while self._switch is None and not self._stop_event.is_set():
            left = end - time.perf_counter()
            if left <= 0:
                break
            self._stop_event.wait(min(left, 0.05))

    def run(self) -> None:
        delay = self.cfg.reconnect_initial_s
        seq = 0
        while not self._stop_event.is_set():
            if self._take_switch():
                delay = self.cfg.reconnect_initial_s
            source: Source | None = None
            try:
                source = self._open_source()
                source.open()
                if self._stop_event.is_set() or self._switch is not None:
                    continue  # stopped or switched while opening (the finally closes it)
                self.description = source.description
                log.info("source open: %s", source.description)
                while not self._stop_event.is_set() and self._switch is None:
                    self._read_one(source, seq)
                    seq += 1
                    if self.state != "running":
                        self.state = "running"
                        self.last_error = ""
                        delay = self.cfg.reconnect_initial_s
            except SourceError as exc:
                self._failed(str(exc))
            except Exception as exc:  # a bug or driver error must not kill capture for the day
                log.exception("capture failed")
                self._failed(f"capture error: {exc}")
            finally:
                if source is not None:
                    source.close()
            if self._stop_event.is_set():
                break
            if self._switch is not None:
                continue  # a source change: open the new one at once, no back-off
            with self._metering as m:
                if m is not None:
                    m.reconnects += 1
            self._wait(delay)
            delay = min(delay * 2.0, self.cfg.reconnect_max_s)
        self.state = "stopped"

    def _failed(self, message: str) -> None:
        if message != self.last_error:
            log.warning("source unavailable: %s; retrying", message)
        self.last_error = message
        self.state = "reconnecting"

    def _read_one(self, source: Source, seq: int) -> None:
        slot = self.out.write_slot()
        if not self.transforms:
            frame = source.read(
                slot.frame_bgr if slot.frame_bgr.ndim == 3 and slot.frame_bgr.size > 3 else None
            )
            slot.frame_bgr = frame
        else:
            raw = source.read(self._scratch)
            self._scratch = raw
            slot.frame_bgr = self._transform(raw, slot.frame_bgr)
        if self._abandoned.is_set():
            return  # given up on during that read: a fresh thread owns the buffers now
        slot.t_capture = time.perf_counter()
        slot.seq = seq
        self.out.publish()
        with self._metering as m:
            if m is not None:
                m.rate.tick(slot.t_capture)
        if self.live is not None:
            self._feed_live(slot.frame_bgr, seq, slot.t_capture)

    def _feed_live(self, frame: FrameBGR, seq: int, t_capture: float) -> None:
        """Track and publish the live frame; a tracker failure costs that frame, never the camera.

        Reading the slot just published is safe: only this thread writes slots, and the inference
        thread only reads it."""
        assert self.live is not None
        try:
            self.live.on_frame(frame, seq, t_capture)
        except Exception as exc:
            with self._metering as m:
                if m is not None:
                    m.live_errors += 1
            if str(exc) != self.live_last_error:
                log.exception("live tracker failed on a frame")
            self.live_last_error = str(exc)

    def _transform(self, raw: FrameBGR, dst: FrameBGR) -> FrameBGR:
        h, w = raw.shape[:2]
        rot = self.cfg.rotate
        shape = (w, h, 3) if rot in (90, 270) else (h, w, 3)
        if dst.shape != shape:
            dst = np.empty(shape, np.uint8)
        if rot == 0:
            cv2.flip(raw, 1, dst=dst)
            return dst
        if self.cfg.mirror:
            cv2.flip(raw, 1, dst=raw)  # the scratch frame is ours; flip in place
        cv2.rotate(raw, _ROTATE_CODES[rot], dst=dst)
        return dst
