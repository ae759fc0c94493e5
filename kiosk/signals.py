"""Signals of ``kiosk run``: SIGTERM/SIGINT stop the run, SIGHUP reloads the config.

Stdlib only, so :func:`install_early` can run before the command line is parsed (parsing imports
OpenCV and NumPy, a second or more on a busy machine): a signal at any moment of start-up then
ends the run cleanly with status 0 instead of killing it."""

from __future__ import annotations

import signal
import threading


class SignalState:
    """SIGTERM/SIGINT → :attr:`stop`; SIGHUP → :attr:`reload` (reload the config now)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.reload = threading.Event()
        self.received: list[int] = []
        #: True until the kiosk starts its first thread: a stop signal before that exits at once
        #: (nothing to release yet), instead of waiting for the imports and the config to finish.
        self.exit_at_once = True

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        if signum == signal.SIGHUP:
            self.reload.set()
            return
        self.stop.set()
        if self.exit_at_once:
            raise SystemExit(0)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)


_early: SignalState | None = None


def install_early() -> SignalState:
    """Install the handlers now (``kiosk run`` does this first thing); later calls return the same."""
    global _early
    if _early is None:
        _early = SignalState()
        _early.install()
    return _early
