"""Snapshots and screenshots of the frame just drawn: the render loop reads the pixels, a writer
thread (:class:`kiosk.render.shots.ShotWriter`, started with the first shot) encodes and saves them.

:class:`Shots` owns that writer, the snapshots a full folder did not take yet
(:class:`kiosk.booth.snapshots.SnapshotKeeper`) and the count of snapshots written.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiosk.booth.snapshots import SnapshotKeeper

if TYPE_CHECKING:
    from kiosk.render.shots import ShotWriter


class Shots:
    """See the module docstring."""

    def __init__(self) -> None:
        self.snapshots_written = 0
        self.keeper = SnapshotKeeper()  # snapshots a full folder did not take yet
        self.writer: ShotWriter | None = None  # started with the first screenshot or snapshot

    def _writer(self) -> ShotWriter:
        if self.writer is None:
            from kiosk.render.shots import ShotWriter

            self.writer = ShotWriter()
        return self.writer

    def close(self) -> None:
        """Write the screenshot and snapshots still waiting, then stop the writer thread."""
        if self.writer is not None:
            self.writer.close()

    def take_snapshot(self, surface: Any, folder: Path, retention_hours: float, max_files: int) -> None:
        """Read the frame just drawn; the writer thread encodes and saves it (queued, never dropped)."""
        rgb = surface.read_rgb()
        taken = time.time()
        keeper = self.keeper

        def save() -> None:  # a full folder: kept in memory, written when space returns
            before = keeper.written
            keeper.save(rgb, folder, retention_hours, max_files, now=taken)
            self.snapshots_written += keeper.written - before

        self._writer().job(save)

    def retry_snapshots(self) -> None:
        """Snapshots kept in memory (a full snapshot folder): hand the writer thread a retry now
        and then."""
        keeper = self.keeper
        if keeper.claim_retry():

            def retry() -> None:
                before = keeper.written
                keeper.retry()
                self.snapshots_written += keeper.written - before

            self._writer().job(retry)

    def screenshot(self, path: Path | None, surface: Any) -> None:
        """Hand the frame just drawn to the writer thread, which replaces ``path`` by it atomically
        (a reader never sees half a PNG); a newer frame replaces one still waiting."""
        if path is None:
            return
        self._writer().screenshot(path, surface.read_rgb())

    @property
    def problem(self) -> str:
        """The snapshot folder's staff line (snapshots kept in memory while it is full), else ""."""
        return self.keeper.problem
