"""The staff console's web server: the keepsake server's kind (aiohttp's low-level server in a
thread of its own, :mod:`kiosk.keepsake.guard` admitting connections from ``console.allow`` only,
the same request limits, rate limit and header hardening, aiohttp's own error answers replaced)
serving a handful of fixed addresses:

* ``GET /login``, ``POST /login``: the login form (the only page reachable without the PIN) and a
  session cookie for the right PIN;
* ``GET /``: the status page with its controls and plots; ``GET /app.js``: its script;
* ``GET /status.json``: the status, machine-readable; ``GET /screen.jpg``: the screen's thumbnail;
* ``POST /api/face/next``, ``/api/face/prev``, ``/api/face/pick`` (``key``), ``/api/swap``
  (``on=1|0``), ``/api/faces/reload``, ``/api/keepsake/take``, ``/api/keepsake/delete``
  (``token`` or ``last=N``), ``/logout``.

Everything but the login page answers 401 without the PIN (HTTP Basic as user ``staff``, or the
session cookie); after :data:`~kiosk.console.auth.MAX_FAILURES` wrong PINs a client gets 429. A
state-changing request is a POST that no other site's page sent (``Origin``/``Sec-Fetch-Site``)
and, from a browser session, carries the session's CSRF token. Commands go to ``command``: the
kiosk's render loop applies them (the server never touches the kiosk's state).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any

from aiohttp import web
from aiohttp.web_request import BaseRequest

from kiosk.config import ConsoleConfig
from kiosk.console import pages
from kiosk.console.auth import COOKIE, Door, Session, basic_password, csrf_ok, same_origin
from kiosk.keepsake.counts import ServerCounts
from kiosk.keepsake.guard import ConnectionGuard, ConnectionLimits
from kiosk.keepsake.server import (
    _SECURITY_HEADERS,
    KEEPALIVE_S,
    MAX_FIELD_BYTES,
    MAX_HEADERS,
    MAX_LINE_BYTES,
    RateLimiter,
    _listening_socket,
    _RefusalLog,
    _Server,
    client_key,
    plain_answer,
)
from kiosk.keepsake.store import KeepsakeError

log = logging.getLogger(__name__)

#: A form's body at most (a token, a key, the CSRF token).
MAX_BODY_BYTES = 4096
#: Per client: the status page polls once a second and the thumbnail every 3 s.
RATE_BURST = 60
RATE_PER_S = 10.0
#: A status older than this: the kiosk's loop is not answering (said on the page).
STALE_S = 5.0
HEADERS = {**_SECURITY_HEADERS, "Content-Security-Policy": pages.CSP}
_TOKEN_RE = re.compile(r"(?:/p/)?([A-Za-z0-9_-]{22})(?:\.jpg)?/?")
_FACE_KEY_MAX = 200

#: POST address → the command it queues (the arguments come from the form).
_SIMPLE = {
    "/api/face/next": ("next_face",),
    "/api/face/prev": ("prev_face",),
    "/api/faces/reload": ("reload_faces",),
    "/api/keepsake/take": ("keepsake",),
    "/api/keepsake/print": ("print_again",),
}

Command = tuple[Any, ...]


def _answer(status: int, *, challenge: bool = False) -> web.Response:
    resp = plain_answer(status)
    resp.headers["Content-Security-Policy"] = pages.CSP
    if status == 405:
        resp.headers["Allow"] = "GET, HEAD, POST"
    if challenge:
        resp.headers["WWW-Authenticate"] = 'Basic realm="faceswap-kiosk staff console", charset="UTF-8"'
    return resp


def _html(text: str, status: int = 200, **extra: str) -> web.Response:
    return web.Response(
        text=text, status=status, content_type="text/html", charset="utf-8", headers={**HEADERS, **extra}
    )


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(doc), status=status, content_type="application/json", headers=HEADERS)


class ConsoleServer:
    """Serves the console on ``cfg.listen`` from its own thread. ``status()``: the kiosk's newest
    status (a dict, None before the first); ``thumbnail()``: the screen's newest JPEG (None: none
    yet); ``command(cmd)``: queue a command for the kiosk."""

    def __init__(
        self,
        cfg: ConsoleConfig,
        pin: str,
        status: Callable[[], dict[str, Any] | None],
        thumbnail: Callable[[], bytes | None],
        command: Callable[[Command], None],
        *,
        door: Door | None = None,
        limiter: RateLimiter | None = None,
        limits: ConnectionLimits | None = None,
        counts: ServerCounts | None = None,
    ) -> None:
        self.cfg = cfg
        self.door = door or Door(pin)
        self._status = status
        self._thumbnail = thumbnail
        self._command = command
        self.limiter = limiter or RateLimiter(RATE_BURST, RATE_PER_S)
        self.limits = limits or ConnectionLimits(max_connections=32, max_per_client=8)
        self.counts = counts or ServerCounts()
        self.port = cfg.listen_host_port()[1]
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._guard: ConnectionGuard | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> ConsoleServer:
        """Returns once the socket is bound; :class:`KeepsakeError` with one line otherwise."""
        ready = threading.Event()
        failure: list[str] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure), name="console-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout_s):
            raise KeepsakeError(f"console: the web server did not start within {timeout_s:g} s")
        if failure:
            self._thread.join(timeout_s)
            raise KeepsakeError(failure[0])
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._thread = None

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, ready: threading.Event, failure: list[str]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready, failure))
        except Exception as exc:  # noqa: BLE001 - the kiosk goes on without its console
            if not ready.is_set():
                failure.append(f"console: the web server failed: {type(exc).__name__}: {exc}")
            else:
                log.exception("console: the web server stopped")
        finally:
            ready.set()
            loop.close()

    async def _serve(self, ready: threading.Event, failure: list[str]) -> None:
        self._stopped = asyncio.Event()
        server = _Server(
            self._handle,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_FIELD_BYTES,
            max_headers=MAX_HEADERS,
            keepalive_timeout=KEEPALIVE_S,
            lingering_time=1.0,
            access_log=None,
            logger=_RefusalLog(self.counts),
        )
        guard = ConnectionGuard(server, client_key, self._allowed_networks(), self.counts, self.limits)
        server.guard = self._guard = guard
        host, port = self.cfg.listen_host_port()
        try:
            listener = _listening_socket(host, port)
        except OSError as exc:
            if exc.errno in (errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES):
                hint = "the service's network rules: apply them, see kiosk keepsake network --help"
            else:
                hint = "another program on that port? change console.listen"
            failure.append(f"console: cannot listen on {self.cfg.listen}: {exc.strerror or exc} ({hint})")
            ready.set()
            return
        self.port = listener.getsockname()[1]
        accepting = asyncio.get_running_loop().create_task(guard.accept_forever(listener))
        ready.set()
        try:
            while not self._stopped.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), self.limits.first_request_s / 2)
                guard.reap()
        finally:
            accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accepting
            listener.close()
            guard.close_all()
            await server.shutdown(0.5)

    def _allowed_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        """``console.allow``, and the listen address when it is a specific one (``kiosk doctor``)."""
        networks = [ipaddress.ip_network(text) for text in self.cfg.allow]
        host = ipaddress.ip_address(self.cfg.listen_host_port()[0])
        if not host.is_unspecified:
            networks.append(ipaddress.ip_network(host))
        return networks

    # -- requests -----------------------------------------------------------------------------
    async def _handle(self, request: BaseRequest) -> web.StreamResponse:
        if self._guard is not None:
            self._guard.served(request.protocol)
        try:
            resp = await self._route(request)
        except Exception:  # a bug here must show in the log, and the client gets an answer
            log.exception("console: request %s %s failed", request.method, request.raw_path[:80])
            resp = _answer(500)
        if resp.status >= 400:
            self.counts.refused += 1
        else:
            self.counts.pages += 1
        return resp

    async def _route(self, request: BaseRequest) -> web.StreamResponse:
        client = client_key(request.remote)
        if not self.limiter.allow(client, time.monotonic()):
            return _answer(429)
        method = request.method
        target = request.raw_path.split("?", 1)[0]
        session: Session | None = None
        if target != "/login":  # the PIN first: without it nothing but the login page says anything
            if self.door.locked(client):
                return _answer(429)
            session, why = self._who(request, client)
            if why:
                if self.door.locked(client):  # this was its last try
                    return _answer(429)
                if target in ("/", "/index.html") and method == "GET":
                    return _html(pages.unauthorised_page(), 401)
                return _answer(401, challenge=True)
        if method not in ("GET", "HEAD", "POST"):
            return _answer(405)
        if request.headers.get("Transfer-Encoding"):
            return _answer(413)
        length = request.content_length or 0
        if (method != "POST" and request.body_exists) or length > MAX_BODY_BYTES:
            return _answer(413)
        if target == "/login":
            return await self._login(request, client)
        if method == "POST":
            return await self._post(request, target, session)
        if target.startswith("/api/") or target == "/logout":
            return _answer(405)  # a change is a POST, never a GET a link or an image could send
        return self._get(target, session)

    def _who(self, request: BaseRequest, client: str) -> tuple[Session | None, str]:
        """(the browser's session or None for HTTP Basic, "") when the PIN was given; else
        (None, why not)."""
        password = basic_password(request.headers.get("Authorization"))
        if password is not None:
            if self.door.check(client, password):
                return None, ""
            log.warning("console: wrong PIN from %s (HTTP Basic)", request.remote)
            return None, "wrong PIN"
        session = self.door.session(_cookie(request))
        if session is None:
            return None, "no PIN"
        return session, ""

    async def _login(self, request: BaseRequest, client: str) -> web.StreamResponse:
        if request.method != "POST":
            return _html(pages.login_page())
        if self.door.locked(client):
            return _answer(429)
        if not self._same_origin(request):
            return _answer(403)
        form = await _form(request)
        if self.door.check(client, form.get("pin", "")):
            sid, _ = self.door.open_session()
            log.info("console: staff logged in from %s", request.remote)
            cookie = f"{COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/; Max-Age={int(self.door.session_s)}"
            return web.Response(status=303, headers={**HEADERS, "Location": "/", "Set-Cookie": cookie})
        log.warning("console: wrong PIN from %s (login form)", request.remote)
        if self.door.locked(client):
            return _answer(429)
        return _html(pages.login_page("Wrong PIN."), 401)

    def _same_origin(self, request: BaseRequest) -> bool:
        h = request.headers
        return same_origin(h.get("Origin"), h.get("Sec-Fetch-Site"), h.get("Host"))

    def _get(self, target: str, session: Session | None) -> web.StreamResponse:
        if target in ("/", "/index.html"):
            return _html(pages.status_page(self._status(), session.csrf if session else ""))
        if target == "/status.json":
            return _json(self.status_document())
        if target == "/app.js":
            return web.Response(
                text=pages.SCRIPT, content_type="text/javascript", charset="utf-8", headers=HEADERS
            )
        if target == "/screen.jpg":
            self._command(("viewer",))  # someone looks: the kiosk sends thumbnails for a while
            jpeg = self._thumbnail()
            if jpeg is None:
                return _answer(404)
            return web.Response(body=jpeg, content_type="image/jpeg", headers=HEADERS)
        return _answer(404)

    def status_document(self) -> dict[str, Any]:
        """``GET /status.json``: the kiosk's newest status and whether it is current."""
        status = self._status()
        if status is None:
            return {"kiosk_answering": False}
        age = time.time() - float(status.get("updated_unix", 0.0))
        return {**status, "kiosk_answering": age < STALE_S, "status_age_s": round(age, 2)}

    async def _post(self, request: BaseRequest, target: str, session: Session | None) -> web.StreamResponse:
        if not self._same_origin(request):
            return _answer(403)
        form = await _form(request)
        if session is not None and not csrf_ok(
            session, form.get("csrf") or request.headers.get("X-CSRF-Token")
        ):
            return _answer(403)
        if target == "/logout":
            self.door.close_session(_cookie(request))
            expired = f"{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
            return web.Response(status=303, headers={**HEADERS, "Location": "/login", "Set-Cookie": expired})
        cmd = self._command_of(target, form)
        if cmd is None:
            return _answer(404 if target not in _FORMS else 400)
        self._command(cmd)
        log.info("console: %s from %s", cmd[0], request.remote)
        if session is not None and "X-CSRF-Token" not in request.headers:  # a form: back to the page
            return web.Response(status=303, headers={**HEADERS, "Location": "/"})
        return _json({"ok": True, "queued": cmd[0]}, 202)

    @staticmethod
    def _command_of(target: str, form: dict[str, str]) -> Command | None:
        if target in _SIMPLE:
            return _SIMPLE[target]
        if target == "/api/face/pick":
            key = form.get("key", "")
            return ("pick_face", key) if 0 < len(key) <= _FACE_KEY_MAX else None
        if target == "/api/swap":
            on = form.get("on", "")
            return ("swap", on == "1") if on in ("0", "1") else None
        if target == "/api/keepsake/delete":
            match = _TOKEN_RE.search(form.get("token", "").strip())
            if match is not None:
                return ("delete_keepsake", match.group(1))
            last = form.get("last", "")
            return ("delete_last_keepsakes", int(last)) if last.isdigit() and 0 < int(last) <= 1000 else None
        return None


_FORMS = ("/api/face/pick", "/api/swap", "/api/keepsake/delete")


def _cookie(request: BaseRequest) -> str | None:
    raw = request.headers.get("Cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    with contextlib.suppress(Exception):
        jar.load(raw)
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


async def _form(request: BaseRequest) -> dict[str, str]:
    """A POST's urlencoded form (first value of each field); {} for any other body."""
    if not request.body_exists:
        return {}
    body = await request.content.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        return {}
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8"), max_num_fields=16)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in fields.items() if v}
