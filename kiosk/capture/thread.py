"""The capture thread: reads the source into triple-buffer slots, reconnects with back-off."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import cv2
import numpy as np

from kiosk.capture.sources import Source, SourceError
from kiosk.config import SourceConfig
from kiosk.live import LiveFeed
from kiosk.stats import RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, FrameBGR

log = logging.getLogger(__name__)

_ROTATE_CODES = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}


def new_captured_frame() -> CapturedFrame:
    return CapturedFrame(frame_bgr=np.zeros((1, 1, 3), np.uint8))


class CaptureThread(threading.Thread):
    """Owns the source. Publishes each frame (mirrored/rotated as configured) without copying
    it again after the transform; failures switch to ``reconnecting`` and retry with
    exponential back-off, never raising out of the thread."""

    def __init__(
        self,
        cfg: SourceConfig,
        open_source: Callable[[], Source],
        out: TripleBuffer[CapturedFrame],
        stop: threading.Event,
        live: LiveFeed | None = None,
    ) -> None:
        super().__init__(name="capture", daemon=True)
        self.cfg = cfg
        self._open_source = open_source
        self.out = out
        self._stop_event = stop
        self.rate = RateMeter()
        self.state = "starting"  # starting | running | reconnecting | stopped
        self.last_error = ""
        self.reconnects = 0
        self.description = ""
        self._scratch: FrameBGR | None = None
        #: Live display (``display.mode: live``): after each frame is published for processing,
        #: the keypoint tracker carries the newest swap onto it and it goes to the display.
        self.live = live
        self.live_errors = 0
        self.live_last_error = ""

    @property
    def transforms(self) -> bool:
        return self.cfg.mirror or self.cfg.rotate != 0

    def run(self) -> None:
        delay = self.cfg.reconnect_initial_s
        seq = 0
        while not self._stop_event.is_set():
            source: Source | None = None
            try:
                source = self._open_source()
                source.open()
                self.description = source.description
                log.info("source open: %s", source.description)
                while not self._stop_event.is_set():
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
            self.reconnects += 1
            self._stop_event.wait(delay)
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
        slot.t_capture = time.perf_counter()
        slot.seq = seq
        self.out.publish()
        self.rate.tick(slot.t_capture)
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
            self.live_errors += 1
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
