"""A source change never blocks the render loop and never leaves two producers on one buffer.

The sources here block on purpose (``time.sleep`` releases the GIL, as a V4L2 read does): a read
that takes 1 s, a read that does not return for 4 s, an open that takes 0.3 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from egl_helpers import egl_available

import kiosk.app.wiring
from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.capture.thread import CaptureThread, new_captured_frame
from kiosk.config import KioskConfig, SourceConfig, parse_config
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, FrameBGR

W, H = 320, 180
RED, BLUE = (0, 0, 200), (200, 0, 0)  # BGR

BASE = f"""
display: {{width: {W}, height: {H}, max_fps: 60}}
processing: {{enabled: false}}
overlay: {{debug: false, status_line: false}}
"""
CFG_A = "source: {kind: synthetic, synthetic: {width: 320, height: 180, fps: 30}, mirror: false}\n"
CFG_B = "source: {kind: image, path: b.png, mirror: false}\n"


class BlockingSource:
    """Frames of one colour; after ``fluent_s`` of reads every read blocks ``block_s``; the open
    takes ``open_s``."""

    def __init__(self, colour: tuple[int, int, int], fluent_s: float, block_s: float, open_s: float) -> None:
        self.colour, self.fluent_s, self.block_s, self.open_s = colour, fluent_s, block_s, open_s
        self.description = f"blocking {colour}"
        self.t_open = 0.0
        self.closed = False

    def open(self) -> None:
        time.sleep(self.open_s)
        self.t_open = time.perf_counter()

    def read(self, out: FrameBGR | None) -> FrameBGR:
        time.sleep(1 / 30)
        if time.perf_counter() - self.t_open > self.fluent_s:
            time.sleep(self.block_s)
        return np.full((H, W, 3), self.colour, np.uint8)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def buffers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[TripleBuffer]]:  # type: ignore[type-arg]
    """Every triple buffer made during the test, to check none had two producers."""
    made: list[TripleBuffer] = []  # type: ignore[type-arg]
    real = TripleBuffer.__init__

    def init(self: TripleBuffer, factory) -> None:  # type: ignore[type-arg, no-untyped-def]
        real(self, factory)
        made.append(self)

    monkeypatch.setattr(TripleBuffer, "__init__", init)
    yield made


def _conflicts(made: list[TripleBuffer]) -> int:  # type: ignore[type-arg]
    return sum(getattr(b, "producer_conflicts", 0) for b in made)


def _wait(cond, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- the capture thread alone (no GL) ------------------------------------------------------------
def test_switch_returns_at_once_and_the_same_thread_opens_the_new_source(buffers) -> None:  # type: ignore[no-untyped-def]
    cfg = SourceConfig()
    out: TripleBuffer[CapturedFrame] = TripleBuffer(new_captured_frame)
    stop = threading.Event()
    a = BlockingSource(RED, fluent_s=0.2, block_s=0.5, open_s=0.0)
    b = BlockingSource(BLUE, fluent_s=60.0, block_s=0.0, open_s=0.3)
    cap = CaptureThread(cfg, lambda: a, out, stop)
    cap.start()
    try:
        assert _wait(lambda: out.generation >= 3)
        time.sleep(0.3)  # now inside a 0.5 s read
        t0 = time.perf_counter()
        cap.switch(cfg, lambda: b)
        assert time.perf_counter() - t0 < 0.05
        assert cap.switch_pending is not None
        assert _wait(lambda: cap.description.startswith("blocking (200"))
        assert a.closed and cap.switches == 1 and cap.meters.reconnects == 0
        gen = out.generation
        assert _wait(lambda: out.generation >= gen + 3)
        frame = out.read()
        assert frame is not None and tuple(frame.frame_bgr[0, 0]) == BLUE
        assert cap.is_alive() and cap.switch_stuck_for(time.perf_counter()) == 0.0
    finally:
        stop.set()
        cap.join(2.0)
    assert out.producer_conflicts == 0


def test_a_switch_ends_the_reconnect_back_off_at_once() -> None:
    class Gone:
        description = "gone"

        def open(self) -> None:
            from kiosk.capture.sources import SourceError

            raise SourceError("camera 0 not found")

        def read(self, out: FrameBGR | None) -> FrameBGR:
            raise AssertionError

        def close(self) -> None:
            pass

    cfg = SourceConfig(reconnect_initial_s=30.0, reconnect_max_s=30.0)
    out: TripleBuffer[CapturedFrame] = TripleBuffer(new_captured_frame)
    stop = threading.Event()
    cap = CaptureThread(cfg, Gone, out, stop)
    cap.start()
    try:
        assert _wait(lambda: cap.state == "reconnecting")
        b = BlockingSource(BLUE, fluent_s=60.0, block_s=0.0, open_s=0.0)
        t0 = time.perf_counter()
        cap.switch(cfg, lambda: b)
        assert _wait(lambda: out.generation >= 1, 2.0)  # not after the 30 s back-off
        assert time.perf_counter() - t0 < 2.0
    finally:
        stop.set()
        cap.join(2.0)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_supervise_restarts_a_dead_capture_thread_on_its_buffers_without_a_conflict(buffers) -> None:  # type: ignore[no-untyped-def]
    class Dies(BlockingSource):
        def read(self, out: FrameBGR | None) -> FrameBGR:
            if time.perf_counter() - self.t_open > 0.2:
                raise SystemExit  # not an Exception: ends the thread, as a bug in native code would
            return super().read(out)

    made = iter([Dies(RED, 60.0, 0.0, 0.0), BlockingSource(BLUE, 60.0, 0.0, 0.0)])
    app = KioskApp(
        parse_config(BASE + CFG_A, "t.yaml"), RunOptions(headless=True), source_factory=lambda: next(made)
    )
    first = app.capture
    first.start()
    app.inference.start()
    try:
        assert _wait(lambda: not first.is_alive())
        gen = app.capture_buf.generation
        app.supervise()
        assert app.capture is not first and app.supervisor.thread_restarts == 1
        assert app.capture_buf is first.out  # a dead thread publishes nothing: same buffers
        assert _wait(lambda: app.capture_buf.generation >= gen + 3)
    finally:
        app.shutdown()
    assert _conflicts(buffers) == 0


# -- the whole kiosk, headless ---------------------------------------------------------------------
def _run_with_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, a: BlockingSource, seconds: float
) -> tuple[KioskApp, dict[str, float], list[float], np.ndarray]:
    import cv2

    cv2.imwrite(str(tmp_path / "b.png"), np.full((H, W, 3), BLUE, np.uint8))
    b = BlockingSource(BLUE, fluent_s=60.0, block_s=0.0, open_s=0.3)
    monkeypatch.setattr(
        kiosk.app.wiring, "make_source", lambda cfg, base: a if cfg.kind == "synthetic" else b
    )
    cfg_a = parse_config(BASE + CFG_A, "t.yaml", base_dir=tmp_path)
    cfg_b: KioskConfig = parse_config(BASE + CFG_B, "t.yaml", base_dir=tmp_path)
    shot = tmp_path / "end.png"
    app = KioskApp(cfg_a, RunOptions(headless=True, seconds=seconds, screenshot=shot))
    timing: dict[str, float] = {}
    frames: list[float] = []
    real_poll, real_overlay = app.poll_config, app.overlay_texts

    def poll() -> None:
        real_poll()
        if not timing and app._t_start and time.perf_counter() - app._t_start > 0.8:
            t0 = time.perf_counter()
            app.apply_config(cfg_b)
            timing["t_switch"] = t0
            timing["apply_s"] = time.perf_counter() - t0

    def overlay(now: float, *counters):  # type: ignore[no-untyped-def]
        frames.append(now)
        cap = app.capture
        if "t_new" not in timing and cap.state == "running" and cap.description.startswith("blocking (200"):
            timing["t_new"] = now  # the new source's first frame is out
        return real_overlay(now, *counters)

    app.poll_config = poll  # type: ignore[method-assign]
    app.overlay_texts = overlay  # type: ignore[method-assign]
    assert app.run() == 0
    print(
        f"\napply_config {timing['apply_s'] * 1000:.2f} ms; new source running "
        f"{timing.get('t_new', float('nan')) - timing['t_switch']:.2f} s after the change; "
        f"longest render gap after it {_max_gap_after(frames, timing['t_switch']) * 1000:.0f} ms"
    )
    from PIL import Image

    return app, timing, frames, np.asarray(Image.open(shot).convert("RGB"))


def _max_gap_after(frames: list[float], t: float) -> float:
    after = [f for f in frames if f >= t - 0.05]
    return float(max(np.diff(after))) if len(after) > 1 else float("inf")


@pytest.mark.gl
@pytest.mark.skipif(not egl_available(), reason="no EGL for the headless surface")
def test_switch_from_a_slow_source_keeps_the_loop_drawing_and_the_thread(
    tmp_path, monkeypatch, buffers
) -> None:  # type: ignore[no-untyped-def]
    """Each read of the old source takes 1 s: the switch waits for none of them."""
    a = BlockingSource(RED, fluent_s=0.3, block_s=1.0, open_s=0.0)
    app, timing, frames, shot = _run_with_switch(tmp_path, monkeypatch, a, seconds=3.0)
    assert timing["apply_s"] < 0.05  # back in the render loop at once
    # It kept drawing (the bound is loose for a loaded machine: llvmpipe may stall an upload).
    assert _max_gap_after(frames, timing["t_switch"]) < 0.8
    assert app.capture.switches == 1 and app.supervisor.thread_restarts == 0  # the same thread switched
    assert a.closed
    assert app.capture.description.startswith("blocking (200")
    centre = shot[H // 2, W // 2]
    assert centre[2] > 150 and centre[0] < 60  # the new source (blue) on screen
    assert _conflicts(buffers) == 0


@pytest.mark.slow
@pytest.mark.gl
@pytest.mark.skipif(not egl_available(), reason="no EGL for the headless surface")
def test_switch_from_a_stuck_source_abandons_it_for_fresh_buffers(tmp_path, monkeypatch, buffers) -> None:  # type: ignore[no-untyped-def]
    """The old source's read does not return for 4 s: a fresh thread on fresh buffers shows the
    new source, and the stuck one, when its read returns, publishes into nothing anyone reads."""
    monkeypatch.setattr(CaptureThread, "switch_timeout_s", 0.8, raising=False)
    a = BlockingSource(RED, fluent_s=0.3, block_s=4.0, open_s=0.0)
    app, timing, frames, shot = _run_with_switch(tmp_path, monkeypatch, a, seconds=5.0)
    assert timing["apply_s"] < 0.05
    assert _max_gap_after(frames, timing["t_switch"]) < 0.8
    assert app.supervisor.thread_restarts == 1  # the stuck thread was replaced
    assert app.inference.inp is app.capture_buf  # inference reads the fresh buffer
    assert app.capture.description.startswith("blocking (200")
    centre = shot[H // 2, W // 2]
    assert centre[2] > 150 and centre[0] < 60
    assert a.closed  # the stuck thread closed its source when the read returned
    assert _conflicts(buffers) == 0


def test_a_stuck_thread_in_live_mode_leaves_all_three_buffers_to_the_fresh_one(buffers, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """display.mode live: the capture thread also reads the anchors and writes the live frames;
    its replacement gets fresh ones of both, wired to the inference thread and the live feed."""
    monkeypatch.setattr(CaptureThread, "switch_timeout_s", 0.3)
    live_cfg = BASE.replace("max_fps: 60}", "max_fps: 60, mode: live}")
    a = BlockingSource(RED, fluent_s=0.3, block_s=2.0, open_s=0.0)
    b = BlockingSource(BLUE, fluent_s=60.0, block_s=0.0, open_s=0.0)
    monkeypatch.setattr(
        kiosk.app.wiring, "make_source", lambda cfg, base: a if cfg.kind == "synthetic" else b
    )
    app = KioskApp(parse_config(live_cfg + CFG_A, "t.yaml"), RunOptions(headless=True))
    old_capture, old_live, old_anchors = app.capture, app.live_buf, app.anchor_buf
    app.capture.start()
    app.inference.start()
    try:
        assert _wait(lambda: old_live.generation >= 3)
        time.sleep(0.2)  # inside the stuck read
        t0 = time.perf_counter()
        app.apply_config(parse_config(live_cfg + CFG_B, "t.yaml"))
        assert time.perf_counter() - t0 < 0.05
        time.sleep(0.4)
        app.supervise()  # the switch has waited past switch_timeout_s
        assert app.capture is not old_capture and old_capture.abandoned
        assert app.live_buf is not old_live and app.anchor_buf is not old_anchors
        # the inference thread takes its new buffers itself, at its next iteration (rewire's queue)
        assert _wait(lambda: app.inference.anchors is app.anchor_buf and app.inference.inp is app.capture_buf)
        assert app.live_feed is not None and app.live_feed.anchors is app.anchor_buf
        assert app.capture.live is app.live_feed and app.live_feed.out is app.live_buf
        assert _wait(lambda: app.live_buf.generation >= 3)
        frame = app.live_buf.read()
        assert frame is not None and tuple(frame.frame_bgr[0, 0]) == BLUE
        gen = old_live.generation
        assert _wait(lambda: not old_capture.is_alive(), 4.0)  # its read returned: it left
        assert old_live.generation == gen and a.closed  # without publishing again
    finally:
        app.shutdown()
    assert _conflicts(buffers) == 0
