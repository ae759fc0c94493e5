"""Live reload applied: the running kiosk follows its config file (and SIGHUP).

:data:`kiosk.app.reload_table.RELOAD_TABLE` declares which part of a running kiosk each key rebuilds;
:class:`ConfigReload` applies it: it polls the :class:`~kiosk.app.config_watch.ConfigWatcher`, keeps
the staff line of a change it ignored or could not apply, and rebuilds exactly the parts the plan
names, each through its owner (the booth session's bindings and library, the staff toggles, the
wiring's capture switch and stage rebuild, the display's reopen, the render loop's options).

It owns the config in force (:attr:`ConfigReload.cfg`) and the parts that are nothing but that
config applied: the face library, the Prometheus textfile writer and the gamepads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kiosk.app.config_watch import ConfigWatcher, ReloadEvent
from kiosk.app.loop import LoopOptions, RenderLoop, RunOptions
from kiosk.app.parts import FrameParts
from kiosk.app.reload_table import RELOAD_TABLE, Part, changed_keys, plan_reload
from kiosk.app.wiring import default_processor_factory, default_source_factory, live_options
from kiosk.appliance.monitoring import TextfileMonitor
from kiosk.booth.controls import GamepadInput, GlfwGamepadProvider, KeyboardInput
from kiosk.booth.faces import FaceLibrary, make_library
from kiosk.config.schema import KioskConfig
from kiosk.processing.thread import ErrorPolicy
from kiosk.signals import SignalState

log = logging.getLogger(__name__)


class ConfigReload:
    """See the module docstring. ``custom_source`` / ``custom_processor``: the kiosk was given its
    own source or stage factory (tests, bench), which a reload keeps; ``running()``: the render
    loop runs (a monitor or gamepad is opened only then)."""

    def __init__(
        self,
        cfg: KioskConfig,
        library: FaceLibrary,
        config_path: Path | None,
        signals: SignalState,
        *,
        headless: bool,
        parts: FrameParts,
        custom_source: bool,
        custom_processor: bool,
        loop: RenderLoop,
        run_options: RunOptions,
        running: Callable[[], bool],
    ) -> None:
        self.cfg = cfg
        #: The face library (refreshed by the inference thread; read it through ``.snapshot``),
        #: replaced by a reload of ``faces``; the booth session follows.
        self.library = library
        self.watcher = ConfigWatcher(config_path) if config_path is not None else None
        self._signals = signals
        self._headless = headless
        # what a reload rebuilds, each through its owner
        self._session, self._controls, self._workers = parts.session, parts.controls, parts.workers
        self._keepsake, self._display = parts.keepsake, parts.display
        self._custom_source = custom_source
        self._custom_processor = custom_processor
        self._loop = loop
        self._run_options = run_options
        self._running = running
        #: The staff line of a change ignored (invalid) or not applied; "" when none.
        self.problem = ""
        self.monitor: TextfileMonitor | None = None  # monitoring.textfile, while the kiosk runs

    def poll(self) -> None:
        """Once a frame: SIGHUP reloads now, else the watcher reports a changed file (settled)."""
        if self._signals.reload.is_set():
            self._signals.reload.clear()
            if self.watcher is None:
                log.warning("SIGHUP: no config file to reload")
                return
            log.info("SIGHUP: reloading %s", self.watcher.path)
            event: ReloadEvent | None = self.watcher.reload_now()
        elif self.watcher is None:
            return
        else:
            event = self.watcher.poll()
        if event is None:
            return
        if event.config is None:
            self.problem = f"config change ignored: {event.problems[0]}"
            return
        # A good reload solves the config's problems, not a display change still waiting for its
        # retry: that line stays until the reopen heals it.
        self.problem = self._display.problem
        try:
            self.apply(event.config)
        except Exception as exc:  # a reload never ends the run; the old parts keep going
            log.exception("config change not applied")
            self.problem = f"config change not applied: {type(exc).__name__}: {exc}".splitlines()[0]

    def apply(self, new: KioskConfig) -> frozenset[Part]:
        """Apply a validated config to the running kiosk: rebuild the parts that
        :data:`kiosk.app.reload_table.RELOAD_TABLE` names for the keys that changed, nothing else; returns them."""
        old, self.cfg = self.cfg, new
        # The booth session reads the quit policy, snapshots.enabled and the UI texts where used
        # (keys that rebuild nothing), so it follows every change, before the plan is looked at.
        session = self._session
        session.cfg = new
        self._keepsake.apply(new.keepsake)  # limits, page text, printing, the flow on screen
        plan = plan_reload(old, new)
        if not plan:
            return plan
        changed = changed_keys(old, new)
        log.info("config change (%s): %s", ", ".join(changed), ", ".join(sorted(p.value for p in plan)))
        if Part.INPUT in plan:
            session.keyboard = KeyboardInput(new.controls.keyboard)
            if session.gamepad is not None or self._running():
                session.gamepad = self.new_gamepad()
        if Part.TOGGLES in plan:  # a toggle whose config key changed takes the new value
            if new.overlay.debug != old.overlay.debug:
                self._controls.debug = new.overlay.debug
            if new.processing.enhance != old.processing.enhance:
                self._controls.enhance_enabled = new.processing.enhance
        if Part.CAPTURE in plan:
            self._switch_capture()
        if Part.LIBRARY in plan:
            self.library = session.library = make_library(new)
        if Part.STAGE in plan and not self._custom_processor:
            log.info("processing settings changed: rebuilding the processing stage")
            factory = default_processor_factory(new, self.library, self._controls)
            self._workers.reconfigure_stage(factory, ErrorPolicy.of(new.processing))
        elif Part.STAGE in plan:  # a custom stage stays; a fresh inference thread takes the new policy
            self._workers.follow_policy(ErrorPolicy.of(new.processing))
        if Part.WINDOW in plan:
            self._display.changed = True  # reopened by the render loop, on its own thread
        if Part.LOOP in plan:
            self._loop.options = LoopOptions.of(new, self._run_options)
        if Part.MONITOR in plan:
            self.reconfigure_monitor()
        if Part.LOG_LEVEL in plan:
            logging.getLogger().setLevel(new.logging.level)
        if Part.RESTART in plan:
            keys = [k for k in changed if Part.RESTART in RELOAD_TABLE[k]]
            log.warning("%s: applies at the next start of the kiosk", ", ".join(keys))
        return plan

    def apply_window(self) -> None:
        """The window part of a reload, on the render loop's thread between frames: ask for a new
        surface and renderer when ``display`` window settings changed (a failed reopen keeps the
        previous settings, else goes offscreen, and retries), reopen when that or a retry is due,
        with the gamepads; the reopener's staff line while a retry waits."""
        display = self._display
        if display.changed:
            display.request_reopen(self.cfg.display)
        if display.reopen_due():
            self._session.gamepad = self.new_gamepad()
            self.problem = display.staff_line(self.problem)

    def _switch_capture(self) -> None:
        """Switch capture to the current source and display mode: the capture thread takes the
        switch itself (this never waits; one producer per buffer, always)."""
        new = self.cfg
        log.info("source or live display settings changed: switching capture")
        workers = self._workers
        factory = workers.spec.source_factory if self._custom_source else default_source_factory(new)
        workers.switch_source(new.source, factory, live_options(new.display))  # never waits

    def reconfigure_monitor(self) -> None:
        cfg = self.cfg
        new_path = cfg.resolve(cfg.monitoring.textfile) if cfg.monitoring.textfile else None
        if self.monitor is not None and self.monitor.path == new_path:
            self.monitor.interval_s = cfg.monitoring.interval_s  # same file, new interval
            return
        if self.monitor is not None:
            self.monitor.close(None, timeout_s=0.5)  # the old file goes: two files of one booth clash
            self.monitor = None
        if self._running():
            self.monitor = self.new_monitor()

    def close_monitor(self, stats: dict[str, Any] | None, timeout_s: float = 1.0) -> None:
        """The last metrics (``up 0``) after any write in flight; the writer goes."""
        if self.monitor is not None:
            self.monitor.close(stats, timeout_s=timeout_s)
            self.monitor = None

    def new_monitor(self) -> TextfileMonitor | None:
        """The textfile writer for ``monitoring`` in force (None when off)."""
        m = self.cfg.monitoring
        if m.textfile is None:
            return None
        path = self.cfg.resolve(m.textfile)
        log.info("monitoring: Prometheus metrics in %s every %.0f s", path, m.interval_s)
        return TextfileMonitor(path, m.interval_s)

    def new_gamepad(self) -> GamepadInput | None:
        """Gamepads for ``controls`` in force (None when off, headless, or without glfw's)."""
        c = self.cfg.controls
        if not c.gamepad_enabled or self._headless:
            return None
        try:
            return GamepadInput(
                GlfwGamepadProvider(), c.gamepad, c.debounce_s, c.repeat_delay_s, c.repeat_interval_s
            )
        except Exception as exc:  # gamepads are optional; the keyboard still works
            log.warning("gamepads disabled: %s", exc)
            return None
