"""How long the kiosk took to start with its face library (issue 27): from the process start to the
first library face swapped on screen (``library.first_face_s``) and to every photo of the library
loaded (``library.loaded_s``), in the ``--stats-json`` file.

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

    def as_dict(self) -> dict[str, float | None]:
        return {
            "first_face_s": None if self.first_face_s is None else round(self.first_face_s, 3),
            "loaded_s": None if self.loaded_s is None else round(self.loaded_s, 3),
        }
