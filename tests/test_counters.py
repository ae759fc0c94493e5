"""The counters snapshot (kiosk/app/counters.py): a processing thread that is hung or dead reports no rate
anywhere (overlay, STATUS, stats JSON, hence monitoring), the totals survive an abandoned thread,
and the outputs derive from the snapshot, not from the threads' live state."""

from __future__ import annotations

import threading
import time

import numpy as np

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import KioskConfig
from kiosk.types import SwapResult
from kiosk.util.heartbeat import Bounds


def _app() -> KioskApp:
    cfg = KioskConfig.model_validate(
        {"source": {"kind": "synthetic"}, "processing": {"enabled": False}, "overlay": {"debug": True}}
    )
    return KioskApp(cfg, RunOptions(headless=True))


def _processed_at_30_fps(app: KioskApp, t_end: float, n: int = 30) -> None:
    """The inference thread's meters as if it processed ``n`` frames at 30 fps up to ``t_end``."""
    inf = app.inference
    for k in range(n):
        t = t_end - (n - 1 - k) / 30.0
        inf.meters.rate.tick(t)
        inf.meters.process_ms.add(20.0)


def _process_line(app: KioskApp, now: float) -> str:
    return next(x for x in app.overlay_texts(now)["debug_lines"] if x.startswith("process"))


def test_a_hung_processing_call_shows_stalled_and_no_rate_everywhere() -> None:
    """0.7 s after the last frame, the call running since then is past its 0.5 s bound: the last
    second's window still holds 30 frames, but no output may show that rate."""
    app = _app()
    now = time.perf_counter()  # the threads' clock: STATUS and stats read it themselves
    _processed_at_30_fps(app, now - 0.7)
    app.inference.heartbeat.bounds = Bounds(stall_s=0.5)
    app.inference.heartbeat.begin_frame(now - 0.7)
    c = app.counters(now)
    assert c.processing.stalled_for_s > 0.5 and c.processing.fps_now == 0.0
    assert "stalled" in _process_line(app, now)
    assert "process stalled" in app.status_text(), app.status_text()
    assert app.stats()["fps_now"]["processing"] == 0.0
    app.inference.heartbeat.end_frame(now - 0.69)  # the call returned: the rate is back
    assert app.counters(now).processing.fps_now > 20


def test_a_dead_inference_thread_shows_no_rate() -> None:
    app = _app()
    now = time.perf_counter()
    app._t_start = now - 10.0  # running, but the inference thread is not alive (died)
    _processed_at_30_fps(app, now - 0.3)
    assert not app.inference.is_alive()
    assert app.counters(now).processing.fps_now == 0.0
    assert _process_line(app, now) == "process  stopped (restarting)"
    assert "process stopped (restarting)" in app.status_text()
    assert app.stats()["fps_now"]["processing"] == 0.0


def test_processed_frames_and_times_keep_counting_across_an_abandoned_thread() -> None:
    app = _app()
    try:
        now = time.perf_counter()
        _processed_at_30_fps(app, now - 6.0)
        app.inference.heartbeat.bounds = Bounds(stall_s=0.5)
        app.inference.heartbeat.begin_frame(now - 5.9)
        before = app.stats()
        app.check_pipeline(now)  # abandons the hung thread; a fresh one takes over
        assert app.supervisor.abandoned_threads == 1
        after = app.stats()
        assert after["frames"]["processed"] == before["frames"]["processed"] == 30
        assert after["latency_ms"]["process_samples"] == 30
        assert after["latency_ms"]["process_sum"] == before["latency_ms"]["process_sum"] == 600.0
        assert after["processing"]["abandoned_threads"] == 1
    finally:
        app.shutdown(0.5)


class _FailsThenHangs:
    """The first stage built fails its first 3 calls, then its call hangs; the next one (the
    replacement thread's) fails its first 2 calls, then works."""

    name = "fails-then-hangs"
    built = 0
    gate = threading.Event()
    inside = threading.Event()  # the first stage's call hangs now

    def __init__(self) -> None:
        _FailsThenHangs.built += 1
        self.first = _FailsThenHangs.built == 1
        self.calls = 0

    def process(self, frame_bgr: np.ndarray, out: SwapResult) -> None:
        self.calls += 1
        if self.calls <= (3 if self.first else 2):
            raise RuntimeError("provider error")
        if self.first:
            _FailsThenHangs.inside.set()
            _FailsThenHangs.gate.wait(10)
        np.copyto(out.frame_bgr, frame_bgr)
        out.notice = ""


def _until(cond, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cond()


def test_the_totals_run_on_across_a_replaced_inference_thread() -> None:
    """The supervisor's meters are handed to the replacement: its errors count on from the
    abandoned thread's (3 + 2), its frames from the abandoned thread's, nothing is added up."""
    _FailsThenHangs.built = 0
    _FailsThenHangs.gate.clear()
    _FailsThenHangs.inside.clear()
    cfg = KioskConfig.model_validate(
        {"source": {"kind": "synthetic"}, "processing": {"stall_s": 0.5, "load_stall_s": 0.5}}
    )
    app = KioskApp(cfg, RunOptions(headless=True), processor_factory=_FailsThenHangs)
    first = app.inference
    app.workers.start()
    try:
        _until(_FailsThenHangs.inside.is_set)
        assert app.stats()["processing"]["errors"] == 3
        frames_of_the_first = app.stats()["frames"]["processed"]

        def abandoned() -> bool:
            app.check_pipeline(time.perf_counter())
            return app.supervisor.abandoned_threads == 1

        _until(abandoned)
        assert app.inference is not first and app.inference.meters is first.meters
        _until(lambda: app.inference.ok_calls > 0)
        s = app.stats()
        assert s["processing"]["errors"] == 3 + 2  # the abandoned thread's and the replacement's
        assert s["frames"]["processed"] > frames_of_the_first
        assert s["processing"]["restarts"] == 0 and s["processing"]["abandoned_threads"] == 1
    finally:
        _FailsThenHangs.gate.set()
        app.shutdown(0.5)


def test_the_outputs_come_from_the_snapshot_not_the_live_threads() -> None:
    app = _app()
    now = time.perf_counter()
    _processed_at_30_fps(app, now)
    c = app.counters(now)
    _processed_at_30_fps(app, now + 2.0, n=90)  # the threads move on after the snapshot
    app.shots.snapshots_written = 7
    s = app.stats(c)
    assert s["frames"]["processed"] == 30 and s["snapshots_written"] == 0
    assert app.stats()["frames"]["processed"] == 120  # a fresh snapshot sees them


def test_a_slow_but_progressing_stage_reads_slow_not_stalled_everywhere() -> None:
    """Frames of 5 s whose model calls all return: the overlay's notice, the debug line, STATUS, the
    stats and the metrics say "slow (5.0 s a frame)", never "stalled", and nothing is abandoned."""
    from kiosk.appliance.monitoring import render_metrics

    app = _app()
    now = time.perf_counter()
    hb = app.inference.heartbeat
    hb.bounds = Bounds(stall_s=1.0, load_stall_s=30.0)
    hb.begin_frame(now - 9.0, warm=False)  # the last frame: 5 s, one swapper call of 4.9 s
    hb.end_unit("swapper", hb.begin_unit("swapper", now=now - 9.0), now=now - 4.1)
    hb.end_frame(now - 4.0)
    hb.begin_frame(now - 4.0, warm=False)  # the next one, 4 s in, calls returning
    for k in range(4):
        hb.end_unit("swapper", hb.begin_unit("swapper", now=now - 4.0 + k), now=now - 3.1 + k)
    app.capture.state = "running"
    app.screen.t_last_result = now - 4.0  # no new frame on screen for 4 s (> STALL_S)
    assert app.check_pipeline(now) == 0.0 and app.supervisor.abandoned_threads == 0
    c = app.counters(now)
    assert c.processing.slow_frame_s == 5.0 and not c.processing.stalled_for_s
    texts = app.overlay_texts(now, c)
    assert "processing slow (5.0 s a frame)" in texts["notice"] and "stalled" not in texts["notice"]
    assert _process_line(app, now) == "process  slow (5.0 s a frame)"
    assert "process slow (5.0 s a frame)" in app.status_text(c)
    stats = app.stats()
    assert stats["processing"]["state"] == "slow" and stats["processing"]["stalled_s"] == 0.0
    text = render_metrics(stats, True, time.time())
    assert 'faceswap_kiosk_processing_state{state="slow"} 1' in text
    assert "faceswap_kiosk_processing_slow_frame_seconds 5.0" in text
    # No beat for 4 s more (the call hangs): no longer "slow", the screen says stalled.
    later = now + 4.0
    c = app.counters(later)
    assert c.processing.slow_frame_s == 0.0
    assert "stalled" in app.overlay_texts(later, c)["notice"]


def test_staff_warnings_reach_the_stats_and_metrics_not_the_visitors_words() -> None:
    """Issue 29.4: every staff warning is in one place the staff console can read (the stats
    JSON's ``warnings``, the metrics' ``warnings`` gauge); the visitor's message is plain words.
    Before: no ``warnings`` list nor gauge, and the source's error (a device path) was drawn
    under "reconnecting…"."""
    import dataclasses

    from kiosk.app.counters import overlay_texts, stats_dict
    from kiosk.appliance.monitoring import render_metrics

    app = _app()
    cache = "kernel cache folder /var/cache/k/numba is full: kernels compiled in memory this run"
    app.screen.last_notice = cache  # the swap stage's notice, as Screen.take keeps it
    app.reload.problem = "config change ignored: kiosk.yaml:3: unknown key 'bannr'"
    now = time.perf_counter()
    c = app.counters(now)
    c = dataclasses.replace(
        c,
        duration_s=5.0,
        capture=dataclasses.replace(c.capture, state="reconnecting", last_error="/dev/video0: device busy"),
        face_problems=("faces/x.png: no face found; use a clear, frontal photo",),
    )
    stats = stats_dict(c)
    assert stats["memory"]["rss_peak_mb"] > 10  # issue 27: the peak resident size is reported
    assert stats["warnings"] == [
        "config change ignored: kiosk.yaml:3: unknown key 'bannr'",
        cache,
        "source: /dev/video0: device busy",
        "faces/x.png: no face found; use a clear, frontal photo",
    ]
    assert "faceswap_kiosk_warnings 4" in render_metrics(stats, up=True, now_unix=1000.0).splitlines()
    texts = overlay_texts(c, app.reload.problem, status_line=False)
    assert texts["message"] == "Video source unavailable — reconnecting…", "no device path for the visitor"
    assert texts["warnings"] == ["source: /dev/video0: device busy"]  # the debug block has it
    app.screen.last_notice = app.reload.problem = ""
    clean = app.counters(now)
    assert stats_dict(clean)["warnings"] == [] and "faceswap_kiosk_warnings 0" in render_metrics(
        stats_dict(clean), up=True, now_unix=1000.0
    )


def test_the_status_line_is_off_by_default_and_on_when_asked() -> None:
    """The status line names the source (a device path, a file) and the stage: staff text. Before,
    ``overlay.status_line`` defaulted to true and every visitor read it at the bottom."""
    from kiosk.config import parse_config

    for yaml, shown in (("", False), ("overlay: {status_line: true}\n", True)):
        cfg = parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n" + yaml)
        app = KioskApp(cfg, RunOptions(headless=True))
        status = app.overlay_texts(time.perf_counter())["status"]
        assert bool(status) is shown and (not shown or status.startswith("synthetic")), (yaml, status)


def test_stats_report_the_peak_resident_size() -> None:
    from kiosk.app.counters import peak_rss_mb

    assert 10 < peak_rss_mb() < 100_000  # this test process: a Python with numpy loaded


def test_stats_report_the_first_library_face_and_all_photos_loaded_from_the_process_start() -> None:
    """Issue 27: ``library.first_face_s`` (process start → a library face swapped on screen) and
    ``library.loaded_s`` (→ no photo left to scan), each taken once, None until it happens."""
    from pathlib import Path

    from kiosk.app.startup import process_age_s
    from kiosk.booth.faces import FaceEntry, LibrarySnapshot

    app = _app()
    lib = app.reload.library
    age = process_age_s()
    assert age > 0.05  # this process started before the test ran (not at the module's import)
    entry = FaceEntry("k1", "ann", Path("ann.jpg"), np.zeros(4, np.float32), np.zeros((8, 8, 3), np.uint8))
    t0 = time.perf_counter()
    lib._snapshot = LibrarySnapshot(lib.serial, 1, (entry,), pending=999)  # the first photo scanned
    c = app.counters(t0)
    assert (c.library["first_face_s"], c.library["loaded_s"], c.library["pending"]) == (None, None, 999)
    app.screen._faces_on_screen = True  # the picture now uploaded carries a swapped face
    first = app.stats(app.counters(t0 + 1.0))["library"]
    assert first["loaded_s"] is None and first["pending"] == 999
    assert age + 0.9 < first["first_face_s"] < age + 1.0 + (time.perf_counter() - t0) + 0.1
    lib._snapshot = LibrarySnapshot(lib.serial, 2, (entry,), pending=0)  # every photo loaded
    loaded = app.stats(app.counters(t0 + 5.0))["library"]
    assert loaded["first_face_s"] == first["first_face_s"]  # kept: the first time only
    assert abs(loaded["loaded_s"] - loaded["first_face_s"] - 4.0) < 0.002
    assert app.stats(app.counters(t0 + 9.0))["library"]["loaded_s"] == loaded["loaded_s"]


def test_stats_report_the_face_switch_latency_until_a_result_wears_the_new_face() -> None:
    """Issue 27: ``library.switch_ms``: from the frame the selection changed to the first frame
    whose newest result wears the new face (the start-up's first selection is no switch)."""
    app = _app()
    t0 = time.perf_counter()
    controls, session = app.parts.controls, app.parts.session
    controls.selected_key = "a"
    session._face_keys = ("a",)
    app.counters(t0)
    controls.selected_key = "b"  # "next face" pressed
    assert app.stats(app.counters(t0 + 0.1))["library"]["switches"] == 0  # still wearing a
    session._face_keys = ("b", "b")  # a result swapped b onto two faces
    lib = app.stats(app.counters(t0 + 0.35))["library"]
    assert lib["switches"] == 1 and abs(lib["switch_ms"] - 250.0) < 0.2, lib
    controls.selected_key = "a"
    session._face_keys = ("a",)
    lib = app.stats(app.counters(t0 + 0.4))["library"]
    assert lib["switches"] == 2 and lib["switch_ms"] == 0.0 and abs(lib["switch_max_ms"] - 250.0) < 0.2
