"""The kiosk's side of the staff console (``console.enabled``): the console's process while the
kiosk runs, what the render loop sends it (the status twice a second, the screen's thumbnail every
few seconds while someone looks) and the commands it brings back.

Threads: every method is the main thread's (the render loop's): the commands become actions that
the booth session applies in the same frame (like keys), or calls on their owners made from here
(a reload of the faces, a keepsake deleted). Neither the console's process nor any thread of it
touches the kiosk's state or GL. Only the thumbnail's scaling and JPEG encoding run on a worker
thread, on a copy of the pixels.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiosk.console.history import DayHistory

if TYPE_CHECKING:
    from kiosk.app.counters import Counters
    from kiosk.app.keepsake_host import KeepsakeHost
    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import FaceLibrary
    from kiosk.config import KioskConfig
    from kiosk.console.process import ConsoleProcess

log = logging.getLogger(__name__)

#: The status goes to the console this often.
PUBLISH_EVERY_S = 0.5
#: A thumbnail of the screen this often while someone looked within VIEWER_S.
THUMB_EVERY_S = 3.0
VIEWER_S = 30.0
THUMB_WIDTH_PX = 480
#: The console's health is checked this often; a dead or hung one restarts after a backoff.
WATCH_EVERY_S = 1.0
BACKOFF_S = (2.0, 5.0, 15.0, 60.0)
#: A face seen after this long without any counts as a new one (the "faces seen" plot).
FACE_GAP_S = 3.0
#: Commands that are booth actions as they are.
_ACTIONS = {
    "next_face": "next_face",
    "prev_face": "prev_face",
    "keepsake": "keepsake",
    "print_again": "print_again",  # the last kept photo printed once more (keepsake.print_command)
}


class ConsoleHost:
    """See the module docstring. ``library``: the face library in force (replaced by a reload);
    ``reload``: asks the kiosk to reload its config and faces (the SIGHUP path)."""

    def __init__(
        self,
        controls: ControlState,
        library: Callable[[], FaceLibrary],
        keepsake: KeepsakeHost,
        reload: threading.Event,
        *,
        process_factory: Callable[[Any, str], ConsoleProcess] | None = None,
    ) -> None:
        self._controls = controls
        self._library = library
        self._keepsake = keepsake
        self._reload = reload
        self._factory = process_factory
        self.process: ConsoleProcess | None = None
        self.problem = ""  # the console's staff warning (no PIN, port taken), else ""
        self.history = DayHistory()
        self._starter: threading.Thread | None = None
        self._ready = False
        self._next_publish = 0.0
        self._next_thumb = 0.0
        self._next_watch = 0.0
        self._viewer_until = 0.0
        self._restarts = 0
        self._restart_at = 0.0
        self._models: list[dict[str, str]] = []
        self._folders: dict[str, Path] = {}
        self._faces_seen = 0
        self._face_since = -1e9  # monotonic time of the last face on screen
        self._results_with_faces = 0
        self._encoding = False
        self._swap = True
        self.commands_applied = 0

    # -- life cycle ---------------------------------------------------------------------------
    def open(self, cfg: KioskConfig) -> None:
        """Start the console's process in the background (``console.enabled``); a PIN that cannot
        be had is one log line and a staff warning, and the kiosk runs on without its console."""
        if not cfg.console.enabled:
            return
        from kiosk.console.auth import PinError, read_pin
        from kiosk.keepsake.privacy import hide_secret

        c = cfg.console
        try:
            pin = read_pin(c.pin, cfg.resolve(c.pin_file) if c.pin_file else None)
        except PinError as exc:
            self.problem = str(exc)
            log.error("%s; the kiosk runs without its staff console", exc)
            return
        hide_secret(pin)  # no log line of this process carries it from now on
        self._models = _models_of(cfg)
        self._folders = _folders_of(cfg)
        if self._factory is not None:
            self.process = self._factory(c, pin)
        else:
            from kiosk.console.process import ConsoleProcess

            self.process = ConsoleProcess(c, pin)
        self._starter = threading.Thread(target=self._start, name="console-start", daemon=True)
        self._starter.start()

    def _start(self) -> None:
        from kiosk.keepsake.store import KeepsakeError

        process = self.process
        if process is None:
            return
        try:
            process.start()
        except KeepsakeError as exc:
            self.problem = str(exc)
            log.error("%s; the kiosk runs without its staff console", exc)
            return
        self.problem = ""
        self._ready = True

    @property
    def available(self) -> bool:
        return self._ready

    def close(self) -> None:
        if self._starter is not None:
            self._starter.join(5.0)
        if self.process is not None:
            self.process.stop()
        self._ready = False

    # -- each frame -----------------------------------------------------------------------------
    def actions(self, mono: float) -> tuple[str, ...]:
        """The console's commands since the last frame, as the booth actions they are (applied by
        the session this frame); the others are done here."""
        if not self._ready or self.process is None:
            return ()
        out: list[str] = []
        self._swap = self._controls.swap_enabled  # as this frame's toggles will leave it
        for cmd in self.process.commands():
            action = self._apply(cmd, mono)
            if action:
                out.append(action)
            self.commands_applied += 1
        return tuple(out)

    def _apply(self, cmd: tuple[Any, ...], mono: float) -> str:
        kind = cmd[0]
        if kind in _ACTIONS:
            return _ACTIONS[kind]
        if kind == "viewer":
            if mono >= self._viewer_until:
                self._next_thumb = 0.0  # a new viewer: a thumbnail at once
            self._viewer_until = mono + VIEWER_S
        elif kind == "swap" and len(cmd) == 2:
            if bool(cmd[1]) == self._swap:
                return ""
            self._swap = bool(cmd[1])
            return "toggle_swap"
        elif kind == "pick_face" and len(cmd) == 2:
            index = self._library().snapshot.index_of(str(cmd[1]))
            return f"pick_face_{index + 1}" if index is not None else ""
        elif kind == "reload_faces":
            log.info("console: reloading the config and the faces")
            self._reload.set()
        elif kind == "delete_keepsake" and len(cmd) == 2:
            self._delete_keepsakes([str(cmd[1])])
        elif kind == "delete_last_keepsakes" and len(cmd) == 2:
            service = self._keepsake.service
            if service is not None:
                records = service.store.records()  # oldest first
                self._delete_keepsakes([r.token for r in records[-int(cmd[1]) :]])
        return ""

    def _delete_keepsakes(self, tokens: list[str]) -> None:
        service = self._keepsake.service
        if service is None:
            return
        for token in tokens:
            service.discard(token)
        log.info("console: %d keepsake(s) deleted on request", len(tokens))

    def publish(self, c: Counters, mono: float) -> None:
        """Send the status from the frame's snapshot ``c`` when due; watch the console's health."""
        if mono >= self._next_watch:
            self._next_watch = mono + WATCH_EVERY_S
            self._watch(mono)
        if not self._ready or self.process is None or mono < self._next_publish:
            return
        self._next_publish = mono + PUBLISH_EVERY_S
        from kiosk.console.status import disk_figures, status_document

        now_unix = time.time()
        totals = self._totals(c, mono)
        self.history.update(totals, now_unix)
        faces = [{"key": e.key, "name": e.name} for e in self._library().snapshot.entries]
        extra = {
            "counters": totals,
            "history": self.history.series(now_unix),
            "models": self._models,
            "disk": disk_figures(self._folders),
            "keepsakes_enabled": self._keepsake.service is not None,
            "keepsakes": self._keepsake.metrics(),
        }
        self.process.send("status", status_document(c, faces, extra, now_unix))

    def _totals(self, c: Counters, mono: float) -> dict[str, int]:
        """The plotted counters' totals since the start."""
        if c.render.results_with_faces > self._results_with_faces:
            if mono - self._face_since > FACE_GAP_S:
                self._faces_seen += 1
            self._face_since = mono
        self._results_with_faces = c.render.results_with_faces
        k = self._keepsake.metrics() or {}
        return {
            "faces_seen": self._faces_seen,
            "keepsakes_taken": k.get("taken", 0),
            "keepsakes_downloaded": k.get("downloaded", 0),
            "keepsakes_printed": k.get("printed", 0),
            "keepsakes_expired": k.get("expired", 0),
            "errors": c.processing.errors + c.capture.reconnects + k.get("print_failed", 0),
        }

    def capture(self, surface: Any, mono: float) -> None:
        """Between drawing and presenting: the screen's thumbnail when one is due (someone looked
        within :data:`VIEWER_S`); read here (GL), scaled and encoded on a worker thread."""
        if not self._ready or mono >= self._viewer_until or mono < self._next_thumb or self._encoding:
            return
        self._next_thumb = mono + THUMB_EVERY_S
        rgb = surface.read_rgb()
        self._encoding = True
        threading.Thread(target=self._encode, args=(rgb,), name="console-thumb", daemon=True).start()

    def _encode(self, rgb: Any) -> None:
        try:
            import cv2

            h, w = rgb.shape[:2]
            scale = min(1.0, THUMB_WIDTH_PX / max(1, w))
            small = cv2.resize(
                rgb, (max(1, int(w * scale)), max(1, int(h * scale))), interpolation=cv2.INTER_AREA
            )
            ok, jpeg = cv2.imencode(
                ".jpg", cv2.cvtColor(small, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 70]
            )
            if ok and self.process is not None:
                self.process.send("thumb", jpeg.tobytes())
        except Exception:  # noqa: BLE001 - a thumbnail is not worth a fault
            log.exception("console: the screen's thumbnail failed")
        finally:
            self._encoding = False

    def _watch(self, mono: float) -> None:
        """A console that died or hangs: one log line, then a restart after a growing backoff."""
        process = self.process
        if process is None or (self._starter is not None and self._starter.is_alive()):
            return
        if self._ready:
            wrong = process.health()
            if not wrong:
                return
            self._ready = False
            delay = BACKOFF_S[min(self._restarts, len(BACKOFF_S) - 1)]
            self._restart_at = mono + delay
            self.problem = f"console: the web server {wrong}; restarting it in {delay:g} s"
            log.warning("%s", self.problem)
            process.kill()
        elif self._restart_at and mono >= self._restart_at:
            self._restart_at = 0.0
            self._restarts += 1
            self._starter = threading.Thread(target=self._start, name="console-start", daemon=True)
            self._starter.start()

    def staff_line(self) -> str:
        return self.problem


def _models_of(cfg: KioskConfig) -> list[dict[str, str]]:
    """Each model file the config runs, with its licence (the known specs'; "unknown" else)."""
    from kiosk.inference.specs import known_spec
    from kiosk.processing.models import model_paths, swapper_mode

    out = []
    if swapper_mode(cfg) == "classic":
        out.append({"role": "swapper", "name": "classic (no model file)", "licence": "the kiosk's own"})
    for role, path in model_paths(cfg).items():
        if path is None or (role == "enhancer" and not cfg.processing.enhance):
            continue
        spec = known_spec(role, path)
        licence = spec.licence if spec is not None else "unknown: check its source"
        out.append({"role": role, "name": path.name, "licence": licence})
    return out


def _folders_of(cfg: KioskConfig) -> dict[str, Path]:
    from kiosk.paths import data_dir

    folders = {"kiosk data": data_dir()}
    if cfg.snapshots.enabled:
        folders["snapshots"] = cfg.resolve(cfg.snapshots.dir)
    return folders
