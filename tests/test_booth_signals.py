"""`kiosk run` as a process: SIGTERM at any moment of start-up or steady state exits 0 within 2 s,
SIGHUP reloads the config at once, an unwritable --stats-json does not end the run, and nothing
is written under HOME except the kiosk's own cache/state folders (ONNX Runtime's telemetry is off).

Stand-in models (kiosk.tools.standins) with the face pipeline on, so start-up loads models,
builds the face library and opens the EGL surface like a booth does."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest

from kiosk.tools.standins import make_all, white_square_frame

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]


def _booth(tmp_path: Path, cache_dir: str = "cache", extra: str = "") -> Path:
    make_all(tmp_path / "models")
    (tmp_path / "faces").mkdir()
    cv2.imwrite(str(tmp_path / "faces" / "square.png"), white_square_frame(256, 256, ((96, 96, 64),)))
    cv2.imwrite(str(tmp_path / "scene.png"), white_square_frame())
    cfg = tmp_path / "k.yaml"
    cfg.write_text(
        f"""source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: 320, height: 180, vsync: false, max_fps: 30}}
processing: {{det_size: 320}}
models: {{dir: models, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: {cache_dir}}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: true }}
{extra}"""
    )
    return cfg


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), **extra)
    env.pop("KIOSK_CONFIG", None)
    return env


def _kiosk(cfg: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless", *args],
        cwd=ROOT,
        env=env or _env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _reap(proc: subprocess.Popen[str]) -> None:
    """Kill a kiosk the test left running (the test failed before it ended)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _kiosk_code_runs(pid: int) -> bool:
    """True once the process runs kiosk code: NumPy's C extension is mapped (`kiosk run` imports
    NumPy only after its first line, ``install_early()``; before that the interpreter is still
    starting and nothing of the kiosk exists to stop)."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_sigterm_at_random_moments_of_start_up_exits_0_within_2_s(tmp_path):
    """Start-up: imports and config, model loading and the face library (loader thread), the EGL
    surface, the first frames; a random moment 0-3 s after kiosk code starts running."""
    cfg = _booth(tmp_path)
    rng = random.Random(1234)
    results = []
    for _ in range(8):
        delay = rng.uniform(0.0, 3.0)
        proc = _kiosk(cfg)
        try:
            deadline = time.monotonic() + 20
            while not _kiosk_code_runs(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(delay)
            t0 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
            elapsed = time.perf_counter() - t0
            err = proc.stderr.read() if proc.stderr else ""
        finally:
            _reap(proc)
        results.append((round(delay, 2), rc, round(elapsed, 2)))
        assert "terminate called" not in err and "Traceback" not in err, err[-2000:]
        assert rc == 0, (results, err[-2000:])
        assert elapsed < 2.0, results
    print("SIGTERM delay s, exit status, exit time s:", results)


def test_sighup_reloads_the_config_at_once(tmp_path):
    cfg = _booth(tmp_path)
    stats = tmp_path / "s.json"
    proc = _kiosk(cfg, "--stats-json", str(stats), "--stats-interval", "0.2")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stats.is_file():
            time.sleep(0.1)
        assert json.loads(stats.read_text())["controls"]["debug"] is True
        # Same size and mtime afterwards: the file watcher cannot see this change, only SIGHUP.
        st = cfg.stat()
        cfg.write_text(cfg.read_text().replace("debug: true }", "debug: off  }"))
        os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert cfg.stat().st_size == st.st_size
        time.sleep(1.5)
        assert json.loads(stats.read_text())["controls"]["debug"] is True  # not reloaded yet
        proc.send_signal(signal.SIGHUP)
        t0 = time.monotonic()
        debug = True
        while time.monotonic() - t0 < 5 and debug:
            time.sleep(0.1)
            debug = json.loads(stats.read_text())["controls"]["debug"]
        assert debug is False, "SIGHUP did not apply the config"
        assert proc.poll() is None  # still running
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        _reap(proc)


def test_unwritable_stats_json_does_not_end_the_run(tmp_path):
    cfg = _booth(tmp_path)
    target = tmp_path / "a_directory"
    target.mkdir()
    proc = _kiosk(cfg, "--frames", "20", "--stats-json", str(target), "--stats-interval", "0.1")
    try:
        rc = proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        _reap(proc)
    assert rc == 0, err[-2000:]
    assert "Traceback" not in err
    assert target.is_dir() and not any(target.iterdir())


def test_nothing_is_written_under_home_but_the_kiosks_own_folders(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    booth = tmp_path / "booth"
    booth.mkdir()
    cfg = _booth(booth, cache_dir="~/.cache/faceswap-kiosk/faces")
    env = _env(HOME=str(home))
    for var in (
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "ORT_DISABLE_TELEMETRY",
    ):
        env.pop(var, None)
    stats = tmp_path / "s.json"
    proc = _kiosk(cfg, "--stats-json", str(stats), "--stats-interval", "0.2", env=env)
    try:
        deadline = time.monotonic() + 60
        loaded = 0
        while time.monotonic() < deadline and not loaded and proc.poll() is None:
            time.sleep(0.2)
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads(stats.read_text())["faces"]["loaded"]
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=10)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        _reap(proc)
    assert rc == 0, err[-2000:]
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    allowed = (".cache/faceswap-kiosk/", ".local/state/faceswap-kiosk/")
    assert [w for w in written if not w.startswith(allowed)] == []
    assert loaded == 1, err[-2000:]  # models loaded and the face library built (and cached):
    assert any(w.startswith(".cache/faceswap-kiosk/faces/") for w in written), written


def test_signals_a_person_may_send_never_kill_and_the_shutdown_line_counts_each(tmp_path):
    """SIGUSR1/SIGUSR2/SIGALRM/SIGPWR/SIGTSTP are counted and ignored (before: SIGUSR1 killed the kiosk
    with 138, no clean-up), a burst of SIGHUPs reloads, SIGQUIT stops cleanly with 0 (before: a
    core dump), and the shutdown line names each signal once with its count."""
    cfg = _booth(tmp_path)
    stats = tmp_path / "s.json"
    proc = _kiosk(cfg, "--stats-json", str(stats), "--stats-interval", "0.2")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stats.is_file() and proc.poll() is None:
            time.sleep(0.1)
        for sig in (
            signal.SIGUSR1,
            signal.SIGUSR2,
            signal.SIGALRM,
            signal.SIGPWR,
            signal.SIGTSTP,
            signal.SIGUSR1,
        ):
            proc.send_signal(sig)
            time.sleep(0.05)
        for _ in range(10):
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.05)  # pending signals of one kind coalesce in the kernel
        time.sleep(1.0)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGQUIT)
        rc = proc.wait(timeout=10)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        _reap(proc)
    assert rc == 0, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    line = next(ln for ln in err.splitlines() if "shutting down" in ln)
    # each once (with its count; signals of one kind that arrive together are one, so the count
    # is not exact here: test_signals.py counts 160 SIGHUPs)
    for name in ("SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPWR", "SIGTSTP", "SIGHUP", "SIGQUIT"):
        assert line.count(name) == 1, line
