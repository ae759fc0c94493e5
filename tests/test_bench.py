"""``kiosk bench``: runs the threaded runtime headless on stand-in models and reports every figure.

These check that the numbers are produced and consistent, not how fast anything is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403

from kiosk.cli import build_parser, main
from kiosk.processing.pipeline import SwapPipeline
from kiosk.tools.bench import BenchProcessor, bench_config, run_bench
from kiosk.tools.bench_frames import StillSource, faces_frame
from kiosk.tools.bench_report import format_report

pytestmark = [pytest.mark.gl, pytest.mark.filterwarnings("ignore::FutureWarning")]


def _cpu(cfg):  # type: ignore[no-untyped-def]
    prov = cfg.models.providers.model_copy(update={"order": ["cpu"]})
    return cfg.model_copy(update={"models": cfg.models.model_copy(update={"providers": prov})})


def test_bench_is_a_subcommand() -> None:
    args = build_parser().parse_args(["bench", "--standins", "--frames", "5", "--size", "640x360", "--json"])
    assert args.command == "bench" and args.frames == 5 and args.standins and args.json
    assert args.composite == ["gpu"] and args.tracking is None


def test_still_source_paces_and_reuses_the_buffer() -> None:
    frame = np.full((8, 8, 3), 9, np.uint8)
    src = StillSource(frame, fps=100.0)
    src.open()
    out = np.zeros_like(frame)
    assert src.read(out) is out and (out == 9).all()
    assert src.read(None) is not frame


def test_faces_frame_sizes() -> None:
    for w, h in ((1280, 720), (1920, 1080)):
        f = faces_frame(w, h)
        assert f.shape == (h, w, 3) and f.dtype == np.uint8 and f.any()
    squares = faces_frame(640, 360, white_squares=True)
    assert (squares == 255).all(axis=2).sum() > 6 * 40 * 40


@pytest.mark.slow
@pytest.mark.parametrize("composite", ["gpu", "cpu"])
def test_run_bench_reports_every_figure(tmp_path: Path, composite: str) -> None:
    cfg, standin_detector = bench_config(None, tmp_path, 640, 360, tracking=True, max_faces=4)
    cfg = _cpu(cfg)
    frame = faces_frame(640, 360, white_squares=standin_detector)
    r = run_bench(cfg, frame, frames=12, composite=composite, camera_fps=60.0)
    assert r.setup["frames_measured"] == 12 and r.setup["composite"] == composite
    assert r.machine["provider"] == "CPUExecutionProvider"
    for name in ("detect", "align", "swap", "total", "session", "overhead"):
        assert r.stages_ms[name]["p50"] >= 0 and r.stages_ms[name]["p95"] >= r.stages_ms[name]["p50"]
    assert r.stages_ms["session"]["p50"] <= r.stages_ms["total"]["p50"]
    assert (r.stages_ms["paste"]["p50"] > 0) == (composite == "cpu")
    assert 0 < r.overhead["session_share"] <= 1 and r.overhead["faces_mean"] >= 1
    fps = r.runtime["fps"]
    assert fps["capture"] > 0 and fps["processing"] > 0 and fps["render"] > 0
    assert r.runtime["latency_ms"]["capture_to_display_p50"] is not None
    assert set(r.runtime["dropped"]) >= {"capture_to_processing", "processing_to_display"}
    assert r.allocation["peak_bytes_per_frame"] < r.allocation["frame_bytes"]
    assert {"detector", "swapper", "load_total"} <= set(r.warmup_ms)
    text = format_report(r)
    for needle in ("p50", "outside session.run", "threads: capture", "latency capture→display", "allocation"):
        assert needle in text
    json.dumps(r.as_dict())  # serialisable


def test_bench_processor_records_after_skip(standin_cfg) -> None:  # type: ignore[no-untyped-def]
    from kiosk.tools.standins import white_square_frame
    from kiosk.types import SwapResult

    pipe = SwapPipeline.from_config(standin_cfg)
    pipe.use_latent(np.full((1, 512), 512**-0.5, np.float32), "k")
    proc = BenchProcessor(pipe, "gpu", capacity=3, skip=2)
    frame = white_square_frame(360, 640, ((64, 64, 64),))
    slot = SwapResult(frame_bgr=np.zeros_like(frame))
    for _ in range(6):
        proc.process(frame, slot)
    assert proc.count == 3 and proc.done.is_set()
    assert np.array_equal(slot.frame_bgr, frame) and len(slot.faces) == 1  # camera frame + crops
    assert slot.faces_pasted is False  # the renderer composites them
    cpu = BenchProcessor(pipe, "cpu", capacity=1, skip=0)
    cpu.process(frame, slot)
    assert slot.faces_pasted is True  # pasted on the CPU: the renderer must not composite them again
    assert (proc.rows[:3, 6] > 0).all()


@pytest.mark.slow
def test_kiosk_bench_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["bench", "--standins", "--cpu", "--frames", "8", "--size", "640x360", "--json", "--no-tracking"]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["setup"]["frame"] == "640x360" and data["setup"]["tracking"] is False
    assert data["stages_ms"]["total"]["p50"] > 0


@pytest.mark.slow
def test_bench_set_overrides_config_keys_and_reports_mask_and_colour(tmp_path: Path) -> None:
    from kiosk.config import ConfigError
    from kiosk.tools.bench import apply_overrides

    cfg, standin_detector = bench_config(None, tmp_path, 640, 360, tracking=False, max_faces=2)
    cfg = apply_overrides(
        _cpu(cfg), ["processing.color_correction=mean_std", "mask.shape=face", "mask.mouth=1.0"]
    )
    assert (
        cfg.processing.color_correction == "mean_std" and cfg.mask.shape == "face" and cfg.mask.mouth == 1.0
    )
    frame = faces_frame(640, 360, white_squares=standin_detector)
    r = run_bench(cfg, frame, frames=6, composite="gpu", camera_fps=60.0)
    assert r.stages_ms["mask"]["p50"] > 0 and r.stages_ms["color"]["p50"] > 0
    assert r.setup["mask"]["shape"] == "face" and r.setup["color_correction"] == "mean_std"
    assert "colour correction mean_std" in format_report(r)
    for bad, needle in (
        ("mask.shape=round", "mask.shape"),
        ("mask.size=3", "known key"),
        ("nope.x=1", "unknown section"),
    ):
        with pytest.raises(ConfigError, match=needle):
            apply_overrides(cfg, [bad])


def test_moving_source_sways_and_slow_swapper_takes_its_time(standin_cfg) -> None:  # type: ignore[no-untyped-def]
    import time

    from kiosk.tools.bench_frames import MovingSource, slow_swapper

    frame = faces_frame(320, 180, white_squares=True)
    src = MovingSource(frame, fps=1000.0)
    src.open()
    a = src.read(None).copy()
    for _ in range(10):
        b = src.read(None)
    assert a.shape == b.shape == frame.shape and not np.array_equal(a, b)
    pipe = SwapPipeline.from_config(standin_cfg)
    pipe.use_latent(np.full((1, 512), 512**-0.5, np.float32), "k")
    original = slow_swapper(pipe, 60.0)
    t0 = time.perf_counter()
    pipe.swapper.infer(np.full((1, 512), 512**-0.5, np.float32))
    assert time.perf_counter() - t0 >= 0.06
    assert original is not pipe.swapper.infer


@pytest.mark.slow
def test_run_bench_live_reports_picture_latency_face_age_and_tracker(tmp_path: Path) -> None:
    from kiosk.tools.bench_report import format_display_comparison

    cfg, standin_detector = bench_config(None, tmp_path, 640, 360, tracking=False, max_faces=2)
    cfg = _cpu(cfg)
    frame = faces_frame(640, 360, white_squares=standin_detector)
    results = [
        run_bench(cfg, frame, frames=6, camera_fps=30.0, display_mode=mode, motion="sway", swap_ms=40.0)
        for mode in ("synced", "live")
    ]
    synced, live = results
    assert synced.setup["display_mode"] == "synced" and live.setup["display_mode"] == "live"
    assert live.setup["composite"] == "gpu" and live.setup["swap_ms_min"] == 40.0
    assert synced.runtime["live"] is None
    info = live.runtime["live"]
    assert info["results_carried"] >= 3 and "faces_dropped_to_real" in info
    lat = live.runtime["latency_ms"]
    assert lat["face_age_p50"] is not None and lat["capture_to_display_p50"] is not None
    assert "live tracker:" in format_report(live) and "face content age" in format_report(synced)
    table = format_display_comparison(results)
    assert "synced" in table and "live" in table
