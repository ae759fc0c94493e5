"""A dead or hung keepsake web server (issue 28, item 4): noticed, restarted with backoff, counted
(``keepsake_server_up``), and never hidden from the visitor: no QR code while nobody can fetch it."""

from __future__ import annotations

import http.client
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from net_helpers import free_port
from test_keepsake_flow import Inline

from kiosk.app.keepsake_host import KeepsakeHost
from kiosk.config import KeepsakeConfig
from kiosk.keepsake.flow import UNAVAILABLE, FlowOptions, KeepsakeFlow, Phase
from kiosk.keepsake.process import KeepsakeServerProcess
from kiosk.keepsake.service import Keepsake, KeepsakeService
from kiosk.keepsake.store import KeepsakeError, KeepsakeRecord, KeepsakeStore, StoreLimits

JPEG = b"\xff\xd8\xff\xe0" + b"x" * 200 + b"\xff\xd9"
TOKEN = "AbCdEfGhIjKlMnOpQrStUv"


class Session:
    keepsake_options: Any = None
    attract = False


class Service:
    """Stands in for :class:`KeepsakeService`: ``available`` is set by the test."""

    def __init__(self) -> None:
        self.available = True
        self.discarded: list[str] = []

    def keep(self, jpeg: bytes) -> Keepsake:
        if not self.available:
            raise KeepsakeError("keepsake: the web server is not serving")
        rec = KeepsakeRecord(TOKEN, Path("/nowhere"), 0.0, 900.0, len(jpeg))
        return Keepsake(rec, f"http://127.0.0.1:1/p/{TOKEN}")

    def discard(self, token: str) -> None:
        self.discarded.append(token)

    def full(self) -> bool:
        return self.is_full

    is_full = False


def _host() -> tuple[KeepsakeHost, Service, Session]:
    session = Session()
    frame = np.full((36, 64, 3), 90, np.uint8)
    host = KeepsakeHost(session, lambda: (frame, ()))  # type: ignore[arg-type]
    svc = Service()
    host.service = svc  # type: ignore[assignment]
    opts = FlowOptions(enabled=True, countdown_s=0.0, show_s=20.0)
    host.flow = KeepsakeFlow(opts, host._keep, executor=Inline())
    return host, svc, session


class Renderer:
    def set_frame(self, _: Any) -> None:
        pass


def test_a_press_while_the_server_is_down_says_photos_are_unavailable() -> None:
    host, svc, session = _host()
    svc.available = False
    host.step(("keepsake",), 1.0, Renderer())
    assert host.flow is not None and host.flow.phase is Phase.FAILED  # not ignored silently
    assert host.view is not None and host.view.message == UNAVAILABLE
    # the banner keeps saying photos are kept ("Nothing is recorded." would not be true)
    assert session.keepsake_options is not None


def test_a_qr_code_on_screen_is_withdrawn_when_the_server_goes_down() -> None:
    host, svc, _ = _host()
    r = Renderer()
    host.step(("keepsake",), 1.0, r)
    for t in (1.1, 1.2, 1.3, 1.4):
        host.step((), t, r)
    assert host.flow is not None and host.flow.phase is Phase.SHOW and host.view.qr is not None
    svc.available = False  # killed or stopped while the QR code is shown
    host.step((), 2.0, r)
    assert host.flow.phase is Phase.FAILED and host.view.message == UNAVAILABLE and host.view.qr is None
    assert svc.discarded == [TOKEN]  # no photo kept that nobody can fetch
    assert host.flow.stats()["shown"] == 0


def _get(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.slow
def test_a_stopped_server_process_is_found_not_answering(tmp_path: Path) -> None:
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()
    port = free_port()
    srv = KeepsakeServerProcess(store, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")).start()
    try:
        assert srv.health() == ""
        assert srv.pid is not None
        os.kill(srv.pid, signal.SIGSTOP)  # kill -STOP: the socket still accepts, nobody answers
        time.sleep(1.0)
        assert srv.health(hung_s=0.8).startswith("does not answer (no heartbeat for")
        os.kill(srv.pid, signal.SIGCONT)
        deadline = time.monotonic() + 3
        while srv.health(hung_s=0.8) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.health(hung_s=0.8) == ""
    finally:
        srv.kill()
        store.close()
    assert srv.health().startswith("exited (exit code -9)")


@pytest.mark.slow
def test_a_killed_server_is_restarted_with_backoff_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="kiosk.keepsake")
    port = free_port()
    svc = KeepsakeService(KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}"), tmp_path / "k").start()
    try:
        assert svc.wait_ready() and svc.metrics()["server_up"] == 1
        kept = svc.keep(JPEG)
        server = svc.server
        assert isinstance(server, KeepsakeServerProcess) and server.pid is not None
        first_pid = server.pid
        os.kill(first_pid, signal.SIGKILL)  # kill -9
        deadline = time.monotonic() + 3
        while svc.available and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not svc.available and svc.metrics()["server_up"] == 0
        with pytest.raises(KeepsakeError):
            svc.keep(JPEG)  # no photo kept while nobody can fetch it
        now = time.monotonic()
        svc.watch(now)  # the sweeper thread's check (it may have run already)
        assert "the web server process exited (exit code -9)" in caplog.text
        assert "restarting it in 1 s" in caplog.text
        assert svc.staff_line().startswith("keepsake: the web server stopped; restarting it")
        svc.watch(now + 5)  # past the first backoff
        deadline = time.monotonic() + 30
        while not svc.available and time.monotonic() < deadline:
            time.sleep(0.05)
        assert svc.available and svc.metrics()["server_up"] == 1 and svc.staff_line() == ""
        assert server.pid != first_pid and "was restarted (restart 1)" in caplog.text
        assert _get(port, f"/p/{kept.record.token}.jpg") == 200  # the photo kept before is served
    finally:
        svc.close()


def test_a_press_with_the_store_full_says_so_instead_of_taking() -> None:
    from kiosk.keepsake.store import STORE_FULL

    host, svc, _ = _host()
    svc.is_full = True  # max_photos reached by photos younger than their ttl_s
    host.step(("keepsake",), 1.0, Renderer())
    assert host.flow is not None and host.flow.phase is Phase.FAILED
    assert host.view is not None and host.view.message == STORE_FULL


@pytest.mark.slow
def test_a_stopped_server_is_killed_and_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -STOP: QR codes went on being issued while phones timed out."""
    import kiosk.keepsake.process as process

    monkeypatch.setattr(process, "HUNG_S", 0.8)
    caplog.set_level("INFO", logger="kiosk.keepsake")
    port = free_port()
    svc = KeepsakeService(KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}"), tmp_path / "k").start()
    try:
        assert svc.wait_ready()
        server = svc.server
        assert isinstance(server, KeepsakeServerProcess) and server.pid is not None
        stopped = server.pid
        os.kill(stopped, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while svc.available and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not svc.available and svc.metrics()["server_up"] == 0  # no QR code offered
        deadline = time.monotonic() + 30  # the sweeper thread kills it, then restarts it after 1 s
        while not (svc.available and server.pid != stopped) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert svc.available and server.pid != stopped
        assert "does not answer (no heartbeat for" in caplog.text and "restart 1" in caplog.text
        with pytest.raises(ProcessLookupError):
            os.kill(stopped, 0)  # the stopped one was killed (and reaped)
    finally:
        svc.close()
