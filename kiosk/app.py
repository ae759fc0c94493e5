"""Wiring: builds every stage and buffer, runs the render loop on the main thread, owns stop.

    capture thread ──TripleBuffer[CapturedFrame]──► inference thread ──TripleBuffer[SwapResult]──► render loop

The render loop never waits for inference: each iteration takes the newest processed frame
if there is one, redraws at the display rate, and shows why when frames stop coming.

``display.mode: live`` adds two small channels (:mod:`kiosk.live`): the inference thread hands
each result's crops to the capture thread (TripleBuffer[AnchorSlot]), whose keypoint tracker
carries them onto every new camera frame, published to the render loop (TripleBuffer[LiveFrame]).
The picture then is the newest camera frame; processed results only supply notices and counters.

What staff and visitors do with the booth (input, quit policy, attract mode, selection, thumbnails)
is the booth session's (:mod:`kiosk.booth.session`): the loop calls it once per frame and draws the
frozen view it returns. This module keeps the wiring, start/stop and supervision.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiosk.appliance.monitoring import TextfileMonitor
from kiosk.appliance.sdnotify import SdNotifier
from kiosk.booth.controls import ControlState, GamepadInput, GlfwGamepadProvider, KeyboardInput
from kiosk.booth.faces import FaceLibrary, LibrarySnapshot, make_library
from kiosk.booth.reload import ConfigWatcher, ReloadEvent
from kiosk.booth.session import BoothSession
from kiosk.capture.sources import Source, make_source
from kiosk.capture.thread import CaptureThread, new_captured_frame
from kiosk.config import KioskConfig
from kiosk.live import AnchorSlot, LiveFeed, LiveFrame, LiveOptions, new_live_frame
from kiosk.processing import PassThrough, Processor
from kiosk.runtime import ErrorPolicy, InferenceThread, new_swap_result
from kiosk.signals import SignalState
from kiosk.stats import LatencyRecorder, RateMeter
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult

log = logging.getLogger(__name__)

#: No processed frame for this long while capture runs → say so on screen.
STALL_S = 3.0


@dataclass
class RunOptions:
    headless: bool = False
    frames: int = 0  # exit after this many rendered frames (0: run until stopped)
    seconds: float = 0.0  # exit after this long (0: run until stopped)
    screenshot: Path | None = None
    stats_json: Path | None = None
    stats_interval_s: float = 0.0  # also rewrite stats_json this often while running
    screenshot_every_s: float = 0.0  # also rewrite screenshot this often while running


def default_processor_factory(
    cfg: KioskConfig, library: FaceLibrary, controls: ControlState
) -> Callable[[], Processor]:
    """The face pipeline driven by the library and controls when processing is enabled, else a
    pass-through. Models are imported and opened on the loader thread, not here."""

    def build() -> Processor:
        if not cfg.processing.enabled:
            return PassThrough()  # without importing ONNX Runtime at all
        from kiosk.booth.processor import build_booth_processor

        return build_booth_processor(cfg, library, controls)

    return build


class KioskApp:
    def __init__(
        self,
        cfg: KioskConfig,
        opts: RunOptions,
        source_factory: Callable[[], Source] | None = None,
        processor_factory: Callable[[], Processor] | None = None,
        config_path: Path | None = None,
        signals: SignalState | None = None,
    ) -> None:
        self.cfg = cfg
        self.opts = opts
        self.signals = signals or SignalState()
        self.stop = self.signals.stop
        self.controls = ControlState(debug=cfg.overlay.debug, enhance_enabled=cfg.processing.enhance)
        self._library = make_library(cfg)  # refreshed by the inference thread only
        #: The booth session (input, quit policy, attract mode, selection, thumbnails, warnings):
        #: one call per frame gives the frozen view drawn; it also holds the keyboard and gamepad.
        self.session = BoothSession(cfg, self._library, self.controls)
        self.snapshots_written = 0
        self._custom_source = source_factory is not None
        self._custom_processor = processor_factory is not None
        self._watcher = ConfigWatcher(config_path) if config_path is not None else None
        self._config_problem = ""
        self._display_changed = False
        self.capture_buf: TripleBuffer[CapturedFrame] = TripleBuffer(new_captured_frame)
        self.result_buf: TripleBuffer[SwapResult] = TripleBuffer(new_swap_result)
        self.anchor_buf: TripleBuffer[AnchorSlot] = TripleBuffer(AnchorSlot)
        self.live_buf: TripleBuffer[LiveFrame] = TripleBuffer(new_live_frame)
        self.live_feed: LiveFeed | None = None
        self._source_factory = source_factory or (lambda: make_source(cfg.source, cfg.base_dir))
        self._processor_factory = processor_factory or default_processor_factory(
            cfg, self.library, self.controls
        )
        self._capture_stop = threading.Event()
        self.capture = self._new_capture()
        self.inference = self._new_inference()
        self.render_rate = RateMeter()
        self.latency_ms = LatencyRecorder()  # capture of the picture on screen → display
        self.face_age_ms = LatencyRecorder()  # capture of the frame the swap used → display
        self.thread_restarts = 0
        #: Errors and rebuilds of inference threads that were abandoned or died (each thread counts its own).
        self._past_errors = 0
        self._past_restarts = 0
        self.monitor: TextfileMonitor | None = None  # monitoring.textfile, while run() runs
        self._t_start = 0.0
        self._t_start_unix = 0.0
        self._t_last_result = 0.0
        self._last_notice = ""
        self.exit_code = 0
        self.abandoned_threads = 0  # inference threads given up on after a hung call
        self._t_unrecovered = 0.0  # perf_counter at which the unrecovered hang began; 0: healthy
        self._stats_write_failed = False

    # -- the booth session's parts -------------------------------------------------------------
    @property
    def library(self) -> FaceLibrary:
        """The face library (refreshed by the inference thread; read it through ``.snapshot``).
        Replaced by a live reload of ``faces``; the booth session follows."""
        return self._library

    @library.setter
    def library(self, library: FaceLibrary) -> None:
        self._library = library
        self.session.library = library

    @property
    def keyboard(self) -> KeyboardInput:
        return self.session.keyboard

    @keyboard.setter
    def keyboard(self, keyboard: KeyboardInput) -> None:
        self.session.keyboard = keyboard

    @property
    def gamepad(self) -> GamepadInput | None:
        return self.session.gamepad

    @gamepad.setter
    def gamepad(self, gamepad: GamepadInput | None) -> None:
        self.session.gamepad = gamepad

    @property
    def attract(self) -> bool:
        return self.session.attract

    # -- threads ---------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        return self.cfg.display.mode == "live"

    def _new_live_feed(self) -> LiveFeed | None:
        d = self.cfg.display
        opts = LiveOptions(d.live_track_px, d.live_max_age_s)
        return LiveFeed(self.anchor_buf, self.live_buf, opts) if self.live else None

    def _new_capture(self) -> CaptureThread:
        self._capture_stop = threading.Event()
        self.live_feed = self._new_live_feed()
        return CaptureThread(
            self.cfg.source, self._source_factory, self.capture_buf, self._capture_stop, live=self.live_feed
        )

    def _replace_capture(self, stuck_s: float) -> None:
        """Give up on a capture thread stuck in a source call: a fresh one takes over on fresh
        buffers (capture, live, anchors), so the stuck one can never publish into what the
        inference thread and the screen read; it exits, closing its source, if the call returns."""
        log.error(
            "capture thread stuck in a source call for %.1f s: a fresh capture thread takes over", stuck_s
        )
        self.capture.abandon()
        self.thread_restarts += 1
        self.capture_buf = TripleBuffer(new_captured_frame)
        self.live_buf = TripleBuffer(new_live_frame)
        self.anchor_buf = TripleBuffer(AnchorSlot)
        self.inference.inp = self.capture_buf
        self.inference.anchors = self.anchor_buf if self.live else None
        self.capture = self._new_capture()
        self.capture.start()

    #: Rebuild back-off of the inference thread (tests shorten it before ``run``).
    restart_initial_s = 1.0

    def _new_inference(self) -> InferenceThread:
        return InferenceThread(
            self._processor_factory,
            self.capture_buf,
            self.result_buf,
            self.stop,
            restart_initial_s=self.restart_initial_s,
            controls=self.controls,
            policy=ErrorPolicy.of(self.cfg.processing),
            anchors=self.anchor_buf if self.live else None,
        )

    def _check_pipeline(self, now: float) -> float:
        """Abandon a hung stage call for a fresh inference thread (with its own output buffer, so the
        stuck one can never write to the screen); return how long processing has been unhealthy
        (hung past its bound, or not yet working again after an abandon), 0 when healthy."""
        inf = self.inference
        hung = inf.hung_for(now)
        if hung and not self.stop.is_set():
            if not self._t_unrecovered:
                self._t_unrecovered = now - hung
            log.error(
                "processing call has not returned for %.1f s: abandoning it, a fresh inference thread "
                "and stage take over",
                hung,
            )
            inf.abandon()
            self.library.revoke(inf)  # it may be inside a library refresh: never publish it
            self.abandoned_threads += 1
            self._retire(inf)
            self.result_buf = TripleBuffer(new_swap_result)
            self.inference = self._new_inference()
            self.inference.start()
        elif self._t_unrecovered and (
            inf.ok_calls > 0 or (not self.controls.swap_enabled and inf.rate.count > 0)
        ):  # the fresh stage works (or staff turned swapping off and frames flow)
            log.info("processing recovered %.1f s after the stall", now - self._t_unrecovered)
            self._t_unrecovered = 0.0
        return now - self._t_unrecovered if self._t_unrecovered else 0.0

    def _retire(self, inf: InferenceThread) -> None:
        """Keep a replaced inference thread's error and rebuild counts in the totals."""
        self._past_errors += inf.errors
        self._past_restarts += inf.restarts

    @property
    def processing_errors(self) -> int:
        """Failed processing calls since start, over every inference thread."""
        return self._past_errors + self.inference.errors

    @property
    def processing_restarts(self) -> int:
        """Stage rebuilds since start, over every inference thread."""
        return self._past_restarts + self.inference.restarts

    def _supervise(self) -> None:
        """Restart a worker thread that died (they catch everything, so this is a last resort), or
        replace a capture thread stuck in a source call. Never two producers on one buffer: a dead
        thread publishes nothing, a stuck one is abandoned with its buffers."""
        stuck = self.capture.switch_stuck_for(time.perf_counter())
        if stuck and not self.stop.is_set():
            self._replace_capture(stuck)
        if not self.capture.is_alive() and not self.stop.is_set():
            log.error("capture thread died; restarting it")
            self.thread_restarts += 1
            self.capture = self._new_capture()
            self.capture.start()
        if not self.inference.is_alive() and not self.stop.is_set():
            log.error("inference thread died; restarting it")
            self.thread_restarts += 1
            self._retire(self.inference)
            self.inference = self._new_inference()
            self.inference.start()

    # -- overlay ---------------------------------------------------------------------------
    def overlay_texts(self, now: float) -> dict[str, Any]:
        cap = self.capture
        message = ""
        if cap.state == "reconnecting" or (cap.state == "starting" and now - self._t_start > 1.0):
            what = "Camera" if self.cfg.source.kind == "camera" else "Video source"
            message = f"{what} unavailable — reconnecting…"
            if cap.last_error:
                message += f"\n{cap.last_error}"
        notice = self._config_problem or self._last_notice
        stalled_s = self.processing_stalled_s(now)
        if stalled_s:
            shown = "the camera without swaps" if self.live else "the last frame"
            notice = f"processing stalled for {stalled_s:.0f} s; showing {shown}"
        status = f"{cap.description or self.cfg.source.kind} · {self.inference.processor_name}"
        debug: list[str] = []
        if self.controls.debug:
            faces = self.library.snapshot
            p50 = self.latency_ms.percentile(50)
            p95 = self.latency_ms.percentile(95)
            proc_p50 = self.inference.process_ms.percentile(50)
            unhealthy = self._t_unrecovered or self.inference.hung_for(now)
            process = (
                f"process  stalled ({now - (self._t_unrecovered or now):.0f} s)"
                if unhealthy
                else f"process  {self.inference.rate.fps_at(now):5.1f} fps  "
                + (f"{proc_p50:.1f} ms p50" if proc_p50 is not None else "-")
            )
            debug = [
                f"capture  {cap.rate.fps_at(now):5.1f} fps  ({cap.state}, reconnects {cap.reconnects})",
                process,
                f"render   {self.render_rate.fps:5.1f} fps",
                f"dropped  capture→process {self.capture_buf.dropped}  process→display {self.result_buf.dropped}",
                "latency  capture→display "
                + (f"p50 {p50:.1f} ms  p95 {p95:.1f} ms" if p50 is not None and p95 is not None else "-"),
                self._face_age_line(),
                f"stage    {self.inference.processor_name}  errors {self.processing_errors}",
                f"faces    {len(faces.entries)} loaded"
                + (f", {len(faces.problems)} skipped" if faces.problems else "")
                + (f"  selected: {self.selected_face_name(faces)}" if faces.entries else ""),
            ]
        return {
            "status": status if self.cfg.overlay.status_line else "",
            "message": message,
            "notice": notice,
            "debug_lines": debug,
        }

    def processing_stalled_s(self, now: float) -> float:
        """Seconds without a processed frame while the source runs, once over STALL_S; else 0."""
        if self.capture.state != "running" or not self._t_last_result:
            return 0.0
        gap = now - self._t_last_result
        return gap if gap > STALL_S else 0.0

    def _face_age_line(self) -> str:
        age50, age95 = self.face_age_ms.percentile(50), self.face_age_ms.percentile(95)
        line = f"display  {self.cfg.display.mode}  face age " + (
            f"p50 {age50:.0f} ms  p95 {age95:.0f} ms" if age50 is not None and age95 is not None else "-"
        )
        feed = self.live_feed
        if feed is not None:
            tr = feed.tracker
            err, stale = tr.carry_error_px.percentile(95), tr.stale_error_px.percentile(95)
            if err is not None and stale is not None:
                line += f"  carry err p95 {err:.1f} px (stale {stale:.0f})"
            line += f"  real-face drops {tr.dropped_total}"
        return line

    # -- stats -----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        now = time.perf_counter()
        elapsed = now - self._t_start if self._t_start else 0.0
        provider, gpu_requested, gpu_fallback = self.inference.provider_info()
        faces = self.library.snapshot

        def ms(v: float | None) -> float | None:
            return None if v is None else round(v, 2)

        return {
            "duration_s": round(elapsed, 3),
            "started_unix": round(self._t_start_unix, 3),
            "frames": {
                "captured": self.capture.rate.count,
                "processed": self.inference.rate.count,
                "rendered": self.render_rate.count,
            },
            "dropped": {
                "capture_to_processing": self.capture_buf.dropped,
                "processing_to_display": self.result_buf.dropped,
                "capture_to_display_live": self.live_buf.dropped,
                "total": self.capture_buf.dropped + self.result_buf.dropped + self.live_buf.dropped,
            },
            "fps": {
                "capture": round(self.capture.rate.mean_fps, 2),
                "processing": round(self.inference.rate.mean_fps, 2),
                "render": round(self.render_rate.mean_fps, 2),
                # draws that showed a new picture (a new result in synced mode, a new camera frame in live)
                "new_pictures": round(self.latency_ms.count / elapsed, 2) if elapsed > 0 else 0.0,
            },
            "fps_now": {  # over the last second, falling once a stage stops
                "capture": round(self.capture.rate.fps_at(now), 2),
                "processing": round(self.inference.rate.fps_at(now), 2),
                "render": round(self.render_rate.fps_at(now), 2),
            },
            "latency_ms": {
                "capture_to_display_p50": ms(self.latency_ms.percentile(50)),
                "capture_to_display_p95": ms(self.latency_ms.percentile(95)),
                "capture_to_display_sum": round(self.latency_ms.total, 3),
                "capture_to_display_samples": self.latency_ms.count,
                "face_age_p50": ms(self.face_age_ms.percentile(50)),
                "face_age_p95": ms(self.face_age_ms.percentile(95)),
                "process_p50": ms(self.inference.process_ms.percentile(50)),
                "process_p95": ms(self.inference.process_ms.percentile(95)),
                "process_sum": round(self.inference.process_ms.total, 3),
                "process_samples": self.inference.process_ms.count,
                "samples": self.latency_ms.count,
            },
            "display": {
                "mode": self.cfg.display.mode,
                "live": self.live_feed.tracker.stats() if self.live_feed is not None else None,
                "live_errors": self.capture.live_errors,
            },
            "source": {
                "description": self.capture.description,
                "state": self.capture.state,
                "reconnects": self.capture.reconnects,
                "last_error": self.capture.last_error,
            },
            "processing": {
                "stage": self.inference.processor_name,
                "errors": self.processing_errors,
                "restarts": self.processing_restarts,
                "last_error": self.inference.last_error,
                "notice": self._last_notice,
                "provider": provider,
                "gpu_requested": gpu_requested,
                "gpu_fallback": gpu_fallback,
                "stalled_s": round(self.processing_stalled_s(now), 2),
                "problem": self.inference.problem,
                "build_failures": self.inference.build_failures,
                "abandoned_threads": self.abandoned_threads,
                "unrecovered_s": round(now - self._t_unrecovered, 2) if self._t_unrecovered else 0.0,
            },
            "controls": {
                "selected_face": self.selected_face_name(faces),
                "selected_index": self.controls.selected_index(faces.keys) or 0,
                "actions_applied": self.controls.actions_applied,
                "last_action": self.controls.last_action,
                "swap_enabled": self.controls.swap_enabled,
                "enhance_enabled": self.controls.enhance_enabled,
                "debug": self.controls.debug,
            },
            "faces": {
                "loaded": len(faces.entries),
                "names": [e.name for e in faces.entries],
                "problems": list(faces.problems),
            },
            "attract": self.attract,
            "snapshots_written": self.snapshots_written,
            "thread_restarts": self.thread_restarts,
        }

    def write_stats(self) -> None:
        if self.opts.stats_json is None:
            return
        path = self.opts.stats_json
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self.stats(), indent=2) + "\n")
            tmp.replace(path)
        except OSError as exc:  # a stats file must never stop the booth: say so once
            if not self._stats_write_failed:
                log.error("--stats-json not written (%s): %s", path, exc.strerror or exc)
            self._stats_write_failed = True
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    # -- main loop -------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        self.signals.install()

    # -- live reload -------------------------------------------------------------------------
    def _poll_config(self) -> None:
        if self.signals.reload.is_set():
            self.signals.reload.clear()
            if self._watcher is None:
                log.warning("SIGHUP: no config file to reload")
                return
            log.info("SIGHUP: reloading %s", self._watcher.path)
            event: ReloadEvent | None = self._watcher.reload_now()
        elif self._watcher is None:
            return
        else:
            event = self._watcher.poll()
        if event is None:
            return
        if event.config is None:
            self._config_problem = f"config change ignored: {event.problems[0]}"
            return
        self._config_problem = ""
        try:
            self.apply_config(event.config)
        except Exception as exc:  # a reload never ends the run; the old parts keep going
            log.exception("config change not applied")
            self._config_problem = f"config change not applied: {type(exc).__name__}: {exc}".splitlines()[0]

    def apply_config(self, new: KioskConfig) -> None:
        """Apply a validated config to the running kiosk, restarting only what changed."""
        old, self.cfg = self.cfg, new
        self.session.reconfigure(new, old)  # key bindings, quit policy, UI texts, overlay.debug
        if self.gamepad is not None:
            self.gamepad = self._new_gamepad()
        live_changed = (new.display.mode, new.display.live_track_px, new.display.live_max_age_s) != (
            old.display.mode,
            old.display.live_track_px,
            old.display.live_max_age_s,
        )
        if (new.source != old.source and not self._custom_source) or live_changed:
            log.info("source or live display settings changed: switching capture")
            if not self._custom_source:
                self._source_factory = lambda: make_source(new.source, new.base_dir)
            self.live_feed = self._new_live_feed()
            self.capture.switch(new.source, self._source_factory, self.live_feed)  # never waits
        self.inference.anchors = self.anchor_buf if self.live else None
        processing_changed = (
            new.processing != old.processing
            or new.models != old.models
            or new.mask != old.mask
            or (new.display.mode, new.display.composite) != (old.display.mode, old.display.composite)
        )
        if (processing_changed or new.faces != old.faces) and not self._custom_processor:
            log.info("processing settings changed: rebuilding the processing stage")
            if new.faces != old.faces or new.processing.source_face != old.processing.source_face:
                self.library = make_library(new)
            self._processor_factory = default_processor_factory(new, self.library, self.controls)
            self.inference.reconfigure(self._processor_factory, ErrorPolicy.of(new.processing))
        if new.display != old.display:
            self._display_changed = True
        if new.monitoring != old.monitoring:
            self._reconfigure_monitor()

    def _reconfigure_monitor(self) -> None:
        new_path = self.cfg.resolve(self.cfg.monitoring.textfile) if self.cfg.monitoring.textfile else None
        if self.monitor is not None and self.monitor.path == new_path:
            self.monitor.interval_s = self.cfg.monitoring.interval_s  # same file, new interval
            return
        if self.monitor is not None:
            self.monitor.close(None, timeout_s=0.5)  # the old file goes: two files of one booth clash
            self.monitor = None
        if self._t_start:  # running
            self.monitor = self._new_monitor()

    def _new_monitor(self) -> TextfileMonitor | None:
        m = self.cfg.monitoring
        if m.textfile is None:
            return None
        path = self.cfg.resolve(m.textfile)
        log.info("monitoring: Prometheus metrics in %s every %.0f s", path, m.interval_s)
        return TextfileMonitor(path, m.interval_s)

    def _new_gamepad(self) -> GamepadInput | None:
        c = self.cfg.controls
        if not c.gamepad_enabled or self.opts.headless:
            return None
        try:
            return GamepadInput(
                GlfwGamepadProvider(), c.gamepad, c.debounce_s, c.repeat_delay_s, c.repeat_interval_s
            )
        except Exception as exc:  # gamepads are optional; the keyboard still works
            log.warning("gamepads disabled: %s", exc)
            return None

    # -- booth state -------------------------------------------------------------------------
    def _take_snapshot(self, surface: Any) -> None:
        self.controls.snapshot_requested = False
        from kiosk.booth.snapshots import save_snapshot

        snap = self.cfg.snapshots
        try:
            save_snapshot(
                surface.read_rgb(), self.cfg.resolve(snap.dir), snap.retention_hours, snap.max_files
            )
            self.snapshots_written += 1
        except OSError as exc:
            log.error("snapshot not saved: %s", exc)

    def _write_screenshot(self, surface: Any) -> None:
        """Replace ``opts.screenshot`` by the frame just drawn, atomically (a reader never sees half a PNG)."""
        from kiosk.render.window import save_png

        path = self.opts.screenshot
        if path is None:
            return
        tmp = path.with_name(f"{path.stem}.tmp{path.suffix or '.png'}")
        try:
            save_png(tmp, surface.read_rgb())
            tmp.replace(path)
        except OSError as exc:
            log.error("screenshot not written: %s", exc)

    def status_text(self) -> str:
        """One line for systemd's STATUS= (``systemctl status faceswap-kiosk``)."""
        cap = self.capture
        return (
            f"{cap.description or self.cfg.source.kind} {cap.state}, render {self.render_rate.fps:.0f} fps, "
            f"process {self.inference.rate.fps_at():.0f} fps, {self.inference.processor_name}, "
            f"{len(self.library.snapshot.entries)} faces"
        )

    def selected_face_name(self, faces: LibrarySnapshot | None = None) -> str:
        """The selected face's name in ``faces`` (default: the library now); "" without faces."""
        faces = self.library.snapshot if faces is None else faces
        i = self.controls.selected_index(faces.keys)
        return faces.entries[i].name if i is not None else ""

    def _picture(self, renderer: Any, result: SwapResult | None) -> tuple[float, float | None] | None:
        """Upload the live frame (live mode); return (capture time of the new picture, capture time
        of the frame its faces were swapped on, or None without faces), None when nothing is new."""
        if not self.live:
            if result is None:
                return None
            return result.t_capture, (result.t_capture if result.faces else None)
        frame = self.live_buf.read()
        if frame is None:
            return None
        renderer.set_frame(frame.frame_bgr, frame.faces)
        return frame.t_capture, (frame.anchor_t_capture if frame.faces else None)

    def run(self) -> int:
        from kiosk.render.options import DisplayOptions
        from kiosk.render.renderer import OverlayState, Renderer
        from kiosk.render.reopen import SurfaceReopener, open_display
        from kiosk.render.window import open_surface

        self._install_signal_handlers()
        if self.stop.is_set():  # a signal while the kiosk was being built
            self.shutdown()
            self.write_stats()
            self.inference.release()
            return 0
        surface = open_surface(DisplayOptions.of(self.cfg.display), headless=self.opts.headless)
        renderer = Renderer(surface.ctx, DisplayOptions.of(self.cfg.display))
        headless = self.opts.headless  # a failed reopen keeps the old settings, else goes offscreen
        display: SurfaceReopener[Any, Any] = SurfaceReopener(
            lambda d: open_display(d, headless),
            DisplayOptions.of(self.cfg.display),
            fallback=None if headless else lambda d: open_display(d, True),
        )
        self.gamepad = self._new_gamepad()
        notifier = SdNotifier.from_env()
        self._t_start = time.perf_counter()
        self._t_start_unix = time.time()
        self.monitor = self._new_monitor()
        self.capture.start()
        self.inference.start()
        cap_fps = self.cfg.display.max_fps
        period = 1.0 / cap_fps if cap_fps > 0 else 0.0
        next_tick = time.perf_counter()
        next_stats = self._t_start + self.opts.stats_interval_s
        next_shot = self._t_start
        next_supervise = self._t_start + 1.0
        next_status = self._t_start + 5.0
        overlay = OverlayState()
        try:
            while not self.stop.is_set():
                keys = surface.poll_events()
                self._poll_config()
                if self._display_changed:
                    self._display_changed = False
                    display.request(DisplayOptions.of(self.cfg.display))
                if display.due():  # never raises while any surface opens; retries with back-off
                    surface, renderer = display.reopen(surface, renderer)
                    self.gamepad = self._new_gamepad()
                    self._config_problem = display.staff_line(self._config_problem)
                if surface.should_close():
                    break
                result = self.result_buf.read()
                if result is not None:
                    if not self.live:
                        renderer.set_frame(result.frame_bgr, None if result.faces_pasted else result.faces)
                    self._last_notice = result.notice
                    self._t_last_result = time.perf_counter()
                shown = self._picture(renderer, result)
                now = time.perf_counter()
                mono = time.monotonic()
                view = self.session.step(keys, result, mono, self._config_problem)
                if view.quit_requested:
                    self.stop.set()
                overlay = OverlayState(**self.overlay_texts(now))
                size = surface.begin_frame()
                renderer.draw(size, overlay, booth=view.booth, now=mono)
                if self.controls.snapshot_requested:
                    self._take_snapshot(surface)
                if self.opts.screenshot_every_s and now >= next_shot:
                    self._write_screenshot(surface)
                    next_shot = now + self.opts.screenshot_every_s
                surface.end_frame()
                t_shown = time.perf_counter()
                self.render_rate.tick(t_shown)
                if self.render_rate.count == 1:
                    notifier.ready(status="running")
                unhealthy_s = self._check_pipeline(t_shown)
                if unhealthy_s <= self.cfg.processing.stall_s:
                    notifier.watchdog()  # rate-limited to WATCHDOG_USEC/2 inside
                if unhealthy_s > self.cfg.processing.recovery_s:
                    log.error(
                        "processing has not recovered for %.0f s: exiting with status 3 so that systemd "
                        "restarts the kiosk",
                        unhealthy_s,
                    )
                    self.exit_code = 3
                    break
                if t_shown >= next_status:
                    notifier.status(self.status_text())
                    next_status = t_shown + 5.0
                if shown is not None:
                    self.latency_ms.add((t_shown - shown[0]) * 1000.0)
                    if shown[1] is not None:
                        self.face_age_ms.add((t_shown - shown[1]) * 1000.0)
                if self.opts.frames and self.render_rate.count >= self.opts.frames:
                    break
                if self.opts.seconds and t_shown - self._t_start >= self.opts.seconds:
                    break
                if self.opts.stats_interval_s and t_shown >= next_stats:
                    self.write_stats()
                    next_stats = t_shown + self.opts.stats_interval_s
                if self.monitor is not None and self.monitor.due(t_shown):
                    self.monitor.submit(self.stats())
                if t_shown >= next_supervise:
                    self._supervise()
                    next_supervise = t_shown + 1.0
                if period:
                    next_tick += period
                    delay = next_tick - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    elif delay < -0.25:
                        next_tick = time.perf_counter()
            if self.opts.screenshot is not None:
                size = surface.begin_frame()
                final = self.session.view(time.monotonic(), self._config_problem)
                renderer.draw(size, overlay, booth=final.booth, now=time.monotonic())
                self._write_screenshot(surface)
        finally:
            notifier.stopping()
            self.shutdown()
            self.write_stats()
            if self.monitor is not None:
                self.monitor.close(self.stats())  # up 0
                self.monitor = None
            notifier.close()
            renderer.release()
            surface.close()
            self.inference.release()  # the models' sessions, after the last stats
        return self.exit_code

    def shutdown(self, timeout_s: float = 1.0) -> None:
        """Stop and join the worker threads (the capture thread releases the camera), then the
        model loader, and release the models' sessions here, before the interpreter exits (an
        ONNX Runtime thread still running at exit aborts the process: ``terminate called ...``)."""
        if self.signals.received:
            log.info("signal %s: shutting down", ",".join(str(s) for s in self.signals.received))
        self.stop.set()
        self._capture_stop.set()
        deadline = time.perf_counter() + timeout_s
        for t in (self.capture, self.inference):
            if t.is_alive():
                t.join(max(0.0, deadline - time.perf_counter()))
            if t.is_alive():
                log.warning("%s thread did not stop within %.1f s", t.name, timeout_s)
        if not self.inference.join_loaders(min(0.3, max(0.0, deadline - time.perf_counter()))):
            log.warning("the model loader is still busy; exiting without waiting for it")

    @property
    def clean_exit_possible(self) -> bool:
        """False while a thread that may run native code (model loading) is still alive."""
        return not self.inference.loader_alive()
