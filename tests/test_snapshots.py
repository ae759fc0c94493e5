"""Privacy by default: snapshots only when enabled; pruning by age and count."""

from __future__ import annotations

import os
import time

import cv2
import numpy as np

from kiosk.booth.controls import ControlState
from kiosk.booth.snapshots import prune_snapshots, save_snapshot


def test_snapshot_action_is_refused_unless_enabled():
    state = ControlState()
    assert not state.apply("snapshot", allow_quit=False, snapshots_enabled=False)
    assert not state.snapshot_requested


def test_save_and_prune(tmp_path):
    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[..., 0] = 255
    first = save_snapshot(rgb, tmp_path / "snaps", retention_hours=0, max_files=10)
    assert first.is_file() and first.suffix == ".jpg"
    old = tmp_path / "snaps" / "snapshot-20200101-000000-000.jpg"
    old.write_bytes(first.read_bytes())
    two_days_ago = time.time() - 48 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    assert prune_snapshots(tmp_path / "snaps", retention_hours=24, max_files=10) == 1
    assert not old.exists() and first.exists()
    for i in range(5):
        p = tmp_path / "snaps" / f"snapshot-2030010{i}-000000-000.jpg"
        p.write_bytes(b"x")
        os.utime(p, (time.time() + i, time.time() + i))
    prune_snapshots(tmp_path / "snaps", retention_hours=0, max_files=3)
    assert len(list((tmp_path / "snaps").glob("snapshot-*.jpg"))) == 3


def test_snapshots_in_the_same_millisecond_are_all_kept(tmp_path):
    folder = tmp_path / "snaps"
    now = 1_700_000_000.1234
    frames = [np.full((8, 8, 3), v, np.uint8) for v in (0, 128, 255)]
    paths = [save_snapshot(f, folder, retention_hours=0, max_files=10, now=now) for f in frames]
    assert len(set(paths)) == 3 and all(p.is_file() for p in paths)
    assert paths[0].name == time.strftime("snapshot-%Y%m%d-%H%M%S-123.jpg", time.localtime(now))
    assert [p.name.rsplit("-", 1)[-1] for p in paths[1:]] == ["2.jpg", "3.jpg"]
    means = [int(cv2.imread(str(p)).mean()) for p in paths]
    assert means[0] < 10 and 118 < means[1] < 138 and means[2] > 245
