"""The face library: a folder of source photos, each turned once into a swapper latent and a
thumbnail, cached on disk, and kept in step with the folder while the kiosk runs.

* Each photo's largest face is used. A photo that is unreadable, has no face, or has two faces
  of similar size is skipped with a warning (log + staff view); the rest keep working.
* Any bytes in the folder are safe: a photo that cannot be used is named in a one-line problem and
  skipped (never an exception out of :meth:`FaceLibrary.refresh`), and is not read again until it
  changes. Only regular files are read, never blocking on a FIFO or device
  (:func:`kiosk.util.files.read_regular_file`). Photos are decoded within a memory budget: the
  size is read from the header first and what would need more is refused, whatever the format
  (:mod:`kiosk.util.images`); reading and decoding run on the :class:`PhotoReader`'s thread, so a
  large photo never holds the frame being swapped. The folder's bookkeeping (what changed, what
  failed, a folder away for a moment) is :mod:`kiosk.booth.photo_folder`; one photo's scan is
  :mod:`kiosk.booth.face_scan`.
* Cache entries are keyed by the photo's SHA-256 and a digest of the models the latent depends
  on (embedder and swapper), written atomically, and ignored when stale. A corrupt entry is deleted
  and recomputed; entries of photos no longer in the library are pruned
  (:mod:`kiosk.booth.face_cache`).
* One writer: :meth:`FaceLibrary.refresh` runs on one thread only, the inference thread (it needs
  the models); it costs one ``stat`` per photo when nothing changed. The first refresh makes the
  calling thread the writer; a refresh from any other thread raises :class:`LibraryWriterError`.
  A fresh inference thread that takes over from an abandoned one calls :meth:`FaceLibrary.claim`;
  the supervisor also calls :meth:`FaceLibrary.revoke` on the abandoned thread when it gives up on
  it. From then on the abandoned thread can never publish again, not even a refresh it was in the
  middle of (the writer is checked when the result is published, under the library's lock:
  :mod:`kiosk.booth.library_writer`).
* Readers (the render loop, the booth session, the inference thread itself) take
  :attr:`FaceLibrary.snapshot` once: a frozen :class:`LibrarySnapshot` (version, entries,
  problems) replaced as a whole, never changed in place.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kiosk.booth.face_cache import LatentCache
from kiosk.booth.face_scan import FaceAnalyzer, FaceEntry, Scanned
from kiosk.booth.library_writer import LibraryWriterError, WriterClaim
from kiosk.booth.photo_folder import FaceNames, FolderScan, PhotoFolder, ScanBudget
from kiosk.config import KioskConfig

__all__ = [
    "FaceAnalyzer",
    "FaceEntry",
    "FaceLibrary",
    "LibrarySnapshot",
    "LibraryWriterError",
    "make_library",
]

_SERIALS = itertools.count(1)
#: How long a refresh with a scan budget waits for the photo reader's first result (a small photo
#: is read and decoded in a few ms; a large one finishes off the inference thread meanwhile).
READ_WAIT_S = 0.05


@dataclass(frozen=True)
class LibrarySnapshot:
    """The face library as it was at one moment: published whole, never changed in place."""

    serial: int  # which library (a config reload makes a new one)
    version: int = 0  # bumped whenever entries, problems or pending change; 0: never refreshed
    entries: tuple[FaceEntry, ...] = ()
    problems: tuple[str, ...] = ()
    pending: int = 0  # photos new or changed in the folder, not scanned yet (a refresh's budget ran out)

    @property
    def stamp(self) -> tuple[int, int]:
        """(serial, version): equal stamps mean the same snapshot."""
        return (self.serial, self.version)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(e.key for e in self.entries)

    def index_of(self, key: str) -> int | None:
        for i, e in enumerate(self.entries):
            if e.key == key:
                return i
        return None

    def entry(self, key: str) -> FaceEntry | None:
        """The entry with ``key``, or None when this snapshot has no such face."""
        i = self.index_of(key)
        return None if i is None else self.entries[i]


@dataclass(frozen=True)
class _ScanState:
    """The writer's scan state: replaced, with the snapshot, only by a refresh of the writer."""

    scanned: Mapping[Path, Scanned] = field(default_factory=dict)
    model_digest: str = ""
    names_stamp: tuple[int, int] | None = None
    names: FaceNames = ({}, [], "")


class FaceLibrary:
    """A folder of face photos (and ``extra_photos``) as a published :class:`LibrarySnapshot`,
    refreshed by one writer thread. Composes the folder (:class:`PhotoFolder`), its rescan with
    the photo reader (:class:`FolderScan`), the disk cache (:class:`LatentCache`) and the writer
    claim (:class:`WriterClaim`)."""

    def __init__(
        self,
        folder: Path | None,
        cache_dir: Path,
        *,
        extra_photos: Sequence[Path] = (),
        thumb_px: int = 160,
        similar_size_ratio: float = 0.6,
    ) -> None:
        self._folder = PhotoFolder(folder, tuple(extra_photos))
        self._cache = LatentCache(cache_dir, thumb_px)
        self._scan = FolderScan(self._folder, self._cache, similar_size_ratio)
        self.serial = next(_SERIALS)  # tells one library from its replacement after a config reload
        #: The one atomic reference every reader takes (see :class:`LibrarySnapshot`).
        self._snapshot = LibrarySnapshot(self.serial)
        self._writers = WriterClaim()
        self.clock = time.monotonic  # what refresh's scan budget is measured with
        self._state = _ScanState()
        self.read_wait_s = READ_WAIT_S  # with a scan budget: how long a refresh waits for a read

    @property
    def folder(self) -> Path | None:
        return self._folder.folder

    @property
    def extra_photos(self) -> tuple[Path, ...]:
        return self._folder.extra_photos

    @property
    def cache_dir(self) -> Path:
        return self._cache.cache_dir

    @property
    def thumb_px(self) -> int:
        return self._cache.thumb_px

    @property
    def similar_size_ratio(self) -> float:
        return self._scan.scanner.similar_size_ratio

    # -- the snapshot and its one writer ---------------------------------------------------------
    @property
    def snapshot(self) -> LibrarySnapshot:
        """The library now; take it once and work on it (it never changes under the reader)."""
        return self._snapshot

    @property
    def writer(self) -> threading.Thread | None:
        """The thread that refreshes this library (None until the first refresh or claim)."""
        return self._writers.writer

    def claim(self) -> None:
        """Make the calling thread the library's only writer (a fresh inference thread taking over
        from an abandoned one). The previous writer's refreshes are refused from now on, including
        one it is in the middle of."""
        self._writers.claim()

    def revoke(self, thread: threading.Thread) -> None:
        """The supervisor gave up on ``thread`` (a call that hangs): it may never refresh or claim
        again, not even to finish a refresh it is in; the next thread to claim or refresh the
        library becomes its writer."""
        self._writers.revoke(thread)

    # -- scanning ------------------------------------------------------------------------------
    def photos(self) -> list[Path]:
        return self._folder.listing(self._state.scanned)[0]

    def refresh(self, analyzer: FaceAnalyzer, model_digest: str, budget_s: float | None = None) -> bool:
        """Bring the snapshot in step with the folder. Returns True if anything visible changed.

        Only the writer thread may call this (the first caller becomes it); the work is done on
        locals and published at the end in one step, after checking again that the caller is still
        the writer. Raises :class:`LibraryWriterError` otherwise (nothing is published then).

        Reading, hashing and decoding a new photo happen on the :class:`PhotoReader`'s thread;
        this thread runs the models on what it has read (or takes the cached entry).

        ``budget_s``: no new photo scan starts once this many seconds have gone (one scan may run
        past it; the first one always runs, so every refresh makes progress), and the reader is
        waited for at most :attr:`read_wait_s` (a large photo is decoded meanwhile and scanned by a
        later refresh): the photos left are counted in the snapshot's ``pending`` (a changed photo
        keeps its previous entry meanwhile) and scanned by the next refreshes. The inference
        thread refreshes between frames, so a folder of new photos never holds a frame for long.
        Without a budget every photo is read and scanned now."""
        me = threading.current_thread()
        budget = ScanBudget(self.clock, self.clock(), budget_s, self.read_wait_s)
        self._writers.check(me)
        state = self._state
        previous = state.scanned if model_digest == state.model_digest else {}
        lost = self._scan.scanner.store.take_lost()
        if lost:  # a latent's cache entry went missing since it was scanned: scan its photo again
            previous = {p: s for p, s in previous.items() if s.entry is None or s.entry.key not in lost}
        scan = self._scan.rescan(state.scanned, previous, analyzer, model_digest, budget)
        names_stamp, names = self._folder.read_names(state.names_stamp, state.names)
        new_entries, new_problems = self._folder.contents(scan, names)
        with self._writers.publishing(me):  # a fresh thread may have claimed the library meanwhile
            old = self._snapshot
            changed = [e.key + e.name for e in new_entries] != [e.key + e.name for e in old.entries] or (
                new_problems != old.problems
            )
            if changed or scan.pending != old.pending:
                self._snapshot = LibrarySnapshot(
                    self.serial, old.version + 1, new_entries, new_problems, scan.pending
                )
            self._state = _ScanState(scan.seen, model_digest, names_stamp, names)
            # A partial scan knows no photo is gone, nor does a folder that was not listed.
            # Pruned under the lock: only ever by the current writer.
            if (changed or old.pending) and not scan.pending and scan.listed:
                self._cache.prune(e.key for e in new_entries)
        return changed


def make_library(cfg: KioskConfig) -> FaceLibrary:
    """The face library of ``cfg``: ``faces.dir`` plus ``processing.source_face`` if set."""
    extra = [cfg.resolve(cfg.processing.source_face)] if cfg.processing.source_face else []
    return FaceLibrary(
        cfg.resolve(cfg.faces.dir) if cfg.faces.dir else None,
        cfg.resolve(cfg.faces.cache_dir),
        extra_photos=extra,
        thumb_px=cfg.faces.thumb_px,
        similar_size_ratio=cfg.faces.similar_size_ratio,
    )
