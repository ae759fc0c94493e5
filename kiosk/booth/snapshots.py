"""Snapshots: written only when enabled in the config, pruned by age and count."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import cv2
import numpy as np

from kiosk.util.atomic import atomic_write

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
