"""The keepsake flow on screen: countdown, frozen swapped still, consent, QR code, back to live.

A small state machine driven by the render loop (:meth:`KeepsakeFlow.step`, once per frame, with
the loop's monotonic clock), so it needs no thread of its own and tests drive it with a fake
clock::

    IDLE ──press──► (CONSENT ──press──►) COUNTDOWN ──countdown_s──► CAPTURE ─┬─(confirm)──► CONFIRM ──press──► SAVING ──► SHOW ──show_s──► IDLE
      ▲               │ press: cancelled                └────────────────────────────────►┘  (no press within show_s: IDLE,
      └───────────────┘                                                                         nothing stored)

At the end of the countdown the loop's picture (the frame on screen and its swapped crops) is
copied (:class:`~kiosk.keepsake.still.Picture`) and the screen freezes on it; the composite at the
camera's full resolution, the JPEG encoding and the storing run on one worker thread, never in the
render loop. Nothing is stored before consent when ``confirm`` is on; a failure shows one line for
a few seconds and returns to live (the staff log says why).

With ``consent`` (the organiser's text) a press first shows that text (CONSENT, over the live
picture); only the same key again within ``show_s`` starts the countdown, else nothing is taken and
the booth goes back to live. What was agreed and when is not kept anywhere, only counted
(:attr:`FlowCounts.consented`, :attr:`FlowCounts.consent_declined`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from kiosk.keepsake.brand import NO_FRAME, BrandFrame
from kiosk.keepsake.privacy import photo_id
from kiosk.keepsake.qr import qr_matrix
from kiosk.keepsake.still import Picture, composite, encode_jpeg
from kiosk.render.keepsake_ui import KeepsakeView
from kiosk.types import FrameBGR

log = logging.getLogger(__name__)

#: How long a failure line stays on screen before the booth goes back to live.
FAILED_S = 4.0
#: A press this soon after the QR code appears does not dismiss it (a double press, a bounce).
DISMISS_GRACE_S = 1.5
PROMPT_KEEP = "Press again to keep this photo"
PROMPT_KEEP_HINT = "Otherwise it is not saved"
CONSENT_HINT = "Press again to agree \u2014 otherwise no photo is taken"
#: A press this soon after the consent text appears does not agree (a double press, a bounce).
CONSENT_GRACE_S = 0.5
SCAN_TITLE = "Scan to take your photo home"
NO_PICTURE = "No picture yet \u2014 try again in a moment"
NOT_SAVED = "Sorry, the photo could not be saved"
#: A visitor's takes count until the attract screen comes on (nobody at the booth) or this long
#: after their last photo (``keepsake.takes_per_visitor``).
VISITOR_GAP_S = 120.0
COOLDOWN = "One moment \u2014 the next photo in {s} s"
ENOUGH = "That's all the photos for now \u2014 thank you! The next visitor's turn"
#: The web server is down or hung: no photo is taken, and a QR code on screen is withdrawn.
UNAVAILABLE = "Sorry, photos are unavailable right now \u2014 nothing was saved"


class Phase(str, Enum):
    IDLE = "idle"
    CONSENT = "consent"  # the organiser's consent text, waiting for the press that agrees
    COUNTDOWN = "countdown"
    CAPTURE = "capture"  # the screen is frozen; the still is being composited
    CONFIRM = "confirm"  # the still is shown, asking for the second press
    SAVING = "saving"  # the still is shown, being stored
    SHOW = "show"  # the still with its QR code and address
    FAILED = "failed"


@dataclass(frozen=True)
class FlowOptions:
    """``keepsake.*`` as the flow needs it."""

    enabled: bool = False
    countdown_s: float = 3.0
    show_s: float = 20.0
    confirm: bool = False
    ttl_s: float = 900.0
    cooldown_s: float = 10.0
    takes_per_visitor: int = 5  # 0: no cap
    consent: str = ""  # shown before the countdown; "": no question

    @classmethod
    def of(cls, keepsake: Any) -> FlowOptions:
        """From the config's ``keepsake`` section."""
        return cls(
            enabled=bool(keepsake.enabled),
            countdown_s=float(keepsake.countdown_s),
            show_s=float(keepsake.show_s),
            confirm=bool(keepsake.confirm),
            ttl_s=float(keepsake.ttl_s),
            cooldown_s=float(keepsake.cooldown_s),
            takes_per_visitor=int(keepsake.takes_per_visitor),
            consent=str(keepsake.consent),
        )


@dataclass(frozen=True)
class Saved:
    """A stored keepsake: the address its QR code encodes and when it is deleted (wall clock)."""

    url: str
    expires: float
    token: str = ""  # the store's token (to withdraw it)


class Saver(Protocol):
    def __call__(self, jpeg: bytes) -> Saved: ...


@dataclass(frozen=True)
class Still:
    """The composited still and its JPEG."""

    bgr: FrameBGR
    jpeg: bytes


IDLE_VIEW = KeepsakeView(Phase.IDLE.value)


def duration_text(seconds: float) -> str:
    """15 min, 1 h, 1 h 30 min, 45 s, 2 days."""
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 5400 and s % 3600:
        return f"{round(s / 60)} min"
    if s < 2 * 86400:
        h, m = divmod(round(s / 60), 60)
        return f"{h} h" + (f" {m} min" if m else "")
    return f"{round(s / 86400)} days"


def short_address(url: str) -> str:
    """The address as shown under the QR code: without ``http://`` (``https://`` kept: it matters)."""
    return url[len("http://") :] if url.startswith("http://") else url


def disclosure_banner(banner: str, default_banner: str, options: FlowOptions) -> str:
    """The disclosure banner's text: the operator's own text as it is; the default text ("Nothing is
    recorded") becomes, with keepsakes on, what is kept and for how long."""
    if not options.enabled or banner != default_banner:
        return banner
    return f"Live AI face swap. Photos only when you ask; deleted after {duration_text(options.ttl_s)}."


@dataclass
class FlowCounts:
    started: int = 0
    cancelled: int = 0  # the key again during the countdown
    declined: int = 0  # no second press within show_s (confirm)
    taken: int = 0  # stored, QR shown
    failed: int = 0
    limited: int = 0  # refused: keepsake.cooldown_s, takes_per_visitor or a full store
    consented: int = 0  # the consent text agreed to (keepsake.consent)
    consent_declined: int = 0  # the consent text not agreed to within show_s: nothing taken
    #: Key press → QR code on screen of the last keepsake, and since the still was taken (ms).
    latency_ms: float = 0.0
    capture_to_qr_ms: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        return {
            "started": self.started,
            "cancelled": self.cancelled,
            "declined": self.declined,
            "shown": self.taken,
            "failed": self.failed,
            "limited": self.limited,
            "consented": self.consented,
            "consent_declined": self.consent_declined,
            "latency_ms_last": round(self.latency_ms, 1) if self.taken else None,
            "latency_ms_p50": round(lat[len(lat) // 2], 1) if lat else None,
            "capture_to_qr_ms_last": round(self.capture_to_qr_ms, 1) if self.taken else None,
        }


class KeepsakeFlow:
    """The flow; see the module docstring. Main (render) thread only, except the work it hands to
    its worker thread. ``make_still`` and ``save`` run on that worker; ``clock`` is monotonic
    seconds (the render loop's); ``executor`` defaults to one worker thread."""

    def __init__(
        self,
        options: FlowOptions,
        save: Saver,
        *,
        make_still: Callable[[Picture], Still] | None = None,
        clock: Callable[[], float] = time.monotonic,
        executor: cf.Executor | None = None,
    ) -> None:
        self.options = options
        self._save = save
        self._make_still = make_still or (lambda picture: framed_still(self.brand, picture))
        #: The brand frame drawn over each still (``keepsake.frame``); the host sets it.
        self.brand: BrandFrame = NO_FRAME
        self._clock = clock
        self._executor = executor
        self.phase = Phase.IDLE
        self._t_phase = 0.0
        self._t_press = 0.0
        self._t_capture = 0.0
        self._still: Still | None = None
        self._serial = 0
        self._saved: Saved | None = None
        self._qr: NDArray[np.uint8] | None = None
        self._message = ""
        self._job: cf.Future[Any] | None = None
        self._t_take: float | None = None  # the last photo shown (monotonic)
        self._visitor_takes = 0  # photos of the visitor at the booth (takes_per_visitor)
        self.counts = FlowCounts()

    # -- input ------------------------------------------------------------------------------------
    def press(self, now: float | None = None) -> None:
        """The keepsake key: start, cancel the countdown, consent, or dismiss the QR code."""
        if not self.options.enabled:
            return
        now = self._clock() if now is None else now
        if self.phase is Phase.IDLE and (line := self._limit(now)):
            self.refuse(line, now)
        elif self.phase is Phase.IDLE:
            self.counts.started += 1
            self._t_press = now
            if self.options.consent:
                self._enter(Phase.CONSENT, now)
                log.info("keepsake: asking for consent")
            else:
                self._countdown(now)
        elif self.phase is Phase.CONSENT and now - self._t_phase >= CONSENT_GRACE_S:
            self.counts.consented += 1
            log.info("keepsake: the visitor agreed")
            self._countdown(now)
        elif self.phase is Phase.COUNTDOWN:
            self.counts.cancelled += 1
            log.info("keepsake: cancelled during the countdown")
            self._enter(Phase.IDLE, now)
        elif self.phase is Phase.CONFIRM:
            assert self._still is not None
            log.info("keepsake: the visitor chose to keep the photo")
            self._job = self._submit(self._save, self._still.jpeg)
            self._enter(Phase.SAVING, now)
        elif self.phase is Phase.SHOW and now - self._t_phase >= DISMISS_GRACE_S:
            self._back_to_live(now)

    def _countdown(self, now: float) -> None:
        self._enter(Phase.COUNTDOWN, now)
        log.info("keepsake: countdown of %g s", self.options.countdown_s)

    def new_visitor(self) -> None:
        """The booth saw nobody (its attract screen came on): the next visitor's takes count anew."""
        self._visitor_takes = 0

    def refuse(self, line: str, now: float | None = None) -> None:
        """A press that takes no photo: ``line`` on screen for a few seconds (a full store, a limit)."""
        now = self._clock() if now is None else now
        self.counts.limited += 1
        log.info("keepsake: no photo taken: %s", line)
        self._message = line
        self._enter(Phase.FAILED, now)

    def _limit(self, now: float) -> str:
        """Why a press now takes no photo (``cooldown_s``, ``takes_per_visitor``), else ""."""
        o, last = self.options, self._t_take
        if last is None:
            return ""
        if now - last < o.cooldown_s:
            return COOLDOWN.format(s=max(1, int(np.ceil(o.cooldown_s - (now - last)))))
        if now - last >= VISITOR_GAP_S:
            self._visitor_takes = 0
        if o.takes_per_visitor and self._visitor_takes >= o.takes_per_visitor:
            return ENOUGH
        return ""

    def unavailable(self, now: float | None = None) -> Saved | None:
        """The web server does not serve: a press shows :data:`UNAVAILABLE` instead of a
        countdown; a QR code on screen (nobody could fetch it) is replaced by it. Returns the
        withdrawn keepsake (for the caller to delete), else None."""
        now = self._clock() if now is None else now
        if self.phase is Phase.FAILED:
            return None
        withdrawn = self._saved if self.phase is Phase.SHOW else None
        if self.phase is Phase.SHOW:
            self.counts.taken -= 1  # not shown after all
        self._fail(now, UNAVAILABLE, "the web server is not serving; no photo offered")
        self._still, self._saved, self._qr = None, None, None
        return withdrawn

    def cancel(self, now: float | None = None) -> None:
        """Back to live at once, whatever the phase (a config reload turned keepsakes off)."""
        now = self._clock() if now is None else now
        if self.phase is not Phase.IDLE:
            self._back_to_live(now)

    # -- once per frame ---------------------------------------------------------------------------
    def step(self, picture: Callable[[], Picture | None], now: float | None = None) -> KeepsakeView:
        """Advance by the clock and the finished work; ``picture`` copies the picture on screen (it
        is called once, when the countdown ends). Returns what to draw."""
        now = self._clock() if now is None else now
        o = self.options
        phase = self.phase
        if phase is Phase.COUNTDOWN and now - self._t_phase >= o.countdown_s:
            pic = picture()
            if pic is None:
                self._fail(now, NO_PICTURE, "no picture on screen yet")
            else:
                self._t_capture = now
                self._job = self._submit(self._make_still, pic)
                self._enter(Phase.CAPTURE, now)
                log.info("keepsake: still taken (%dx%d)", *pic.size)
        elif phase is Phase.CAPTURE and self._job is not None and self._job.done():
            still = self._result()
            if still is not None:
                self._still = still
                self._serial += 1
                if o.confirm:
                    self._enter(Phase.CONFIRM, now)
                else:
                    self._job = self._submit(self._save, still.jpeg)
                    self._enter(Phase.SAVING, now)
        elif phase is Phase.CONSENT and now - self._t_phase >= o.show_s:
            self.counts.consent_declined += 1
            log.info("keepsake: consent not given within %g s; nothing taken", o.show_s)
            self._back_to_live(now)
        elif phase is Phase.CONFIRM and now - self._t_phase >= o.show_s:
            self.counts.declined += 1
            log.info("keepsake: not kept (no second press within %g s); nothing stored", o.show_s)
            self._back_to_live(now)
        elif phase is Phase.SAVING and self._job is not None and self._job.done():
            saved = self._result()
            if saved is not None:
                self._show(saved, now)
        elif (phase is Phase.SHOW and now - self._t_phase >= o.show_s) or (
            phase is Phase.FAILED and now - self._t_phase >= FAILED_S
        ):
            self._back_to_live(now)
        return self.view(now)

    def view(self, now: float | None = None) -> KeepsakeView:
        """What to draw now (no state change)."""
        now = self._clock() if now is None else now
        o, phase = self.options, self.phase
        if phase is Phase.IDLE:
            return IDLE_VIEW
        elapsed = now - self._t_phase
        if phase is Phase.CONSENT:
            return KeepsakeView(
                phase.value,
                prompt=o.consent,
                hint=CONSENT_HINT,
                remaining_s=max(0.0, o.show_s - elapsed),
                total_s=o.show_s,
            )
        if phase is Phase.COUNTDOWN:
            left = max(0.0, o.countdown_s - elapsed)
            count = max(1, int(np.ceil(left))) if o.countdown_s > 0 else 0
            return KeepsakeView(
                phase.value, count=count, count_progress=min(1.0, max(0.0, 1.0 - (left - (count - 1))))
            )
        still = self._still
        base = {
            "freeze": True,
            "still_bgr": still.bgr if still is not None else None,
            "still_serial": self._serial if still is not None else 0,
        }
        if phase is Phase.CONFIRM:
            return KeepsakeView(
                phase.value,
                prompt=PROMPT_KEEP,
                hint=PROMPT_KEEP_HINT,
                remaining_s=max(0.0, o.show_s - elapsed),
                total_s=o.show_s,
                **base,  # type: ignore[arg-type]
            )
        if phase is Phase.SHOW:
            assert self._saved is not None
            return KeepsakeView(
                phase.value,
                remaining_s=max(0.0, o.show_s - elapsed),
                total_s=o.show_s,
                qr=self._qr,
                title=SCAN_TITLE,
                address=short_address(self._saved.url),
                expiry=f"Deleted after {duration_text(o.ttl_s)}",
                **base,  # type: ignore[arg-type]
            )
        if phase is Phase.FAILED:
            return KeepsakeView(phase.value, message=self._message, freeze=still is not None)
        return KeepsakeView(phase.value, **base)  # type: ignore[arg-type]  # CAPTURE, SAVING

    def stats(self) -> dict[str, Any]:
        """The flow's figures for the stats JSON (``keepsake`` section)."""
        return {"phase": self.phase.value, **self.counts.stats()}

    @property
    def busy(self) -> bool:
        """Anything but IDLE."""
        return self.phase is not Phase.IDLE

    def close(self) -> None:
        """Stop the worker (work in flight is finished by it, nothing new starts)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # -- helpers ------------------------------------------------------------------------------
    def _enter(self, phase: Phase, now: float) -> None:
        self.phase = phase
        self._t_phase = now

    def _submit(self, fn: Callable[..., Any], arg: Any) -> cf.Future[Any]:
        if self._executor is None:
            self._executor = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="keepsake")
        return self._executor.submit(fn, arg)

    def _result(self) -> Any:
        """The finished job's result; None (and FAILED) when it raised."""
        assert self._job is not None
        job, self._job = self._job, None
        try:
            return job.result()
        except Exception as exc:  # a full disk, a broken encoder: one line, back to live
            saving = self.phase is Phase.SAVING
            line = getattr(exc, "on_screen", NOT_SAVED)  # a full store says so
            self._fail(self._clock(), line, f"{'storing' if saving else 'making'} the photo failed: {exc}")
            return None

    def _show(self, saved: Saved, now: float) -> None:
        try:
            self._qr = qr_matrix(saved.url)
        except ValueError as exc:
            self._fail(now, NOT_SAVED, f"{exc}: shorten keepsake.url_base")
            return
        self._saved = saved
        self._enter(Phase.SHOW, now)
        c = self.counts
        c.taken += 1
        self._t_take = now
        self._visitor_takes += 1
        c.latency_ms = (now - self._t_press) * 1e3
        c.capture_to_qr_ms = (now - self._t_capture) * 1e3
        c.latencies_ms = [*c.latencies_ms, c.latency_ms][-50:]
        log.info(
            "keepsake: QR code on screen %.0f ms after the key (%.0f ms after the still): photo %s",
            c.latency_ms,
            c.capture_to_qr_ms,
            photo_id(saved.url.rsplit("/", 1)[-1]),  # never the address: it is the photo's key
        )

    def _fail(self, now: float, line: str, why: str) -> None:
        self.counts.failed += 1
        log.error("keepsake: %s", why)
        self._message = line
        self._job = None
        self._enter(Phase.FAILED, now)

    def _back_to_live(self, now: float) -> None:
        self._job = None  # a job still running finishes on the worker; its result is dropped
        self._still = None
        self._saved = None
        self._qr = None
        self._message = ""
        self._enter(Phase.IDLE, now)


def framed_still(brand: BrandFrame, picture: Picture) -> Still:
    """The still with the brand frame over it (the worker thread): what the QR screen shows, the
    phone fetches and the printer prints."""
    bgr = brand.apply(composite(picture))
    return Still(bgr, encode_jpeg(bgr))
