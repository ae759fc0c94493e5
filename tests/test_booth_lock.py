"""One kiosk per booth: a second ``kiosk run`` on the same config refuses in one line naming the
first one's pid and exits non-zero; ``kiosk swap``, ``detect``, ``doctor`` and ``config check``
work beside the running kiosk; the lock goes with the process, however it ends (SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from egl_helpers import skip_module_without_egl
from fault_inject import booth_folder

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow
skip_module_without_egl()


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), e.get("PYTHONPATH", "")])
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "KIOSK_CONFIG"):
        e.pop(key, None)
    return e


def kiosk(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kiosk", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_first(tmp_path: Path, cfg: Path) -> subprocess.Popen[str]:
    stats = tmp_path / "stats.json"
    first = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless"]
        + ["--stats-json", str(stats), "--stats-interval", "0.5"],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 90
    while not stats.exists():
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            raise AssertionError(f"the first kiosk did not start: {first.communicate()[1][-2000:]}")
        time.sleep(0.1)
    return first


def test_a_second_kiosk_on_the_same_config_refuses_naming_the_first(tmp_path: Path) -> None:
    cfg = booth_folder(tmp_path)
    first = start_first(tmp_path, cfg)
    try:
        t0 = time.monotonic()
        second = kiosk("run", "--config", str(cfg), "--headless", "--seconds", "20", cwd=tmp_path)
        took = time.monotonic() - t0
        lines = second.stderr.strip().splitlines()
        print(f"\nsecond kiosk: exit {second.returncode} after {took:.1f} s: {lines}")
        assert second.returncode != 0 and second.returncode not in (134, 139)
        assert len(lines) == 1, lines
        assert f"pid {first.pid}" in lines[0] and "already running" in lines[0], lines
        assert first.poll() is None, "the first kiosk stopped"
        # Every other command works beside it.
        scene = tmp_path / "scene.png"
        det = kiosk("detect", "--config", str(cfg), str(scene), cwd=tmp_path)
        assert det.returncode == 0, det.stderr[-1500:]
        out = tmp_path / "out.png"
        swap = kiosk(
            "swap", "--config", str(cfg), "--source", str(tmp_path / "faces" / "ann.png"),
            "--input", str(scene), "--output", str(out), cwd=tmp_path,
        )  # fmt: skip
        assert swap.returncode == 0 and out.exists(), swap.stderr[-1500:]
        check = kiosk("config", "check", str(cfg), cwd=tmp_path)
        assert check.returncode == 0, check.stderr
        doctor = kiosk("doctor", "--config", str(cfg), cwd=tmp_path)
        assert "already running" not in doctor.stdout + doctor.stderr
        assert doctor.returncode in (0, 1), doctor.stderr[-1500:]  # its own verdict, not a refusal
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        rc = first.wait(15)
    assert rc == 0


def test_the_lock_goes_with_a_killed_kiosk(tmp_path: Path) -> None:
    cfg = booth_folder(tmp_path)
    first = start_first(tmp_path, cfg)
    first.kill()
    first.wait(10)
    again = kiosk("run", "--config", str(cfg), "--headless", "--seconds", "1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
