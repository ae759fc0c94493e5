"""Who may use the staff console: the PIN (HTTP Basic as user ``staff`` for scripts, a login form
and a session cookie for browsers), a CSRF token per session, and a lockout per client after
:data:`MAX_FAILURES` wrong PINs (429 until :data:`LOCKOUT_S` have gone).

Pure bookkeeping, no I/O: the server asks, this answers. PINs and session ids are compared in
constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The user name of HTTP Basic (any other is a wrong PIN).
BASIC_USER = "staff"
#: Wrong PINs a client may try; after that it gets 429 until the lockout ends.
MAX_FAILURES = 10
LOCKOUT_S = 300.0
#: A browser's session lasts this long (the staff log in again the next day).
SESSION_S = 12 * 3600.0
#: Sessions and clients remembered at most (the oldest are forgotten first).
MAX_SESSIONS = 64
MAX_CLIENTS = 4096
#: The session cookie's name.
COOKIE = "kiosk_console"


class PinError(Exception):
    """The PIN cannot be had (no PIN configured, an unreadable or empty PIN file): one line."""


def read_pin(pin: str | None, pin_file: Path | None) -> str:
    """The PIN: ``console.pin``, else the first line of ``console.pin_file``; :class:`PinError`
    with one line naming the file and the fix otherwise. The PIN itself is never in the message."""
    if pin is not None:
        return pin
    if pin_file is None:
        raise PinError("console: no PIN: set console.pin_file (a file holding the PIN) or console.pin")
    try:
        text = pin_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise PinError(
            f"console: cannot read the PIN file {pin_file}: {reason} (check console.pin_file)"
        ) from None
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) < 4:
        raise PinError(
            f"console: the PIN file {pin_file} holds no PIN of at least 4 characters on its first line"
        )
    return first


def basic_password(header: str | None) -> str | None:
    """The password of an ``Authorization: Basic`` header for user ``staff``; "" for another user
    or a malformed header (a wrong PIN); None when there is no Basic header."""
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        user, sep, password = (
            base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        )
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
    return password if sep and user == BASIC_USER else ""


@dataclass
class Session:
    csrf: str
    expires: float


@dataclass
class _Tries:
    failures: int = 0
    last: float = 0.0


class Door:
    """The PIN check, the sessions and the lockout. ``clock``: monotonic seconds."""

    def __init__(
        self,
        pin: str,
        *,
        max_failures: int = MAX_FAILURES,
        lockout_s: float = LOCKOUT_S,
        session_s: float = SESSION_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pin = pin.encode("utf-8")
        self.max_failures = max_failures
        self.lockout_s = lockout_s
        self.session_s = session_s
        self._clock = clock
        self._tries: OrderedDict[str, _Tries] = OrderedDict()
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.failures = 0  # wrong PINs, every client, since the start

    # -- the PIN -------------------------------------------------------------------------------
    def locked(self, client: str) -> bool:
        """``client`` tried :attr:`max_failures` wrong PINs within the lockout: 429 for now."""
        tries = self._tries.get(client)
        if tries is None:
            return False
        if self._clock() - tries.last > self.lockout_s:
            del self._tries[client]
            return False
        return tries.failures >= self.max_failures

    def check(self, client: str, given: str) -> bool:
        """Whether ``given`` is the PIN; a wrong one counts against ``client``."""
        ok = hmac.compare_digest(given.encode("utf-8"), self._pin)
        if ok:
            self._tries.pop(client, None)
            return True
        self.failures += 1
        tries = self._tries.pop(client, None) or _Tries()
        tries.failures += 1
        tries.last = self._clock()
        self._tries[client] = tries
        while len(self._tries) > MAX_CLIENTS:
            self._tries.popitem(last=False)
        return False

    # -- sessions ------------------------------------------------------------------------------
    def open_session(self) -> tuple[str, Session]:
        """A new session (after the right PIN): its id (the cookie) and its CSRF token."""
        sid = secrets.token_urlsafe(32)
        session = Session(secrets.token_urlsafe(24), self._clock() + self.session_s)
        self._sessions[sid] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return sid, session

    def session(self, sid: str | None) -> Session | None:
        """The live session of cookie value ``sid``, else None."""
        if not sid:
            return None
        now = self._clock()
        for known, session in list(self._sessions.items()):
            if session.expires <= now:
                del self._sessions[known]
            elif hmac.compare_digest(known.encode(), sid.encode("utf-8", "replace")):
                return session
        return None

    def close_session(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)


def csrf_ok(session: Session, given: str | None) -> bool:
    """The form's or header's CSRF token is the session's."""
    return bool(given) and hmac.compare_digest(
        session.csrf.encode(), (given or "").encode("utf-8", "replace")
    )


def same_origin(origin: str | None, fetch_site: str | None, host: str | None) -> bool:
    """A state-changing request that no other site's page sent. ``Sec-Fetch-Site`` (sent by every
    current browser) decides when present: same-origin or none (typed, a bookmark). Else an
    ``Origin`` must name this host; none at all is a script. (Under ``Referrer-Policy:
    no-referrer`` a browser's own form sends ``Origin: null``, with ``Sec-Fetch-Site``.)"""
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    if origin is None:
        return True
    return host is not None and origin.split("://", 1)[-1] == host
