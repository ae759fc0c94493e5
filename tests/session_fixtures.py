"""Library snapshots without photos or models, for tests of the booth session and the selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kiosk.booth.faces import FaceEntry, LibrarySnapshot


def entry(key: str, name: str | None = None) -> FaceEntry:
    return FaceEntry(
        key=key,
        name=name or key,
        path=Path(f"/faces/{key}.jpg"),
        latent=np.zeros(4, np.float32),
        thumb_bgr=np.zeros((8, 8, 3), np.uint8),
    )


class FakeLibrary:
    """Publishes snapshots like :class:`kiosk.booth.faces.FaceLibrary`, one version per :meth:`publish`."""

    def __init__(self, keys: tuple[str, ...] = (), serial: int = 9000) -> None:
        self.snapshot = LibrarySnapshot(serial)
        if keys:
            self.publish(keys)

    def publish(self, keys: tuple[str, ...], problems: tuple[str, ...] = ()) -> LibrarySnapshot:
        old = self.snapshot
        self.snapshot = LibrarySnapshot(old.serial, old.version + 1, tuple(entry(k) for k in keys), problems)
        return self.snapshot
