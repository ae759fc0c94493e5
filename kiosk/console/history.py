"""The day's counters per hour, for the console's plots: faces seen, keepsakes taken, downloaded,
printed and expired, errors. Kept by the kiosk (the counters' owner), not by the console's process,
so a restarted console shows the whole day. Main thread only."""

from __future__ import annotations

import time
from collections.abc import Mapping

#: The plotted series, in the order shown.
SERIES: tuple[str, ...] = (
    "faces_seen",
    "keepsakes_taken",
    "keepsakes_downloaded",
    "keepsakes_printed",
    "keepsakes_expired",
    "errors",
)
#: Hours kept (the day).
HOURS = 24


class DayHistory:
    """Per-hour increments of monotonically growing totals (:meth:`update` with the totals now)."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        #: hour (unix seconds // 3600) → series → count in that hour
        self._hours: dict[int, dict[str, int]] = {}

    def update(self, totals: Mapping[str, int], now_unix: float | None = None) -> None:
        """Add what each total grew by since the last call to the current hour (a total that fell,
        e.g. a restarted counter, adds its new value)."""
        hour = int((time.time() if now_unix is None else now_unix) // 3600)
        bucket = self._hours.setdefault(hour, dict.fromkeys(SERIES, 0))
        for name in SERIES:
            value = int(totals.get(name, 0))
            before = self._last.get(name, 0)
            grew = value - before if value >= before else value
            bucket[name] += grew
            self._last[name] = value
        for old in [h for h in self._hours if h <= hour - HOURS]:
            del self._hours[old]

    def series(self, now_unix: float | None = None) -> dict[str, list[int]]:
        """The last :data:`HOURS` hours, oldest first: ``hour_start`` (unix seconds) and each series."""
        hour = int((time.time() if now_unix is None else now_unix) // 3600)
        hours = list(range(hour - HOURS + 1, hour + 1))
        out: dict[str, list[int]] = {"hour_start": [h * 3600 for h in hours]}
        for name in SERIES:
            out[name] = [self._hours.get(h, {}).get(name, 0) for h in hours]
        return out
