"""The whole threaded runtime, headless: frames flow, failures show a message and recover,
a raising stage is restarted, config reload applies or rejects, SIGTERM stops quickly."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from egl_helpers import skip_module_without_egl

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.app.wiring import Renew
from kiosk.capture.sources import SourceError
from kiosk.config import parse_config
from kiosk.types import SwapResult

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.gl

SMALL = """
source: {kind: synthetic, synthetic: {width: 320, height: 180, fps: 60}, mirror: false}
display: {width: 320, height: 180, max_fps: 120}
processing: {enabled: false}
overlay: {debug: true}
"""


skip_module_without_egl()


def _cfg(extra: str = "", base: Path | None = None):
    return parse_config(SMALL + extra, "test.yaml", base_dir=base)


def test_headless_run_writes_screenshot_and_stats(tmp_path):
    shot, stats = tmp_path / "s.png", tmp_path / "s.json"
    app = KioskApp(_cfg(), RunOptions(headless=True, frames=90, screenshot=shot, stats_json=stats))
    assert app.run() == 0
    data = json.loads(stats.read_text())
    assert data["frames"]["rendered"] == 90
    assert data["frames"]["captured"] > 10 and data["frames"]["processed"] > 10
    assert data["fps"]["render"] > 20
    assert data["latency_ms"]["capture_to_display_p50"] is not None
    assert data["latency_ms"]["capture_to_display_p95"] >= data["latency_ms"]["capture_to_display_p50"]
    assert set(data["dropped"]) == {
        "capture_to_processing",
        "processing_to_display",
        "capture_to_display_live",
        "total",
    }
    import cv2

    img = cv2.imread(str(shot))
    assert img.shape == (180, 320, 3)
    assert img.std() > 10  # the pattern, not a blank screen
    assert not app.capture.is_alive() and not app.inference.is_alive()


def test_screenshot_every_rewrites_the_png_while_running(tmp_path):
    import cv2

    shot = tmp_path / "live.png"
    app = KioskApp(_cfg(), RunOptions(headless=True, seconds=2.0, screenshot=shot, screenshot_every_s=0.2))
    seen: list[tuple[int, tuple[int, ...]]] = []
    runner = threading.Thread(target=app.run)
    runner.start()
    while runner.is_alive():
        try:
            st = shot.stat()
        except FileNotFoundError:
            time.sleep(0.02)
            continue
        if not seen or st.st_mtime_ns != seen[-1][0]:
            img = cv2.imread(str(shot))
            assert img is not None, "a reader saw a partly written PNG"
            seen.append((st.st_mtime_ns, img.shape))
        time.sleep(0.02)
    runner.join()
    assert len(seen) >= 4  # about every 0.2 s for 2 s, not only at exit
    assert all(shape == (180, 320, 3) for _, shape in seen)
    assert not list(tmp_path.glob("*.tmp*"))


class FailingThenOk:
    """A camera that works, is 'unplugged' for a while, then comes back."""

    description = "fake camera"
    t_unplug = 0.0
    opens = 0

    def __init__(self, unplug_after_s: float, down_for_s: float) -> None:
        self.unplug_after_s = unplug_after_s
        self.down_for_s = down_for_s

    def open(self) -> None:
        cls = FailingThenOk
        if cls.t_unplug and time.perf_counter() - cls.t_unplug < self.down_for_s:
            raise SourceError("camera 0 cannot be opened (unplugged)")
        cls.opens += 1
        self.t_open = time.perf_counter()

    def read(self, out):
        time.sleep(1 / 60)
        if FailingThenOk.opens == 1 and time.perf_counter() - self.t_open > self.unplug_after_s:
            FailingThenOk.t_unplug = time.perf_counter()
            raise SourceError("camera 0 stopped delivering frames (unplugged?)")
        return np.full((180, 320, 3), 100 * FailingThenOk.opens % 255, np.uint8)

    def close(self) -> None:
        pass


def test_source_failure_shows_message_keeps_rendering_and_recovers():
    FailingThenOk.opens, FailingThenOk.t_unplug = 0, 0.0
    cfg = _cfg("", None).model_copy(
        update={"source": _cfg("source: {reconnect_initial_s: 0.05, reconnect_max_s: 0.1}").source}
    )
    app = KioskApp(
        cfg, RunOptions(headless=True, seconds=2.5), source_factory=lambda: FailingThenOk(0.4, 0.6)
    )
    seen_messages: list[str] = []
    rendered_during_outage: list[int] = []
    real = app.overlay_texts

    def spy(now, *counters):
        texts = real(now, *counters)
        if texts["message"]:
            seen_messages.append(texts["message"])
            rendered_during_outage.append(app.render_rate.count)
        return texts

    app.overlay_texts = spy  # type: ignore[method-assign]
    assert app.run() == 0
    assert any("Camera unavailable" in m and "reconnecting" in m for m in seen_messages)
    assert len(set(rendered_during_outage)) > 5  # the display kept drawing during the outage
    assert FailingThenOk.opens == 2  # came back by itself
    assert app.capture.meters.reconnects >= 1
    assert app.stats()["source"]["reconnects"] >= 1


class Exploding:
    """Fails calls 5..9 of the first stage built (five in a row: the stage is rebuilt)."""

    name = "exploding"
    built = 0

    def __init__(self) -> None:
        Exploding.built += 1
        self.calls = 0

    def process(self, frame_bgr, out: SwapResult) -> None:
        self.calls += 1
        if Exploding.built == 1 and 5 <= self.calls < 10:
            raise RuntimeError("CUDA failure 700")
        np.subtract(255, frame_bgr, out=out.frame_bgr)
        out.notice = ""


def test_repeatedly_raising_stage_is_rebuilt():
    Exploding.built = 0
    app = KioskApp(_cfg(), RunOptions(headless=True, seconds=2.5), processor_factory=Exploding)
    app.workers.spec = dataclasses.replace(app.workers.spec, restart_initial_s=0.1)
    app.workers.rebuild(Renew.INFERENCE, start=False)  # run() starts it
    assert app.run() == 0
    s = app.stats()
    assert s["processing"]["errors"] == 5
    assert s["processing"]["restarts"] == 1
    assert Exploding.built == 2
    assert "CUDA failure 700" in s["processing"]["last_error"]
    assert s["frames"]["processed"] > 20  # frames kept flowing


@pytest.mark.slow
def test_live_reload_applies_valid_and_rejects_invalid(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(SMALL)
    from kiosk.config import load_config

    app = KioskApp(load_config(path), RunOptions(headless=True, seconds=4.0), config_path=path)
    app.reload.watcher.interval_s = 0.05  # type: ignore[union-attr]
    results: dict[str, object] = {}

    def edit():
        time.sleep(0.8)
        path.write_text(SMALL.replace("fps: 60", "fps: 20") + "controls: {keyboard: {next_face: [X]}}\n")
        time.sleep(0.8)
        results["fps_after_valid"] = app.capture.cfg.synthetic.fps
        results["binding"] = app.keyboard.actions(["X"])
        path.write_text(SMALL + "display: {fit: sideways}\n")
        time.sleep(0.8)
        results["notice"] = app.overlay_texts(time.perf_counter())["notice"]
        results["fps_after_invalid"] = app.cfg.source.synthetic.fps

    t = threading.Thread(target=edit)
    t.start()
    app.run()
    t.join()
    assert results["fps_after_valid"] == 20  # capture restarted with the new source settings
    assert results["binding"] == ["next_face"]
    assert "config change ignored" in str(results["notice"]) and "display.fit" in str(results["notice"])
    assert results["fps_after_invalid"] == 20  # the running config was kept


def test_sigterm_shuts_down_within_two_seconds(tmp_path):
    cfg = tmp_path / "k.yaml"
    cfg.write_text(SMALL)
    stats = tmp_path / "s.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kiosk",
            "run",
            "--config",
            str(cfg),
            "--headless",
            "--stats-json",
            str(stats),
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 30
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until frames flow
            if "source open" in line or time.time() > deadline:
                break
        time.sleep(0.5)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=10)
        elapsed = time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0
    assert elapsed < 2.0, f"shutdown took {elapsed:.2f} s"
    data = json.loads(stats.read_text())
    assert data["source"]["state"] == "stopped"  # capture thread ended and released the source
    assert data["frames"]["rendered"] > 0


class HangsAfterTen:
    """Every call after the tenth (over all stages built) blocks until ``gate`` is set."""

    name = "hangs"
    calls = 0
    gate = threading.Event()

    def process(self, frame_bgr, out: SwapResult) -> None:
        HangsAfterTen.calls += 1
        if HangsAfterTen.calls > 10:
            HangsAfterTen.gate.wait(10)
        np.copyto(out.frame_bgr, frame_bgr)
        out.notice = ""


@pytest.mark.slow
def test_overlay_says_stalled_instead_of_a_rate_while_processing_hangs():
    HangsAfterTen.calls = 0
    HangsAfterTen.gate.clear()
    cfg = parse_config(
        SMALL.replace("processing: {enabled: false}", "processing: {stall_s: 0.5, load_stall_s: 0.5}"),
        "test.yaml",
    )
    app = KioskApp(cfg, RunOptions(headless=True, seconds=3.0), processor_factory=HangsAfterTen)
    lines: list[tuple[int, str]] = []
    real = app.overlay_texts

    def spy(now, *counters):
        texts = real(now, *counters)
        lines.append((HangsAfterTen.calls, next(x for x in texts["debug_lines"] if x.startswith("process"))))
        return texts

    app.overlay_texts = spy  # type: ignore[method-assign]
    try:
        assert app.run() == 0
    finally:
        HangsAfterTen.gate.set()
    hung = [line for calls, line in lines if calls > 10]
    assert len(hung) > 30
    late = hung[len(hung) // 2 :]  # well past stall_s
    assert all("stalled" in line for line in late), late[:3]
    assert app.supervisor.abandoned_threads >= 1
