"""Attract mode: entered after ui.attract_after_s without a detected face, left as soon as one is seen."""

from __future__ import annotations

import numpy as np

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.booth.session import SessionView
from kiosk.config import parse_config
from kiosk.types import SwapResult


def _app(after_s: float) -> KioskApp:
    cfg = parse_config(f"ui: {{attract_after_s: {after_s}}}\nprocessing: {{enabled: false}}\n", "k.yaml")
    return KioskApp(cfg, RunOptions(headless=True))


def _result(faces: int) -> SwapResult:
    return SwapResult(frame_bgr=np.zeros((2, 2, 3), np.uint8), faces_detected=faces)


def _step(app: KioskApp, result: SwapResult | None, now: float) -> SessionView:
    return app.session.step([], result, now)


def test_enter_after_timeout_and_leave_on_a_face():
    app = _app(10.0)
    t0 = app.session.t_last_face
    _step(app, _result(0), t0 + 5)
    assert not app.attract
    _step(app, None, t0 + 9.9)  # no new frame: still counting
    assert not app.attract
    _step(app, _result(0), t0 + 10.5)
    assert app.attract
    view = _step(app, None, t0 + 10.5).booth
    assert view.attract and not view.show_carousel
    _step(app, _result(1), t0 + 11)  # someone steps in
    assert not app.attract
    assert _step(app, None, t0 + 11).booth.show_carousel
    _step(app, _result(0), t0 + 20)
    assert not app.attract  # the timer restarted at the last face
    _step(app, _result(0), t0 + 21.1)
    assert app.attract


def test_no_attract_without_detection_or_when_disabled():
    app = _app(1.0)
    t0 = app.session.t_last_face
    _step(app, _result(-1), t0 + 100)  # pass-through: nobody can tell
    assert not app.attract
    off = _app(0)
    _step(off, _result(0), off.session.t_last_face + 1000)
    assert not off.attract


def test_attract_cycles_faces():
    from session_fixtures import FakeLibrary

    from kiosk.booth.controls import ControlState
    from kiosk.booth.session import BoothSession

    app = _app(1.0)
    session = BoothSession(app.cfg, FakeLibrary(("0", "1", "2")), ControlState())
    cycle = app.cfg.ui.attract_cycle_s
    indices = [session.view(k * cycle + 0.1).booth.attract_index for k in range(6)]
    assert indices == [0, 1, 2, 0, 1, 2]
