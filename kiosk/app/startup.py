"""How long the kiosk took to start with its face library (issue 27): from the process start to the
first library face swapped on screen (``library.first_face_s``) and to every photo of the library
loaded (``library.loaded_s``), and how long a face switch takes (``library.switch_ms``: the
selection changed → a result wearing the new face), in the ``--stats-json`` file.

:class:`StartupTimes` is owned by the counter reader and told, once per rendered frame, whether
the picture going on screen carries a swapped face and what the library holds; each figure is
taken the first time it holds and kept (a config reload's new library does not start it again).
The process start is read from ``/proc/self/stat`` (the kernel's start time of the process, so
the interpreter's start-up and the imports count); where there is no ``/proc`` it is the moment
this module was imported.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_IMPORTED = time.monotonic()


def process_age_s() -> float:
    """Seconds since this process started (the kernel's start time; else since this module's import)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        # the command name (field 2) may hold spaces and parentheses: count fields after its ")"
        start_ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED
    return max(age, time.monotonic() - _IMPORTED)


class StartupTimes:
    """``first_face_s`` and ``loaded_s`` in seconds from the process start (None until they happen).

    ``clock``: the render loop's clock (perf_counter's timeline), whose readings :meth:`update`
    is given."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.t_process_start = clock() - process_age_s()
        self.first_face_s: float | None = None
        self.loaded_s: float | None = None
        self.switch = FaceSwitch()

    def update(
        self, now: float, face_on_screen: bool, library_faces: int, pending: int, version: int
    ) -> None:
        """One frame at ``now``: ``face_on_screen``: its picture carries a face swapped with a library
        face; the library has ``library_faces`` entries, ``pending`` photos still to scan, and has
        been refreshed (``version`` > 0) or not."""
        if self.first_face_s is None and face_on_screen and library_faces:
            self.first_face_s = now - self.t_process_start
        if self.loaded_s is None and version > 0 and not pending:
            self.loaded_s = now - self.t_process_start

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "first_face_s": None if self.first_face_s is None else round(self.first_face_s, 3),
            "loaded_s": None if self.loaded_s is None else round(self.loaded_s, 3),
            "switch_ms": None if self.switch.last_ms is None else round(self.switch.last_ms, 1),
            "switch_max_ms": None if self.switch.max_ms is None else round(self.switch.max_ms, 1),
            "switches": self.switch.count,
        }


class FaceSwitch:
    """Face-switch latency: from the frame the selected library face changed (a key, the gamepad,
    the staff console) to the first frame whose newest processed result wears it (a face read back
    from the disk cache and swapped). ``last_ms``, ``max_ms`` and ``count`` of the switches seen."""

    def __init__(self) -> None:
        self.last_ms: float | None = None
        self.max_ms: float | None = None
        self.count = 0
        self._selected = ""
        self._since: float | None = None  # when the selection changed, until the result wears it

    def update(self, now: float, selected_key: str, worn_keys: tuple[str, ...]) -> None:
        if selected_key != self._selected:
            # the first selection of the run is the start-up, not a switch
            self._since = now if self._selected else None
            self._selected = selected_key
        if self._since is not None and selected_key in worn_keys:
            ms = (now - self._since) * 1000.0
            self.last_ms, self.max_ms = ms, max(ms, self.max_ms or 0.0)
            self.count += 1
            self._since = None
