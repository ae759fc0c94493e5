"""Quiet, exact logs: a repeated line is said once and then counted; any file name can be written.

:class:`RepeatFilter` sits on each of the kiosk's log handlers: a record whose message (level,
logger and text, traceback included) was already written within the last :attr:`window_s`
seconds is held back and counted; the next time the same line comes after the window it is
written once more, with ``(repeated N times in the last S s)``. A failing screenshot, a cut
video or a camera that keeps refusing therefore leaves one line a minute, not one per try.

:func:`safe_file_handler` writes UTF-8 with ``backslashreplace``: a file name that is not valid
UTF-8 (its bytes arrive as lone surrogates) is written as ``\\xff`` instead of raising
``UnicodeEncodeError`` inside logging and losing the line.
"""

from __future__ import annotations

import collections
import logging
import logging.handlers
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kiosk.keepsake.privacy import hide_secrets, hide_tokens

#: A line seen again within this many seconds is counted, not written.
REPEAT_WINDOW_S = 60.0
_MAX_LINES = 512  # distinct lines remembered (oldest forgotten first)


class RepeatFilter(logging.Filter):
    """Holds back a line already written within ``window_s`` seconds and counts it. One instance
    serves every handler: the decision is made once per record and kept on it."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        #: line -> [time it was last written, times held back since]
        self._seen: collections.OrderedDict[tuple[str, int, str], list[float]] = collections.OrderedDict()
        self.held_back = 0

    @staticmethod
    def _key(record: logging.LogRecord) -> tuple[str, int, str]:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string: logging reports it itself; never hold it back
            return (record.name, record.levelno, f"{record.msg!r}{id(record)}")
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f"\n{type(exc).__name__}: {exc}"
        return (record.name, record.levelno, text)

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "_kiosk_repeat", None)
        if decided is not None:  # another handler of the same logger call decided already
            return bool(decided)
        keep = self._decide(record)
        record._kiosk_repeat = keep
        return keep

    def _decide(self, record: logging.LogRecord) -> bool:
        key = self._key(record)
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.window_s:
                seen[1] += 1
                self.held_back += 1
                return False
            repeated = int(seen[1]) if seen is not None else 0
            since = now - seen[0] if seen is not None else 0.0
            self._seen[key] = [now, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > _MAX_LINES:
                self._seen.popitem(last=False)
        if repeated:
            record.msg = f"{record.getMessage()} (repeated {repeated} times in the last {since:.0f} s)"
            record.args = None
        return True


def unsurrogate(text: str) -> str:
    """``text`` with the lone surrogates of undecodable file name bytes as ``\\xNN`` escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class SafeFormatter(logging.Formatter):
    """A formatter whose lines any stream can write: a file name's undecodable bytes as ``\\xNN``;
    a keepsake's token (a visitor's photo's secret address) as its photo id; the staff console's
    PIN (:func:`~kiosk.keepsake.privacy.hide_secret`) hidden."""

    def format(self, record: logging.LogRecord) -> str:
        return hide_secrets(hide_tokens(unsurrogate(super().format(record))))


def safe_file_handler(path: Path, max_bytes: int = 10_000_000, backups: int = 5) -> logging.Handler:
    """A rotating UTF-8 log file that writes any text (undecodable file names as ``\\xNN``)."""
    return logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", errors="backslashreplace"
    )


def quiet_handlers(handlers: list[logging.Handler], window_s: float = REPEAT_WINDOW_S) -> RepeatFilter:
    """Put one :class:`RepeatFilter` on every handler of ``handlers`` (the root logger's: every
    logger of the kiosk, and of the libraries, propagates to them); returns it."""
    shared = RepeatFilter(window_s)
    for h in handlers:
        for f in [f for f in h.filters if isinstance(f, RepeatFilter)]:
            h.removeFilter(f)
        h.addFilter(shared)
    return shared
