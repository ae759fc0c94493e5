"""The keepsake web server: a visitor's phone fetches its photo from the kiosk, on the booth's network.

Built on aiohttp's low-level server (no router, no static files) in a thread of its own with its own
event loop, so nothing it does waits on the render loop or makes it wait. Exactly two kinds of
address exist, matched on the raw request target before anything decodes it:

* ``GET /p/<token>``: a small mobile page (the picture, a download button, the event's name and
  when the photo will be deleted);
* ``GET /p/<token>.jpg``: the JPEG;
* ``GET /p/<token>.mp4`` and ``/p/<token>.gif``: its clip (``keepsake.clip``), once made; a
  single byte ``Range`` is answered 206 (a phone's video player asks for one).

Everything else is 404 (no index, no listing; ``%2e%2e``, ``%2f`` and ``..`` never match a token),
a token whose photo was deleted is 410, any method but GET and HEAD is 405, a request line or
header over a few KiB or any request body is refused, each client gets a token bucket (429 when
it runs dry), and every answer carries ``Cache-Control: no-store`` and a strict
Content-Security-Policy. Connections are admitted by :mod:`kiosk.keepsake.guard` from the moment
they are accepted: only ``keepsake.allow``, capped in number, per client and in age (a slow client
cannot hold them). Optional TLS from ``keepsake.tls_cert``/``tls_key``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import hashlib
import html
import ipaddress
import logging
import re
import socket
import ssl
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web, web_protocol
from aiohttp.web_request import BaseRequest

from kiosk.config import KeepsakeConfig
from kiosk.keepsake.counts import ServerCounts
from kiosk.keepsake.guard import ConnectionGuard, ConnectionLimits
from kiosk.keepsake.privacy import hide_tokens
from kiosk.keepsake.store import SWEEP_EVERY_S, Found, KeepsakeError, Lookup

log = logging.getLogger(__name__)

#: The only request targets served (query strings are ignored, never interpreted).
_PAGE_RE = re.compile(r"/p/([A-Za-z0-9_-]{22})")
_JPEG_RE = re.compile(r"/p/([A-Za-z0-9_-]{22})\.(jpg|mp4|gif)")
_CONTENT_TYPES = {"jpg": "image/jpeg", "mp4": "video/mp4", "gif": "image/gif"}
_RANGE_RE = re.compile(r"bytes=(\d{0,12})-(\d{0,12})")

#: Request limits: a phone's GET is a few hundred bytes.
MAX_LINE_BYTES = 2048
MAX_FIELD_BYTES = 2048
MAX_HEADERS = 32
#: Per client (IP address; an IPv6 /64): a burst of RATE_BURST requests, then RATE_PER_S.
RATE_BURST = 20
RATE_PER_S = 4.0
KEEPALIVE_S = 5.0
#: Connections the kernel queues for accept(); beyond, a burst's SYNs wait in the phone's retry,
#: costing the kiosk nothing.
BACKLOG = 64

_CSS = (
    "body{margin:0;font-family:system-ui,sans-serif;background:#111;color:#eee;text-align:center}"
    "main{max-width:40rem;margin:auto;padding:1rem}"
    "img{width:100%;height:auto;border-radius:.5rem}"
    "a.button{display:block;margin:1rem 0;padding:1rem;border-radius:.5rem;background:#2d7ff9;"
    "color:#fff;font-size:1.2rem;text-decoration:none}"
    "p{margin:.5rem 0}.small{color:#aaa;font-size:.9rem}"
    "video{width:100%;height:auto;border-radius:.5rem;margin-top:1rem}"
)
_CSS_HASH = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
#: Nothing but this page's own picture and its one inline style; no script at all.
CSP = (
    f"default-src 'none'; img-src 'self'; media-src 'self'; style-src 'sha256-{_CSS_HASH}'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Server": "faceswap-kiosk",  # instead of aiohttp's "Python/3.x aiohttp/3.x"
}
_STATUS_TEXT = {
    400: "Bad request",
    404: "Not found",
    405: "Only GET and HEAD",
    410: "This photo has been deleted",
    413: "No request body, please",
    416: "Range not satisfiable",
    429: "Too many requests; try again in a moment",
    500: "The kiosk could not answer",
}


class PhotoIndex(Protocol):
    """What the server reads: a :class:`~kiosk.keepsake.store.KeepsakeStore`, or its mirror in the
    server process (:class:`~kiosk.keepsake.process.StoreMirror`)."""

    def lookup(self, token: str) -> Lookup: ...
    def read(self, token: str, kind: str = "jpg") -> tuple[Lookup, bytes | None]: ...
    def sweep(self) -> int: ...


class RateLimiter:
    """A token bucket per client, at most ``max_clients`` remembered (least recently seen go)."""

    def __init__(self, burst: float = RATE_BURST, per_s: float = RATE_PER_S, max_clients: int = 4096) -> None:
        self.burst = burst
        self.per_s = per_s
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str, now: float) -> bool:
        tokens, t = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - t) * self.per_s)
        ok = tokens >= 1.0
        self._buckets[client] = (tokens - 1.0 if ok else tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return ok


def client_key(remote: str | None) -> str:
    """The rate limit's key: the IPv4 address, or the /64 of an IPv6 one (a phone has many)."""
    try:
        ip = ipaddress.ip_address((remote or "").split("%")[0])
    except ValueError:
        return remote or "?"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else str(ip)


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def discover_host(cfg: KeepsakeConfig) -> str:
    """The address phones reach the kiosk at: the listen address when it is a specific one; else
    this machine's address on the route to the first network of ``keepsake.allow`` (a UDP socket
    connected there sends nothing); 127.0.0.1 when there is no such route."""
    host, _ = cfg.listen_host_port()
    ip = ipaddress.ip_address(host)
    if not ip.is_unspecified:
        return host
    for text in cfg.allow:
        net = ipaddress.ip_network(text)
        if net.version != ip.version:
            continue  # 0.0.0.0 serves IPv4 phones only, :: IPv6 ones (asyncio binds it IPv6-only)
        probe = net.network_address + 1 if net.num_addresses > 1 else net.network_address
        family = socket.AF_INET if net.version == 4 else socket.AF_INET6
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((str(probe), 9))
                mine = ipaddress.ip_address(s.getsockname()[0].split("%")[0])
        except OSError:
            continue
        if mine in net and not mine.is_loopback:
            return str(mine)
    return "127.0.0.1"


def url_base_of(cfg: KeepsakeConfig) -> str:
    """``keepsake.url_base``, or ``http(s)://<discovered address>[:port]``."""
    if cfg.url_base:
        return cfg.url_base
    scheme = "https" if cfg.tls_cert else "http"
    _, port = cfg.listen_host_port()
    default = 443 if scheme == "https" else 80
    port_text = "" if port == default else f":{port}"
    return f"{scheme}://{_host_for_url(discover_host(cfg))}{port_text}"


def url_for_token(base: str, token: str) -> str:
    return f"{base.rstrip('/')}/p/{token}"


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The (first, last) bytes of one ``Range: bytes=a-b`` (``a-``, ``-n``) within ``size``; None
    when it is not one satisfiable range (several ranges are not served)."""
    m = _RANGE_RE.fullmatch(header.strip())
    if m is None or not (m.group(1) or m.group(2)):
        return None
    if not m.group(1):  # the last n bytes
        first, last = max(0, size - int(m.group(2))), size - 1
    else:
        first = int(m.group(1))
        last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    return (first, last) if first <= last and first < size else None


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2+); :class:`KeepsakeError` with one line naming the files."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise KeepsakeError(
            f"keepsake: cannot load TLS certificate {cert} / key {key}: {getattr(exc, 'strerror', None) or exc}"
            " (check keepsake.tls_cert and keepsake.tls_key)"
        ) from None
    return ctx


def _page(token: str, expires: float, event_name: str, now: float, clips: tuple[str, ...] = ()) -> str:
    when = time.strftime("%H:%M", time.localtime(expires))
    minutes = max(1, round((expires - now) / 60))
    title = html.escape(event_name) if event_name else "Your photo"
    event = f"<p>{html.escape(event_name)}</p>" if event_name else ""
    jpg = f"/p/{token}.jpg"
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", event_name).strip("-")[:40] or "faceswap"
    clip = ""
    if "mp4" in clips:
        clip += f"<video src=/p/{token}.mp4 autoplay loop muted playsinline></video>"
        clip += f"<a class=button href=/p/{token}.mp4 download={name}-{token[:6]}.mp4>Download the video</a>"
    if "gif" in clips:
        clip += f"<a class=button href=/p/{token}.gif download={name}-{token[:6]}.gif>Download the GIF</a>"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        '<meta name=robots content="noindex,nofollow">'
        f"<title>{title}</title><style>{_CSS}</style></head><body><main>"
        f"{event}<img src={jpg} alt='Your face-swap photo'>"
        f"<a class=button href={jpg} download={name}-{token[:6]}.jpg>Download the photo</a>{clip}"
        f"<p class=small>This photo is deleted at {when} (in about {minutes} min). "
        "Save it to your phone now.</p></main></body></html>"
    )


class _RefusalLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's own log of requests its parser refused (line too long, too many headers, bad
    syntax): counted as refused and kept at DEBUG, no traceback: a hostile phone is not a fault."""

    def __init__(self, counts: ServerCounts) -> None:
        super().__init__(logging.getLogger(f"{__name__}.http"), {})
        self.counts = counts

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level >= logging.ERROR:
            self.counts.refused += 1
            kwargs.pop("exc_info", None)
            exc = sys.exc_info()[1]
            if exc is not None:
                msg = f"{msg}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.logger.debug(msg, *args, **kwargs)


def plain_answer(status: int) -> web.Response:
    """An answer with the security headers and a fixed text: never an echo of the request."""
    headers = dict(_SECURITY_HEADERS)
    if status == 405:
        headers["Allow"] = "GET, HEAD"
    if status == 429:
        headers["Retry-After"] = "2"
    return web.Response(status=status, text=f"{status} {_STATUS_TEXT.get(status, '')}\n", headers=headers)


class _RequestHandler(web_protocol.RequestHandler):  # type: ignore[misc]
    """aiohttp's connection handler, whose own error answers (its parser's 400s: a NUL, a bad
    version, a header over the limits, bare LF line ends, Content-Length with chunked; a 500 or
    504) are :func:`plain_answer`'s instead of aiohttp's text, which echoes the request line (a
    token with it) and lacks the security headers."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        self.log_exception("refused a request from %s", request.remote, exc_info=exc)  # counted
        if request.writer.output_size > 0:  # as aiohttp: an answer was begun, the connection is broken
            raise ConnectionError("an answer was already sent; cannot send an error answer")
        resp = plain_answer(status)
        resp.force_close()
        return resp


class _Server(web.Server):  # type: ignore[misc]
    """aiohttp's low-level server, telling the guard each connection that closes."""

    guard: ConnectionGuard | None = None

    def __call__(self) -> web_protocol.RequestHandler:
        return _RequestHandler(self, loop=self._loop, **self._kwargs)

    def connection_lost(self, handler: web_protocol.RequestHandler, exc: BaseException | None = None) -> None:
        if self.guard is not None:
            self.guard.lost(handler)
        super().connection_lost(handler, exc)


def _listening_socket(host: str, port: int) -> socket.socket:
    ip = ipaddress.ip_address(host)
    sock = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if ip.version == 6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class KeepsakeServer:
    """Serves ``store`` on ``cfg.listen`` from its own thread; see the module docstring.

    :meth:`start` returns once the socket is bound (or raises :class:`KeepsakeError` with one
    line: port taken, no permission, bad certificate); :meth:`stop` closes it and joins."""

    def __init__(
        self,
        store: PhotoIndex,
        cfg: KeepsakeConfig,
        counts: ServerCounts | None = None,
        *,
        resolve: Callable[[str], Path] = Path,
        clock: Callable[[], float] = time.time,
        limiter: RateLimiter | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.store = store
        self.cfg = cfg  # event_name is read from it per request; update() swaps it
        self.counts = counts or ServerCounts()
        self._resolve = resolve
        self._clock = clock
        self.limiter = limiter or RateLimiter()
        self.limits = limits or ConnectionLimits()
        self.url_base = url_base_of(cfg)
        self.port = cfg.listen_host_port()[1]  # the bound port once started (0 asks the system)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._server: _Server | None = None
        self._guard: ConnectionGuard | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> KeepsakeServer:
        ctx = None
        if self.cfg.tls_cert and self.cfg.tls_key:
            ctx = tls_context(self._resolve(self.cfg.tls_cert), self._resolve(self.cfg.tls_key))
        ready = threading.Event()
        failure: list[str] = []
        self._thread = threading.Thread(
            target=self._run, args=(ctx, ready, failure), name="keepsake-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout_s):
            raise KeepsakeError(f"keepsake: the web server did not start within {timeout_s:g} s")
        if failure:
            self._thread.join(timeout_s)
            raise KeepsakeError(failure[0])
        scheme = "https" if ctx else "http"
        log.info("keepsakes: serving %s://%s (QR codes point at %s)", scheme, self.cfg.listen, self.url_base)
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("keepsakes: the web server did not stop within %.1f s", timeout_s)
        self._thread = None

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def update(self, cfg: KeepsakeConfig) -> None:
        """A reloaded config: the page's event name from now on (the address needs a restart)."""
        self.cfg = cfg

    def url_for(self, token: str) -> str:
        """The address the QR code encodes: ``<url_base>/p/<token>``."""
        return url_for_token(self.url_base, token)

    @property
    def open_connections(self) -> int:
        return len(self._guard.conns) if self._guard is not None else 0

    # -- the server's thread ------------------------------------------------------------------
    def _run(self, ctx: ssl.SSLContext | None, ready: threading.Event, failure: list[str]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ctx, ready, failure))
        except Exception as exc:  # noqa: BLE001 - the kiosk goes on without keepsakes
            if not ready.is_set():
                failure.append(f"keepsake: the web server failed: {type(exc).__name__}: {exc}")
            else:
                log.exception("keepsakes: the web server stopped")
        finally:
            ready.set()
            loop.close()

    async def _serve(self, ctx: ssl.SSLContext | None, ready: threading.Event, failure: list[str]) -> None:
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
        self._server = server
        guard = ConnectionGuard(
            server,
            client_key,
            self._allowed_networks(),
            self.counts,
            self.limits,
            ctx,
        )
        server.guard = self._guard = guard
        host, port = self.cfg.listen_host_port()
        try:
            listener = _listening_socket(host, port)
        except OSError as exc:
            if exc.errno in (errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES):
                hint = "the service's network rules: apply them, see kiosk keepsake network --help"
            else:
                hint = "another program on that port? change keepsake.listen"
            failure.append(f"keepsake: cannot listen on {self.cfg.listen}: {exc.strerror or exc} ({hint})")
            ready.set()
            return
        self.port = listener.getsockname()[1]
        accepting = asyncio.get_running_loop().create_task(guard.accept_forever(listener))
        tick_s = min(SWEEP_EVERY_S, self.limits.first_request_s / 2)  # the guard's deadlines, too
        ready.set()
        try:
            while not self._stopped.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopped.wait(), tick_s)
                try:
                    self.store.sweep()
                except Exception:  # noqa: BLE001 - a failed sweep is retried next second
                    log.exception("keepsakes: sweep failed")
                guard.reap()
        finally:
            accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await accepting
            listener.close()
            guard.close_all()
            await server.shutdown(0.5)

    def _allowed_networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        """``keepsake.allow``, and the listen address when it is a specific one (this machine's own
        requests come from it, e.g. ``kiosk doctor``'s)."""
        networks = [ipaddress.ip_network(text) for text in self.cfg.allow]
        host = ipaddress.ip_address(self.cfg.listen_host_port()[0])
        if not host.is_unspecified:
            networks.append(ipaddress.ip_network(host))
        return networks

    def _answer(self, status: int) -> web.Response:
        self.counts.refused += 1
        return plain_answer(status)

    async def _handle(self, request: BaseRequest) -> web.StreamResponse:
        if self._guard is not None:
            self._guard.served(request.protocol)
        try:
            return await self._route(request)
        except Exception:  # a bug here must show in the log, and the phone gets an answer
            log.exception(
                "keepsakes: request %s %s failed", request.method, hide_tokens(request.raw_path[:80])
            )
            return self._answer(500)

    async def _route(self, request: BaseRequest) -> web.StreamResponse:
        if not self.limiter.allow(client_key(request.remote), time.monotonic()):
            return self._answer(429)
        if request.method not in ("GET", "HEAD"):
            return self._answer(405)
        if request.body_exists or request.headers.get("Transfer-Encoding"):
            return self._answer(413)
        target = request.raw_path.split("?", 1)[0]
        jpeg = _JPEG_RE.fullmatch(target)
        page = None if jpeg else _PAGE_RE.fullmatch(target)
        match = jpeg or page
        if match is None:
            return self._answer(404)
        token = match.group(1)
        if page is not None:
            found = self.store.lookup(token)
            if found.record is None:
                return self._answer(int(found.found))
            rec = found.record
            body = _page(token, rec.expires, self.cfg.event_name, self._clock(), rec.clips)
            if request.method == "GET":
                self.counts.pages += 1
            return web.Response(
                text=body, content_type="text/html", charset="utf-8", headers=_SECURITY_HEADERS
            )
        kind = match.group(2)
        found, data = await asyncio.get_running_loop().run_in_executor(None, self.store.read, token, kind)
        if data is None:
            return self._answer(int(found.found) if found.found is not Found.OK else 410)
        headers = {
            **_SECURITY_HEADERS,
            "Content-Disposition": f'inline; filename="keepsake-{token[:6]}.{kind}"',
            "Accept-Ranges": "bytes",
        }
        status, part, first = 200, data, 0
        if "Range" in request.headers:
            span = byte_range(request.headers["Range"], len(data))
            if span is None:
                return self._answer(416)
            (first, last), status = span, 206
            part = data[first : last + 1]
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        if request.method == "GET" and first + len(part) == len(data):  # once: with its last byte
            if kind == "jpg":
                self.counts.downloads += 1
            else:
                self.counts.clip_downloads += 1
        return web.Response(body=part, status=status, content_type=_CONTENT_TYPES[kind], headers=headers)
