"""Snapshots: written only when enabled in the config, pruned by age and count; kept in memory
while the snapshot folder is full (:class:`SnapshotKeeper`)."""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from kiosk.util.atomic import atomic_write
from kiosk.util.files import shown

log = logging.getLogger(__name__)


def save_snapshot(
    rgb: np.ndarray, folder: Path, retention_hours: float, max_files: int, now: float | None = None
) -> Path:
    """Write ``rgb`` (H, W, 3) as a JPEG named by the time (``now``, default the clock: local
    date, time and milliseconds), then prune old snapshots. A second snapshot in the same
    millisecond gets ``-2``, ``-3``... instead of overwriting the first."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    path = folder / f"snapshot-{stamp}.jpg"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"snapshot-{stamp}-{n}.jpg"
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 92])
    if not ok:
        raise OSError("JPEG encoding failed")
    atomic_write(path, data.tobytes(), mode=0o600, fsync=True)
    prune_snapshots(folder, retention_hours, max_files)
    log.info("snapshot saved: %s", path)
    return path


def prune_snapshots(folder: Path, retention_hours: float, max_files: int, now: float | None = None) -> int:
    """Delete snapshots older than ``retention_hours`` (0: no age limit) and beyond ``max_files``."""
    now = time.time() if now is None else now
    files = sorted(folder.glob("snapshot-*.jpg"), key=lambda p: p.stat().st_mtime, reverse=True)
    removed = 0
    for i, p in enumerate(files):
        too_old = retention_hours > 0 and now - p.stat().st_mtime > retention_hours * 3600
        if i >= max_files or too_old:
            p.unlink(missing_ok=True)
            removed += 1
    return removed


class SnapshotKeeper:
    """Staff snapshots that could not be written (a full or unwritable folder) are kept in memory,
    at most :attr:`MAX_KEPT` (the oldest given up first, counted as lost), and written, under the
    name of the moment they were taken, by the next snapshot or :meth:`retry` once the folder
    takes them again. :attr:`problem` is the staff line while any is waiting or was lost.

    Called on the shot writer's thread only (:meth:`save`, :meth:`retry`); :attr:`problem` and
    :attr:`kept` are read by the render loop (each a single reference)."""

    MAX_KEPT = 4
    RETRY_S = 5.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._kept: list[
            tuple[float, np.ndarray, Path, float, int]
        ] = []  # (taken, rgb, folder, hours, files)
        self.kept = 0
        self.lost = 0
        self.written = 0
        self.problem = ""
        self._next_retry = 0.0

    def save(
        self, rgb: np.ndarray, folder: Path, retention_hours: float, max_files: int, now: float | None = None
    ) -> bool:
        """Write the snapshots kept so far, then this one (taken at ``now``, default the clock);
        True if this one is on disk, False if it is kept in memory (or lost) for now."""
        self._kept.append((time.time() if now is None else now, rgb, folder, retention_hours, max_files))
        return self._write_kept() and not self._kept

    def claim_retry(self) -> bool:
        """True (once per :attr:`RETRY_S`) when snapshots are waiting: the caller then has
        :meth:`retry` run on the writer thread."""
        if not self.kept or self.clock() < self._next_retry:
            return False
        self._next_retry = self.clock() + self.RETRY_S
        return True

    def retry(self) -> None:
        """Try again to write the kept snapshots."""
        if self._kept:
            self._write_kept()

    def _write_kept(self) -> bool:
        failing = bool(self.kept)
        while self._kept:
            taken, rgb, folder, hours, files = self._kept[0]
            try:
                save_snapshot(rgb, folder, hours, files, now=taken)
            except OSError as exc:
                while len(self._kept) > self.MAX_KEPT:
                    self._kept.pop(0)
                    self.lost += 1
                self.kept = len(self._kept)
                self._next_retry = self.clock() + self.RETRY_S
                lost = f", {self.lost} lost" if self.lost else ""
                problem = (
                    f"snapshot not saved: {shown(folder)} {_why(exc)}; "
                    f"{self.kept} kept in memory, written when space returns{lost}"
                )
                if problem != self.problem:
                    log.error("%s", problem)
                self.problem = problem
                return False
            self._kept.pop(0)
            self.written += 1
            self.kept = len(self._kept)
        if failing:
            log.info("snapshots written again to the snapshot folder (%d were kept in memory)", self.written)
        self.problem = f"{self.lost} snapshots could not be saved (disk was full)" if self.lost else ""
        return True


def _why(exc: OSError) -> str:
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "is full"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "is not writable"
    return f"cannot be written ({exc.strerror or exc})"
