"""The rules of the inference thread's error ladder (:mod:`kiosk.processing.thread`), with their state.

- :class:`ErrorPolicy`: the ladder's bounds from the config (``processing.*``);
- :class:`FailureWindow`: rule 2, over the installed stage's calls: rebuild after
  ``rebuild_after_errors`` failures in a row, or when half of the last :data:`ERROR_WINDOW` calls
  failed;
- :class:`Backoff`: the delay before each rebuild, ``restart_initial_s`` doubling up to
  ``restart_max_s``, back to the start only once a stage ran :data:`HEALTHY_S` (or a new stage
  was asked for).

Each object belongs to one inference thread and is used by it alone; what the ladder publishes
(error counts, the last error, the notice) stays on the thread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kiosk.util.heartbeat import Bounds

#: The window of recent calls for the failure-rate rule (rebuild when half of them failed).
ERROR_WINDOW = 20
#: A stage that ran this long resets the rebuild back-off.
HEALTHY_S = 30.0


@dataclass(frozen=True)
class ErrorPolicy:
    """The ladder's bounds (``processing.*`` in the config)."""

    rebuild_after_errors: int = 5
    stall_s: float = 5.0
    load_stall_s: float = 120.0

    @classmethod
    def of(cls, proc: object) -> ErrorPolicy:
        return cls(
            rebuild_after_errors=int(getattr(proc, "rebuild_after_errors", 5)),
            stall_s=float(getattr(proc, "stall_s", 5.0)),
            load_stall_s=float(getattr(proc, "load_stall_s", 120.0)),
        )

    @property
    def bounds(self) -> Bounds:
        return Bounds(stall_s=self.stall_s, load_stall_s=self.load_stall_s)


class FailureWindow:
    """The installed stage's recent calls, failed or not (rule 2 of the ladder)."""

    def __init__(self) -> None:
        self.consecutive = 0  # failures in a row
        self._recent: deque[bool] = deque(maxlen=ERROR_WINDOW)
        self._in_burst = False  # a failure came since the last success (only the first is logged)

    def succeeded(self) -> None:
        self.consecutive = 0
        self._recent.append(False)
        self._in_burst = False

    def failed(self) -> bool:
        """Count a failed call; True when it is the first since the last success."""
        self.consecutive += 1
        self._recent.append(True)
        first, self._in_burst = not self._in_burst, True
        return first

    def exceeded(self, rebuild_after_errors: int) -> bool:
        """Whether the stage is to be rebuilt: ``rebuild_after_errors`` failures in a row, or half
        of the last :data:`ERROR_WINDOW` calls."""
        return self.consecutive >= rebuild_after_errors or (
            len(self._recent) >= ERROR_WINDOW and sum(self._recent) * 2 >= ERROR_WINDOW
        )

    def clear(self) -> None:
        """Start afresh (a new stage, or the stage dropped for a rebuild)."""
        self.consecutive = 0
        self._recent.clear()


class Backoff:
    """The delay before the next rebuild (after a failed build, or a stage dropped after errors)."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._delay = initial_s
        self._installed_at = 0.0

    def next(self) -> float:
        """This rebuild's delay; the next one waits twice as long (up to ``max_s``)."""
        delay = self._delay
        self._delay = min(self._delay * 2.0, self.max_s)
        return delay

    def reset(self) -> None:
        self._delay = self.initial_s

    def installed(self, now: float) -> None:
        """A stage was installed at ``now`` (perf_counter)."""
        self._installed_at = now

    def ran(self, now: float) -> None:
        """A call of the installed stage succeeded at ``now``: once the stage has run
        :data:`HEALTHY_S`, the back-off starts again from ``initial_s``."""
        if self._delay != self.initial_s and now - self._installed_at > HEALTHY_S:
            self._delay = self.initial_s
