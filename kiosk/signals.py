"""Signals of ``kiosk run``: every signal a person can send either stops the run cleanly, reloads
the config, or is counted and ignored; none ends the kiosk with its default action (no clean-up).

* SIGTERM, SIGINT, SIGQUIT → :attr:`SignalState.stop` (exit status 0, keepsakes deleted as at any
  clean exit);
* SIGHUP → :attr:`SignalState.reload` (re-read the config now);
* SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT, SIGXCPU, SIGTSTP,
  SIGTTIN, SIGTTOU and the real-time signals → counted and ignored (the shutdown line names them;
  a paused kiosk would be killed by the watchdog, without clean-up); SIGPIPE and SIGXFSZ are
  ignored by Python itself (a failed write raises instead);
* SIGSEGV, SIGBUS,
  SIGFPE, SIGILL, SIGABRT, SIGTRAP and SIGSYS stay crashes (a Python handler cannot resume after a
  real fault); SIGKILL and SIGSTOP cannot be caught.

Stdlib only, so :func:`install_early` can run before the command line is parsed (parsing imports
OpenCV and NumPy, a second or more on a busy machine): a signal at any moment of start-up then
ends the run cleanly with status 0 instead of killing it."""

from __future__ import annotations

import signal
import threading
from collections import Counter

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
RELOAD_SIGNAL = signal.SIGHUP
_IGNORED_NAMES = (
    "SIGUSR1 SIGUSR2 SIGALRM SIGVTALRM SIGPROF SIGIO SIGPOLL SIGPWR SIGSTKFLT SIGXCPU SIGTSTP SIGTTIN SIGTTOU"
)


def ignored_signals() -> list[int]:
    """The signals counted and ignored on this platform (see the module docstring)."""
    out = {int(getattr(signal, name)) for name in _IGNORED_NAMES.split() if hasattr(signal, name)}
    if hasattr(signal, "SIGRTMIN"):
        out.update(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
    return sorted(out)


def signal_name(signum: int) -> str:
    if hasattr(signal, "SIGRTMIN") and signal.SIGRTMIN <= signum <= signal.SIGRTMAX:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class SignalState:
    """Stop signals → :attr:`stop`; SIGHUP → :attr:`reload`; :attr:`received` counts every signal
    caught, in the order each was first seen."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.reload = threading.Event()
        self.received: Counter[int] = Counter()
        #: True until the kiosk starts its first thread: a stop signal before that exits at once
        #: (nothing to release yet), instead of waiting for the imports and the config to finish.
        self.exit_at_once = True

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.received[signum] += 1
        if signum == RELOAD_SIGNAL:
            self.reload.set()
            return
        if signum not in STOP_SIGNALS:
            return  # counted, ignored
        self.stop.set()
        if self.exit_at_once:
            raise SystemExit(0)

    def summary(self) -> str:
        """``SIGHUP ×160, SIGTERM``: each signal received once, with its count when more than one."""
        return ", ".join(signal_name(s) + (f" ×{n}" if n > 1 else "") for s, n in self.received.items())

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (*STOP_SIGNALS, RELOAD_SIGNAL, *ignored_signals()):
            try:
                signal.signal(sig, self._on_signal)
            except (OSError, ValueError):  # not catchable on this platform
                continue


def ignore_stray_signals() -> None:
    """For a helper process (the keepsake server): the signals a person may send to every process
    of the kiosk at once (``pkill -HUP -f kiosk``) are ignored instead of killing it; SIGTERM stays
    the way to end it (the kiosk ends it anyway)."""
    for sig in (signal.SIGINT, signal.SIGQUIT, RELOAD_SIGNAL, *ignored_signals()):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            continue


_early: SignalState | None = None


def install_early() -> SignalState:
    """Install the handlers now (``kiosk run`` does this first thing); later calls return the same."""
    global _early
    if _early is None:
        _early = SignalState()
        _early.install()
    return _early
