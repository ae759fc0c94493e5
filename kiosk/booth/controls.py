"""Staff controls: actions, keyboard and gamepad bindings, and the small shared state.

The main thread owns :class:`ControlState` and is its only writer (the booth session,
:mod:`kiosk.booth.session`, applies actions); the inference thread only reads its plain
attributes. The selection is one value, the selected face's library key
(:attr:`ControlState.selected_key`), resolved against the library snapshot it is applied to
(:meth:`ControlState.selected_index`): there is no index to go stale when the folder changes. Gamepads are polled through a
:class:`GamepadProvider` (glfw's gamepad API in the kiosk, a fake one in tests) with edge
detection, debounce, hold-to-repeat and hot-plug.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kiosk.bindings import GAMEPAD_BUTTONS, REPEATING

log = logging.getLogger(__name__)


@dataclass
class ControlState:
    """What staff chose. Written by the main thread only; read by the inference thread."""

    #: Library key of the selected face: the selection's one value (what the inference thread
    #: swaps in). "" or a key the library no longer has: the first face.
    selected_key: str = ""
    swap_enabled: bool = True
    enhance_enabled: bool = False
    debug: bool = False
    quit_requested: bool = False
    snapshot_requested: bool = False
    actions_applied: int = 0
    last_action: str = ""
    #: Monotonic time of the last face switch (for the carousel's transition).
    t_switched: float = 0.0
    history: list[str] = field(default_factory=list)

    def selected_index(self, keys: Sequence[str]) -> int | None:
        """Where the selection is among ``keys`` (a library snapshot's keys, in carousel order):
        the selected key's index, the first face when the key is not among them, None when there
        are no faces."""
        if not keys:
            return None
        try:
            return list(keys).index(self.selected_key)
        except ValueError:
            return 0

    def apply(
        self,
        action: str,
        *,
        allow_quit: bool,
        snapshots_enabled: bool,
        keys: Sequence[str] = (),
        now: float | None = None,
        keepsakes_enabled: bool = False,
    ) -> bool:
        """Apply one action; returns False when it was refused (e.g. quit in booth mode). Face
        actions are resolved against ``keys``, the keys of the library snapshot they apply to;
        ``now`` (monotonic seconds) stamps a face switch. ``keepsake`` changes nothing here: the
        render loop's keepsake flow (:mod:`kiosk.keepsake.flow`) takes it from the applied
        actions, and ``print_again`` (staff: the last photo printed once more) likewise; both refused
        when ``keepsakes_enabled`` is False (``keepsake.enabled``)."""
        if action in ("next_face", "prev_face"):
            i = self.selected_index(keys)
            if i is None:
                return False
            step = 1 if action == "next_face" else -1
            self.selected_key = keys[(i + step) % len(keys)]
            self.t_switched = time.monotonic() if now is None else now
        elif action.startswith("pick_face_"):
            n = int(action.rsplit("_", 1)[1]) - 1
            if not 0 <= n < len(keys):
                return False
            self.selected_key = keys[n]
            self.t_switched = time.monotonic() if now is None else now
        elif action == "toggle_swap":
            self.swap_enabled = not self.swap_enabled
        elif action == "toggle_enhance":
            self.enhance_enabled = not self.enhance_enabled
        elif action == "toggle_debug":
            self.debug = not self.debug
        elif action == "snapshot":
            if not snapshots_enabled:
                return False
            self.snapshot_requested = True
        elif action in ("keepsake", "print_again"):
            if not keepsakes_enabled:
                return False
        elif action == "quit":
            if not allow_quit:
                log.info("quit refused: quitting is disabled in booth mode (controls.allow_quit)")
                return False
            self.quit_requested = True
        else:
            return False
        self.actions_applied += 1
        self.last_action = action
        self.history = (self.history + [action])[-20:]
        return True


def invert_bindings(bindings: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """``{action: [inputs]}`` → ``{input: action}``; inputs are upper-cased."""
    out: dict[str, str] = {}
    for action, inputs in bindings.items():
        for name in inputs:
            out[name.upper()] = action
    return out


class KeyboardInput:
    """Maps key names reported by the window (``"RIGHT"``, ``"CTRL+SHIFT+Q"``) to actions."""

    def __init__(self, bindings: Mapping[str, Iterable[str]]) -> None:
        self._by_key = invert_bindings(bindings)

    def actions(self, keys: Iterable[str]) -> list[str]:
        out = []
        for key in keys:
            action = self._by_key.get(key.upper())
            if action is None and "+" in key:  # a modified key with no combo binding: try it bare
                action = self._by_key.get(key.rsplit("+", 1)[1].upper())
            if action is not None:
                out.append(action)
        return out


class GamepadProvider(Protocol):
    def connected(self) -> list[int]:
        """Ids of the joysticks that have a gamepad mapping now."""
        ...

    def buttons(self, jid: int) -> tuple[bool, ...] | None:
        """Button states in :data:`GAMEPAD_BUTTONS` order, or None if it is gone."""
        ...


class GlfwGamepadProvider:
    """glfw's gamepad API (SDL_GameControllerDB mappings built into glfw)."""

    def __init__(self) -> None:
        import glfw

        self._glfw = glfw

    def connected(self) -> list[int]:
        g = self._glfw
        return [jid for jid in range(g.JOYSTICK_1, g.JOYSTICK_LAST + 1) if g.joystick_is_gamepad(jid)]

    def buttons(self, jid: int) -> tuple[bool, ...] | None:
        state = self._glfw.get_gamepad_state(jid)
        if not state:
            return None
        return tuple(bool(b) for b in state.buttons[: len(GAMEPAD_BUTTONS)])


@dataclass
class _Held:
    action: str
    t_down: float
    t_next_repeat: float


class GamepadInput:
    """Turns polled button states into actions: press edges, debounce, hold-to-repeat, hot-plug."""

    def __init__(
        self,
        provider: GamepadProvider,
        bindings: Mapping[str, Iterable[str]],
        debounce_s: float = 0.03,
        repeat_delay_s: float = 0.5,
        repeat_interval_s: float = 0.2,
    ) -> None:
        self.provider = provider
        self.debounce_s = debounce_s
        self.repeat_delay_s = repeat_delay_s
        self.repeat_interval_s = repeat_interval_s
        by_button = invert_bindings(bindings)
        unknown = sorted(set(by_button) - set(GAMEPAD_BUTTONS))
        if unknown:
            raise ValueError(
                f"unknown gamepad button(s) {', '.join(unknown)}; use {', '.join(GAMEPAD_BUTTONS)}"
            )
        self._by_index = {GAMEPAD_BUTTONS.index(b): a for b, a in by_button.items()}
        self._prev: dict[int, tuple[bool, ...]] = {}
        self._last_edge: dict[tuple[int, int], float] = {}
        self._held: dict[tuple[int, int], _Held] = {}
        self.connected: list[int] = []

    def poll(self, now: float | None = None) -> list[str]:
        now = time.monotonic() if now is None else now
        actions: list[str] = []
        ids = self.provider.connected()
        if ids != self.connected:
            for jid in set(ids) - set(self.connected):
                log.info("gamepad %d connected", jid)
            for jid in set(self.connected) - set(ids):
                log.info("gamepad %d disconnected", jid)
                self._forget(jid)
            self.connected = ids
        for jid in ids:
            state = self.provider.buttons(jid)
            if state is None:
                self._forget(jid)
                continue
            prev = self._prev.get(jid, (False,) * len(state))
            for index, action in self._by_index.items():
                if index >= len(state):
                    continue
                down, was_down = state[index], prev[index] if index < len(prev) else False
                key = (jid, index)
                if down and not was_down:
                    if now - self._last_edge.get(key, -1e9) >= self.debounce_s:
                        actions.append(action)
                        self._last_edge[key] = now
                        if action in REPEATING:
                            self._held[key] = _Held(action, now, now + self.repeat_delay_s)
                elif not down and was_down:
                    self._held.pop(key, None)
                elif down and key in self._held:
                    held = self._held[key]
                    if now >= held.t_next_repeat:
                        actions.append(held.action)
                        held.t_next_repeat = now + self.repeat_interval_s
            self._prev[jid] = state
        return actions

    def _forget(self, jid: int) -> None:
        self._prev.pop(jid, None)
        for key in [k for k in self._held if k[0] == jid]:
            del self._held[key]
