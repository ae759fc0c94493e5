"""The keepsake server's door: it accepts every TCP connection itself and decides, before any TLS
handshake or HTTP byte, whether it may stay.

* Only ``keepsake.allow`` (and this machine: 127.0.0.1, ::1) gets in; anyone else is closed at once,
  with or without the systemd unit's network rules around the kiosk.
* Connections are counted from ``accept()``: in all (``max_connections``) and per client
  (``max_per_client``, an IPv4 address or an IPv6 /64), so idle TCP or half-done TLS handshakes count
  like any other and can never use up the process's file descriptors.
* When the cap is full, a newcomer from a client holding fewer connections than the heaviest one
  takes one of the heaviest client's connections (the oldest that has not sent a whole request yet,
  else its oldest): a few addresses can fill the cap only until a phone from another one arrives.
* Deadlines: a connection that has not sent a whole request ``first_request_s`` after it was
  accepted (TLS handshake included; a slow-header client) is closed, and every connection at
  ``max_age_s``.
* Out of file descriptors (EMFILE), accepting pauses ``ACCEPT_RETRY_S`` and retries, with one log
  line at most every ``EMFILE_LOG_EVERY_S``: never a traceback per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kiosk.keepsake.counts import ServerCounts

log = logging.getLogger(__name__)

#: Pause before accepting again after the process ran out of file descriptors.
ACCEPT_RETRY_S = 0.1
#: At most one "out of file descriptors" line per this many seconds.
EMFILE_LOG_EVERY_S = 30.0
_OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
#: This machine may always ask (the kiosk's own checks); systemd's drop-in allows it too.
_SELF = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


@dataclass(frozen=True)
class ConnectionLimits:
    """The door's limits; the defaults are the booth's (docs/keepsakes.md, section 7)."""

    max_connections: int = 128
    max_per_client: int = 16
    first_request_s: float = 10.0
    max_age_s: float = 30.0


def allowed(remote: str | None, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    """Whether a peer address is in ``networks`` (``keepsake.allow``) or is this machine."""
    try:
        ip = ipaddress.ip_address((remote or "").split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip in _SELF or any(ip.version == net.version and ip in net for net in networks)


@dataclass(eq=False)
class _Conn:
    client: str
    accepted: float
    handover: asyncio.Task[Any] | None = None  # until the transport (and TLS) is up
    handler: Any = None  # aiohttp's RequestHandler
    requests: int = 0

    def close(self) -> None:
        if self.handover is not None and not self.handover.done():
            self.handover.cancel()  # mid-handshake: asyncio closes the transport
            return
        handler = self.handler
        if handler is not None:
            handler.force_close()
            transport = handler.transport
            if transport is not None:
                transport.abort()


@dataclass(eq=False)
class ConnectionGuard:
    """Accepts on a listening socket and hands admitted connections to ``protocol_factory`` (with
    ``tls``); :meth:`lost` and :meth:`served` are told by the server, :meth:`reap` each tick."""

    protocol_factory: Callable[[], Any]
    client_key: Callable[[str | None], str]  # the address → what is counted (an IPv6 /64 is one)
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    counts: ServerCounts
    limits: ConnectionLimits = ConnectionLimits()
    tls: ssl.SSLContext | None = None  # a TLS handshake after admission; None: plain HTTP
    clock: Callable[[], float] = time.monotonic
    conns: dict[int, _Conn] = field(default_factory=dict)  # id(handler) or id(_Conn) → connection
    _per_client: Counter[str] = field(default_factory=Counter)
    _emfile_logged: float = float("-inf")
    _emfile_quiet: int = 0

    # -- accepting ------------------------------------------------------------------------------
    async def accept_forever(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(listener)
            except OSError as exc:
                if exc.errno in _OUT_OF_FILES:
                    self._out_of_files(exc)
                    await asyncio.sleep(ACCEPT_RETRY_S)
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR):
                    continue  # the peer gave up before accept(): nothing to do
                raise
            self.admit(sock, addr[0] if addr else None)

    def _out_of_files(self, exc: OSError) -> None:
        now = self.clock()
        if now - self._emfile_logged < EMFILE_LOG_EVERY_S:
            self._emfile_quiet += 1
            return
        more = f" ({self._emfile_quiet} more times since the last such line)" if self._emfile_quiet else ""
        log.warning(
            "keepsakes: out of file descriptors (%s): waiting for connections to close%s; "
            "raise LimitNOFILE= of the unit if phones are refused",
            exc.strerror or exc,
            more,
        )
        self._emfile_logged, self._emfile_quiet = now, 0

    def admit(self, sock: socket.socket, remote: str | None) -> bool:
        """Keep ``sock`` (True) or close it at once: outside ``allow``, over the per-client share,
        or the cap full with no heavier client to take a connection from."""
        client = self.client_key(remote)
        if not allowed(remote, self.networks) or not self._room_for(client):
            self.counts.connections_refused += 1
            sock.close()
            return False
        conn = _Conn(client, self.clock())
        self.conns[id(conn)] = conn
        self._per_client[client] += 1
        conn.handover = asyncio.get_running_loop().create_task(self._hand_over(conn, sock))
        return True

    def _room_for(self, client: str) -> bool:
        mine = self._per_client[client]
        if mine >= self.limits.max_per_client:
            return False
        if len(self.conns) < self.limits.max_connections:
            return True
        heaviest, most = self._per_client.most_common(1)[0]
        if most <= mine + 1:
            return False  # everyone holds about as many as this client: nobody to take from
        victim = min(  # one that has not sent a whole request yet (a phone's keep-alive stays), oldest
            (c for c in self.conns.values() if c.client == heaviest),
            key=lambda c: (c.requests > 0, c.accepted),
        )
        self.counts.connections_refused += 1
        self._forget(victim)
        victim.close()
        return True

    async def _hand_over(self, conn: _Conn, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()

        def factory() -> Any:
            handler = self.protocol_factory()
            conn.handler = handler
            if id(conn) in self.conns:  # from now on the server reports it by its handler
                del self.conns[id(conn)]
                self.conns[id(handler)] = conn
            return handler

        try:
            kw: dict[str, Any] = {"ssl": self.tls, "ssl_handshake_timeout": self.limits.first_request_s}
            await loop.connect_accepted_socket(factory, sock, **(kw if self.tls else {}))
        except (OSError, ssl.SSLError, asyncio.TimeoutError, asyncio.CancelledError):
            self._forget(conn)  # a failed or cut handshake: asyncio has closed the socket
            with contextlib.suppress(OSError):
                sock.close()
        finally:
            conn.handover = None

    # -- what the server reports ----------------------------------------------------------------
    def lost(self, handler: Any) -> None:
        conn = self.conns.get(id(handler))
        if conn is not None:
            self._forget(conn)

    def served(self, handler: Any) -> None:
        conn = self.conns.get(id(handler))
        if conn is not None:
            conn.requests += 1

    def _forget(self, conn: _Conn) -> None:
        key = id(conn.handler) if conn.handler is not None and id(conn.handler) in self.conns else id(conn)
        if self.conns.pop(key, None) is conn:
            self._per_client[conn.client] -= 1
            if self._per_client[conn.client] <= 0:
                del self._per_client[conn.client]

    # -- deadlines ------------------------------------------------------------------------------
    def reap(self, now: float | None = None) -> int:
        """Close connections past their deadline; how many."""
        now = self.clock() if now is None else now
        late = [
            c
            for c in self.conns.values()
            if now - c.accepted > self.limits.max_age_s
            or (c.requests == 0 and now - c.accepted > self.limits.first_request_s)
        ]
        for conn in late:
            self._forget(conn)
            conn.close()
        return len(late)

    def close_all(self) -> None:
        for conn in list(self.conns.values()):
            self._forget(conn)
            conn.close()
