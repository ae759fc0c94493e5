"""The capture thread's part of live mode (:class:`LiveFeed`): take the newest result's anchor, carry
its faces onto each camera frame with :class:`~kiosk.capture.live.LiveTracker`, publish the frame.

The tracker is the capture thread's alone (it is replaced after a tracker error); other threads read
its figures only from :attr:`LiveFeed.figures`, a frozen snapshot the capture thread publishes
whole every :data:`FIGURES_EVERY_S`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from kiosk.capture.live import AnchorSlot, LiveFrame, LiveOptions, LiveTracker
from kiosk.sync import TripleBuffer
from kiosk.types import FrameBGR

#: How often the capture thread publishes the tracker's figures (a snapshot costs about 0.5 ms).
FIGURES_EVERY_S = 0.25


@dataclass(frozen=True)
class LiveFigures:
    """The live tracker's figures at one moment, for the stats, the overlay and the metrics."""

    stats: dict[str, Any]
    carry_err_p95: float | None
    stale_err_p95: float | None
    real_face_drops: int

    @classmethod
    def of(cls, tracker: LiveTracker) -> LiveFigures:
        return cls(
            stats=tracker.stats(),
            carry_err_p95=tracker.counts.carry_error_px.percentile(95),
            stale_err_p95=tracker.counts.stale_error_px.percentile(95),
            real_face_drops=tracker.counts.dropped_total,
        )


class LiveFeed:
    """The capture thread's part of live mode: take new anchors, track, publish the live frame."""

    def __init__(
        self,
        anchors: TripleBuffer[AnchorSlot],
        out: TripleBuffer[LiveFrame],
        opts: LiveOptions | None = None,
    ) -> None:
        self.anchors = anchors
        self.out = out
        self._tracker = LiveTracker(opts)
        #: The tracker's figures, replaced whole by the capture thread (read by any thread).
        self.figures = LiveFigures.of(self._tracker)
        self._figures_at = time.monotonic()

    @property
    def tracker(self) -> LiveTracker:
        """The capture thread's tracker (other threads read :attr:`figures` instead)."""
        return self._tracker

    def on_frame(self, frame_bgr: FrameBGR, seq: int, t_capture: float) -> None:
        """Publish ``frame_bgr`` for the display with the faces carried onto it.

        If the tracker raises, the frame is still published (with the real faces: no swap on it)
        and the tracker starts afresh, so the screen never freezes on a tracker bug; the error is
        raised again afterwards for the capture thread to count and log."""
        slot = self.anchors.read()
        if slot is not None and slot.anchor is not None:
            self._tracker.submit(slot.anchor)
        tracker = self._tracker
        live = self.out.write_slot()
        error: Exception | None = None
        try:
            tracker.update(frame_bgr, seq, t_capture)
            tracker.carried_faces(live.faces)
        except Exception as exc:
            error = exc
            live.faces.clear()
            self._tracker = LiveTracker(tracker.opts)
        if live.frame_bgr.shape != frame_bgr.shape:
            live.frame_bgr = np.empty_like(frame_bgr)
        np.copyto(live.frame_bgr, frame_bgr)
        live.seq, live.t_capture = seq, t_capture
        anchor = tracker.anchor if error is None else None
        live.anchor_seq = anchor.seq if anchor is not None else -1
        live.anchor_t_capture = anchor.t_capture if anchor is not None else 0.0
        states = tracker.face_states if error is None else []
        live.real_reasons = tuple(why for why in states if why)
        live.faces_untrusted = len(live.real_reasons)
        self.out.publish()
        now = time.monotonic()
        if now - self._figures_at >= FIGURES_EVERY_S:
            self.figures, self._figures_at = LiveFigures.of(self._tracker), now
        if error is not None:
            raise error
