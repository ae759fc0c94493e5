"""display.mode live in the whole threaded runtime, headless, with a slow processing stage.

The stage "detects" a textured patch with a white ring on a moving frame (the bench's walking-speed
sway), returns a tinted crop of it with its affine, and sleeps to cost 350 ms a frame (sleep
releases the GIL, as ONNX Runtime does). Same source and stage in both modes, one run each; the
bounds are relative or generous so a loaded machine does not fail them.
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from egl_helpers import skip_module_without_egl

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import parse_config
from kiosk.tools.bench_frames import MovingSource
from kiosk.types import Face, FrameBGR, SwappedFace, SwapResult

pytestmark = [pytest.mark.gl, pytest.mark.slow]

W, H = 480, 270
STAGE_S = 0.35
CONFIG = f"""
source: {{kind: synthetic, synthetic: {{width: {W}, height: {H}, fps: 30}}, mirror: false}}
display: {{width: {W}, height: {H}, max_fps: 60, mode: MODE}}
processing: {{enabled: false}}
overlay: {{debug: true}}
"""


skip_module_without_egl()


def scene() -> FrameBGR:
    rng = np.random.default_rng(5)
    small = rng.integers(0, 200, (H // 6, W // 6, 3)).astype(np.uint8)
    frame = np.asarray(cv2.resize(small, (W, H), interpolation=cv2.INTER_CUBIC), np.uint8)
    frame = np.minimum(frame, 200).astype(np.uint8)
    cv2.rectangle(frame, (200, 90), (290, 190), (255, 255, 255), 3)  # the "head" ring
    return frame


class RingFinder:
    """Finds the white ring, returns the patch inside as a tinted 128 px crop; slow on purpose."""

    name = "ring finder"

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        t0 = time.perf_counter()
        ys, xs = np.nonzero(frame_bgr.min(axis=2) > 235)
        np.copyto(out.frame_bgr, frame_bgr)
        out.faces.clear()
        out.notice = ""
        out.faces_detected = 0
        if xs.size > 50:
            x0, y0, x1, y1 = float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())
            box = np.array([x0, y0, x1, y1], np.float32)
            kps = np.array(
                [
                    [x0 + f * (x1 - x0), y0 + g * (y1 - y0)]
                    for f, g in ((0.3, 0.35), (0.7, 0.35), (0.5, 0.55), (0.35, 0.75), (0.65, 0.75))
                ],
                np.float32,
            )
            s = 128.0 / (x1 - x0)
            affine = np.array([[s, 0.0, -s * x0], [0.0, s, -s * y0]])
            crop = cv2.warpAffine(frame_bgr, affine, (128, 128))
            crop[..., 2] = 255  # tinted: the swapped face
            out.faces.append(SwappedFace(np.asarray(crop, np.uint8), affine, Face(box, 0.9, kps)))
            out.faces_detected = 1
        out.faces_pasted = False
        rest = STAGE_S - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)


def run(mode: str, tmp: Path) -> tuple[dict, KioskApp]:  # type: ignore[type-arg]
    import json

    cfg = parse_config(CONFIG.replace("MODE", mode), "test.yaml")
    stats = tmp / f"{mode}.json"
    frame = scene()
    app = KioskApp(
        cfg,
        RunOptions(headless=True, seconds=4.0, stats_json=stats, screenshot=tmp / f"{mode}.png"),
        source_factory=lambda: MovingSource(frame, 30.0),
        processor_factory=RingFinder,
    )
    assert app.run() == 0
    return json.loads(stats.read_text()), app


def test_live_shows_the_newest_frame_with_the_faces_carried(tmp_path: Path) -> None:
    synced, _ = run("synced", tmp_path)
    live, app = run("live", tmp_path)
    s_lat, l_lat = synced["latency_ms"], live["latency_ms"]
    # Synced shows the frame the stage worked on: at least the stage's time old.
    assert s_lat["capture_to_display_p50"] >= STAGE_S * 1000 * 0.9
    # Live shows the newest camera frame: far fresher, while its faces are as old as the swap.
    assert l_lat["capture_to_display_p50"] < s_lat["capture_to_display_p50"] / 2.5
    assert l_lat["face_age_p50"] >= STAGE_S * 1000 * 0.9
    assert live["fps"]["render"] > 3 * live["fps"]["processing"]
    info = live["display"]["live"]
    assert live["display"]["mode"] == "live" and synced["display"]["live"] is None
    assert info["results_carried"] >= 3
    assert info["faces_carried_frames"] > 2 * info["faces_real_frames"]
    # Where the next result shows where the face really was, the carried one was close; the
    # stale one was not (the patch moves up to ~60 px/s, 0.35 s a result).
    if info["carry_error_samples"] >= 2:
        assert info["carry_error_px_p95"] < 3.0
        assert info["stale_error_px_p50"] > 2 * info["carry_error_px_p50"]
    lines = app.overlay_texts(time.perf_counter())["debug_lines"]
    assert any("display  live" in line and "face age" in line for line in lines)
    # the carry figures have a line of their own, so the block stays narrow (off the face)
    assert any(line.startswith("carry") and "real-face drops" in line for line in lines), lines
    assert max(map(len, lines)) <= 96, lines


def test_switching_display_mode_while_running_rewires_capture_and_inference() -> None:
    synced = parse_config(CONFIG.replace("MODE", "synced"), "test.yaml")
    live = parse_config(CONFIG.replace("MODE", "live"), "test.yaml")
    frame = scene()
    app = KioskApp(synced, RunOptions(headless=True), source_factory=lambda: MovingSource(frame, 30.0))
    app.capture.start()
    app.inference.start()
    try:
        assert app.capture.live is None and app.inference.anchors is None
        before = app.capture
        app.apply_config(live)
        assert app.capture is before  # the capture thread switches itself: one producer, always
        _wait_switched(app)
        assert app.capture.live is not None and app.capture.live is app.live_feed
        assert app.inference.anchors is app.anchor_buf
        deadline = time.monotonic() + 5.0
        while app.live_buf.generation < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.live_buf.generation >= 3  # the new capture thread feeds the live display
        app.apply_config(synced)
        _wait_switched(app)
        assert app.capture.live is None and app.inference.anchors is None
        assert app.capture is before and app.capture.switches == 2
        assert app.live_buf.producer_conflicts == 0 and app.capture_buf.producer_conflicts == 0
    finally:
        app.shutdown()


def _wait_switched(app: KioskApp) -> None:
    deadline = time.monotonic() + 5.0
    while app.capture.switch_pending is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert app.capture.switch_pending is None
