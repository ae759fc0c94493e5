"""What is on screen, and the render side's meters: which picture the frame shows (synced: the newest
processed result; live: the newest tracked camera frame; auto: whichever
:class:`~kiosk.app.display_mode.AutoMode` picks from the rates), uploading it when a new one came,
and counting what the visitor saw (rendered frames, frames with swapped faces, capture-to-display
latency, the share of faces shown swapped per mode).

:class:`Screen` owns that state; only the render loop writes it (the counters read it).
"""

from __future__ import annotations

from typing import Any

from kiosk.app.display_mode import AutoMode, ScreenShare
from kiosk.capture.live import LiveFrame
from kiosk.capture.thread import CaptureThread
from kiosk.processing.thread import InferenceThread
from kiosk.stats import LatencyRecorder, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import SwapResult

#: No processed frame for this long while capture runs → say so on screen.
STALL_S = 3.0

#: (capture time of a new picture, capture time of the frame its faces were swapped on, or None).
Shown = tuple[float, float | None]


class Screen:
    """See the module docstring."""

    def __init__(self) -> None:
        self.render_rate = RateMeter()
        #: Rendered frames whose picture carried at least one swapped face (what the visitor saw).
        self.frames_with_faces = 0
        #: Processing results taken for the screen, and those with at least one swapped face.
        self.results_shown = 0
        self.results_swapping = 0
        self.results_with_faces = 0
        self.latency_ms = LatencyRecorder()  # capture of the picture on screen → display
        self.face_age_ms = LatencyRecorder()  # capture of the frame the swap used → display
        #: display.mode auto: which picture is shown; the share of the screen showing the swap.
        self.auto_mode = AutoMode()
        self.screen_share = ScreenShare()
        self.last_notice = ""  # the newest result's notice
        self.t_last_result = 0.0  # when the newest result was taken (the loop's clock); 0: none yet
        #: (frame_bgr, crops) last uploaded: what a keepsake copies.
        self.shown_picture: tuple[Any, Any] | None = None
        self._faces_on_screen = False
        self._on_screen: tuple[int, int, tuple[str, ...]] = (0, 0, ())  # swapped, fresh, real reasons
        self._shown_mode = ""

    def choose_mode(
        self, now: float, live: bool, auto: bool, cap: CaptureThread, inf: InferenceThread
    ) -> str:
        """The mode of this frame: the configured one (``live``), or for ``auto`` the chooser's
        (from the capture and processing rates over the last second)."""
        if not auto:
            return "live" if live else "synced"
        # the swapping stage's own rate: a pass-through (models loading) runs at camera rate
        processing = inf.meters.swap_rate.fps_at(now) if inf.is_alive() and not inf.hung_for(now) else 0.0
        return self.auto_mode.update(now, cap.meters.rate.fps_at(now), processing)

    def take(
        self, result: SwapResult | None, mode: str, auto: bool, frozen: bool, renderer: Any, t: float
    ) -> None:
        """Count a new processed ``result`` (taken at ``t``); in synced mode it goes on screen at
        once, unless a keepsake's still is ``frozen`` there."""
        if result is None:
            return
        if mode == "synced" and not auto and not frozen:
            faces = None if result.faces_pasted else result.faces
            renderer.set_frame(result.frame_bgr, faces)
            self.shown_picture = (result.frame_bgr, faces)
        self.last_notice = result.notice
        self.t_last_result = t
        self.results_shown += 1
        self.results_swapping += result.faces_detected >= 0  # from the swap stage (not a pass-through)
        self.results_with_faces += bool(result.faces)

    def picture(
        self,
        renderer: Any,
        result: SwapResult | None,
        mode: str,
        auto: bool,
        results: TripleBuffer[SwapResult],
        live_frames: TripleBuffer[LiveFrame],
    ) -> Shown | None:
        """Upload the picture of ``mode`` if a new one came (synced: ``result``; live: the live
        frame); return (capture time of the new picture, capture time of the frame its faces were
        swapped on, or None without faces), None when nothing is new."""
        shown = self._picture(renderer, result, mode, auto, results, live_frames)
        if shown is not None:  # a new picture: whether it carries swapped faces
            self._faces_on_screen = shown[1] is not None
        return shown

    def _picture(
        self,
        renderer: Any,
        result: SwapResult | None,
        mode: str,
        auto: bool,
        results: TripleBuffer[SwapResult],
        live_frames: TripleBuffer[LiveFrame],
    ) -> Shown | None:
        switched = mode != self._shown_mode
        self._shown_mode = mode
        if mode == "synced":
            if result is None and switched and results.read_generation:
                result = results.current()  # back from live: the newest result at once
            if result is None:
                return None
            if auto or switched:
                faces = None if result.faces_pasted else result.faces
                renderer.set_frame(result.frame_bgr, faces)
                self.shown_picture = (result.frame_bgr, faces)
            n = len(result.faces)
            real = max(result.faces_detected - n, 0) if result.faces_detected >= 0 else 0
            self._on_screen = (n, n, ("unswapped",) * real)
            return result.t_capture, (result.t_capture if result.faces else None)
        frame = live_frames.read()
        if frame is None:
            return None
        renderer.set_frame(frame.frame_bgr, frame.faces)
        self.shown_picture = (frame.frame_bgr, frame.faces)
        fresh = len(frame.faces) if frame.anchor_seq == frame.seq else 0
        self._on_screen = (len(frame.faces), fresh, frame.real_reasons)
        return frame.t_capture, (frame.anchor_t_capture if frame.faces else None)

    @property
    def faces_on_screen(self) -> bool:
        """Whether the picture on screen (the newest one uploaded) carries a swapped face."""
        return self._faces_on_screen

    def presented(self, t_shown: float, mode: str, shown: Shown | None) -> None:
        """A frame of ``mode`` went to the display at ``t_shown``, with the new picture ``shown``
        (None: the same as before)."""
        self.render_rate.tick(t_shown)
        swapped, fresh, real = self._on_screen
        self.screen_share.add(mode, swapped, fresh, real)
        if self._faces_on_screen:
            self.frames_with_faces += 1
        if shown is not None:
            self.latency_ms.add((t_shown - shown[0]) * 1000.0)
            if shown[1] is not None:
                self.face_age_ms.add((t_shown - shown[1]) * 1000.0)

    def stalled_s(self, now: float, capture_state: str) -> float:
        """Seconds without a processed frame while the source runs, once over STALL_S; else 0."""
        if capture_state != "running" or not self.t_last_result:
            return 0.0
        gap = now - self.t_last_result
        return gap if gap > STALL_S else 0.0
