"""Controls: actions on the shared state, keyboard mapping, gamepad edges/debounce/repeat/hot-plug."""

from __future__ import annotations

import pytest

from kiosk.bindings import DEFAULT_GAMEPAD, DEFAULT_KEYBOARD, GAMEPAD_BUTTONS
from kiosk.booth.controls import (
    ControlState,
    GamepadInput,
    KeyboardInput,
)

KEYS = ("a", "b", "c")


def _apply(
    state: ControlState,
    action: str,
    allow_quit: bool = False,
    snapshots: bool = False,
    keys: tuple[str, ...] = KEYS,
) -> bool:
    return state.apply(action, allow_quit=allow_quit, snapshots_enabled=snapshots, keys=keys)


def test_next_prev_wrap_and_pick():
    s = ControlState()
    assert s.selected_index(KEYS) == 0  # nothing chosen yet: the first face
    assert _apply(s, "next_face") and s.selected_key == "b"
    _apply(s, "next_face")
    _apply(s, "next_face")
    assert s.selected_key == "a"  # wrapped
    _apply(s, "prev_face")
    assert s.selected_key == "c" and s.selected_index(KEYS) == 2
    assert _apply(s, "pick_face_1") and s.selected_key == "a"
    assert not _apply(s, "pick_face_9")  # no 9th face
    assert s.selected_key == "a"
    assert s.actions_applied == 5


def test_toggles_and_refusals():
    s = ControlState()
    assert not _apply(s, "next_face", keys=())  # no faces loaded
    assert not _apply(s, "pick_face_1", keys=())
    assert s.selected_index(()) is None
    assert _apply(s, "toggle_swap") and not s.swap_enabled
    assert _apply(s, "toggle_enhance") and s.enhance_enabled
    assert _apply(s, "toggle_debug") and s.debug
    assert not _apply(s, "snapshot")  # snapshots disabled: privacy by default
    assert _apply(s, "snapshot", snapshots=True) and s.snapshot_requested
    assert not _apply(s, "quit") and not s.quit_requested
    assert _apply(s, "quit", allow_quit=True) and s.quit_requested


def test_selection_is_the_key_resolved_against_the_keys_it_is_applied_to():
    s = ControlState(selected_key="c")
    assert s.selected_index(KEYS) == 2
    assert s.selected_index(("c", "x")) == 0  # the same face at its new place
    assert s.selected_index(("x", "y")) == 0  # the face is gone: the first one
    assert _apply(s, "next_face", keys=("x", "y")) and s.selected_key == "y"  # from the first
    assert _apply(s, "pick_face_2", keys=("p", "q", "r")) and s.selected_key == "q"
    assert not _apply(s, "pick_face_3", keys=("p", "q")) and s.selected_key == "q"


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
    from kiosk.app.kiosk_app import KioskApp, RunOptions
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
    view = app.session.step([key], None, 0.0)
    assert view.quit_requested is quits
    assert (view.actions == ("quit",)) is quits
