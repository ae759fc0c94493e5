"""systemd's ``sd_notify`` protocol with the standard library only.

systemd hands a ``Type=notify`` service the address of a Unix datagram socket in
``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace). The service sends
newline-separated ``KEY=VALUE`` fields to it: ``READY=1`` when start-up is done,
``WATCHDOG=1`` more often than ``WatchdogSec=``, ``STATUS=...`` for ``systemctl status`` and
``STOPPING=1`` on the way out. With ``WatchdogSec=`` set, systemd also exports
``$WATCHDOG_USEC`` (the timeout) and ``$WATCHDOG_PID`` (the process meant to send the pings).

The render loop calls :meth:`SdNotifier.watchdog` every frame while processing is healthy (not
stalled past ``processing.stall_s``, see :meth:`kiosk.app.wiring.Workers.check_inference`): it is a clock
read and a compare, and it sends at most every ``WATCHDOG_USEC / 2``. If the render loop stalls, the
pings stop, systemd sends ``WatchdogSignal=`` (SIGABRT: :mod:`faulthandler` dumps every
thread's stack into the journal) and ``Restart=always`` starts the kiosk again.

Sending never blocks and never raises: the socket is non-blocking, and a failed send is
logged once and otherwise ignored, because a missing supervisor must not take the kiosk down.
Without ``$NOTIFY_SOCKET`` (a desk run, tests) every method is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


def _parse_address(value: str) -> str | bytes | None:
    """The ``sendto`` address for a ``$NOTIFY_SOCKET`` value, or None if unsupported."""
    if value.startswith("@"):  # Linux abstract namespace: leading NUL byte instead of "@"
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # e.g. "vsock:..." (VMs): not used on a booth PC


def _parse_watchdog(environ: Mapping[str, str], pid: int) -> float | None:
    """Watchdog timeout in seconds if it is meant for process ``pid``, else None."""
    usec_text = environ.get("WATCHDOG_USEC", "")
    if not usec_text:
        return None
    try:
        usec = int(usec_text)
    except ValueError:
        log.warning("ignoring malformed WATCHDOG_USEC=%r", usec_text)
        return None
    if usec <= 0:
        return None
    pid_text = environ.get("WATCHDOG_PID", "")
    if pid_text:
        try:
            if int(pid_text) != pid:
                return None  # the pings are expected from another process (e.g. our parent)
        except ValueError:
            log.warning("ignoring malformed WATCHDOG_PID=%r", pid_text)
            return None
    return usec / 1e6


class SdNotifier:
    """Sends service state to systemd; a silent no-op when not run under ``Type=notify``.

    ``clock`` is injectable so tests can drive the watchdog interval without sleeping.
    Safe to call from any thread (the render loop pings, other threads may set the status).
    """

    def __init__(
        self,
        address: str | bytes | None,
        watchdog_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = address
        self._clock = clock
        self.watchdog_timeout_s = watchdog_timeout_s if address is not None else None
        #: Pings are sent at most this often (half the timeout, as sd_watchdog_enabled(3) advises).
        self.watchdog_interval_s = self.watchdog_timeout_s / 2 if self.watchdog_timeout_s else None
        self._last_ping = -float("inf")
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._send_failed_logged = False
        if address is not None:
            try:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            except OSError as exc:
                log.warning("cannot create the systemd notify socket: %s", exc)
                self._sock = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> SdNotifier:
        """Build from ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID``."""
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        if not raw:
            return cls(None)
        address = _parse_address(raw)
        if address is None:
            log.warning("NOTIFY_SOCKET=%r is not a Unix socket address; systemd notifications are off", raw)
            return cls(None)
        return cls(address, _parse_watchdog(env, os.getpid()), clock=clock)

    @property
    def enabled(self) -> bool:
        """True when notifications actually go to systemd."""
        return self._sock is not None

    @property
    def watchdog_enabled(self) -> bool:
        return self._sock is not None and self.watchdog_interval_s is not None

    def notify(self, *fields: str) -> bool:
        """Send ``KEY=VALUE`` fields in one datagram; True if it was sent."""
        sock = self._sock
        if sock is None or not fields:
            return False
        payload = "\n".join(fields).encode("utf-8", "replace")
        try:
            sock.sendto(payload, self._address)  # type: ignore[arg-type]
        except OSError as exc:  # supervisor gone, queue full (non-blocking), permission: never fatal
            if not self._send_failed_logged:
                log.warning("systemd notification failed (%s); continuing without it", exc)
                self._send_failed_logged = True
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Start-up is complete (first frame on screen). Starts systemd's watchdog clock."""
        fields = ["READY=1"]
        if status is not None:
            fields.append(_status_field(status))
        sent = self.notify(*fields)
        if sent:
            with self._lock:
                self._last_ping = self._clock()  # READY counts as a first sign of life
        return sent

    def status(self, text: str) -> bool:
        """One line shown by ``systemctl status`` (e.g. ``running, 29.8 fps, cuda``)."""
        return self.notify(_status_field(text))

    def watchdog(self, force: bool = False) -> bool:
        """Keep-alive; cheap enough to call every frame. True if a ping was sent now."""
        if self.watchdog_interval_s is None or self._sock is None:
            return False
        now = self._clock()
        with self._lock:
            if not force and now - self._last_ping < self.watchdog_interval_s:
                return False
            self._last_ping = now
        return self.notify("WATCHDOG=1")

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for more start-up/shut-down time (e.g. while TensorRT builds its engines)."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1e6)}")

    def stopping(self, status: str | None = None) -> bool:
        """Shutdown has begun."""
        fields = ["STOPPING=1"]
        if status is not None:
            fields.append(_status_field(status))
        return self.notify(*fields)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> SdNotifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _status_field(text: str) -> str:
    # A newline would start a new KEY=VALUE field: keep the status on one line.
    return "STATUS=" + " ".join(text.split())
