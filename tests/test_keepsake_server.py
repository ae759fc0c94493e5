"""The keepsake web server (kiosk/keepsake/server.py) over real sockets on loopback ports the kernel picks, with
real HTTP clients: http.client (it sends a path exactly as written, no normalising) and aiohttp's
client for the concurrent burst. Every request kind a phone or an attacker might send, and its answer."""

from __future__ import annotations

import asyncio
import http.client
import shutil
import socket
import ssl
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from net_helpers import free_port, raw_request

from kiosk.config import KeepsakeConfig
from kiosk.keepsake.server import CSP, KeepsakeServer, RateLimiter, client_key, url_base_of
from kiosk.keepsake.store import KeepsakeError, KeepsakeStore, StoreLimits

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40 + b"\xff\xd9"


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> KeepsakeStore:
    return KeepsakeStore(tmp_path / "keepsakes", StoreLimits(900, 50, 200), clock).open()


def _server(store: KeepsakeStore, clock: Clock, **kw: object) -> KeepsakeServer:
    limiter = kw.pop("limiter", None)
    kw.setdefault("allow", ["127.0.0.0/8"])  # the test's clients come from 127.0.0.2, 127.0.0.3, ...
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{free_port()}", event_name="Expo <2026>", **kw)  # type: ignore[arg-type]
    return KeepsakeServer(store, cfg, clock=clock, limiter=limiter).start()  # type: ignore[arg-type]


@pytest.fixture
def server(store: KeepsakeStore, clock: Clock) -> Iterator[KeepsakeServer]:
    srv = _server(store, clock, limiter=RateLimiter(burst=1000, per_s=1000))
    yield srv
    srv.stop()
    assert not srv.is_alive()


def _get(
    srv: KeepsakeServer,
    path: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_page_and_the_jpeg_of_a_token(server: KeepsakeServer, store: KeepsakeStore) -> None:
    rec = store.add(JPEG)
    url = server.url_for(rec.token)
    assert url == f"http://127.0.0.1:{server.port}/p/{rec.token}"
    status, headers, body = _get(server, f"/p/{rec.token}")
    assert status == 200 and headers["content-type"].startswith("text/html")
    page = body.decode()
    assert f"<img src=/p/{rec.token}.jpg" in page and "download=" in page
    assert "Expo &lt;2026&gt;" in page and "<2026>" not in page  # the event's name, escaped
    assert time.strftime("%H:%M", time.localtime(rec.expires)) in page and "deleted" in page
    status, headers, body = _get(server, f"/p/{rec.token}.jpg")
    assert (status, headers["content-type"], body) == (200, "image/jpeg", JPEG)
    status, headers, body = _get(server, f"/p/{rec.token}.jpg?utm=x")  # a query is ignored, never read
    assert (status, body) == (200, JPEG)
    status, headers, body = _get(server, f"/p/{rec.token}.jpg", method="HEAD")
    assert (status, body, int(headers["content-length"])) == (200, b"", len(JPEG))
    status, headers, body = _get(server, f"/p/{rec.token}", method="HEAD")
    assert status == 200 and body == b""
    assert server.counts.downloads == 2 and server.counts.pages == 1  # HEAD counts as neither


def test_every_answer_has_no_store_and_a_strict_csp(server: KeepsakeServer, store: KeepsakeStore) -> None:
    rec = store.add(JPEG)
    for path, method in [
        (f"/p/{rec.token}", "GET"),
        (f"/p/{rec.token}.jpg", "GET"),
        ("/", "GET"),
        ("/p/x", "POST"),
    ]:
        _, headers, _ = _get(server, path, method)
        assert headers["cache-control"] == "no-store", path
        assert headers["content-security-policy"] == CSP, path
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    assert CSP.startswith("default-src 'none'") and "unsafe" not in CSP and "script-src" not in CSP
    assert "frame-ancestors 'none'" in CSP


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/index.html",
        "/p/",
        "/p",
        "/p/{tok}/",
        "/p/{tok}.png",
        "/p/{tok}.jpg/",
        "/p/{tok}.jpg.jpg",
        "/p/{tok}x",
        "/p/../x",
        "/p/../../etc/passwd",
        "/p/./{tok}",
        "/p/%2e%2e/x",
        "/p/%2e%2e%2f{tok}",
        "/p/..%2f{tok}.jpg",
        "/p%2f{tok}",
        "/p/{tok}%2ejpg",
        "/%70/{tok}",
        "/p/{enc}",
        "//p/{tok}",
        "/P/{tok}",
        "/p/{tok}%00.jpg",
        "/p/{tok}.jpg%00",
        "/keepsakes/{tok}.jpg",
        "/" + "{tok}.jpg",
    ],
)
def test_any_other_path_is_404_including_traversal_and_encoded_ones(
    server: KeepsakeServer, store: KeepsakeStore, path: str
) -> None:
    rec = store.add(JPEG)
    (store.folder.parent / "x").write_text("secret")
    enc = "".join(f"%{ord(c):02X}" for c in rec.token)  # the right token, percent-encoded
    status, _, body = _get(server, path.format(tok=rec.token, enc=enc))
    assert status == 404, path
    assert JPEG not in body and b"secret" not in body


def test_a_wrong_or_malformed_token_is_404(server: KeepsakeServer, store: KeepsakeStore) -> None:
    rec = store.add(JPEG)
    wrong = ("A" if rec.token[0] != "A" else "B") + rec.token[1:]
    for path in (f"/p/{wrong}", f"/p/{wrong}.jpg", f"/p/{rec.token[:-1]}", "/p/" + "=" * 22):
        assert _get(server, path)[0] == 404, path


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
def test_only_get_and_head(server: KeepsakeServer, store: KeepsakeStore, method: str) -> None:
    rec = store.add(JPEG)
    status, headers, _ = _get(
        server, f"/p/{rec.token}.jpg", method=method, body=b"x" if method != "TRACE" else None
    )
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert rec.path.read_bytes() == JPEG  # DELETE deleted nothing


def _raw(port: int, data: bytes, source: str = "127.0.0.1") -> bytes:
    return raw_request(port, data, source)


def test_oversized_requests_are_refused(server: KeepsakeServer, store: KeepsakeStore) -> None:
    rec = store.add(JPEG)
    end = b"Host: k\r\nConnection: close\r\n\r\n"
    long_line = b"GET /p/" + b"a" * 4000 + b" HTTP/1.1\r\n" + end
    big_header = b"GET /p/" + rec.token.encode() + b" HTTP/1.1\r\nCookie: " + b"c" * 4000 + b"\r\n" + end
    many = (
        b"GET /p/"
        + rec.token.encode()
        + b" HTTP/1.1\r\n"
        + b"".join(b"X-%d: 1\r\n" % i for i in range(60))
        + end
    )
    for request in (long_line, big_header, many):
        answer = _raw(server.port, request)
        assert answer.split(b"\r\n")[0].endswith(b"400 Bad Request"), answer[:80]
        assert JPEG not in answer
    status, _, _ = _get(server, f"/p/{rec.token}", body=b"x" * 100)  # GET with a body
    assert status == 413
    chunked = (
        b"GET /p/"
        + rec.token.encode()
        + b" HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
        + end
        + b"5\r\nhello\r\n0\r\n\r\n"
    )
    assert b" 413 " in _raw(server.port, chunked).split(b"\r\n")[0]
    assert server.counts.refused >= 5
    assert _get(server, f"/p/{rec.token}")[0] == 200  # and the server goes on


def test_after_the_ttl_the_address_is_gone_410_and_the_file_deleted(
    server: KeepsakeServer, store: KeepsakeStore, clock: Clock
) -> None:
    rec = store.add(JPEG)
    assert _get(server, f"/p/{rec.token}.jpg")[0] == 200
    clock.t += 901
    deadline = time.monotonic() + 5
    while rec.path.exists() and time.monotonic() < deadline:  # the server's own sweep, once a second
        time.sleep(0.05)
    assert not rec.path.exists()
    for path in (f"/p/{rec.token}", f"/p/{rec.token}.jpg"):
        status, _, body = _get(server, path)
        assert status == 410 and JPEG not in body
    assert not list(store.folder.glob("*.jpg"))


def test_each_client_has_its_own_rate_limit(store: KeepsakeStore, clock: Clock) -> None:
    srv = _server(store, clock, limiter=RateLimiter(burst=5, per_s=0.5))
    try:
        rec = store.add(JPEG)
        statuses = [
            _raw(srv.port, f"GET /p/{rec.token} HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n".encode())
            for _ in range(8)
        ]
        codes = [int(a.split(b" ")[1]) for a in statuses]
        assert codes[:5] == [200] * 5 and codes[5:] == [429] * 3
        assert b"Retry-After: 2" in statuses[-1]
        other = _raw(
            srv.port,
            f"GET /p/{rec.token} HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n".encode(),
            "127.0.0.2",
        )
        assert other.startswith(b"HTTP/1.1 200"), "another phone is not limited by the first one"
    finally:
        srv.stop()


def test_client_key_groups_an_ipv6_64_and_unmaps_ipv4() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("::ffff:192.168.1.5") == "192.168.1.5"
    assert client_key("192.168.1.5") == "192.168.1.5"


def test_a_burst_of_concurrent_requests_is_served_or_refused_cleanly(
    store: KeepsakeStore, clock: Clock
) -> None:
    """400 requests at once from loopback (one client): each gets 200 or 429 (or, beyond the
    connection cap, a closed connection), all within a bounded time; the server then serves a
    phone as before."""
    import aiohttp

    srv = _server(store, clock)  # the real limits
    rec = store.add(JPEG)

    async def burst() -> Counter[object]:
        seen: Counter[object] = Counter()
        timeout = aiohttp.ClientTimeout(total=20)
        conn = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:

            async def one(i: int) -> None:
                path = f"/p/{rec.token}.jpg" if i % 2 else f"/p/{rec.token}"
                try:
                    async with session.get(f"http://127.0.0.1:{srv.port}{path}") as resp:
                        body = await resp.read()
                        seen[resp.status] += 1
                        if resp.status == 200 and path.endswith(".jpg"):
                            assert body == JPEG
                except (aiohttp.ClientConnectionError, aiohttp.ServerDisconnectedError):
                    seen["closed"] += 1

            await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(400))), 30)
        return seen

    try:
        t0 = time.monotonic()
        seen = asyncio.run(burst())
        elapsed = time.monotonic() - t0
        assert sum(seen.values()) == 400
        assert set(seen) <= {200, 429, "closed"}, seen
        assert seen[200] >= 20 and seen[429] > 0, seen  # the bucket's burst served, the rest refused
        assert elapsed < 30
        assert srv.is_alive()
        assert _raw(
            srv.port,
            f"GET /p/{rec.token} HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n".encode(),
            "127.0.0.3",
        ).startswith(b"HTTP/1.1 200")
        deadline = time.monotonic() + 5
        while srv.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.open_connections == 0
    finally:
        srv.stop()


def test_a_taken_port_is_one_clear_line(store: KeepsakeStore, clock: Clock) -> None:
    port = free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")
        with pytest.raises(KeepsakeError) as info:
            KeepsakeServer(store, cfg).start()
    line = str(info.value)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "keepsake.listen" in line and "\n" not in line


@pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl (to make a test certificate) not installed"
)
def test_tls_from_tls_cert_and_tls_key(store: KeepsakeStore, clock: Clock, tmp_path: Path) -> None:
    cert, key = tmp_path / "booth.pem", tmp_path / "booth.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    srv = _server(store, clock, tls_cert=str(cert), tls_key=str(key))
    try:
        rec = store.add(JPEG)
        assert srv.url_for(rec.token).startswith("https://")
        ctx = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=10)
        conn.request("GET", f"/p/{rec.token}.jpg")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, JPEG)
        conn.close()
        plain = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=3)
        with pytest.raises((http.client.HTTPException, OSError)):  # plain HTTP on the TLS port: no answer
            plain.request("GET", f"/p/{rec.token}.jpg")
            plain.getresponse().read()
        plain.close()
    finally:
        srv.stop()
    bad = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{free_port()}", tls_cert=str(key), tls_key=str(key))
    with pytest.raises(KeepsakeError, match="cannot load TLS certificate"):
        KeepsakeServer(store, bad).start()


def test_url_base_given_or_discovered() -> None:
    given = KeepsakeConfig(url_base="https://booth.example:8443/")
    assert url_base_of(given) == "https://booth.example:8443"
    specific = KeepsakeConfig(listen="192.168.7.20:8088")
    assert url_base_of(specific) == "http://192.168.7.20:8088"
    assert url_base_of(KeepsakeConfig(listen="192.168.7.20:80")) == "http://192.168.7.20"
    # a wildcard listen and no route into the allowed networks: loopback (kiosk doctor says so)
    assert url_base_of(KeepsakeConfig(listen="0.0.0.0:8088", allow=["198.51.100.0/24"])) in (
        "http://127.0.0.1:8088",
        "http://198.51.100.1:8088",  # a machine that really has an address there
    )


@pytest.mark.skipif(
    shutil.which("ip") is None, reason="iproute2 (to list this machine's addresses) not installed"
)
def test_url_base_is_discovered_from_the_interface_on_the_booth_lan() -> None:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    nets = [f.split()[3] for f in out.splitlines() if " scope global " in f]
    if not nets:
        pytest.skip("this machine has no global IPv4 address")
    address, prefix = nets[0].split("/")
    import ipaddress

    lan = str(ipaddress.ip_network(nets[0], strict=False))
    cfg = KeepsakeConfig(listen="0.0.0.0:8088", allow=["198.51.100.0/24", lan])
    assert url_base_of(cfg) == f"http://{address}:8088"


def test_the_parsers_own_400s_carry_the_security_headers_and_echo_nothing(
    server: KeepsakeServer, store: KeepsakeStore
) -> None:
    """Issue 28, item 7: aiohttp's low-level answers (before: its own text, which quotes the request
    line with the token, no security headers, ``Server: Python/3.11 aiohttp/…``)."""
    tok = store.add(JPEG).token.encode()
    end = b"Host: k\r\nConnection: close\r\n\r\n"
    hostile = {
        "NUL": b"GET /p/" + tok + b"\x00 HTTP/1.1\r\n" + end,
        "bad version": b"GET /p/" + tok + b" HTTP/9.Z\r\n" + end,
        "header over 2 KiB": b"GET /p/" + tok + b" HTTP/1.1\r\nCookie: " + b"c" * 4000 + b"\r\n" + end,
        "over 32 headers": b"GET /p/"
        + tok
        + b" HTTP/1.1\r\n"
        + b"".join(b"X-%d: 1\r\n" % i for i in range(40))
        + end,
        "LF-only lines": b"GET /p/" + tok + b" HTTP/1.1\nHost: k\n\n",
        "Content-Length and chunked": b"GET /p/"
        + tok
        + b" HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
        + end
        + b"0\r\n\r\n",
    }
    for what, request in hostile.items():
        answer = _raw(server.port, request)
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.") and lines[0][9] == "4", (what, answer[:200])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        assert headers.get("cache-control") == "no-store", what
        assert headers.get("content-security-policy") == CSP, what
        assert headers.get("x-content-type-options") == "nosniff", what
        assert headers.get("x-frame-options") == "DENY", what
        assert "aiohttp" not in headers.get("server", "").lower() and b"aiohttp" not in answer.lower(), what
        assert tok not in answer and b"GET" not in body, (what, body[:200])
    _, headers, _ = _get(server, f"/p/{tok.decode()}")
    assert headers["server"] == "faceswap-kiosk"  # the normal pages too
    assert _get(server, f"/p/{tok.decode()}")[0] == 200  # and the server goes on
