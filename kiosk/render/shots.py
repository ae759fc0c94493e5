"""Screenshots and snapshots written off the render loop.

Encoding a 1280x720 camera picture as PNG took 0.7-3.5 s at zlib level 6 on a loaded 2-core
machine; done inside the render loop it stalled every frame it ran in (``--screenshot-every 0.2``
cut the render rate from ~45 to ~2 fps). The render loop now only reads the frame back
(``surface.read_rgb()``, a few ms) and hands it to :class:`ShotWriter`, whose thread encodes and
writes it:

* the ``--screenshot`` PNG: latest frame wins (a frame handed over while the previous one is
  still being written replaces the one waiting, never queues behind it), written to a temporary
  file in the same folder and renamed over the path, so a reader never sees half a PNG;
* staff snapshots (F12): queued in order, none dropped (:func:`kiosk.booth.snapshots.save_snapshot`
  keeps its naming and retention).

:meth:`ShotWriter.close` writes what is still waiting, so the last screenshot at exit is on disk when
``run`` returns.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kiosk.render import window

log = logging.getLogger(__name__)


def screenshot_tmp(path: Path) -> Path:
    """The temporary file a screenshot is written to before the rename over ``path``."""
    return path.with_name(f"{path.stem}.tmp{path.suffix or '.png'}")


def write_screenshot(path: Path, rgb: np.ndarray) -> None:
    """Replace ``path`` by ``rgb`` as PNG, atomically (temporary file in the same folder, rename)."""
    tmp = screenshot_tmp(path)
    try:
        window.save_png(tmp, rgb)  # looked up per call: tests swap in a slow encoder
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class ShotWriter:
    """A background thread that writes screenshots (latest wins) and snapshots (queued)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shot: tuple[Path, np.ndarray] | None = None
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._busy = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self.screenshots_written = 0
        self.screenshots_replaced = 0  # handed over but overtaken by a newer frame before being written
        self.screenshots_failing = 0  # failed tries since the last screenshot written
        self.screenshot_problem = ""  # the last failure's line

    def screenshot(self, path: Path, rgb: np.ndarray) -> None:
        """Write ``rgb`` to ``path`` soon; replaces a screenshot still waiting (latest frame wins)."""
        with self._cond:
            if self._shot is not None:
                self.screenshots_replaced += 1
            self._shot = (path, rgb)
            self._wake()

    def job(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the writer thread, after the jobs handed over before it (never dropped)."""
        with self._cond:
            self._jobs.append(fn)
            self._wake()

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being written."""
        with self._cond:
            return self._shot is None and not self._jobs and not self._busy

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything handed over is written; False if ``timeout_s`` ran out first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._shot is None and not self._jobs and not self._busy, timeout_s
            )

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is waiting (up to ``timeout_s``), then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("screenshot writer still busy after %.1f s; exiting without it", timeout_s)

    def _wake(self) -> None:  # holding self._cond
        if self._thread is None or not self._thread.is_alive():
            self._closing = False
            self._thread = threading.Thread(target=self._run, name="shots", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._jobs or self._shot is not None or self._closing)
                if self._jobs:
                    work: Callable[[], None] | None = self._jobs.popleft()
                    shot = None
                elif self._shot is not None:
                    work, shot, self._shot = None, self._shot, None
                else:
                    return  # closing, nothing left
                self._busy = True
            try:
                if work is not None:
                    work()
                elif shot is not None:
                    write_screenshot(*shot)
                    self.screenshots_written += 1
                    if self.screenshots_failing:
                        log.info("screenshot written again after %d failed tries", self.screenshots_failing)
                        self.screenshots_failing = 0
            except Exception as exc:  # a full disk must not end the writer (or the kiosk)
                if work is not None:
                    log.error("snapshot not written: %s", exc)
                else:  # said once per run of failures (a screenshot is tried every frame or 0.5 s)
                    self.screenshots_failing += 1
                    self.screenshot_problem = f"screenshot not written: {exc}"
                    if self.screenshots_failing == 1:
                        log.error("%s (said once until one is written again)", self.screenshot_problem)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
