"""Live config reload: watch the YAML file, validate changes, keep the running config on error.

A change is applied only once the file has settled: the same size, mtime and SHA-256 on two polls
``settle_s`` apart, so a file caught half-written (an editor mid-save, a slow copy) is never
applied. SIGHUP (:meth:`ConfigWatcher.reload_now`) reloads at once. Any bytes in the file give a
one-line problem (see :func:`kiosk.config.safe_yaml`), never an exception.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from kiosk.config import MAX_YAML_BYTES, ConfigError, KioskConfig, load_config
from kiosk.util.files import FileTooLargeError, read_regular_file

log = logging.getLogger(__name__)

_Seen = tuple[tuple[int, int] | None, str | None]  # ((mtime_ns, size), sha256)


@dataclass(frozen=True)
class ReloadEvent:
    """A change of the file: the new config, or the problems that kept the old one running."""

    config: KioskConfig | None
    problems: tuple[str, ...] = ()


class ConfigWatcher:
    """Polls the file's size and mtime (a cheap ``stat``) at most every ``interval_s``; once they
    change, looks again after ``settle_s`` and applies the file when nothing moved in between."""

    def __init__(self, path: Path, interval_s: float = 1.0, settle_s: float = 0.3) -> None:
        self.path = path
        self.interval_s = interval_s
        self.settle_s = settle_s
        self._next = 0.0
        self._stamp = self._stat()
        self._digest = self._hash()
        self._pending: _Seen | None = None  # seen once, waiting to be seen again unchanged

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _hash(self) -> str | None:
        # A regular file only, bounded: a FIFO or device put at the path is never opened in a way
        # that blocks the render loop (load_config then names what is there).
        try:
            return hashlib.sha256(read_regular_file(self.path, MAX_YAML_BYTES)).hexdigest()
        except FileTooLargeError as exc:  # refused by load_config; its size tells one such file from another
            return f"too large: {exc}"
        except OSError:
            return None

    def poll(self, now: float | None = None) -> ReloadEvent | None:
        now = time.monotonic() if now is None else now
        if now < self._next:
            return None
        self._next = now + self.interval_s
        stamp = self._stat()
        if stamp == self._stamp and self._pending is None:
            return None
        seen: _Seen = (stamp, self._hash())
        if seen != self._pending:
            if seen[1] == self._digest and stamp is not None:
                self._stamp, self._pending = stamp, None  # touched, not changed
                return None
            self._pending = seen  # changed or still changing: look again shortly
            self._next = now + min(self.settle_s, self.interval_s)
            return None
        self._pending = None
        self._stamp, self._digest = seen
        return self._load()

    def reload_now(self) -> ReloadEvent:
        """Load the file now (SIGHUP), whether or not it changed."""
        self._pending = None
        self._stamp, self._digest = self._stat(), self._hash()
        return self._load()

    def _load(self) -> ReloadEvent:
        try:
            cfg = load_config(self.path)
        except ConfigError as exc:
            for line in exc.problems:
                log.error("config not reloaded: %s", line)
            return ReloadEvent(None, tuple(exc.problems))
        except Exception as exc:  # never let a config file stop the kiosk
            line = f"{self.path}: cannot be loaded ({type(exc).__name__}: {exc})".splitlines()[0]
            log.error("config not reloaded: %s", line)
            return ReloadEvent(None, (line,))
        log.info("config reloaded from %s", self.path)
        return ReloadEvent(cfg)
