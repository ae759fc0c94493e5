"""kiosk/signals.py without a process: what each signal does to the state, and the shutdown line's
summary (issue 28, items 11 and 12). The real signals to a real kiosk: test_booth_signals.py."""

from __future__ import annotations

import signal

import pytest

from kiosk.signals import STOP_SIGNALS, SignalState, ignored_signals


def test_a_burst_of_sighups_is_one_name_with_its_count() -> None:
    state = SignalState()  # not installed: the test process keeps its own handlers
    state.exit_at_once = False
    for _ in range(160):
        state._on_signal(signal.SIGHUP, None)
    state._on_signal(signal.SIGUSR1, None)
    state._on_signal(signal.SIGTERM, None)
    assert state.summary() == "SIGHUP ×160, SIGUSR1, SIGTERM"  # before: 1,1,…(160×),15
    assert state.reload.is_set() and state.stop.is_set()


@pytest.mark.parametrize(
    "sig", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGTSTP, signal.SIGRTMIN]
)
def test_a_stray_signal_is_counted_and_ignored(sig: int) -> None:
    state = SignalState()
    state._on_signal(sig, None)  # exit_at_once: a stop signal would raise SystemExit here
    assert not state.stop.is_set() and not state.reload.is_set() and state.received[sig] == 1
    assert sig in ignored_signals()


def test_sigquit_stops_like_sigterm() -> None:
    assert signal.SIGQUIT in STOP_SIGNALS
    state = SignalState()
    with pytest.raises(SystemExit) as exc:
        state._on_signal(signal.SIGQUIT, None)
    assert exc.value.code == 0 and state.stop.is_set()
