"""The keepsake server's door under attack (issue 28): connections counted from accept() (before
TLS), a fair share per client when the cap is full, deadlines for slow clients, no traceback flood
when file descriptors run out, and ``keepsake.allow`` enforced by the server itself. Each attack is
scaled down (lower limits, a child's RLIMIT_NOFILE) and runs on loopback from 127.0.0.x sources."""

from __future__ import annotations

import http.client
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from net_helpers import free_port, raw_request

from kiosk.config import KeepsakeConfig
from kiosk.keepsake.guard import ConnectionLimits
from kiosk.keepsake.server import KeepsakeServer, RateLimiter
from kiosk.keepsake.store import KeepsakeStore, StoreLimits

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> KeepsakeStore:
    return KeepsakeStore(tmp_path / "keepsakes", StoreLimits(900, 50, 200)).open()


def _start(store: KeepsakeStore, limits: ConnectionLimits, **kw: object) -> KeepsakeServer:
    kw.setdefault("allow", ["127.0.0.0/8"])
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{free_port()}", **kw)  # type: ignore[arg-type]
    limiter = RateLimiter(burst=1000, per_s=1000)
    return KeepsakeServer(store, cfg, limiter=limiter, limits=limits).start()


def _connect(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _fetch(port: int, token: str, source: str, timeout_s: float = 5.0) -> bytes:
    """A phone's GET from ``source``: the answer's bytes, b"" when the server closed it unanswered."""
    request = f"GET /p/{token}.jpg HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n".encode()
    return raw_request(port, request, source, timeout_s)


def _closed_within(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``timeout_s``."""
    readable, _, _ = select.select([sock], [], [], timeout_s)
    if not readable:
        return False
    try:
        return sock.recv(1) == b""
    except OSError:
        return True


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl (to make a test certificate) not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "booth.pem", folder / "booth.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_idle_tcp_on_the_tls_port_counts_from_accept_and_is_cut_at_the_handshake_deadline(
    store: KeepsakeStore, cert: tuple[Path, Path]
) -> None:
    """Item 1: idle TCP connections that never start TLS count against the per-client cap (the
    extras are closed at once), are closed at the deadline, and a phone from another address is
    served over HTTPS all along."""
    limits = ConnectionLimits(max_connections=8, max_per_client=3, first_request_s=1.0, max_age_s=30)
    srv = _start(store, limits, tls_cert=str(cert[0]), tls_key=str(cert[1]))
    idle: list[socket.socket] = []
    try:
        rec = store.add(JPEG)
        idle = [_connect(srv.port, "127.0.0.2") for _ in range(10)]
        t0 = time.monotonic()
        closed_now = [s for s in idle if _closed_within(s, 0.3)]
        assert len(closed_now) == 7, "beyond the per-client cap, idle TCP is closed at once"
        assert srv.open_connections == 3
        ctx = ssl.create_default_context(cafile=str(cert[0]))
        ctx.check_hostname = False
        phone = http.client.HTTPSConnection(
            "127.0.0.1", srv.port, context=ctx, timeout=5, source_address=("127.0.0.3", 0)
        )
        phone.request("GET", f"/p/{rec.token}.jpg")
        resp = phone.getresponse()
        assert (resp.status, resp.read()) == (200, JPEG)
        phone.close()
        held = [s for s in idle if s not in closed_now]
        assert all(_closed_within(s, 3.0) for s in held), "no handshake within first_request_s: closed"
        assert time.monotonic() - t0 < 3.5
        deadline = time.monotonic() + 2  # the phone's closed connection, as the server sees it
        while srv.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.open_connections == 0 and srv.counts.connections_refused == 7
    finally:
        for s in idle:
            s.close()
        srv.stop()


class _Slowloris:
    """``per_address`` connections from each of ``sources``, each sending a header a byte at a time
    and reconnecting whenever the server closes it, until stopped."""

    def __init__(self, port: int, sources: list[str], per_address: int) -> None:
        self.port, self.sources, self.per_address = port, sources, per_address
        self.reconnects = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Slowloris:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _open(self, source: str) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=1, source_address=(source, 0))
            s.sendall(b"GET /p/aaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: k\r\nX-Slow: ")
            s.setblocking(False)
            return s
        except OSError:
            return None

    def _run(self) -> None:
        slots: list[tuple[str, socket.socket | None]] = [
            (src, None) for src in self.sources for _ in range(self.per_address)
        ]
        while not self._stop.is_set():
            for i, (src, s) in enumerate(slots):
                if s is not None:
                    try:
                        if s.recv(1) == b"":
                            raise ConnectionResetError
                    except BlockingIOError:
                        try:
                            s.send(b"a")
                            continue
                        except OSError:
                            pass
                    except OSError:
                        pass
                    s.close()
                    self.reconnects += 1
                slots[i] = (src, self._open(src))
            self._stop.wait(0.05)
        for _, s in slots:
            if s is not None:
                s.close()


@pytest.mark.slow
def test_slowloris_from_a_few_addresses_never_locks_out_a_phone_from_another(store: KeepsakeStore) -> None:
    """Item 2: 4 addresses x 4 slow reconnecting clients would fill a cap of 12 (3 addresses are
    enough); a newcomer takes the heaviest client's oldest connection, slow clients are cut at the
    deadline, and a phone from a fifth address gets every one of its photos while the attack runs."""
    limits = ConnectionLimits(max_connections=12, max_per_client=4, first_request_s=1.0, max_age_s=30)
    srv = _start(store, limits)
    try:
        rec = store.add(JPEG)
        attackers = [f"127.0.1.{i}" for i in range(1, 5)]
        with _Slowloris(srv.port, attackers, per_address=4) as attack:
            time.sleep(0.5)
            assert srv.open_connections == 12, "the attack fills the cap"
            answers = []
            for _ in range(8):
                answers.append(_fetch(srv.port, rec.token, "127.0.0.3", timeout_s=3))
                assert srv.open_connections <= 12
                time.sleep(0.2)
            time.sleep(1.2)
            reconnects = attack.reconnects
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 8
        assert all(a.endswith(JPEG) for a in answers)
        assert reconnects >= 12, "slow clients were cut at the deadline (and over the cap) and came back"
    finally:
        srv.stop()


def test_a_client_outside_keepsake_allow_is_refused_by_the_server_itself(store: KeepsakeStore) -> None:
    """Item 6: without the systemd unit's rules, an address outside ``keepsake.allow`` gets its
    connection closed unanswered; this machine (127.0.0.1) and the allowed networks are served."""
    limits = ConnectionLimits()
    booth = _start(store, limits, allow=["192.168.8.0/24", "127.0.0.7/32"])
    try:
        rec = store.add(JPEG)
        assert _fetch(booth.port, rec.token, "127.0.0.5") == b""
        assert booth.counts.connections_refused == 1
        assert _fetch(booth.port, rec.token, "127.0.0.7").startswith(b"HTTP/1.1 200")
        assert _fetch(booth.port, rec.token, "127.0.0.1").startswith(b"HTTP/1.1 200")
        assert booth.counts.pages + booth.counts.downloads == 2
    finally:
        booth.stop()


def test_a_specific_listen_address_is_this_machine_and_may_connect(store: KeepsakeStore) -> None:
    """``kiosk doctor`` asks a kiosk listening on a specific address from that address."""
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.9:{free_port()}", allow=["192.168.8.0/24"])
    srv = KeepsakeServer(store, cfg, limiter=RateLimiter(burst=1000, per_s=1000)).start()
    try:
        rec = store.add(JPEG)

        def fetch(source: str) -> bytes:
            with socket.create_connection(
                ("127.0.0.9", srv.port), timeout=5, source_address=(source, 0)
            ) as s:
                try:
                    s.sendall(f"GET /p/{rec.token} HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n".encode())
                    return s.makefile("rb").read()
                except ConnectionResetError:  # closed unanswered, before or after the request was sent
                    return b""

        assert fetch("127.0.0.9").startswith(b"HTTP/1.1 200")
        assert fetch("127.0.0.5") == b""
    finally:
        srv.stop()


_CHILD = textwrap.dedent(
    """
    import logging, os, resource, sys, time
    from pathlib import Path
    from kiosk.config import KeepsakeConfig
    from kiosk.keepsake.server import KeepsakeServer
    from kiosk.keepsake.store import KeepsakeStore, StoreLimits
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    store = KeepsakeStore(Path(sys.argv[1]), StoreLimits(900, 50, 200)).open()
    rec = store.add(b"\\xff\\xd8" + b"x" * 100 + b"\\xff\\xd9")
    cfg = KeepsakeConfig(enabled=True, listen="127.0.0.1:" + sys.argv[2], allow=["127.0.0.0/8"])
    srv = KeepsakeServer(store, cfg).start()
    time.sleep(0.2)
    spare = int(sys.argv[3])
    used = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (used + spare, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    print(rec.token, flush=True)
    sys.stdin.read()
    srv.stop()
    """
)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="counts its descriptors in /proc/self/fd")
def test_out_of_file_descriptors_is_one_log_line_and_the_server_recovers(tmp_path: Path) -> None:
    """Item 1: a child server allowed only 12 more file descriptors than it uses at rest; 40 idle
    connections from 4 addresses (within the caps) run it out of descriptors. Its log gains at most
    a line or two and no traceback; once the attack goes, a phone is served again."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "keepsakes"), str(port), "12"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    attack: list[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        token = child.stdout.readline().strip()
        assert token, child.stderr.read() if child.stderr else ""
        for i in range(40):
            try:
                attack.append(_connect(port, f"127.0.2.{i % 4 + 1}"))
            except OSError:
                break
        time.sleep(1.5)  # the accept loop meets EMFILE again and again meanwhile
        for s in attack:
            s.close()
        attack.clear()
        time.sleep(0.3)
        answer = _fetch(port, token, "127.0.0.3")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        child.stdin.close()
        child.wait(10)
        log = child.stderr.read() if child.stderr else ""
    finally:
        for s in attack:
            s.close()
        if child.poll() is None:
            child.kill()
            child.wait(5)
    assert "Traceback" not in log, log[-2000:]
    assert 1 <= log.count("out of file descriptors") <= 2, log[-2000:]
    assert len(log.splitlines()) <= 4, log[-2000:]


def test_the_full_cap_gives_a_newcomer_the_heaviest_clients_oldest_idle_connection() -> None:
    """The share rule on its own (socket pairs, no server): over the full cap a newcomer takes a
    connection from the heaviest client only if that one holds at least two more than it, and a
    connection that has already served a request is taken last."""
    import asyncio

    from kiosk.keepsake.counts import ServerCounts
    from kiosk.keepsake.guard import ConnectionGuard

    class Handler(asyncio.Protocol):  # what the guard calls of aiohttp's RequestHandler
        transport: asyncio.BaseTransport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def force_close(self) -> None:
            pass

    async def run() -> tuple[list[bool], dict[str, int], int]:
        guard = ConnectionGuard(
            Handler, lambda r: r or "?", [], ServerCounts(), ConnectionLimits(4, 3, 10, 30)
        )
        ends: list[socket.socket] = []

        def admit(client: str) -> bool:
            mine, theirs = socket.socketpair()
            ends.append(theirs)
            return guard.admit(mine, client)

        try:
            got = [admit("127.0.0.1") for _ in range(3)]  # this machine, always allowed: the heavy client
            await asyncio.sleep(0.05)  # the hand-overs run: each connection is known by its protocol
            first = min(guard.conns.values(), key=lambda c: c.accepted)
            guard.served(first.handler)  # the oldest has served a request: it is taken last
            got += [
                admit("::1"),
                admit("::1"),
                admit("::1"),
            ]  # 4th fills the cap; the 5th takes one of 127.0.0.1's; the 6th: level, closed
            await asyncio.sleep(0.05)
            per = {c: sum(1 for x in guard.conns.values() if x.client == c) for c in ("127.0.0.1", "::1")}
            kept_first = any(c is first for c in guard.conns.values())
            guard.close_all()
            return got, per, int(kept_first) + 10 * guard.counts.connections_refused
        finally:
            for s in ends:
                s.close()

    got, per, code = asyncio.run(run())
    assert got == [True, True, True, True, True, False]
    assert per == {"127.0.0.1": 2, "::1": 2}
    assert code == 1 + 10 * 2  # the served connection stayed; one taken, one newcomer closed
