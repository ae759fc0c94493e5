"""display.mode auto (synced while processing keeps up, live when it falls behind, never
flickering), the share of the screen showing the swap, and the live tracker keeping the swap on
between slow results (tests/test_live_share.py judges the same from screenshots)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from test_live import RESULT_FRAMES, texture, texture_clip, two_faces

from kiosk.app.display_mode import AutoMode, ScreenShare
from kiosk.appliance.monitoring import render_metrics
from kiosk.capture.live import KEEP_MISSED_RESULTS, LiveAnchor, LiveFace, LiveTracker
from kiosk.config import KioskConfig
from kiosk.tools.motion_videos import Scene, make_clip, simulate_live
from kiosk.types import SwappedFace, SwapResult

ROOT = Path(__file__).resolve().parents[1]

# -- auto mode --------------------------------------------------------------------------------------


def drive(auto: AutoMode, ratios: list[float], dt: float = 1 / 60, capture_fps: float = 30.0) -> list[str]:
    out = []
    for i, r in enumerate(ratios):
        out.append(auto.update(i * dt, capture_fps, r * capture_fps))
    return out


def test_the_booth_configs_use_auto_and_it_starts_live() -> None:
    from kiosk.config import load_config
    from kiosk.paths import bundled_config

    assert load_config(bundled_config("default"), env=False).display.mode == "auto"
    assert (ROOT / "deploy" / "kiosk.yaml").read_text().count("mode: auto") == 1
    assert KioskConfig().display.live_max_age_s == 0.0  # automatic age limit
    assert AutoMode().mode == "live"


def test_auto_goes_synced_only_after_processing_kept_up_for_settle_s() -> None:
    auto = AutoMode(settle_s=1.5, dwell_s=5.0)
    modes = drive(auto, [1.0] * 200)  # 200 frames at 60 fps: 3.3 s keeping up
    first = modes.index("synced")
    assert 1.5 <= first / 60 <= 1.6
    assert set(modes[first:]) == {"synced"} and auto.switches == 1


def test_auto_falls_back_to_live_when_processing_falls_behind_and_stays() -> None:
    auto = AutoMode(settle_s=1.5, dwell_s=5.0, mode="synced")
    modes = drive(auto, [1.0] * 60 + [0.1] * 300)
    assert modes[59] == "synced" and modes[-1] == "live"
    assert auto.switches == 1


def test_auto_never_flickers_between_the_thresholds_or_on_a_wobbling_rate() -> None:
    # Between fall_behind (0.7) and keep_up (0.9) nothing changes, whichever mode it is in.
    for start in ("synced", "live"):
        auto = AutoMode(mode=start)
        assert set(drive(auto, [0.75, 0.85] * 600)) == {start}
    # A rate wobbling across both thresholds every half second: at most one change per dwell_s.
    auto = AutoMode(settle_s=1.5, dwell_s=5.0)
    wobble = ([1.0] * 30 + [0.2] * 30) * 30  # 30 s
    drive(auto, wobble)
    assert auto.switches == 0
    # ... and a slow swing (4 s each way) changes at most once per dwell_s.
    auto = AutoMode(settle_s=1.5, dwell_s=5.0)
    modes = drive(auto, ([1.0] * 240 + [0.2] * 240) * 4)  # 32 s
    changes = sum(a != b for a, b in zip(modes, modes[1:], strict=False))
    assert changes == auto.switches <= 32 / 5.0 + 1


def test_auto_keeps_its_mode_without_a_camera_rate() -> None:
    auto = AutoMode(mode="synced")
    assert drive(auto, [0.0] * 300, capture_fps=0.0)[-1] == "synced"


# -- the screen's share -----------------------------------------------------------------------------


def test_screen_share_counts_face_x_frame_per_mode_with_reasons() -> None:
    share = ScreenShare()
    share.add("live", 3, 0, ())
    share.add("live", 2, 0, ("track",))
    share.add("synced", 1, 1, ("unswapped",))
    d = share.as_dict()
    assert d["live"]["faces_swapped_frames"] == 5 and d["live"]["faces_carried_frames"] == 5
    assert d["live"]["faces_real_by_reason"] == {"track": 1} and d["live"]["swapped_pct"] == pytest.approx(
        83.33
    )
    assert d["synced"]["faces_fresh_frames"] == 1 and d["synced"]["swapped_pct"] == 50.0
    assert d["swapped_pct"] == pytest.approx(100 * 6 / 8) and share.active == "synced"


def test_prometheus_file_has_the_share_per_mode_and_the_reasons() -> None:
    from test_monitoring import families, value

    share = ScreenShare()
    share.add("live", 2, 0, ("old",))
    stats = {
        "started_unix": 1.0,
        "source": {"state": "running", "reconnects": 0},
        "processing": {
            "provider": "",
            "gpu_requested": None,
            "stage": "s",
            "gpu_fallback": False,
            "errors": 0,
            "restarts": 0,
            "stalled_s": 0,
        },
        "latency_ms": {
            f"{k}_{q}": 1.0
            for k in ("capture_to_display", "process")
            for q in ("p50", "p95", "sum", "samples")
        },
        "fps_now": {},
        "frames": {},
        "dropped": {},
        "thread_restarts": 0,
        "faces": {"loaded": 0, "problems": []},
        "attract": False,
        "snapshots_written": 0,
        "display": {"mode": "auto", "active_mode": "live", "mode_switches": 1, "screen": share.as_dict()},
    }
    fams = families(render_metrics(stats, up=True, now_unix=2.0))
    assert value(fams, "screen_swapped_ratio", mode="live") == pytest.approx(2 / 3, abs=1e-4)
    assert value(fams, "screen_faces", "screen_faces_total", mode="live", shown="real", reason="old") == 1
    assert value(fams, "screen_faces", "screen_faces_total", mode="live", shown="swapped", reason="") == 2
    assert value(fams, "display_mode_info", mode="live", configured="auto") == 1
    assert value(fams, "display_mode_switches", "display_mode_switches_total") == 1


# -- the live tracker keeps the swap on ---------------------------------------------------------------


def test_the_age_limit_follows_the_result_interval() -> None:
    """A result every 40 frames (1.33 s), about as old when it arrives: nothing is dropped as old
    (a fixed 1.5 s dropped every face for the last 0.6 s of each interval)."""
    c = texture_clip("pan")
    run = simulate_live(c, None, result_frames=40, max_age_s=0.0)
    assert sum(run.dropped.values()) == 0, run.dropped
    shown = ~np.isnan(run.live[:, :, 0, 0])
    assert shown[41:].all()
    fixed = simulate_live(c, None, result_frames=40, max_age_s=1.5)
    assert fixed.dropped["old"] >= 1


def test_tracks_top_up_their_points_over_long_intervals() -> None:
    """Two faces on a sine clip, a result every 75 frames (2.5 s): points die as the faces rock,
    the tracks reseed and stay trusted the whole interval."""
    scene = Scene(texture(600, 800, 11), np.array([[1.0, 0.0, -80.0], [0.0, 1.0, -60.0]]))
    c = make_clip(scene, two_faces, "sine", 150, noise_sigma=3.0)
    run = simulate_live(c, None, result_frames=75, max_age_s=0.0)
    assert sum(run.dropped.values()) == 0, run.dropped
    live = run.live[76:]
    assert not np.isnan(live).any()
    err = np.linalg.norm(live - c.truth_kps[76:], axis=-1)
    assert float(np.percentile(err, 95)) <= 1.0


def _face(kps: np.ndarray, box: np.ndarray) -> LiveFace:
    return LiveFace(
        np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), kps.astype(np.float32), box.astype(np.float32)
    )


def test_a_face_a_newer_result_missed_keeps_its_crop_for_a_few_results() -> None:
    scene = Scene(texture(600, 800, 11), np.array([[1.0, 0.0, -80.0], [0.0, 1.0, -60.0]]))
    c = make_clip(scene, two_faces, "pan", 75, noise_sigma=3.0)
    tracker = LiveTracker()
    out: list[SwappedFace] = []
    shown = []
    for i, frame in enumerate(c.frames):
        if i and i % RESULT_FRAMES == 0:
            n = i - RESULT_FRAMES
            both = i == RESULT_FRAMES  # the first result has both faces, the later ones face 0 only
            faces = [_face(c.truth_kps[n, k], c.truth_boxes[n, k]) for k in ((0, 1) if both else (0,))]
            tracker.submit(LiveAnchor(n, n / 30, tuple(faces)))
        tracker.update(frame, i, i / 30)
        tracker.carried_faces(out)
        shown.append(len(out))
    per_result = [shown[RESULT_FRAMES * k + 1] for k in range(1, len(c.frames) // RESULT_FRAMES)]
    # 2 while face 1 is kept, for KEEP_MISSED_RESULTS results; then only face 0
    assert per_result[: KEEP_MISSED_RESULTS + 1] == [2] * (KEEP_MISSED_RESULTS + 1), per_result
    assert per_result[KEEP_MISSED_RESULTS + 1 :] and set(per_result[KEEP_MISSED_RESULTS + 1 :]) == {1}
    assert tracker.counts.faces_kept > 0 and tracker.stats()["faces_kept_frames"] == tracker.counts.faces_kept


def test_a_face_is_never_kept_beside_a_new_face_on_the_same_head() -> None:
    """The newer result lists face 1 farther from its track than the match radius (half a face):
    it gets a track of its own, and the old crop is not kept beside it."""
    scene = Scene(texture(600, 800, 11), np.array([[1.0, 0.0, -80.0], [0.0, 1.0, -60.0]]))
    c = make_clip(scene, two_faces, "still", 40, noise_sigma=3.0)
    tracker = LiveTracker()
    out: list[SwappedFace] = []
    for i in range(14):
        tracker.update(c.frames[i], i, i / 30)
    faces = [_face(c.truth_kps[0, k], c.truth_boxes[0, k]) for k in (0, 1)]
    tracker.submit(LiveAnchor(0, 0.0, tuple(faces)))
    for i in range(14, 27):
        tracker.update(c.frames[i], i, i / 30)
    shift = np.array([0.7 * float(c.truth_boxes[13, 1, 2] - c.truth_boxes[13, 1, 0]), 0.0])
    moved = _face(c.truth_kps[13, 1] + shift, c.truth_boxes[13, 1] + np.tile(shift, 2))
    tracker.submit(LiveAnchor(13, 13 / 30, (_face(c.truth_kps[13, 0], c.truth_boxes[13, 0]), moved)))
    tracker.update(c.frames[27], 27, 27 / 30)
    tracker.carried_faces(out)
    assert len(out) == 2 and tracker.counts.faces_kept == 0


def test_a_result_of_no_swapping_stage_drops_every_carried_face() -> None:
    c = texture_clip("still", 20)
    tracker = LiveTracker()
    out: list[SwappedFace] = []
    for i in range(5):
        tracker.update(c.frames[i], i, i / 30)
    tracker.submit(LiveAnchor(2, 2 / 30, (_face(c.truth_kps[2, 0], c.truth_boxes[2, 0]),)))
    tracker.update(c.frames[5], 5, 5 / 30)
    tracker.carried_faces(out)
    assert len(out) == 1
    tracker.submit(LiveAnchor(5, 5 / 30, (), swapping=False))  # staff turned swapping off
    tracker.update(c.frames[6], 6, 6 / 30)
    tracker.carried_faces(out)
    assert out == []


# -- the kiosk: auto picks the mode from the rates -----------------------------------------------------


class Stage:
    """Copies the frame, finds nothing, takes ``stage_s`` a frame (sleep releases the GIL)."""

    name = "timed stage"

    def __init__(self, stage_s: float) -> None:
        self.stage_s = stage_s

    def process(self, frame_bgr: np.ndarray, out: SwapResult) -> None:
        np.copyto(out.frame_bgr, frame_bgr)
        out.faces.clear()
        out.faces_detected = 0
        out.faces_pasted = False
        out.notice = ""
        if self.stage_s:
            time.sleep(self.stage_s)


@pytest.mark.gl
@pytest.mark.slow
@pytest.mark.parametrize(("stage_s", "expect"), [(0.0, "synced"), (0.35, "live")])
def test_kiosk_in_auto_shows_synced_when_processing_keeps_up_else_live(
    stage_s: float, expect: str, tmp_path: Path
) -> None:
    from egl_helpers import egl_available

    if not egl_available():
        pytest.skip("needs EGL (headless GL)")
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import parse_config

    cfg = parse_config(
        "source: {kind: synthetic, synthetic: {width: 320, height: 240, fps: 20}, mirror: false}\n"
        "display: {width: 320, height: 240, max_fps: 30, mode: auto}\n"
        "processing: {enabled: false}\noverlay: {debug: true}\n",
        "test.yaml",
    )
    stats = tmp_path / "stats.json"
    app = KioskApp(
        cfg,
        RunOptions(headless=True, seconds=5.0, stats_json=stats),
        processor_factory=lambda: Stage(stage_s),
    )
    app.screen.auto_mode = AutoMode(settle_s=1.0, dwell_s=2.0)
    assert app.run() == 0
    s = json.loads(stats.read_text())
    assert s["display"]["mode"] == "auto" and s["display"]["active_mode"] == expect, s["fps"]
    assert s["display"]["mode_switches"] == (1 if expect == "synced" else 0)
    assert s["display"]["screen"][expect]["rendered_frames"] > 0
    lines = app.overlay_texts(time.perf_counter())["debug_lines"]
    assert any(f"display  auto: {expect}" in line and "swap on" in line for line in lines), lines
