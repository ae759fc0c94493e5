"""The booth session: what visitors and staff do with the booth, one frame at a time.

:class:`BoothSession` owns the booth's interaction state on the main thread: staff input
(keyboard keys and gamepad buttons) turned into actions, the quit policy, the selection (one
value, the selected face's library key, kept in :class:`~kiosk.booth.controls.ControlState`),
attract mode, the carousel thumbnails and the staff warnings. The render loop calls
:meth:`BoothSession.step` once per frame and draws the :class:`SessionView` it returns: a frozen
value resolved against one library snapshot, so nothing it holds can change while the frame is
drawn, and a face key pressed while the faces folder changes resolves against the faces that
frame shows.

Threads: the main thread is the only writer of everything here (and of ``ControlState``); the
inference thread reads ``ControlState``'s plain attributes and refreshes the library, whose
snapshot this module only reads (:attr:`kiosk.booth.faces.FaceLibrary.snapshot`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kiosk.booth.controls import ControlState, GamepadInput, KeyboardInput
from kiosk.booth.faces import LibrarySnapshot
from kiosk.config import KioskConfig, UiConfig
from kiosk.keepsake.flow import FlowOptions, disclosure_banner
from kiosk.render.booth_ui import BoothView, FaceThumb
from kiosk.types import SwapResult

log = logging.getLogger(__name__)

_FACE_ACTIONS = ("next_face", "prev_face")
_DEFAULT_BANNER: str = UiConfig.model_fields["banner"].default


class FaceSnapshots(Protocol):
    """What the session needs of the face library (:class:`kiosk.booth.faces.FaceLibrary`)."""

    @property
    def snapshot(self) -> LibrarySnapshot: ...


def _is_face_action(action: str) -> bool:
    return action in _FACE_ACTIONS or action.startswith("pick_face_")


@dataclass(frozen=True)
class SessionView:
    """One frame of the booth session, frozen: what the renderer draws and what the app needs."""

    #: What the booth layer draws (carousel, banner, attract screen, badge, staff warnings).
    booth: BoothView
    #: The library snapshot this frame was resolved against.
    faces: LibrarySnapshot
    #: The selected face in ``faces`` (None: no faces), its key and name.
    selected_index: int | None
    selected_key: str
    selected_name: str
    attract: bool
    #: Staff asked to quit (and the quit policy allowed it): the app stops.
    quit_requested: bool
    #: Actions applied this frame, in order.
    actions: tuple[str, ...] = ()


class BoothSession:
    """Input → actions, quit policy, attract mode, selection, thumbnails and warnings.

    ``cfg``, ``library``, ``keyboard`` and ``gamepad`` may be replaced between frames (a live
    reload, a window reopened); ``controls`` is shared with the inference thread, which reads it.
    """

    def __init__(
        self,
        cfg: KioskConfig,
        library: FaceSnapshots,
        controls: ControlState,
        *,
        gamepad: GamepadInput | None = None,
        now: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.library = library
        self.controls = controls
        self.keyboard = KeyboardInput(cfg.controls.keyboard)
        self.gamepad = gamepad
        self.attract = False
        #: Monotonic time of the last frame with a detected face (attract mode counts from it).
        self.t_last_face = time.monotonic() if now is None else now
        self._detection_known = False
        self._faces: LibrarySnapshot | None = None  # the snapshot the thumbnails were made from
        self._thumbs: tuple[FaceThumb, ...] = ()
        #: The keepsake flow's options while keepsakes run (the app sets them once the server is
        #: up): the keepsake action is applied and the disclosure banner says how long photos live.
        self.keepsake_options: FlowOptions | None = None
        self._face_keys: tuple[str, ...] = ()  # the library keys the newest result swapped in

    @property
    def worn_keys(self) -> tuple[str, ...]:
        """The library keys the newest processed result swapped in (one per face)."""
        return self._face_keys

    # -- one frame -------------------------------------------------------------------------------
    def step(
        self,
        keys: list[str],
        result: SwapResult | None,
        now: float,
        config_problem: str = "",
        staff_actions: Sequence[str] = (),
    ) -> SessionView:
        """One frame: take the library snapshot once, keep the selection valid in it, apply the
        keys pressed (and the gamepad's buttons, and ``staff_actions``: the staff console's)
        against it, update attract mode from ``result`` (the newest processed frame, None if none
        came), and return the frame's view. ``now``: monotonic seconds."""
        faces = self._sync(self.library.snapshot)
        actions = self._apply_input(keys, faces, now, staff_actions)
        self._update_attract(result, now)
        return self._view(faces, now, config_problem, actions)

    def view(self, now: float, config_problem: str = "") -> SessionView:
        """The view of the current state without input (e.g. the final screenshot). Main thread
        only, like :meth:`step` (it adopts a new library snapshot)."""
        return self._view(self._sync(self.library.snapshot), now, config_problem, ())

    def quit_allowed(self, key: str) -> bool:
        """Whether ``key`` (bound to quit) may quit: ``controls.allow_quit`` when set; else any quit
        binding in a window, and in a booth (fullscreen) only a key combination bound to quit as
        such (CTRL+SHIFT+Q), not a plain key nor a plain binding pressed with a modifier."""
        allow = self.cfg.controls.allow_quit
        if allow is not None:
            return allow
        if not self.cfg.display.fullscreen:
            return True
        combos = {k.upper() for k in self.cfg.controls.keyboard.get("quit", []) if "+" in k}
        return key.upper() in combos

    @property
    def banner(self) -> str:
        """The disclosure banner: ``ui.banner``; its default text, with keepsakes running, says what
        is kept and for how long instead of "Nothing is recorded"."""
        banner = self.cfg.ui.banner
        if self.keepsake_options is None:
            return banner
        return disclosure_banner(banner, _DEFAULT_BANNER, self.keepsake_options)

    # -- parts of a frame ------------------------------------------------------------------------
    def _sync(self, faces: LibrarySnapshot) -> LibrarySnapshot:
        """Adopt a new library snapshot: the selection stays on the same face; when that face is
        gone, it moves to the face now at its place (the last one if the list got shorter)."""
        prev = self._faces
        if prev is not None and faces.stamp == prev.stamp:
            return faces
        c = self.controls
        if faces.entries and faces.index_of(c.selected_key) is None:
            was = prev.index_of(c.selected_key) if prev is not None and prev.serial == faces.serial else None
            c.selected_key = faces.entries[min(was or 0, len(faces.entries) - 1)].key
        self._faces = faces
        # Thumbnails decoded only when the atlas packs them (a window of a large library).
        self._thumbs = tuple(FaceThumb(key=e.key, name=e.name, load=e.thumbnail) for e in faces.entries)
        return faces

    def _apply_input(
        self, keys: list[str], faces: LibrarySnapshot, now: float, staff_actions: Sequence[str] = ()
    ) -> tuple[str, ...]:
        pressed = [(key, a) for key in keys for a in self.keyboard.actions([key])]
        if self.gamepad is not None:
            pressed += [("", a) for a in self.gamepad.poll()]
        pressed += [("", a) for a in staff_actions if a != "quit"]  # the console never quits
        applied: list[str] = []
        face_keys = faces.keys
        for key, action in pressed:
            if self.controls.apply(
                action,
                allow_quit=self.quit_allowed(key),
                snapshots_enabled=self.cfg.snapshots.enabled,
                keys=face_keys,
                now=now if _is_face_action(action) else None,
                keepsakes_enabled=self.keepsake_options is not None,
            ):
                log.info("action %s", action)
                applied.append(action)
        return tuple(applied)

    def _update_attract(self, result: SwapResult | None, now: float) -> None:
        if result is not None:
            self._face_keys = tuple(result.face_keys)
            self._detection_known = result.faces_detected >= 0
            if result.faces_detected > 0:
                self.t_last_face = now
        after = self.cfg.ui.attract_after_s
        attract = bool(after) and self._detection_known and now - self.t_last_face > after
        if attract != self.attract:
            log.info("attract mode %s", "on" if attract else "off")
            self.attract = attract

    def _on_screen(self, faces: LibrarySnapshot) -> dict[int, int]:
        """per_visitor: how many faces on screen wear each library face, by carousel index."""
        if self.cfg.processing.assign != "per_visitor" or not self.controls.swap_enabled:
            return {}
        out: dict[int, int] = {}
        for key in self._face_keys:
            i = faces.index_of(key)
            if i is not None:
                out[i] = out.get(i, 0) + 1
        return out

    def _view(
        self, faces: LibrarySnapshot, now: float, config_problem: str, actions: tuple[str, ...]
    ) -> SessionView:
        ui = self.cfg.ui
        c = self.controls
        thumbs = self._thumbs
        n = len(thumbs)
        index = c.selected_index(faces.keys)
        selected = faces.entries[index] if index is not None else None
        booth = BoothView(
            faces=thumbs,
            selected=index or 0,
            t_switched=c.t_switched,
            show_carousel=ui.carousel and not self.attract,
            banner=self.banner,
            attract=self.attract,
            attract_title=ui.attract_title,
            attract_lines=tuple(ui.attract_lines),
            attract_index=int(now / ui.attract_cycle_s) % n if n else 0,
            swap_enabled=c.swap_enabled,
            warnings=(config_problem, *faces.problems) if config_problem else faces.problems,
            on_screen=self._on_screen(faces),
        )
        return SessionView(
            booth=booth,
            faces=faces,
            selected_index=index,
            selected_key=selected.key if selected is not None else "",
            selected_name=selected.name if selected is not None else "",
            attract=self.attract,
            quit_requested=c.quit_requested,
            actions=actions,
        )
