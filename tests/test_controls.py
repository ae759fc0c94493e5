"""Controls: actions on the shared state, keyboard mapping, gamepad edges/debounce/repeat/hot-plug."""

from __future__ import annotations

import pytest

from kiosk.bindings import DEFAULT_GAMEPAD, DEFAULT_KEYBOARD, GAMEPAD_BUTTONS
from kiosk.booth.controls import (
    ControlState,
    GamepadInput,
    KeyboardInput,
)


def _apply(state: ControlState, action: str, allow_quit: bool = False, snapshots: bool = False) -> bool:
    return state.apply(action, allow_quit=allow_quit, snapshots_enabled=snapshots)


def test_next_prev_wrap_and_pick():
    s = ControlState(face_count=3)
    assert _apply(s, "next_face") and s.selected_face == 1
    _apply(s, "next_face")
    _apply(s, "next_face")
    assert s.selected_face == 0  # wrapped
    _apply(s, "prev_face")
    assert s.selected_face == 2
    assert _apply(s, "pick_face_1") and s.selected_face == 0
    assert not _apply(s, "pick_face_9")  # no 9th face
    assert s.selected_face == 0
    assert s.actions_applied == 5


def test_toggles_and_refusals():
    s = ControlState(face_count=0)
    assert not _apply(s, "next_face")  # no faces loaded
    assert _apply(s, "toggle_swap") and not s.swap_enabled
    assert _apply(s, "toggle_enhance") and s.enhance_enabled
    assert _apply(s, "toggle_debug") and s.debug
    assert not _apply(s, "snapshot")  # snapshots disabled: privacy by default
    assert _apply(s, "snapshot", snapshots=True) and s.snapshot_requested
    assert not _apply(s, "quit") and not s.quit_requested
    assert _apply(s, "quit", allow_quit=True) and s.quit_requested


def test_clamp_keeps_selection_valid():
    s = ControlState(face_count=5, selected_face=4)
    s.clamp(2)
    assert s.selected_face == 1 and s.face_count == 2
    s.clamp(0)
    assert s.selected_face == 0


def test_keyboard_maps_defaults_and_combos():
    kb = KeyboardInput(DEFAULT_KEYBOARD)
    assert kb.actions(["RIGHT", "LEFT", "3", "SPACE", "F1", "CTRL+SHIFT+Q", "ESCAPE"]) == [
        "next_face", "prev_face", "pick_face_3", "toggle_swap", "toggle_debug", "quit", "quit",
    ]  # fmt: skip
    assert kb.actions(["SHIFT+RIGHT"]) == ["next_face"]  # a modifier does not hide a plain binding
    assert kb.actions(["Z"]) == []


class FakePads:
    """A scriptable joystick-state provider."""

    def __init__(self) -> None:
        self.pads: dict[int, list[bool]] = {}

    def plug(self, jid: int) -> None:
        self.pads[jid] = [False] * len(GAMEPAD_BUTTONS)

    def unplug(self, jid: int) -> None:
        del self.pads[jid]

    def set(self, jid: int, button: str, down: bool) -> None:
        self.pads[jid][GAMEPAD_BUTTONS.index(button)] = down

    def connected(self) -> list[int]:
        return sorted(self.pads)

    def buttons(self, jid: int):
        pad = self.pads.get(jid)
        return tuple(pad) if pad is not None else None


def test_gamepad_press_edges_only():
    pads = FakePads()
    pads.plug(0)
    gp = GamepadInput(pads, DEFAULT_GAMEPAD, debounce_s=0.03)
    assert gp.poll(0.0) == []
    pads.set(0, "A", True)
    assert gp.poll(0.1) == ["toggle_swap"]
    assert gp.poll(0.2) == []  # still held: A does not repeat
    pads.set(0, "A", False)
    assert gp.poll(0.3) == []
    pads.set(0, "A", True)
    assert gp.poll(0.4) == ["toggle_swap"]


def test_gamepad_debounce_ignores_bounce():
    pads = FakePads()
    pads.plug(0)
    gp = GamepadInput(pads, DEFAULT_GAMEPAD, debounce_s=0.05)
    pads.set(0, "A", True)
    assert gp.poll(1.000) == ["toggle_swap"]
    pads.set(0, "A", False)
    gp.poll(1.010)
    pads.set(0, "A", True)  # contact bounce 20 ms after the press
    assert gp.poll(1.020) == []


def test_gamepad_hold_to_repeat():
    pads = FakePads()
    pads.plug(0)
    gp = GamepadInput(pads, DEFAULT_GAMEPAD, repeat_delay_s=0.5, repeat_interval_s=0.2)
    pads.set(0, "DPAD_RIGHT", True)
    got = []
    for k in range(27):  # polls every 50 ms up to 1.3 s
        got += gp.poll(k / 20)
    # press at 0.0, repeats at ~0.5, 0.7, 0.9, 1.1, 1.3
    assert got.count("next_face") == 6
    pads.set(0, "DPAD_RIGHT", False)
    assert gp.poll(1.4) == []
    assert gp.poll(2.0) == []


def test_gamepad_hot_plug():
    pads = FakePads()
    gp = GamepadInput(pads, DEFAULT_GAMEPAD)
    assert gp.poll(0.0) == []  # nothing connected
    pads.plug(1)
    pads.set(1, "RIGHT_BUMPER", True)  # held while being plugged in: counts as a press
    assert gp.poll(0.1) == ["next_face"]
    assert gp.connected == [1]
    pads.unplug(1)
    assert gp.poll(0.2) == [] and gp.connected == []
    pads.plug(1)
    pads.set(1, "LEFT_BUMPER", True)
    assert gp.poll(0.3) == ["prev_face"]
    pads.plug(2)
    pads.set(2, "A", True)
    assert gp.poll(0.4) == ["toggle_swap"]


def test_gamepad_rejects_unknown_buttons():
    with pytest.raises(ValueError, match="unknown gamepad button"):
        GamepadInput(FakePads(), {"next_face": ["TRIGGER_9"]})


def _app(fullscreen: bool, allow_quit: str = "null"):
    from kiosk.app import KioskApp, RunOptions
    from kiosk.config import parse_config

    cfg = parse_config(
        f"display: {{fullscreen: {str(fullscreen).lower()}}}\ncontrols: {{allow_quit: {allow_quit}}}\n"
        "processing: {enabled: false}\n",
        "k.yaml",
    )
    return KioskApp(cfg, RunOptions(headless=True))


@pytest.mark.parametrize(
    ("fullscreen", "allow_quit", "key", "quits"),
    [
        (False, "null", "ESCAPE", True),  # a window: Esc quits
        (True, "null", "ESCAPE", False),  # booth: a visitor's Esc does nothing
        (True, "null", "SHIFT+ESCAPE", False),  # nor Esc with a modifier
        (True, "null", "CTRL+SHIFT+Q", True),  # the deliberate combination
        (True, "true", "ESCAPE", True),
        (False, "false", "CTRL+SHIFT+Q", False),
    ],
)
def test_quit_policy(fullscreen, allow_quit, key, quits):
    app = _app(fullscreen, allow_quit)
    app._handle_input([key])
    assert app.stop.is_set() is quits
