"""The keepsake server in its own process (kiosk/keepsake/process.py): the kiosk's store stays the owner,
the child serves a mirror told every addition and deletion; 410 once the kiosk's sweep deletes a photo,
its counters come back, a start failure is one line, and it stops (niced below the render loop)."""

from __future__ import annotations

import http.client
import os
import pickle
import signal
import socket
import time
from pathlib import Path

import pytest
from net_helpers import free_port

from kiosk.config import KeepsakeConfig
from kiosk.keepsake.process import NICE, KeepsakeServerProcess, StoreMirror, lower_priority
from kiosk.keepsake.store import Found, KeepsakeError, KeepsakeRecord, KeepsakeStore, StoreLimits

JPEG = b"\xff\xd8\xff\xe0" + b"m" * 3000 + b"\xff\xd9"
TOKEN = "Bbbbbbbbbbbbbbbbbbbbbb"


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _until(fn, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    return False


def test_the_mirror_answers_like_the_store(tmp_path: Path) -> None:
    now = [1000.0]
    mirror = StoreMirror(clock=lambda: now[0])
    rec = KeepsakeRecord(TOKEN, tmp_path / f"{TOKEN}.jpg", 1000.0, 1060.0, len(JPEG))
    assert mirror.lookup(TOKEN).found is Found.UNKNOWN
    mirror.apply(("add", rec))
    # the file is not there: never a 200 without it, for the page (lookup) as for the JPEG (read)
    assert mirror.lookup(TOKEN).found is Found.GONE
    assert mirror.read(TOKEN)[0].found is Found.GONE
    rec.path.write_bytes(JPEG)
    assert mirror.lookup(TOKEN).record == rec
    assert mirror.read(TOKEN) == (mirror.lookup(TOKEN), JPEG)
    now[0] = 1060.0
    assert mirror.lookup(TOKEN).found is Found.GONE  # expired before any sweep
    mirror.apply(("gone", TOKEN))
    assert mirror.lookup(TOKEN).found is Found.GONE and mirror.lookup("../" + TOKEN).found is Found.UNKNOWN


def test_a_priority_that_cannot_be_lowered_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(_: int) -> int:  # what seccomp's SystemCallErrorNumber=EPERM makes of setpriority
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "nice", denied)
    line = lower_priority()
    assert "failed (Operation not permitted" in line and "setpriority" in line
    monkeypatch.setattr(os, "nice", lambda n: 10)
    assert lower_priority() == "at nice 10"


def test_the_server_process_serves_the_kiosks_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="kiosk.keepsake.process")
    clock = [time.time()]
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200), lambda: clock[0]).open()
    before = store.add(JPEG)  # taken before the server started: told at start
    port = free_port()
    srv = KeepsakeServerProcess(store, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")).start()
    try:
        assert srv.pid != os.getpid() and srv.is_alive()
        assert f"from process {srv.pid} at nice " in caplog.text  # the log says its priority
        assert os.getpriority(os.PRIO_PROCESS, srv.pid) >= os.getpriority(os.PRIO_PROCESS, 0) + min(
            NICE, 19 - os.getpriority(os.PRIO_PROCESS, 0)
        )
        rec = store.add(JPEG)
        assert srv.url_for(rec.token) == f"http://127.0.0.1:{port}/p/{rec.token}"
        assert _until(lambda: _get(port, f"/p/{rec.token}.jpg") == (200, JPEG))
        assert _get(port, f"/p/{before.token}.jpg") == (200, JPEG)
        assert _get(port, f"/p/{rec.token}")[0] == 200
        assert _get(port, "/p/../x")[0] == 404
        clock[0] += 601
        store.sweep()  # the kiosk deletes; the child hears of it
        assert not rec.path.exists()
        assert _until(lambda: _get(port, f"/p/{rec.token}.jpg")[0] == 410)
        assert _until(lambda: srv.counts.downloads == 2 and srv.counts.pages == 1 and srv.counts.refused >= 2)
    finally:
        srv.stop()
    assert not srv.is_alive()
    with pytest.raises(ConnectionRefusedError):
        _get(port, "/")
    assert store.listener is None


def test_a_start_failure_in_the_child_is_one_line(tmp_path: Path) -> None:
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()
    port = free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        srv = KeepsakeServerProcess(store, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}"))
        with pytest.raises(KeepsakeError) as info:
            srv.start()
    assert str(info.value).startswith(f"keepsake: cannot listen on 127.0.0.1:{port}")
    assert not srv.is_alive()


def test_a_reloaded_event_name_reaches_the_page(tmp_path: Path) -> None:
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()
    port = free_port()
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}", event_name="Old Fair")
    srv = KeepsakeServerProcess(store, cfg).start()
    try:
        rec = store.add(JPEG)
        assert _until(lambda: b"Old Fair" in _get(port, f"/p/{rec.token}")[1])
        srv.update(cfg.model_copy(update={"event_name": "New Expo"}))
        assert _until(lambda: b"New Expo" in _get(port, f"/p/{rec.token}")[1])
    finally:
        srv.stop()


HOLDER = """
import sys, time
from pathlib import Path
from kiosk.config import KeepsakeConfig
from kiosk.keepsake.process import KeepsakeServerProcess
from kiosk.keepsake.store import KeepsakeStore, StoreLimits
store = KeepsakeStore(Path(sys.argv[1]), StoreLimits(600, 5, 10)).open()
srv = KeepsakeServerProcess(store, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{sys.argv[2]}")).start()
print(srv.pid, flush=True)
time.sleep(60)
"""


def test_the_server_process_exits_when_the_kiosk_is_killed(tmp_path: Path) -> None:
    import subprocess
    import sys

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    kiosk = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "k"), str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # its resource tracker reports the killed process's queues there
        text=True,
    )
    try:
        assert kiosk.stdout is not None
        child = int(kiosk.stdout.readline())
        assert _get(port, "/")[0] == 404
    finally:
        kiosk.kill()  # SIGKILL: no clean-up ran
        kiosk.wait()

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{child}/status").read_text().find("State:\tZ") >= 0

    assert _until(gone, 10), "the server process outlived the kiosk"
    with pytest.raises(ConnectionRefusedError):
        _get(port, "/")


def test_after_a_restart_a_photo_deleted_at_the_last_exit_answers_410(tmp_path: Path) -> None:
    """Issue 28, item 11: the new server process is told the store's memory of deleted photos."""
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()
    token = store.add(JPEG).token
    store.close()  # the clean exit deletes it
    again = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()  # the next start
    port = free_port()
    srv = KeepsakeServerProcess(again, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")).start()
    try:
        assert _get(port, f"/p/{token}")[0] == 410  # before: 404
        assert _get(port, f"/p/{token}.jpg")[0] == 410
        assert _get(port, f"/p/{'A' * 22}")[0] == 404
        for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGQUIT, signal.SIGALRM):
            os.kill(srv.pid, sig)  # a person's signal to every kiosk process: not the server's end
        time.sleep(0.3)
        assert srv.is_alive() and _get(port, f"/p/{token}")[0] == 410  # before: killed by SIGUSR1
    finally:
        srv.stop()
        again.close()


class _SlowToSend:
    """Pickles (in the queue's feeder thread) like ``real``, a second late: the start's messages
    reach the server process after its web server could already answer."""

    def __init__(self, real: object) -> None:
        self.real = real

    def __reduce_ex__(self, protocol: object) -> tuple[object, tuple[bytes]]:
        time.sleep(1.0)
        return pickle.loads, (pickle.dumps(self.real),)


def test_the_server_answers_nothing_before_it_has_the_store(tmp_path: Path) -> None:
    """A (re)started server knows every stored and deleted photo before its first answer: a valid
    QR code right after a restart is never 404, a deleted one is 410 (before: a race, 404)."""
    store = KeepsakeStore(tmp_path / "k", StoreLimits(600, 50, 200)).open()
    gone_token = store.add(JPEG).token
    store.discard(gone_token)
    kept = store.add(JPEG).token
    real_records, real_gone = store.records, store.gone_tokens
    store.gone_tokens = lambda: _SlowToSend(real_gone())  # type: ignore[method-assign,assignment]
    store.records = lambda: [_SlowToSend(r) for r in real_records()]  # type: ignore[method-assign]
    port = free_port()
    srv = KeepsakeServerProcess(store, KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")).start()
    try:
        assert _get(port, f"/p/{kept}")[0] == 200  # before: 404 for a second
        assert _get(port, f"/p/{gone_token}")[0] == 410
    finally:
        srv.stop()
        store.close()
