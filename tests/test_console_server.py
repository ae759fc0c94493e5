"""The staff console's server (issue 29, items 2 and 3), in this process on loopback: nothing but
the login page without the PIN, the lockout after 10 wrong PINs, HTTP Basic and the browser's
session with CSRF, POST only for changes, ``console.allow`` enforced, the keepsake server's
headers, and the commands it queues for the kiosk."""

from __future__ import annotations

import base64
import http.client
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from net_helpers import free_port, raw_request

from kiosk.config import ConsoleConfig
from kiosk.console.auth import Door
from kiosk.console.server import ConsoleServer
from kiosk.keepsake.server import RateLimiter

PIN = "4711-booth"
STATUS: dict[str, Any] = {
    "updated_unix": 0.0,
    "swapping": True,
    "face": "Ada",
    "faces": [{"key": "k1", "name": "Ada"}, {"key": "k2", "name": "Grace"}],
    "mode": "synced",
    "fps": {"render": 59.9, "processing": 24.0, "capture": 30.0},
    "swap_share_pct": 97.5,
    "camera": {"description": "synthetic", "state": "running", "last_error": ""},
    "models": [{"role": "swapper", "name": "inswapper_128", "licence": "non-commercial"}],
    "disk": [{"what": "keepsakes", "free_gb": 12.5, "total_gb": 64.0}],
    "warnings": [{"text": "source: no camera", "todo": "check the cable"}],
    "counters": {"faces_seen": 3},
    "history": {"hour_start": [0] * 24, "faces_seen": [0] * 23 + [3]},
    "keepsakes_enabled": True,
}


class Console:
    def __init__(self, allow: list[str] | None = None) -> None:
        self.commands: list[tuple[Any, ...]] = []
        cfg = ConsoleConfig(
            enabled=True, listen=f"127.0.0.1:{free_port()}", pin=PIN, allow=allow or ["10.0.0.0/8"]
        )
        self.server = ConsoleServer(
            cfg,
            PIN,
            lambda: {**STATUS, "updated_unix": time.time()},
            lambda: b"\xff\xd8jpeg",
            self.commands.append,
            door=Door(PIN, lockout_s=60.0),
            limiter=RateLimiter(burst=1000, per_s=1000),
        ).start()

    def request(
        self, method: str, path: str, body: str = "", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=5)
        try:
            hdrs = dict(headers or {})
            if body:
                hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
            conn.request(method, path, body=body.encode() if body else None, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


def basic(pin: str, user: str = "staff") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{pin}".encode()).decode()}


@pytest.fixture
def console() -> Iterator[Console]:
    c = Console()
    try:
        yield c
    finally:
        c.server.stop()


def served_paths() -> list[str]:
    """Every path the console's server names (each string literal of its module that starts with a
    slash), so a route added later is covered without editing this list."""
    import inspect

    import kiosk.console.server as module

    found = set(re.findall(r"[\"'](/[A-Za-z0-9_./-]*)[\"']", inspect.getsource(module)))
    return sorted(found - {"/login"})


def variants(path: str) -> list[str]:
    return [
        path,
        path + "/",
        "/" + path,
        path + "?pin=" + PIN,
        path.upper(),
        "/login/.." + path,
        "/login/" + path.lstrip("/"),
        path + ";login",
        "/%" + f"{ord(path[1]):02X}" + path[2:] if len(path) > 1 else "/%2F",
    ]


def test_without_the_pin_every_path_but_the_login_page_is_401(console: Console) -> None:
    paths = served_paths()
    assert {"/", "/status.json", "/screen.jpg", "/app.js", "/api/face/next", "/logout"} <= set(paths)
    for path in [*paths, "/nope", "/.env", "/login/"]:
        for target in variants(path):
            for method in ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"):
                if target != path and method not in ("GET", "POST"):
                    continue
                status, headers, body = console.request(method, target)
                assert status == 401, (method, target, status)
                assert b"Ada" not in body and b"jpeg" not in body and b"function" not in body
    status, headers, body = console.request("GET", "/login")
    assert status == 200 and b"name=pin" in body
    assert console.request("GET", "/login?next=/status.json")[0] == 200
    assert console.request("GET", "/status.json", headers=basic(PIN, "admin"))[0] == 401
    assert console.request("GET", "/status.json", headers=basic(PIN + "x"))[0] == 401
    assert console.commands == []


def test_with_the_pin_status_json_answers_and_face_next_is_queued(console: Console) -> None:
    status, headers, body = console.request("GET", "/status.json", headers=basic(PIN))
    assert status == 200 and headers["content-type"].startswith("application/json")
    doc = json.loads(body)
    assert doc["face"] == "Ada" and doc["fps"]["render"] == 59.9 and doc["swap_share_pct"] == 97.5
    assert doc["warnings"] and doc["counters"] and doc["kiosk_answering"] is True
    assert console.request("POST", "/api/face/next", headers=basic(PIN))[0] == 202
    assert console.request("POST", "/api/face/prev", headers=basic(PIN))[0] == 202
    assert console.request("POST", "/api/swap", "on=0", basic(PIN))[0] == 202
    assert console.request("POST", "/api/face/pick", "key=k2", basic(PIN))[0] == 202
    token = "A" * 22
    assert console.request("POST", "/api/keepsake/delete", f"token=http://x/p/{token}", basic(PIN))[0] == 202
    assert console.request("POST", "/api/keepsake/delete", "last=2", basic(PIN))[0] == 202
    assert console.request("POST", "/api/keepsake/print", headers=basic(PIN))[0] == 202
    assert console.request("POST", "/api/swap", "on=maybe", basic(PIN))[0] == 400
    assert console.commands == [
        ("next_face",),
        ("prev_face",),
        ("swap", False),
        ("pick_face", "k2"),
        ("delete_keepsake", token),
        ("delete_last_keepsakes", 2),
        ("print_again",),
    ]


def test_changes_are_post_only(console: Console) -> None:
    assert console.request("GET", "/api/face/next", headers=basic(PIN))[0] == 405
    assert console.request("PUT", "/api/face/next", headers=basic(PIN))[0] == 405
    assert console.commands == []


def test_ten_wrong_pins_then_429_for_that_client_even_with_the_right_one(console: Console) -> None:
    for _ in range(9):
        assert console.request("GET", "/status.json", headers=basic("0000"))[0] == 401
    assert console.request("POST", "/login", "pin=0000")[0] == 429  # the tenth wrong PIN
    assert console.request("GET", "/status.json", headers=basic(PIN))[0] == 429
    assert console.request("POST", "/login", f"pin={PIN}")[0] == 429
    assert console.server.door.failures == 10


def _login(console: Console) -> tuple[str, str]:
    status, headers, _ = console.request("POST", "/login", f"pin={PIN}")
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    sid = cookie.split(";", 1)[0]
    status, _, page = console.request("GET", "/", headers={"Cookie": sid})
    assert status == 200
    match = re.search(rb"name=csrf value=([A-Za-z0-9_-]+)", page)
    assert match is not None
    return sid, match.group(1).decode()


def test_a_browser_session_needs_the_csrf_token_and_no_other_site(console: Console) -> None:
    sid, csrf = _login(console)
    page = console.request("GET", "/", headers={"Cookie": sid})[2].decode()
    assert "Ada" in page and "59.9 fps" in page and "source: no camera" in page and "<svg" in page
    assert console.request("POST", "/api/face/next", "csrf=wrong", {"Cookie": sid})[0] == 403
    assert console.request("POST", "/api/face/next", "", {"Cookie": sid})[0] == 403
    cross = {"Cookie": sid, "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert console.request("POST", "/api/face/next", f"csrf={csrf}", cross)[0] == 403
    assert (
        console.request("POST", "/api/face/next", headers={**basic(PIN), "Origin": "http://evil.example"})[0]
        == 403
    )
    assert console.commands == []
    status, headers, _ = console.request("POST", "/api/face/next", f"csrf={csrf}", {"Cookie": sid})
    assert status == 303 and headers["location"] == "/"
    assert console.commands == [("next_face",)]
    assert console.request("POST", "/logout", f"csrf={csrf}", {"Cookie": sid})[0] == 303
    assert console.request("GET", "/status.json", headers={"Cookie": sid})[0] == 401


def test_the_keepsake_servers_header_hardening(console: Console) -> None:
    for path, headers in (("/login", {}), ("/", basic(PIN)), ("/nope", basic(PIN)), ("/", {})):
        _, got, _ = console.request("GET", path, headers=headers)
        assert got["cache-control"] == "no-store", path
        assert "default-src 'none'" in got["content-security-policy"]
        assert "frame-ancestors 'none'" in got["content-security-policy"]
        assert got["x-content-type-options"] == "nosniff" and got["x-frame-options"] == "DENY"
        assert got["server"] == "faceswap-kiosk"
    # aiohttp's own error answer (a bad request line) is the plain one, with the headers
    answer = raw_request(console.server.port, b"GET /\x00 HTTP/1.1\r\nHost: k\r\n\r\n")
    assert answer.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")) and b"no-store" in answer


def test_a_client_outside_console_allow_is_refused_by_the_server_itself() -> None:
    c = Console(allow=["192.168.8.0/24", "127.0.0.7/32"])
    try:
        req = b"GET /login HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n"
        assert raw_request(c.server.port, req, "127.0.0.5") == b""
        assert raw_request(c.server.port, req, "127.0.0.7").startswith(b"HTTP/1.1 200")
        assert c.server.counts.connections_refused == 1
    finally:
        c.server.stop()


def test_doctor_knows_a_running_console_on_its_port(console: Console) -> None:
    from kiosk.appliance.doctor.console import check_console_port

    r = check_console_port(ConsoleConfig(enabled=True, listen=f"127.0.0.1:{console.server.port}"))
    assert r.ok and "a running kiosk serves its console there" in r.detail
