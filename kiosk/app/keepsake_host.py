"""The kiosk's side of keepsakes (``keepsake.enabled``): the service (web server, store, printing)
while the kiosk runs, its on-screen flow (:mod:`kiosk.keepsake.flow`), and what the flow puts on
screen each frame (the countdown, the frozen still, the QR code).

:class:`KeepsakeHost` owns the three; the render loop steps it once a frame and draws the booth view
it adjusts (:meth:`KeepsakeHost.with_keepsake`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kiosk.booth.session import BoothSession
from kiosk.config.schema import KeepsakeConfig, KioskConfig
from kiosk.keepsake.flow import Phase
from kiosk.keepsake.store import STORE_FULL

if TYPE_CHECKING:
    from kiosk.keepsake.clip import ClipFrame, ClipMaker
    from kiosk.keepsake.flow import KeepsakeFlow, Saved
    from kiosk.keepsake.service import KeepsakeService
    from kiosk.keepsake.still import Picture

log = logging.getLogger(__name__)

#: Phases that offer a photo (a countdown towards one, a QR code): ended while the server is down.
_OFFERING = (Phase.CONSENT, Phase.COUNTDOWN, Phase.SHOW)

#: How long the staff line says why a print-again printed nothing.
PRINT_AGAIN_LINE_S = 10.0

#: (frame_bgr, crops) of the picture on screen, as last uploaded; None before the first.
ShownPicture = Callable[[], "tuple[Any, Any] | None"]


class KeepsakeHost:
    """See the module docstring. ``session``: the booth session (it takes the keepsake key while the
    server serves); ``shown``: the picture on screen, copied for a keepsake."""

    def __init__(self, session: BoothSession, shown: ShownPicture) -> None:
        self._session = session
        self._shown = shown
        self.service: KeepsakeService | None = None  # keepsake.enabled, while the kiosk runs
        #: The keepsakes' on-screen flow (:mod:`kiosk.keepsake.flow`) while their service runs.
        self.flow: KeepsakeFlow | None = None
        self.view: Any = None  # the last frame's KeepsakeView (None: idle)
        self._still_shown: tuple[int, Any] = (0, None)  # (still serial, renderer) last uploaded
        self._resolve: Callable[[str], Any] = str
        self._brand_keys: tuple[str | None, str] = (None, "")  # (frame, frame_text) loaded
        self._print_problem = ("", 0.0)  # why the last print-again printed nothing, and when
        #: keepsake.clip: the ring of the screen's last seconds and the clips' builder (None: off).
        self.clips: ClipMaker | None = None
        self.clip_counts: Any = None  # the clips' totals (ClipCounts), kept over a reload
        self._clip_frames: list[ClipFrame] = []  # the ring's frames when the last still was taken

    def open(self, cfg: KioskConfig) -> None:
        """Start the service and its on-screen flow (the server starts in the background: the key
        is taken, and the banner says photos are kept, only while it serves)."""
        if not cfg.keepsake.enabled:
            return
        from kiosk.keepsake.flow import FlowOptions, KeepsakeFlow
        from kiosk.keepsake.service import open_keepsakes  # aiohttp: only for a booth that shares photos

        self.service = open_keepsakes(cfg)
        self.flow = KeepsakeFlow(FlowOptions.of(cfg.keepsake), self._keep)
        self._resolve = cfg.resolve
        self._load_brand(cfg.keepsake)
        self._set_clip(cfg.keepsake.clip)

    def _set_clip(self, on: bool) -> None:
        """``keepsake.clip``: start the ring (when the encoder is there: else one line) or drop it."""
        if on and self.clips is None and self.flow is not None:
            from kiosk.keepsake.clip import ClipCounts, ClipMaker, encoder_problem

            problem = encoder_problem()
            if problem:
                log.error("%s", problem)
                return
            self.clip_counts = self.clip_counts or ClipCounts()
            self.clips = ClipMaker(counts=self.clip_counts)
        elif not on and self.clips is not None:
            self.clips.close()
            self.clips = None

    def _load_brand(self, k: KeepsakeConfig) -> None:
        """The brand frame (``keepsake.frame``, ``frame_text``): one line when the file is unusable."""
        from kiosk.keepsake.brand import load_frame

        if self.flow is not None:
            self.flow.brand = load_frame(k.frame, k.frame_text, self._resolve)
            self._brand_keys = (k.frame, k.frame_text)

    def apply(self, new: KeepsakeConfig) -> None:
        """A reloaded config: limits, page text and printing are read where used; the flow takes
        the countdown, show_s, confirm and ttl_s at once."""
        if self.service is not None:
            self.service.apply(new)
        if self.flow is not None:
            from kiosk.keepsake.flow import FlowOptions

            # keepsake.enabled applies at the next start: the server runs until then
            self.flow.options = dataclasses.replace(FlowOptions.of(new), enabled=True)
            if (new.frame, new.frame_text) != self._brand_keys:
                self._load_brand(new)
            self._set_clip(new.clip)

    def close(self) -> None:
        """Close the flow, then stop the server (the photos go, unless keep_on_disk). The service's
        metrics stay readable for the last stats until :attr:`service` is dropped."""
        if self.flow is not None:
            self.flow.close()
            self.flow = None
        if self.clips is not None:
            self.clips.close()
        if self.service is not None:
            self.service.close()

    def _keep(self, jpeg: bytes) -> Saved:
        """Store a kept photo (the flow's worker thread): the address its QR code encodes."""
        from kiosk.keepsake.flow import Saved

        assert self.service is not None
        kept = self.service.keep(jpeg)
        frames, self._clip_frames = self._clip_frames, []
        if self.clips is not None and frames and self.flow is not None:
            self.clips.make(kept.record.token, frames, self.flow.brand, self.service.keep_clip)
        return Saved(kept.url, kept.record.expires, kept.record.token)

    def step(self, actions: tuple[str, ...], mono: float, renderer: Any) -> None:
        """The keepsake key(s) of this frame, then the flow's step; a new still goes on screen once."""
        if "print_again" in actions and self.service is not None:  # staff: the last photo again
            self.print_again()
        flow = self.flow
        if flow is None:
            return
        service = self.service
        serving = service is not None and service.available
        # the key is taken (and the banner says photos are kept) while keepsakes run, also while
        # the server is down: the visitor is then told photos are unavailable, never ignored
        self._session.keepsake_options = flow.options if service is not None else None
        presses = actions.count("keepsake")
        if not serving and (presses and flow.phase is Phase.IDLE or flow.phase in _OFFERING):
            withdrawn = flow.unavailable(mono)
            if withdrawn is not None and withdrawn.token and service is not None:
                service.discard(withdrawn.token)  # its QR code is gone: the photo too
            presses = 0
        if self._session.attract:  # nobody at the booth: the next visitor starts afresh
            flow.new_visitor()
        if presses and flow.phase is Phase.IDLE and service is not None and service.full():
            flow.refuse(STORE_FULL, mono)  # never evict a photo before its time, nor fail silently
            presses = 0
        for _ in range(presses):
            flow.press(mono)
        if self.clips is not None and not self.frozen:  # the screen's last seconds, a few frames a second
            self.clips.ring.offer(mono, self._shown)
        kv = flow.step(self._copy_picture, mono)
        self.view = kv if kv.active else None
        if kv.still_bgr is not None and self._still_shown != (kv.still_serial, renderer):
            renderer.set_frame(kv.still_bgr)  # the stored pixels, at the camera's resolution
            self._still_shown = (kv.still_serial, renderer)

    def print_again(self, copies: int = 1) -> str:
        """Staff: print the last kept photo once more (the ``print_again`` key; a staff console may
        call this): "" when queued, else why not (also the staff line's until the next print)."""
        if self.service is None:
            return "print again: keepsakes are off"
        why = self.service.print_again(copies)
        self._print_problem = (why, time.monotonic())
        return why

    @property
    def frozen(self) -> bool:
        """A keepsake's still is on screen: the camera picture must not replace it."""
        return self.view is not None and self.view.freeze

    def _copy_picture(self) -> Picture | None:
        """A copy of the picture on screen (the frame and its GPU-composited crops) for a keepsake."""
        shown = self._shown()
        if shown is None:
            return None
        from kiosk.keepsake.still import Picture

        self._clip_frames = self.clips.ring.snapshot() if self.clips is not None else []

        return Picture.copy_of(*shown)

    def with_keepsake(self, booth: Any) -> tuple[Any, dict[str, Any]]:
        """The booth view (no carousel or attract screen over a keepsake) and the renderer's keepsake
        argument (none while no keepsake is on screen)."""
        kv = self.view
        if kv is None:
            return booth, {}
        return dataclasses.replace(booth, show_carousel=False, attract=False), {"keepsake": kv}

    def staff_line(self) -> str:
        """The keepsakes' staff warning (server down, print failed), else ""."""
        if self.service is None:
            return ""
        why, since = self._print_problem
        recent = why and time.monotonic() - since < PRINT_AGAIN_LINE_S
        return self.service.staff_line() or (why if recent else "")

    def metrics(self) -> dict[str, int] | None:
        """The service's totals (stats JSON ``keepsakes``, the Prometheus file) and the visitors'
        answers to the consent text (counted only: nothing else of them is kept)."""
        if self.service is None:
            return None
        out = self.service.metrics()
        out["consent_declined"] = self.flow.counts.consent_declined if self.flow is not None else 0
        out["clips_made"] = self.clip_counts.made if self.clip_counts is not None else 0
        return out

    def flow_stats(self) -> dict[str, Any] | None:
        """What visitors did on screen (the keepsakes themselves are the service's metrics)."""
        return self.flow.stats() if self.flow is not None else None
