"""The running kiosk: :class:`KioskApp` owns its collaborators, starts and stops them, and keeps the
API the CLI, bench and tests use.

    capture thread ──TripleBuffer[CapturedFrame]──► inference thread ──TripleBuffer[SwapResult]──► render loop

Each concern is its own module of :mod:`kiosk.app`, owning its state:

- :mod:`~kiosk.app.wiring`: every buffer and worker thread, built by one function (also for each
  replacement and a reload's source switch), watched by :mod:`~kiosk.app.supervisor`;
- :mod:`~kiosk.app.loop`: the render loop (schedule, pacing, reports due; reads no config);
- :mod:`~kiosk.app.reload`: the config in force and its live reload (:mod:`~kiosk.app.reload_table`);
- :mod:`~kiosk.app.screen`: the picture on screen and the render meters;
  :mod:`~kiosk.app.counters`: the one snapshot per frame and everything derived from it;
- :mod:`~kiosk.app.display`, :mod:`~kiosk.app.shots`, :mod:`~kiosk.app.keepsake_host`,
  :mod:`~kiosk.app.console_host`: the window, snapshots and screenshots, keepsakes, the staff
  console (its process, the status sent to it, the commands it brings back).

What staff and visitors do with the booth (input, quit policy, attract mode, selection, thumbnails)
is the booth session's (:mod:`kiosk.booth.session`): the loop calls it once per frame and draws the
frozen view it returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kiosk.app.console_host import ConsoleHost
from kiosk.app.counters import (
    CounterReader,
    Counters,
    StatsFile,
    overlay_texts,
    stats_dict,
    status_line,
)
from kiosk.app.display import Display
from kiosk.app.keepsake_host import KeepsakeHost
from kiosk.app.loop import LoopOptions, RenderLoop, RunOptions
from kiosk.app.parts import FrameParts
from kiosk.app.reload import ConfigReload
from kiosk.app.reload_table import Part
from kiosk.app.screen import Screen
from kiosk.app.shots import Shots
from kiosk.app.supervisor import Supervisor
from kiosk.app.wiring import (
    WiringSpec,
    Workers,
    default_processor_factory,
    default_source_factory,
    live_options,
)
from kiosk.appliance.exit import EXIT_DISPLAY_LOST, other_threads
from kiosk.appliance.monitoring import TextfileMonitor
from kiosk.appliance.sdnotify import SdNotifier
from kiosk.booth.controls import ControlState, GamepadInput, KeyboardInput
from kiosk.booth.faces import FaceLibrary, make_library
from kiosk.booth.session import BoothSession
from kiosk.capture.live import AnchorSlot, LiveFrame
from kiosk.capture.live_feed import LiveFeed
from kiosk.capture.sources import Source
from kiosk.capture.thread import CaptureThread
from kiosk.config import KioskConfig
from kiosk.processing.stage import Processor
from kiosk.processing.thread import ErrorPolicy, InferenceThread
from kiosk.signals import SignalState
from kiosk.stats import RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame

log = logging.getLogger(__name__)


class KioskApp:
    """The running kiosk: builds and owns the collaborators (see the module docstring), runs the
    render loop until stopped, and shuts everything down in order."""

    def __init__(
        self,
        cfg: KioskConfig,
        opts: RunOptions,
        source_factory: Callable[[], Source] | None = None,
        processor_factory: Callable[[], Processor] | None = None,
        config_path: Path | None = None,
        signals: SignalState | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        notifier: SdNotifier | None = None,
    ) -> None:
        """``clock`` (perf_counter's timeline: the worker threads stamp frames with it) and
        ``sleep`` drive the render loop; ``notifier`` defaults to systemd's from the environment."""
        self.opts = opts
        self._clock = clock
        self._notifier = notifier
        self.display = Display(opts.headless)  # the surface and renderer, while run() runs
        self.signals = signals or SignalState()
        self.stop = self.signals.stop
        self.controls = ControlState(debug=cfg.overlay.debug, enhance_enabled=cfg.processing.enhance)
        library = make_library(cfg)  # refreshed by the inference thread only
        #: The booth session (input, quit policy, attract mode, selection, thumbnails, warnings):
        #: one call per frame gives the frozen view drawn; it also holds the keyboard and gamepad.
        self.session = BoothSession(cfg, library, self.controls)
        self.shots = Shots()  # snapshots and screenshots, written by their own thread
        #: What is on screen (the picture, the mode) and the render side's meters.
        self.screen = Screen()
        #: Keepsakes (keepsake.enabled): the service and its on-screen flow, while run() runs.
        self.keepsake = KeepsakeHost(self.session, lambda: self.screen.shown_picture)
        self.console = ConsoleHost(self.controls, lambda: self.library, self.keepsake, self.signals.reload)
        #: Hang supervision: abandons hung calls, restarts dead workers, owns the workers' meters.
        self.supervisor = Supervisor(self.stop)
        #: Every buffer and worker thread (:mod:`kiosk.app.wiring`: built once, rebuilt through it).
        self.workers = Workers(
            WiringSpec(
                cfg.source,
                source_factory or default_source_factory(cfg),
                processor_factory or default_processor_factory(cfg, library, self.controls),
                live_options(cfg.display),
                ErrorPolicy.of(cfg.processing),
                self.controls,
                self.stop,
            ),
            self.supervisor,
            lambda thread: self.library.revoke(thread),
        )
        self.parts = FrameParts(
            self.workers,
            self.screen,
            self.display,
            self.session,
            self.keepsake,
            self.shots,
            self.controls,
            self.stop,
            self.console,
        )
        #: The render loop (its schedule and pacing; reads LoopOptions, never the config).
        self.loop = RenderLoop(self, self.parts, LoopOptions.of(cfg, opts), clock=clock, sleep=sleep)
        #: The config in force and its live reload (the library, monitor and gamepads follow it).
        self.reload = ConfigReload(
            cfg,
            library,
            config_path,
            self.signals,
            headless=opts.headless,
            parts=self.parts,
            custom_source=source_factory is not None,
            custom_processor=processor_factory is not None,
            loop=self.loop,
            run_options=opts,
            running=lambda: bool(self._t_start),
        )
        #: One frozen reading of every counter, from each figure's owner (once a frame).
        self.reader = CounterReader(self.parts, self.supervisor, self.reload)
        self._t_start = 0.0
        self._t_start_unix = 0.0
        self.exit_code = 0
        self._stats_file = StatsFile(opts.stats_json) if opts.stats_json is not None else None
        self._active_notifier: SdNotifier | None = None  # while run() runs

    # -- the booth session's parts -------------------------------------------------------------
    @property
    def cfg(self) -> KioskConfig:
        """The config in force (replaced by a live reload)."""
        return self.reload.cfg

    @property
    def library(self) -> FaceLibrary:
        """The face library (refreshed by the inference thread; read it through ``.snapshot``).
        Replaced by a live reload of ``faces``; the booth session follows."""
        return self.reload.library

    @property
    def monitor(self) -> TextfileMonitor | None:
        """The Prometheus textfile writer (monitoring.textfile), while run() runs."""
        return self.reload.monitor

    @property
    def keyboard(self) -> KeyboardInput:
        return self.session.keyboard

    @property
    def gamepad(self) -> GamepadInput | None:
        return self.session.gamepad

    @property
    def attract(self) -> bool:
        return self.session.attract

    # -- threads ---------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        """The live feed runs (display.mode live, or auto, which may switch to it any time)."""
        return self.cfg.display.mode in ("live", "auto")

    def active_mode(self) -> str:
        """The mode on screen now: synced or live (``auto`` resolved)."""
        mode = self.cfg.display.mode
        return self.screen.auto_mode.mode if mode == "auto" else mode

    # The current wiring's threads and buffers (replaced by the supervisor and reloads).
    @property
    def capture(self) -> CaptureThread:
        return self.workers.now.capture

    @property
    def inference(self) -> InferenceThread:
        return self.workers.now.inference

    @property
    def capture_buf(self) -> TripleBuffer[CapturedFrame]:
        return self.workers.now.capture_buf

    @property
    def anchor_buf(self) -> TripleBuffer[AnchorSlot]:
        return self.workers.now.anchor_buf

    @property
    def live_buf(self) -> TripleBuffer[LiveFrame]:
        return self.workers.now.live_buf

    @property
    def live_feed(self) -> LiveFeed | None:
        return self.workers.now.live_feed

    def check_pipeline(self, now: float) -> float:
        """Seconds processing has been unhealthy (0: healthy); a hung thread is replaced."""
        return self.workers.check_inference(now)

    def supervise(self) -> None:
        """Replace a stuck capture thread, restart a dead worker (once a second)."""
        self.workers.check_workers(self._clock())

    # -- counters ----------------------------------------------------------------------------
    def counters(self, now: float | None = None, detailed: bool = True) -> Counters:
        """One frozen reading of every counter of the kiosk at ``now`` (the loop's clock). The render
        loop takes one per frame; the stats JSON, monitoring, overlay and STATUS derive from it.
        ``detailed=False`` leaves out the latency percentiles (a sort of up to 4096 samples each),
        for frames that show no debug overlay and write no stats."""
        return self.reader.read(
            self._clock() if now is None else now,
            detailed,
            self._t_start,
            self._t_start_unix,
            self.staff_problem(),
        )

    # -- overlay ---------------------------------------------------------------------------
    def overlay_texts(self, now: float, counters: Counters | None = None) -> dict[str, Any]:
        """The overlay's texts from ``counters`` (the frame's snapshot; a fresh one if None)."""
        c = counters if counters is not None else self.counters(now)
        return overlay_texts(c, self.reload.problem, self.cfg.overlay.status_line)

    # -- stats -----------------------------------------------------------------------------
    def stats(self, counters: Counters | None = None) -> dict[str, Any]:
        """The stats JSON document from ``counters`` (a fresh snapshot if None)."""
        if counters is not None and not counters.detailed:
            raise ValueError("stats need a detailed counters snapshot (latency percentiles)")
        out = stats_dict(counters if counters is not None else self.counters())
        flow = self.keepsake.flow_stats()
        if flow is not None:  # what visitors did on screen (keepsakes: the service's)
            out["keepsake_flow"] = flow
        return out

    def write_stats(self, counters: Counters | None = None) -> None:
        """Rewrite the ``--stats-json`` file (if asked for) from ``counters`` (fresh if None)."""
        if self._stats_file is not None:
            self._stats_file.write(self.stats(counters))

    # -- live reload -------------------------------------------------------------------------
    def poll_config(self) -> None:
        """Between frames: a config reload (:meth:`ConfigReload.poll`), then a display reopen
        asked for (``display`` window settings changed) or due (a retry), with its gamepads."""
        self.reload.poll()
        self.reload.apply_window()

    def apply_config(self, new: KioskConfig) -> frozenset[Part]:
        """Apply a validated config to the running kiosk (:meth:`ConfigReload.apply`)."""
        return self.reload.apply(new)

    # -- booth state -------------------------------------------------------------------------
    def take_snapshot(self, surface: Any) -> None:
        """The staff's snapshot key: the frame just drawn, saved by the shots' writer thread."""
        self.controls.snapshot_requested = False
        snap = self.cfg.snapshots
        self.shots.take_snapshot(surface, self.cfg.resolve(snap.dir), snap.retention_hours, snap.max_files)

    def staff_problem(self) -> str:
        """The staff warning line: a config problem, else the keepsakes' (server down, print failed);
        and the snapshot folder's (snapshots kept in memory while it is full)."""
        first = self.reload.problem or self.keepsake.staff_line()
        return " · ".join(p for p in (first, self.console.staff_line(), self.shots.problem) if p)

    def status_text(self, counters: Counters | None = None) -> str:
        """One line for systemd's STATUS= (``systemctl status faceswap-kiosk``)."""
        return status_line(counters if counters is not None else self.counters())

    @property
    def render_rate(self) -> RateMeter:
        """Rendered frames (the render loop's meter)."""
        return self.screen.render_rate

    # -- the render loop ---------------------------------------------------------------------
    def _start_workers(self) -> None:
        self.workers.start()

    def run(self) -> int:
        """Open the display, start the workers, render until stopped; the exit status."""
        self.signals.install()
        if self.stop.is_set():  # a signal while the kiosk was being built
            self.shutdown()
            self.write_stats()
            self.inference.release()
            return 0
        self.display.open(self.cfg.display)
        self.session.gamepad = self.reload.new_gamepad()
        notifier = self._notifier or SdNotifier.from_env()
        self._active_notifier = notifier
        self.display.watch_lost(self._display_lost)
        self._t_start = t0 = self._clock()
        self._t_start_unix = time.time()
        self.reload.monitor = self.reload.new_monitor()
        self.keepsake.open(self.cfg)
        self.console.open(self.cfg)
        self._start_workers()
        try:
            self.loop.run(notifier, t0)
            self.exit_code = self.exit_code or self.loop.exit_code
            if self.opts.screenshot is not None:  # the last frame, drawn once more for the PNG
                self.loop.draw_final_screenshot()
        finally:
            notifier.stopping()
            self.shots.close()  # the last screenshot is on disk when run returns
            self.shutdown()
            self.console.close()
            self.keepsake.close()  # the server stops, the photos go (unless keep_on_disk)
            self.write_stats()
            if self.reload.monitor is not None:
                self.reload.close_monitor(self.stats())  # up 0
            self.keepsake.service = None
            notifier.close()
            self.display.watch_lost(None)  # the X connection goes with the window: nothing to report after
            self.display.close()
            self.inference.release()  # the models' sessions, after the last stats
        return self.exit_code

    def _display_lost(self) -> None:
        """The X server went away (:meth:`Display.watch_lost` logged it): the last words before the
        process leaves with status 4 — ``STOPPING=1``, the metrics file with ``up 0``, the stats
        file. No thread is joined and no GL object released (the connection is gone)."""
        self.stop.set()
        self.exit_code = EXIT_DISPLAY_LOST
        notifier = self._active_notifier
        if notifier is not None:
            notifier.stopping()
        stats = self.stats()
        self.reload.close_monitor(stats, timeout_s=1.0)  # after any write in flight: up 0 stays
        self.write_stats()

    def shutdown(self, timeout_s: float = 1.0) -> None:
        """Stop and join the worker threads (the capture thread releases the camera), then the
        model loader, and release the models' sessions here, before the interpreter exits (an
        ONNX Runtime thread still running at exit aborts the process: ``terminate called ...``)."""
        if self.signals.received:
            log.info("signal %s: shutting down", self.signals.summary())
        self.stop.set()
        self.workers.join(timeout_s)

    @property
    def clean_exit_possible(self) -> bool:
        """False while any other thread is alive after :meth:`shutdown`: it may be inside native code
        (an abandoned hung model call, a model loader), which no interpreter teardown survives."""
        return not other_threads()
