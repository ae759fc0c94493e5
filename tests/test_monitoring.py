"""Fleet monitoring: `kiosk run` keeps a Prometheus textfile for node_exporter up to date, parsed
here with prometheus_client's own parser (and `promtool check metrics` where it is installed);
the file is replaced atomically, and a failing or hung write never reaches the render loop."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import pytest
from egl_helpers import egl_available

from kiosk.appliance import monitoring
from kiosk.appliance.monitoring import TextfileMonitor, render_metrics
from kiosk.config import ConfigError, parse_config
from kiosk.tools.standins import make_detector, make_embedder, make_swapper, white_square_frame
from kiosk.util.atomic import atomic_write

prom_parser = pytest.importorskip(
    "prometheus_client.parser", reason="pip install prometheus_client (test extra)"
)

ROOT = Path(__file__).resolve().parent.parent
P = "faceswap_kiosk_"


def families(text: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """{family name: {(sample name, sorted labels): value}} through prometheus_client's parser."""
    out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        out[fam.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in fam.samples}
    return out


def value(fams, family: str, sample: str | None = None, **labels: str) -> float:
    return fams[P + family][(P + (sample or family), tuple(sorted(labels.items())))]


def _booth(tmp_path: Path, interval_s: float = 1.0) -> Path:
    """A booth folder: stand-in models, one face photo, a still image with a face, GPU asked for."""
    models = tmp_path / "models"
    models.mkdir()
    make_detector(models / "det_10g.onnx")
    make_embedder(models / "w600k_r50.onnx")
    make_swapper(models / "inswapper_128.onnx")
    faces = tmp_path / "faces"
    faces.mkdir()
    cv2.imwrite(str(faces / "ann.png"), white_square_frame(h=640, w=640, squares=((320, 320, 32),)))
    cv2.imwrite(str(tmp_path / "scene.png"), white_square_frame(squares=((64, 64, 64),)))
    (tmp_path / "metrics").mkdir()
    cfg = tmp_path / "booth.yaml"
    cfg.write_text(
        f"""
source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: 320, height: 180, vsync: false, max_fps: 60}}
models: {{dir: models, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cuda, cpu], intra_op_threads: 1, warmup: false}}}}
faces: {{dir: faces, cache_dir: cache}}
controls: {{gamepad_enabled: false}}
monitoring: {{textfile: metrics/faceswap_kiosk.prom, interval_s: {interval_s}}}
"""
    )
    return cfg


@pytest.mark.gl
@pytest.mark.slow
def test_kiosk_run_keeps_the_textfile_up_to_date_and_writes_up_0_at_exit(tmp_path):
    if not egl_available():
        pytest.skip("no EGL/OpenGL context available (install libegl1 and Mesa)")
    cfg = _booth(tmp_path)
    prom = tmp_path / "metrics" / "faceswap_kiosk.prom"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless", "--seconds", "30"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    running = None
    stamps: set[float] = set()
    try:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if not prom.exists():
                continue
            fams = families(prom.read_text())  # a reader never sees half a file
            stamps.add(value(fams, "last_update_timestamp_seconds"))
            if running is None and (
                value(fams, "up") == 1
                and value(fams, "faces_loaded") == 1
                and value(fams, "fps", stage="processing") > 0
                and value(fams, "frames", "frames_total", stage="processing") > 10
            ):
                running = fams
            if running is not None and len(stamps) >= 2:
                break
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert running is not None, f"no running figures in {prom}:\n{err[-3000:]}"
    assert proc.returncode == 0, err[-3000:]
    fams = running
    assert len(stamps) >= 2, "the file is rewritten while the kiosk runs"
    for stage in ("capture", "processing", "render"):
        assert value(fams, "fps", stage=stage) > 0
        assert value(fams, "frames", "frames_total", stage=stage) > 0
    for buffer in ("capture_to_processing", "processing_to_display"):
        assert value(fams, "dropped_frames", "dropped_frames_total", buffer=buffer) >= 0
    p50 = value(fams, "capture_to_display_latency_seconds", quantile="0.5")
    p95 = value(fams, "capture_to_display_latency_seconds", quantile="0.95")
    assert 0 < p50 <= p95 < 5
    count = value(fams, "capture_to_display_latency_seconds", "capture_to_display_latency_seconds_count")
    total = value(fams, "capture_to_display_latency_seconds", "capture_to_display_latency_seconds_sum")
    assert count > 0 and 0 < total / count < 5
    assert value(fams, "processing_duration_seconds", quantile="0.5") > 0
    assert value(fams, "errors", "errors_total", component="processing") == 0
    assert value(fams, "restarts", "restarts_total", component="processing") == 0
    assert value(fams, "restarts", "restarts_total", component="threads") == 0
    assert value(fams, "source_up") == 1 and value(fams, "source_state", state="running") == 1
    assert sum(v for _, v in fams[P + "source_state"].items()) == 1
    assert value(fams, "processing_stalled_seconds") == 0
    [(_, labels)] = fams[P + "provider_info"]
    provider = dict(labels)
    assert provider["provider"].endswith("ExecutionProvider")
    assert provider["requested"] == "CUDAExecutionProvider"
    # The GPU-fallback flag says whether the CUDA provider asked for really runs.
    assert value(fams, "gpu_fallback") == (provider["provider"] == "CPUExecutionProvider")
    assert value(fams, "start_time_seconds") <= value(fams, "last_update_timestamp_seconds")

    final = families(prom.read_text())
    assert value(final, "up") == 0, "exit writes up 0"
    assert value(final, "source_state", state="stopped") == 1
    assert not [p for p in prom.parent.iterdir() if p != prom], "no temporary file is left behind"
    assert prom.stat().st_mode & 0o777 == 0o644, "node_exporter (another user) can read it"
    promtool = shutil.which("promtool")
    if promtool:
        lint = subprocess.run(
            [promtool, "check", "metrics"], input=prom.read_text(), capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr


def _stats_of_a_stopped_kiosk() -> dict:
    from kiosk.app.kiosk_app import KioskApp, RunOptions

    cfg = parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n")
    app = KioskApp(cfg, RunOptions(headless=True))
    app.stop.set()
    try:
        return app.stats()
    finally:
        app.shutdown()


def test_render_metrics_names_help_type_and_quantiles_before_any_frame():
    text = render_metrics(_stats_of_a_stopped_kiosk(), up=True, now_unix=1000.0)
    fams = families(text)
    assert all(name.startswith(P) for name in fams)
    names = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# HELP")]
    types = {ln.split()[2]: ln.split()[3] for ln in text.splitlines() if ln.startswith("# TYPE")}
    assert names == list(types), "each family has HELP and TYPE lines"
    assert all(n.endswith("_total") for n, t in types.items() if t == "counter")
    assert value(fams, "up") == 1 and value(fams, "last_update_timestamp_seconds") == 1000.0
    p50 = value(fams, "capture_to_display_latency_seconds", quantile="0.5")
    assert p50 != p50, "no frame yet: the quantile is NaN, as Prometheus summaries report it"
    assert dict(next(iter(fams[P + "provider_info"]))[1]) == {"provider": "none", "requested": "none"}


def test_monitoring_config_keys_and_errors(tmp_path):
    cfg = parse_config("monitoring: {textfile: m/kiosk.prom}\n", "k.yaml", base_dir=tmp_path)
    assert cfg.resolve(cfg.monitoring.textfile) == tmp_path / "m" / "kiosk.prom"
    assert cfg.monitoring.interval_s == 5.0
    assert parse_config("").monitoring.textfile is None
    with pytest.raises(ConfigError) as e:
        parse_config("monitoring:\n  textfile: /var/lib/kiosk.txt\n  interval_s: 0.1\n", "k.yaml")
    assert e.value.problems[0].startswith("k.yaml:2: monitoring.textfile: must end in .prom")
    assert e.value.problems[1].startswith("k.yaml:3: monitoring.interval_s:")


def test_write_atomic_readers_see_whole_files_only(tmp_path):
    path = tmp_path / "kiosk.prom"
    versions = [f"# version {i}\n" + f"faceswap_kiosk_x {i}\n" * 20000 for i in range(2)]
    atomic_write(path, versions[0])
    stop = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(60):
            atomic_write(path, versions[i % 2])
    finally:
        stop.set()
        reader.join()
    assert seen and all(text in versions for text in seen)
    assert {text[:11] for text in seen} >= {"# version 0"}
    assert sorted(os.listdir(tmp_path)) == ["kiosk.prom"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_write_atomic_failure_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "kiosk.prom"
    target.mkdir()  # a folder where the file should be: the rename fails after the temp file exists
    with pytest.raises(OSError):
        atomic_write(target, "faceswap_kiosk_up 1\n")
    assert sorted(os.listdir(tmp_path)) == ["kiosk.prom"]


def test_failing_write_is_logged_once_and_retried(tmp_path, caplog):
    folder = tmp_path / "collector"  # not there yet (node_exporter not installed, wrong path)
    monitor = TextfileMonitor(folder / "faceswap_kiosk.prom", interval_s=1.0)
    stats = _stats_of_a_stopped_kiosk()
    try:
        with caplog.at_level(logging.INFO, logger="kiosk.appliance.monitoring"):
            assert not monitor.write(stats, True, 1.0)
            assert not monitor.write(stats, True, 2.0)
            assert not monitor.write(stats, True, 3.0)
            folder.mkdir()
            assert monitor.write(stats, True, 4.0)
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and str(folder) in warnings[0].getMessage()
        assert "writable for the kiosk user" in warnings[0].getMessage()
        assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
        assert monitor.failures == 3 and monitor.writes == 1
        assert (
            value(families((folder / "faceswap_kiosk.prom").read_text()), "last_update_timestamp_seconds")
            == 4
        )
    finally:
        monitor.close(None)
    assert not (folder / "faceswap_kiosk.prom").exists(), "close(None) removes the file"


def test_a_hung_write_never_blocks_submit_and_the_newest_figures_win(tmp_path, monkeypatch):
    release = threading.Event()
    entered = threading.Event()
    written: list[str] = []
    real = monitoring.atomic_write

    def slow_write(path: Path, text: str, **kwargs: object) -> None:
        entered.set()
        release.wait(10)  # a hung NFS mount, a disk full of retries
        written.append(text)
        real(path, text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(monitoring, "atomic_write", slow_write)
    monitor = TextfileMonitor(tmp_path / "k.prom", interval_s=1.0)
    stats = _stats_of_a_stopped_kiosk()
    monitor.submit({**stats, "snapshots_written": 1})
    assert entered.wait(5)
    for n in (2, 3, 4):  # the writer is stuck; these return at once, only the newest is kept
        monitor.submit({**stats, "snapshots_written": n})
    assert not written
    monitor.close(None, timeout_s=0.05)  # gives up waiting for the hung writer
    release.set()
    monitor._thread.join(5)
    assert len(written) == 1, "the closed monitor drops figures it has not started writing"

    written.clear()
    monitor = TextfileMonitor(tmp_path / "k.prom", interval_s=1.0)
    for n in (5, 6, 7):
        monitor.submit({**stats, "snapshots_written": n})
    monitor.close({**stats, "snapshots_written": 8})
    final = families((tmp_path / "k.prom").read_text())
    assert value(final, "up") == 0
    assert value(final, "snapshots", "snapshots_total") == 8
    assert len(written) <= 4


def test_due_once_per_interval():
    monitor = TextfileMonitor(Path("/nonexistent/k.prom"), interval_s=2.0)
    try:
        assert [monitor.due(t) for t in (10.0, 10.5, 11.9, 12.0, 13.0, 14.1)] == [
            True, False, False, True, False, True,
        ]  # fmt: skip
    finally:
        monitor.close(None)


def test_fps_falls_towards_zero_once_a_stage_stops():
    from kiosk.stats import RateMeter

    meter = RateMeter()
    assert meter.fps_at(0.0) == 0.0
    for i in range(61):
        meter.tick(i / 30)  # 30 fps for two seconds, then nothing
    assert meter.fps_at(2.0) == pytest.approx(30, rel=0.05)
    assert meter.fps_at(2.9) == meter.fps, "within a window the last rate stands"
    assert meter.fps_at(12.0) == pytest.approx(0.1) and meter.fps == pytest.approx(30, rel=0.05)


def test_node_exporter_serves_the_file_without_a_scrape_error(tmp_path):
    """The real consumer: node_exporter's textfile collector reads the file (Debian package
    prometheus-node-exporter; skipped where it is not installed). Listens on loopback only."""
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exe is None:
        pytest.skip("node_exporter not installed (apt-get install prometheus-node-exporter)")
    import socket
    import urllib.request

    monitor = TextfileMonitor(tmp_path / "faceswap_kiosk.prom", interval_s=1.0)
    assert monitor.write(_stats_of_a_stopped_kiosk(), True, time.time())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [exe, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={tmp_path}"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        body = ""
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
                break
            except OSError:
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)
    fams = families(body)
    assert fams["node_textfile_scrape_error"][("node_textfile_scrape_error", ())] == 0
    assert value(fams, "up") == 1
    assert value(fams, "frames", "frames_total", stage="render") == 0
    monitor.close(None)


def test_config_reload_moves_or_switches_off_the_textfile(tmp_path):
    from kiosk.app.kiosk_app import KioskApp, RunOptions

    base = "source: {kind: synthetic}\nprocessing: {enabled: false}\n"
    app = KioskApp(parse_config(base, base_dir=tmp_path), RunOptions(headless=True))
    app._t_start = time.perf_counter()  # as if run() were rendering
    try:
        for name in ("a.prom", "b.prom"):
            app.apply_config(parse_config(base + f"monitoring: {{textfile: {name}}}\n", base_dir=tmp_path))
            assert app.monitor is not None and app.monitor.path == tmp_path / name
            app.monitor.submit(app.stats())
            deadline = time.monotonic() + 5
            while not (tmp_path / name).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert sorted(p.name for p in tmp_path.iterdir()) == [name], "the old file is removed"
        same_file = app.monitor
        app.apply_config(
            parse_config(base + "monitoring: {textfile: b.prom, interval_s: 9}\n", base_dir=tmp_path)
        )
        assert app.monitor is same_file and same_file.interval_s == 9 and (tmp_path / "b.prom").exists()
        app.apply_config(parse_config(base, base_dir=tmp_path))
        assert app.monitor is None and not list(tmp_path.iterdir())
    finally:
        app.stop.set()
        app.shutdown()
