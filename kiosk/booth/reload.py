"""Live config reload: watch the YAML file, validate changes, keep the running config on error."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from kiosk.config import ConfigError, KioskConfig, load_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadEvent:
    """A change of the file: the new config, or the problems that kept the old one running."""

    config: KioskConfig | None
    problems: tuple[str, ...] = ()


class ConfigWatcher:
    """Polls the file's size and mtime (a cheap ``stat``) at most every ``interval_s``."""

    def __init__(self, path: Path, interval_s: float = 1.0) -> None:
        self.path = path
        self.interval_s = interval_s
        self._next = 0.0
        self._stamp = self._stat()
        self._digest = self._hash()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _hash(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    def poll(self, now: float | None = None) -> ReloadEvent | None:
        now = time.monotonic() if now is None else now
        if now < self._next:
            return None
        self._next = now + self.interval_s
        stamp = self._stat()
        if stamp == self._stamp:
            return None
        self._stamp = stamp
        digest = self._hash()
        if digest == self._digest:
            return None  # touched, not changed
        self._digest = digest
        try:
            cfg = load_config(self.path)
        except ConfigError as exc:
            for line in exc.problems:
                log.error("config not reloaded: %s", line)
            return ReloadEvent(None, tuple(exc.problems))
        log.info("config reloaded from %s", self.path)
        return ReloadEvent(cfg)
