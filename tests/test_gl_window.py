"""The glfw window under a private Xvfb server (skipped when Xvfb is not installed)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import OverlayState, Renderer
from kiosk.render.window import DisplayError, Window, open_surface

pytestmark = pytest.mark.gl

XVFB_SIZE = (1280, 720)  # the screen of the conftest xvfb_display server


@pytest.fixture
def on_xvfb(xvfb_display: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A private Xvfb (tests/conftest.py) as DISPLAY."""
    monkeypatch.setenv("DISPLAY", xvfb_display)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    return xvfb_display


def test_window_draws_and_reads_back(on_xvfb: str) -> None:
    display = DisplayOptions(width=320, height=240, vsync=False)
    window = open_surface(display, headless=False)
    assert isinstance(window, Window)
    renderer = Renderer(window.ctx, display)
    try:
        frame = np.zeros((120, 160, 3), np.uint8)
        frame[:, :80] = (255, 0, 0)  # blue (BGR)
        frame[:, 80:] = (0, 0, 255)  # red
        for _ in range(2):  # two frames: draw, read, present
            window.poll_events()
            size = window.begin_frame()
            assert size == (320, 240)
            renderer.set_frame(frame)
            renderer.draw(size, OverlayState(status="window test"))
            assert window.ctx.error == "GL_NO_ERROR"
            rgb = window.read_rgb()
            assert window.ctx.error == "GL_NO_ERROR"
            window.end_frame()
        assert rgb.shape == (240, 320, 3)
        assert tuple(rgb[60, 80]) == (0, 0, 255)
        assert tuple(rgb[60, 240]) == (255, 0, 0)
        assert rgb[200:, :100].max(axis=2).min() < 200, "status box darkens the bottom-left"
        assert not window.should_close()
    finally:
        renderer.release()
        window.close()


def _keys_typed_into_window(xdotool_keys: list[str], expect: int) -> list[str]:
    """Open a small window, type ``xdotool_keys`` into it, return the key names it reports
    (waiting for ``expect`` of them, then a little longer so late extras show up too)."""
    xdotool = shutil.which("xdotool")
    if xdotool is None:
        pytest.skip("xdotool not installed")
    window = Window(DisplayOptions(width=320, height=240, vsync=False, title="kiosk-key-test"))
    try:
        window.begin_frame()
        window.end_frame()
        window.poll_events()
        # No window manager: keyboard focus follows the pointer, so park it over the window.
        subprocess.run([xdotool, "mousemove", "100", "100"], check=True, timeout=10)
        subprocess.run([xdotool, "key", *xdotool_keys], check=True, timeout=10)
        keys: list[str] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and len(keys) < expect:
            keys += window.poll_events()
            time.sleep(0.01)
        time.sleep(0.1)
        return keys + window.poll_events()
    finally:
        window.close()


def test_window_reports_key_presses(on_xvfb: str) -> None:
    assert _keys_typed_into_window(["Escape", "d", "F1", "Left"], 4) == ["ESCAPE", "D", "F1", "LEFT"]


def test_window_reports_modifiers_in_a_fixed_order(on_xvfb: str) -> None:
    combos = ["ctrl+shift+q", "shift+ctrl+a", "alt+F4", "super+Right", "ctrl+alt+shift+super+x", "q"]
    expected = ["CTRL+SHIFT+Q", "CTRL+SHIFT+A", "ALT+F4", "SUPER+RIGHT", "CTRL+SHIFT+ALT+SUPER+X", "Q"]
    # the lone modifiers at the end must not show up, not even late
    assert _keys_typed_into_window([*combos, "Control_L", "Shift_R"], len(expected)) == expected


def test_key_name_order_and_lone_modifiers() -> None:
    from kiosk.render.window import key_name

    assert key_name("Q", 0) == "Q"
    assert key_name("Q", 0x1 | 0x2) == "CTRL+SHIFT+Q"
    assert key_name("F4", 0x8 | 0x4) == "ALT+SUPER+F4"
    assert key_name("Q", 0x10 | 0x20) == "Q", "Caps/Num Lock are not modifiers"
    assert key_name("LEFT_CONTROL", 0x2) is None and key_name("RIGHT_SHIFT", 0) is None


def test_fullscreen_missing_monitor_falls_back_to_primary(
    on_xvfb: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kiosk.render.window")
    window = Window(DisplayOptions(fullscreen=True, monitor=7, vsync=True))
    try:
        assert window.begin_frame() == XVFB_SIZE
        assert any("monitor 7 not found" in r.getMessage() for r in caplog.records)
    finally:
        window.close()


def test_no_display_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if not sys.platform.startswith("linux"):
        pytest.skip("the DISPLAY check is for Linux (X11/Wayland)")
    with pytest.raises(DisplayError) as err:
        Window(DisplayOptions())
    message = str(err.value)
    assert "DISPLAY unset" in message and "--headless" in message and "\n" not in message
