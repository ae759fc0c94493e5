"""A real kiosk window under its own Xvfb, with a thread held inside ONNX Runtime (the swapper's calls
hang in native code, :func:`fault_inject.native_hang`):

- the X server goes away (TERM or KILL): one log line, ``faceswap_kiosk_up 0`` in the metrics file,
  ``STOPPING=1`` to systemd, exit status 4 (non-zero: systemd restarts the kiosk), never Xlib's
  ``exit(1)`` nor the abort of 134 / crash of 139;
- the quit key (ESCAPE in a window): exit status 0 within 2 s, no abort.

Each test starts its own Xvfb (``-displayfd``): killing the shared one would take the other window
tests down with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import pytest
from conftest import start_xvfb
from egl_helpers import skip_module_without_egl
from fault_inject import booth_folder, swapped

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]
skip_module_without_egl()

ABORTS = ("terminate called", "Aborted", "core dumped", "Fatal Python error", "Segmentation fault", "XIO:")
XDOTOOL = shutil.which("xdotool")


@pytest.fixture
def own_xvfb() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    proc, display = start_xvfb()  # killed by the test: its own server
    try:
        yield proc, display
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)


class Notify:
    """A NOTIFY_SOCKET that keeps every message the kiosk sends."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.messages: list[str] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(0.2)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._done.is_set():
            try:
                self.messages.append(self._sock.recv(4096).decode())
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self._done.set()
        self._thread.join(1)
        self._sock.close()


def start_window_kiosk(tmp_path: Path, display: str, notify: Notify) -> tuple[subprocess.Popen[str], Path]:
    cfg = booth_folder(
        tmp_path,
        "processing: {stall_s: 0.5, load_stall_s: 1.0, recovery_s: 60}\n"
        "monitoring: {textfile: metrics.prom, interval_s: 1}\n"
        "display: {width: 640, height: 360, max_fps: 30, vsync: false, fullscreen: false, title: lostkiosk}",
    )
    mark = tmp_path / "hang.txt"
    env = dict(os.environ, DISPLAY=display, PYTHONUNBUFFERED="1", NOTIFY_SOCKET=notify.path)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    for key in ("WAYLAND_DISPLAY", "WATCHDOG_USEC", "WATCHDOG_PID", "KIOSK_CONFIG"):
        env.pop(key, None)
    cmd = [sys.executable, str(ROOT / "tests" / "fault_inject.py"), "--native-hang-after", "30"]
    cmd += ["--mark", str(mark), "--", "run", "--config", str(cfg)]
    cmd += ["--screenshot", str(tmp_path / "shot.png"), "--screenshot-every", "0.3"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    return proc, mark


def wait_swapped_then_hung(tmp_path: Path, proc: subprocess.Popen[str], mark: Path) -> None:
    """The window showed the swap, then the swapper hung in native code and was abandoned."""
    shot = tmp_path / "shot.png"
    deadline = time.monotonic() + 90
    seen_swap = False
    t_hang = 0.0
    while not t_hang or time.monotonic() < t_hang + 1.5:  # past stall_s: the thread is abandoned
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(
                f"the swapper never hung (rc {proc.returncode}): {proc.communicate()[1][-2000:]}"
            )
        img = cv2.imread(str(shot)) if shot.exists() else None
        seen_swap |= img is not None and swapped(cv2.cvtColor(img, cv2.COLOR_BGR2RGB))
        if not t_hang and mark.exists():
            t_hang = time.monotonic()
        time.sleep(0.1)
    assert seen_swap, "the window never showed the swap"


def finish(proc: subprocess.Popen[str], timeout_s: float) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"the kiosk did not exit within {timeout_s} s: {err[-2000:]}") from None
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_x_server_going_away_is_reported_and_exits_4(tmp_path: Path, own_xvfb, sig: int) -> None:
    xvfb, display = own_xvfb
    notify = Notify(tmp_path / "notify.sock")
    proc, mark = start_window_kiosk(tmp_path, display, notify)
    try:
        wait_swapped_then_hung(tmp_path, proc, mark)
        t0 = time.monotonic()
        xvfb.send_signal(sig)
        rc, err = finish(proc, 15)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    lines = [line for line in err.splitlines() if "went away" in line]
    print(f"\nX server {signal.Signals(sig).name}: exit status {rc} {took:.2f} s later; {lines}")
    assert "abandoning it" in err, "no thread was inside native code: the test did not test that"
    bad = [a for a in ABORTS if a in err]
    assert rc == 4 and not bad, f"exit status {rc}, {bad}: {err[-3000:]}"
    assert len(lines) == 1 and f"display {display} went away" in lines[0], lines
    assert "faceswap_kiosk_up 0" in (tmp_path / "metrics.prom").read_text()
    assert any("STOPPING=1" in m for m in notify.messages), notify.messages
    assert took < 5.0


@pytest.mark.skipif(XDOTOOL is None, reason="xdotool not installed (apt-get install xdotool)")
def test_quit_key_with_a_thread_inside_onnx_runtime_exits_0_within_2_s(tmp_path: Path, own_xvfb) -> None:
    _xvfb, display = own_xvfb
    notify = Notify(tmp_path / "notify.sock")
    proc, mark = start_window_kiosk(tmp_path, display, notify)
    try:
        wait_swapped_then_hung(tmp_path, proc, mark)
        env = dict(os.environ, DISPLAY=display)
        wid = subprocess.run(
            [str(XDOTOOL), "search", "--name", "^lostkiosk$"],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
        assert wid, "no kiosk window"
        t0 = time.monotonic()
        subprocess.run([str(XDOTOOL), "key", "--window", wid[-1], "Escape"], env=env, check=True, timeout=10)
        rc, err = finish(proc, 15)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    print(f"\nquit key: exit status {rc} {took:.2f} s later")
    assert "abandoning it" in err
    bad = [a for a in ABORTS if a in err]
    assert rc == 0 and not bad, f"exit status {rc}, {bad}: {err[-3000:]}"
    assert "faceswap_kiosk_up 0" in (tmp_path / "metrics.prom").read_text()
    assert took < 2.0, f"exit took {took:.2f} s"
