"""The render loop, on the main thread: one frame after another at ``display.max_fps``.

Each frame takes the newest processed result if there is one (the loop never waits for
inference), puts the picture of the mode on screen (:class:`~kiosk.app.screen.Screen`), steps the
booth session and the keepsake flow, takes the frame's one counters snapshot, draws and presents,
then does the work that is due: the watchdog, systemd's STATUS=, the stats file, the metrics
textfile, supervision of the worker threads, now and then the heap handed back to the system
(:mod:`kiosk.util.memory`). Exit after the run's frame or time limit, or with
status 3 once processing has been unhealthy past ``processing.recovery_s``.

:class:`RenderLoop` owns the frame schedule and pacing; it reads no config (only
:class:`LoopOptions`, replaced on reload) and its time comes from the injected ``clock``
(perf_counter's timeline, which the worker threads stamp frames with) and ``monotonic`` (the
booth's and the keepsakes' timers), so tests drive it with a fake clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kiosk.app.counters import Counters
from kiosk.app.parts import FrameParts
from kiosk.appliance.monitoring import TextfileMonitor
from kiosk.appliance.sdnotify import SdNotifier
from kiosk.config.schema import KioskConfig
from kiosk.util.memory import trim_heap

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    headless: bool = False
    frames: int = 0  # exit after this many rendered frames (0: run until stopped)
    seconds: float = 0.0  # exit after this long (0: run until stopped)
    screenshot: Path | None = None
    stats_json: Path | None = None
    stats_interval_s: float = 0.0  # also rewrite stats_json this often while running
    screenshot_every_s: float = 0.0  # also rewrite screenshot this often while running


@dataclass(frozen=True)
class LoopOptions:
    """What the render loop needs of the config and the run options, taken when config is
    (re)applied (:data:`kiosk.app.reload_table.Part.LOOP`): the loop body itself reads no config."""

    period_s: float = 0.0  # 1 / display.max_fps; 0: not paced
    live: bool = False  # display.mode: live (the picture is the newest camera frame)
    auto: bool = False  # display.mode: auto (synced while processing keeps up, else live)
    stall_s: float = 5.0  # processing.stall_s: the watchdog is fed while unhealthy no longer than this
    recovery_s: float = 30.0  # processing.recovery_s: exit 3 once unhealthy longer than this
    frames: int = 0
    seconds: float = 0.0
    stats_interval_s: float = 0.0
    screenshot_every_s: float = 0.0
    screenshot: Path | None = None  # the run's screenshot file (None: none)
    supervise_every_s: float = 1.0  # worker threads checked (and restarted if dead) this often
    status_every_s: float = 5.0  # systemd STATUS= this often
    #: The heap's free pages handed back to the system this often (:mod:`kiosk.util.memory`: the
    #: arenas fragment over a day; without it the resident size crept up 50 MB/h in a fault soak).
    trim_every_s: float = 30.0

    @classmethod
    def of(cls, cfg: KioskConfig, opts: RunOptions) -> LoopOptions:
        fps = cfg.display.max_fps
        return cls(
            period_s=1.0 / fps if fps > 0 else 0.0,
            live=cfg.display.mode == "live",
            auto=cfg.display.mode == "auto",
            stall_s=cfg.processing.stall_s,
            recovery_s=cfg.processing.recovery_s,
            frames=opts.frames,
            seconds=opts.seconds,
            stats_interval_s=opts.stats_interval_s,
            screenshot_every_s=opts.screenshot_every_s,
            screenshot=opts.screenshot,
        )


@dataclass(frozen=True)
class _Reports:
    """The reports one frame sends."""

    status: bool
    stats: bool
    monitor: bool


@dataclass
class _Schedule:
    """The render loop's next due times (its clock)."""

    tick: float = 0.0
    stats: float = 0.0
    shot: float = 0.0
    supervise: float = 0.0
    status: float = 0.0
    trim: float = 0.0


class LoopHost(Protocol):
    """What the render loop asks of the kiosk (:class:`kiosk.app.kiosk_app.KioskApp`)."""

    @property
    def monitor(self) -> TextfileMonitor | None: ...

    def poll_config(self) -> None: ...  # a reload, and a display reopen, between frames
    def staff_problem(self) -> str: ...
    def take_snapshot(self, surface: Any) -> None: ...
    def counters(self, now: float | None = None, detailed: bool = True) -> Counters: ...
    def overlay_texts(self, now: float, counters: Counters | None = None) -> dict[str, Any]: ...
    def status_text(self, counters: Counters | None = None) -> str: ...
    def stats(self, counters: Counters | None = None) -> dict[str, Any]: ...
    def write_stats(self, counters: Counters | None = None) -> None: ...
    def check_pipeline(self, now: float) -> float: ...  # seconds processing has been unhealthy
    def supervise(self) -> None: ...


class RenderLoop:
    """See the module docstring."""

    def __init__(
        self,
        host: LoopHost,
        parts: FrameParts,
        options: LoopOptions,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host = host
        self.parts = parts
        self.options = options  # replaced on reload (Part.LOOP)
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic
        self._schedule = _Schedule()
        self._t0 = 0.0
        self.overlay: Any = None  # the last frame's OverlayState
        self.exit_code = 0  # 3: processing did not recover

    def run(self, notifier: SdNotifier, t0: float) -> None:
        """Render from ``t0`` (the clock) until stopped, the window closes or a limit is reached."""
        from kiosk.render.renderer import OverlayState

        o, self._t0, self.overlay = self.options, t0, OverlayState()
        self._schedule = _Schedule(
            t0,
            t0 + o.stats_interval_s,
            t0,
            t0 + o.supervise_every_s,
            t0 + o.status_every_s,
            t0 + o.trim_every_s,
        )
        while not self.parts.stop.is_set() and self._frame(notifier):
            self._pace()

    def _frame(self, notifier: SdNotifier) -> bool:
        """One iteration of the render loop: config, picture, booth, draw, then the due work.
        False ends the run."""
        from kiosk.render.renderer import OverlayState

        p, o, host = self.parts, self.options, self.host
        host.poll_config()
        wired, screen, renderer = p.workers.now, p.screen, p.display.renderer
        result = wired.result_buf.read()
        frozen = p.keepsake.frozen  # a keepsake's still
        mode = screen.choose_mode(self._clock(), o.live, o.auto, wired.capture, wired.inference)
        if result is not None:
            screen.take(result, mode, o.auto, frozen, renderer, self._clock())
        shown = (
            None
            if frozen
            else screen.picture(renderer, result, mode, o.auto, wired.result_buf, wired.live_buf)
        )
        # -- the booth: input → actions, library, attract mode, the frame's view (one block) --
        mono = self._monotonic()
        staff = p.console.actions(mono)  # the staff console's commands, applied like keys
        view = p.session.step(p.display.surface.poll_events(), result, mono, host.staff_problem(), staff)
        if view.quit_requested:
            p.stop.set()
        p.keepsake.step(view.actions, mono, renderer)
        # --
        if p.display.surface.should_close():
            return False
        now = self._clock()
        reports = self._reports_due(now)
        # the frame's one snapshot: overlay, STATUS, stats file, monitoring
        counters = host.counters(now, detailed=p.controls.debug or reports.stats or reports.monitor)
        self.overlay = OverlayState(**host.overlay_texts(now, counters))
        p.console.publish(counters, mono)  # twice a second: the status for the staff console
        self._draw(self.overlay, view.booth, mono, now)
        t_shown = self._clock()
        screen.presented(t_shown, mode, shown)
        if screen.render_rate.count == 1:
            notifier.ready(status="running")
        return self._after_frame(t_shown, counters, reports, notifier)

    def _draw(self, overlay: Any, booth: Any, mono: float, now: float) -> None:
        """Draw one frame (and save the snapshot or screenshot asked for), then present it."""
        p = self.parts
        surface = p.display.surface
        size = surface.begin_frame()
        booth, extra = p.keepsake.with_keepsake(booth)
        p.display.renderer.draw(size, overlay, booth=booth, now=mono, **extra)
        if p.controls.snapshot_requested:
            self.host.take_snapshot(surface)
        p.console.capture(surface, mono)  # the console's thumbnail of the screen, when due
        p.shots.retry_snapshots()
        every = self.options.screenshot_every_s
        if every and now >= self._schedule.shot:
            p.shots.screenshot(self.options.screenshot, surface)
            self._schedule.shot = now + every
        surface.end_frame()

    def draw_final_screenshot(self) -> None:
        """The last frame, drawn once more for the run's screenshot (on disk once the shots close)."""
        p = self.parts
        size = p.display.surface.begin_frame()
        mono = self._monotonic()
        final = p.session.view(mono, self.host.staff_problem())
        booth, extra = p.keepsake.with_keepsake(final.booth)
        p.display.renderer.draw(size, self.overlay, booth=booth, now=mono, **extra)
        p.shots.screenshot(self.options.screenshot, p.display.surface)

    def _reports_due(self, now: float) -> _Reports:
        """Which reports this frame sends (and when the next ones are due)."""
        o, due, monitor = self.options, self._schedule, self.host.monitor
        status = now >= due.status
        if status:
            due.status = now + o.status_every_s
        stats = bool(o.stats_interval_s) and now >= due.stats
        if stats:
            due.stats = now + o.stats_interval_s
        return _Reports(status, stats, monitor is not None and monitor.due(now))

    def _after_frame(self, t: float, counters: Counters, reports: _Reports, notifier: SdNotifier) -> bool:
        """Supervision and reports due at ``t``; False ends the run (limits reached, or exit 3)."""
        o, due, host = self.options, self._schedule, self.host
        unhealthy_s = host.check_pipeline(t)
        if unhealthy_s <= o.stall_s:
            notifier.watchdog()  # rate-limited to WATCHDOG_USEC/2 inside
        if unhealthy_s > o.recovery_s:
            log.error(
                "processing has not recovered for %.0f s: exiting with status 3 so that systemd "
                "restarts the kiosk",
                unhealthy_s,
            )
            self.exit_code = 3
            return False
        if reports.status:
            notifier.status(host.status_text(counters))
        if o.frames and self.parts.screen.render_rate.count >= o.frames:
            return False
        if o.seconds and t - self._t0 >= o.seconds:
            return False
        if reports.stats:
            host.write_stats(counters)
        monitor = host.monitor
        if reports.monitor and monitor is not None:
            monitor.submit(host.stats(counters))
        if t >= due.supervise:
            host.supervise()
            due.supervise = t + o.supervise_every_s
        if o.trim_every_s and t >= due.trim:
            trim_heap()
            due.trim = t + o.trim_every_s
        return True

    def _pace(self) -> None:
        """Sleep until the next frame is due at ``display.max_fps`` (no catching up after a hitch)."""
        period = self.options.period_s
        if not period:
            return
        due = self._schedule
        due.tick += period
        delay = due.tick - self._clock()
        if delay > 0:
            self._sleep(delay)
        elif delay < -0.25:
            due.tick = self._clock()
