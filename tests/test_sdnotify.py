"""sd_notify against a real Unix datagram socket, as systemd would listen on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiosk.appliance.sdnotify import SdNotifier


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2.0)
    yield sock, path
    sock.close()


def _drain(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(2.0)
    return out


def test_ready_status_stopping_on_path_socket(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    n = SdNotifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled and not n.watchdog_enabled
    assert n.ready(status="warming up")
    assert sock.recv(4096).decode() == "READY=1\nSTATUS=warming up"
    assert n.status("camera lost\nretrying")  # a newline must not start a new field
    assert sock.recv(4096).decode() == "STATUS=camera lost retrying"
    assert n.stopping()
    assert sock.recv(4096).decode() == "STOPPING=1"
    assert not n.watchdog()  # no WATCHDOG_USEC: never pings
    n.close()
    assert not n.ready()  # closed: no-op, no exception


def test_abstract_socket() -> None:
    name = f"kiosk-test-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2.0)
    try:
        with SdNotifier.from_env({"NOTIFY_SOCKET": "@" + name}) as n:
            assert n.ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_watchdog_is_rate_limited_to_half_the_timeout(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    clock = FakeClock()
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    n = SdNotifier.from_env(env, clock=clock)
    assert n.watchdog_enabled and n.watchdog_interval_s == pytest.approx(2.0)
    assert n.watchdog()  # first call pings at once
    sent = 1
    for _ in range(600):  # 10 s of frames at 60 fps
        clock.now += 1 / 60
        sent += n.watchdog()
    assert sent in (5, 6)  # one every 2 s, not one per frame
    msgs = _drain(sock)
    assert msgs == ["WATCHDOG=1"] * sent
    n.close()


def test_watchdog_for_another_pid_is_ignored(listener: tuple[socket.socket, str]) -> None:
    _, path = listener
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    n = SdNotifier.from_env(env)
    assert n.enabled and not n.watchdog_enabled and not n.watchdog()
    n.close()


def test_noop_without_notify_socket() -> None:
    n = SdNotifier.from_env({"WATCHDOG_USEC": "1000000"})
    assert not n.enabled and not n.watchdog_enabled
    assert not n.ready() and not n.watchdog() and not n.status("x") and not n.stopping()
    n.close()


def test_vanished_supervisor_never_raises_or_blocks(tmp_path: Path) -> None:
    path = str(tmp_path / "gone.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    n = SdNotifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "10", "WATCHDOG_PID": str(os.getpid())})
    t0 = time.monotonic()
    for _ in range(2000):  # nobody reads: the receive queue fills, sends must fail fast
        n.watchdog(force=True)
    sock.close()
    os.unlink(path)
    assert not n.ready()  # socket gone
    assert time.monotonic() - t0 < 2.0
    n.close()


def test_periodic_watchdog_from_a_child_process(listener: tuple[socket.socket, str]) -> None:
    """The process systemd starts sees the env; a real clock yields pings every timeout/2."""
    sock, path = listener
    script = textwrap.dedent(
        """
        import time
        from kiosk.appliance.sdnotify import SdNotifier
        n = SdNotifier.from_env()
        n.ready(status="running")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # a 100 fps "render loop"
            n.watchdog()
            time.sleep(0.01)
        n.stopping()
        n.close()
        """
    )
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")  # 0.2 s: ping every 0.1 s
    env.pop("WATCHDOG_PID", None)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=30)
    msgs = _drain(sock)
    assert msgs[0] == "READY=1\nSTATUS=running"
    assert msgs[-1] == "STOPPING=1"
    pings = msgs[1:-1]
    assert set(pings) == {"WATCHDOG=1"}
    assert 7 <= len(pings) <= 11  # ~10 in 1 s; far fewer than the 100 frames


ROOT = Path(__file__).resolve().parent.parent


def test_kiosk_run_speaks_sd_notify_and_stops_on_sigterm(
    listener: tuple[socket.socket, str], tmp_path: Path
) -> None:
    """`kiosk run` under a fake systemd: READY once rendering, WATCHDOG every WATCHDOG_USEC/2,
    STOPPING and exit within 2 s of SIGTERM."""
    import signal

    sock, path = listener
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(
        "source: {kind: synthetic, synthetic: {width: 320, height: 240, fps: 30}}\n"
        "display: {width: 320, height: 240}\nprocessing: {enabled: false}\n"
    )
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")  # ping every 0.2 s
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless", "--seconds", "60"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        sock.settimeout(30)
        first = sock.recv(4096).decode()
        assert "READY=1" in first.split("\n"), first
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        proc.wait(timeout=10)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    msgs = [f for m in _drain(sock) for f in m.split("\n")]
    assert proc.returncode == 0 or proc.returncode == -signal.SIGTERM, (
        proc.stderr.read() if proc.stderr else ""
    )
    assert stop_s < 2.0
    assert msgs.count("WATCHDOG=1") >= 4  # ~7 in 1.5 s
    assert "STOPPING=1" in msgs
