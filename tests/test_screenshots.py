"""Screenshots (``--screenshot-every``) and snapshots are encoded and written off the render loop.

A PNG of a camera picture took 0.7-3.5 s to encode on a loaded 2-core machine; written inside the
render loop it stalled the frames (``--screenshot-every 0.2``: ~45 → ~2 fps). The render loop now
only reads the frame back and hands it to :class:`kiosk.render.shots.ShotWriter`: the newest
screenshot wins, each is renamed over the path (never half a PNG), snapshots are queued, none lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from test_render_loop import _app

from kiosk.app.kiosk_app import RunOptions
from kiosk.render import shots, window


def _frame(value: int) -> np.ndarray:
    rgb = np.zeros((18, 32, 3), np.uint8)
    rgb[..., 0] = value
    rgb[4:10, 4:20] = 255  # not blank
    return rgb


class SlowEncoder:
    """``window.save_png`` that, on its first call, does not return until the render loop has drawn
    ``frames`` more frames (or ``timeout_s`` of real time passed): it can only return early when the
    encode runs beside the render loop, not inside it."""

    def __init__(self, drawn: Any, frames: int = 5, timeout_s: float = 3.0) -> None:
        self.drawn, self.frames, self.timeout_s = drawn, frames, timeout_s
        self.calls = 0
        self.drawn_during_first = -1
        self.real = window.save_png

    def __call__(self, path: Any, rgb: Any) -> Path:
        self.calls += 1
        if self.calls == 1:
            start = self.drawn()
            deadline = time.monotonic() + self.timeout_s
            while self.drawn() < start + self.frames and time.monotonic() < deadline:
                time.sleep(0.005)
            self.drawn_during_first = self.drawn() - start
        return self.real(path, rgb)


def test_the_render_loop_keeps_drawing_while_a_screenshot_is_encoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shot = tmp_path / "live.png"
    app, clock, surface, _, _ = _app(
        RunOptions(headless=True, frames=120, screenshot=shot, screenshot_every_s=0.2), max_fps=20.0
    )
    reads: list[int] = []

    def read_rgb() -> np.ndarray:
        reads.append(len(surface.frames))
        return _frame(len(reads) % 256)

    surface.read_rgb = read_rgb  # type: ignore[method-assign]
    slow = SlowEncoder(lambda: len(surface.frames))
    monkeypatch.setattr(window, "save_png", slow)
    assert app.run() == 0
    assert len(surface.frames) == 120
    # the old loop encoded inside the frame: not one frame was drawn until the encode returned
    assert slow.drawn_during_first >= slow.frames
    # a read-back about every 0.2 s of (fake) time at 20 fps (4-5 frames), plus the final one at exit
    assert 120 // 5 + 1 <= len(reads) <= 120 // 4 + 1
    writer = app.shots.writer
    assert writer is not None and writer.idle
    assert writer.screenshots_replaced >= 1  # frames handed over during the slow encode: newest won
    assert writer.screenshots_written + writer.screenshots_replaced == len(reads)
    img = cv2.imread(str(shot))  # the final frame, on disk when run returned
    assert img is not None and int(img[0, 0, 2]) == len(reads) % 256
    assert not list(tmp_path.glob("*.tmp*"))


def test_the_newest_screenshot_wins_and_is_renamed_over_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shot = tmp_path / "s.png"
    release = threading.Event()
    written: list[int] = []
    real = window.save_png

    def gated(path: Path, rgb: np.ndarray) -> Path:
        release.wait(5.0)
        assert path == shots.screenshot_tmp(shot) and path.parent == shot.parent  # same folder
        written.append(int(rgb[0, 0, 0]))
        return real(path, rgb)

    monkeypatch.setattr(window, "save_png", gated)
    w = shots.ShotWriter()
    for v in range(1, 6):
        w.screenshot(shot, _frame(v))
        time.sleep(0.02)  # the first is taken by the thread, the others wait in turn
    assert not w.flush(0.05)  # still blocked in the encoder
    release.set()
    assert w.flush(5.0)
    w.close()
    assert written == [1, 5]  # 2, 3 and 4 were overtaken while 1 was written
    assert w.screenshots_replaced == 3 and w.screenshots_written == 2
    assert int(cv2.imread(str(shot))[0, 0, 2]) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.png"]


def test_a_failing_write_is_logged_leaves_no_temporary_file_and_the_writer_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    shot = tmp_path / "s.png"
    real = window.save_png
    calls: list[int] = []

    def flaky(path: Path, rgb: np.ndarray) -> Path:
        calls.append(1)
        real(path, rgb)
        if len(calls) == 1:
            raise OSError("No space left on device")
        return path

    monkeypatch.setattr(window, "save_png", flaky)
    w = shots.ShotWriter()
    w.screenshot(shot, _frame(1))
    assert w.flush(5.0)
    assert "screenshot not written: No space left on device" in caplog.text
    assert not shot.exists() and not list(tmp_path.iterdir())
    w.screenshot(shot, _frame(2))
    w.close()
    assert int(cv2.imread(str(shot))[0, 0, 2]) == 2


def test_snapshots_are_written_by_the_writer_none_dropped(tmp_path: Path) -> None:
    def on_frame(n: int) -> None:
        if n in (3, 4, 10):
            app.controls.snapshot_requested = True

    app, _, surface, _, _ = _app(RunOptions(headless=True, frames=20), on_frame=on_frame)
    app.reload.cfg = app.cfg.model_copy(
        update={"snapshots": app.cfg.snapshots.model_copy(update={"enabled": True, "dir": str(tmp_path)})}
    )
    surface.read_rgb = lambda: _frame(200)  # type: ignore[method-assign]
    assert app.run() == 0
    assert app.shots.snapshots_written == 3  # counted once written; all written before run returned
    files = sorted(tmp_path.glob("snapshot-*.jpg"))
    assert 1 <= len(files) <= 3  # named by the millisecond: two in the same one share a name
    assert cv2.imread(str(files[0])) is not None
