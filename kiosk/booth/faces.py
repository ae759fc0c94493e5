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
  large photo never holds the frame being swapped.
* Cache entries are keyed by the photo's SHA-256 and a digest of the models the latent depends
  on (embedder and swapper), written atomically, and ignored when stale. A corrupt entry is deleted
  and recomputed; entries of photos no longer in the library are pruned.
* One writer: :meth:`FaceLibrary.refresh` runs on one thread only, the inference thread (it needs
  the models); it costs one ``stat`` per photo when nothing changed. The first refresh makes the
  calling thread the writer; a refresh from any other thread raises :class:`LibraryWriterError`.
  A fresh inference thread that takes over from an abandoned one calls :meth:`FaceLibrary.claim`;
  the supervisor also calls :meth:`FaceLibrary.revoke` on the abandoned thread when it gives up on
  it. From then on the abandoned thread can never publish again, not even a refresh it was in the
  middle of (the writer is checked when the result is published, under the library's lock).
* Readers (the render loop, the booth session, the inference thread itself) take
  :attr:`FaceLibrary.snapshot` once: a frozen :class:`LibrarySnapshot` (version, entries,
  problems) replaced as a whole, never changed in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.booth.photo_files import PhotoError, PhotoJob, PhotoRead, PhotoReader, decode_photo
from kiosk.config import ConfigError, KioskConfig, read_text_bounded, safe_yaml
from kiosk.types import Face, FrameBGR
from kiosk.util.atomic import atomic_write
from kiosk.util.files import (
    FileTooLargeError,
    NotRegularFileError,
    kind_of,
    read_regular_file,
    regular_file_kind,
    shown,
)

log = logging.getLogger(__name__)

_SERIALS = itertools.count(1)
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
NAMES_FILE = "faces.yaml"
CACHE_VERSION = 1
MAX_PHOTO_BYTES = 64 << 20  # a staff photo is a few MB
MAX_CACHE_ENTRY_BYTES = 16 << 20  # an entry is a latent and a thumbnail: a few hundred KB
#: How long a refresh with a scan budget waits for the photo reader's first result (a small photo
#: is read and decoded in a few ms; a large one finishes off the inference thread meanwhile).
READ_WAIT_S = 0.05
_CACHE_NAME = re.compile(r"[0-9a-f]{24}-[0-9a-f]{0,12}\.npz")


class FaceAnalyzer(Protocol):
    """What the library needs from the pipeline (see :class:`kiosk.processing.pipeline.SwapPipeline`)."""

    def find_source_faces(self, face_bgr: FrameBGR) -> tuple[list[Face], FrameBGR]: ...

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]: ...


@dataclass(frozen=True)
class FaceEntry:
    key: str  # photo SHA-256 (hex, shortened) + model digest: changes when either changes
    name: str
    path: Path
    latent: NDArray[np.float32]
    thumb_bgr: FrameBGR


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


class LibraryWriterError(RuntimeError):
    """A refresh from a thread that is not the library's writer: refused, nothing is published."""


@dataclass(frozen=True)
class _Scanned:
    stamp: tuple[int, int]  # (mtime_ns, size)
    entry: FaceEntry | None
    problem: str


def make_thumbnail(image_bgr: FrameBGR, face: Face, size_px: int) -> FrameBGR:
    """A square crop centred on the face, 1.8x the face box, edges padded, resized to ``size_px``."""
    x0, y0, x1, y1 = (float(v) for v in face.box_xyxy)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 - 0.05 * (y1 - y0)
    half = 0.9 * max(x1 - x0, y1 - y0)
    scale = size_px / (2 * half)
    m = np.array([[scale, 0, size_px / 2 - scale * cx], [0, scale, size_px / 2 - scale * cy]], np.float64)
    thumb = cv2.warpAffine(
        image_bgr, m, (size_px, size_px), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE
    )
    return np.ascontiguousarray(thumb, dtype=np.uint8)


def read_names(folder: Path) -> tuple[dict[str, str], list[str], str]:
    """Names and order from ``faces.yaml``: a list of ``{file, name}`` or a ``{file: name}`` mapping.
    Returns (names by file, ordered files, problem)."""
    path = folder / NAMES_FILE
    if not path.is_file():
        return {}, [], ""
    try:
        _, data = safe_yaml(read_text_bounded(path), str(path))
    except ConfigError as exc:
        detail = exc.problems[0].removeprefix(str(path)).lstrip(":0123456789 ")
        return {}, [], f"{path}: cannot read ({detail}); file names are used as names"
    names: dict[str, str] = {}
    order: list[str] = []
    if isinstance(data, dict):
        items = [{"file": k, "name": v} for k, v in data.items()]
    elif isinstance(data, list):
        items = data
    else:
        return {}, [], f"{path}: expected a list of {{file, name}} or a mapping file: name"
    for item in items[:10_000]:
        if isinstance(item, dict) and isinstance(item.get("file"), str):
            order.append(item["file"])
            if item.get("name") is not None:
                names[item["file"]] = str(item["name"])
        elif isinstance(item, str):
            order.append(item)
    return names, order, ""


class FaceLibrary:
    def __init__(
        self,
        folder: Path | None,
        cache_dir: Path,
        *,
        extra_photos: Sequence[Path] = (),
        thumb_px: int = 160,
        similar_size_ratio: float = 0.6,
    ) -> None:
        self.folder = folder
        self.cache_dir = cache_dir
        self.extra_photos = tuple(extra_photos)
        self.thumb_px = thumb_px
        self.similar_size_ratio = similar_size_ratio
        self.serial = next(_SERIALS)  # tells one library from its replacement after a config reload
        #: The one atomic reference every reader takes (see :class:`LibrarySnapshot`).
        self._snapshot = LibrarySnapshot(self.serial)
        #: Guards the writer claim and the publication (a claim never interleaves a publish).
        self._lock = threading.Lock()
        self.clock = time.monotonic  # what refresh's scan budget is measured with
        self._writer: threading.Thread | None = None
        self._revoked: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # abandoned writers
        # The writer's scan state: replaced, with the snapshot, only by a refresh of the writer.
        self._scanned: dict[Path, _Scanned] = {}
        self._names_stamp: tuple[int, int] | None = None
        self._names: tuple[dict[str, str], list[str], str] = ({}, [], "")
        self._model_digest = ""
        self._reader = PhotoReader(self._read_photo)
        self.read_wait_s = READ_WAIT_S  # with a scan budget: how long a refresh waits for a read

    # -- the snapshot and its one writer ---------------------------------------------------------
    @property
    def snapshot(self) -> LibrarySnapshot:
        """The library now; take it once and work on it (it never changes under the reader)."""
        return self._snapshot

    @property
    def writer(self) -> threading.Thread | None:
        """The thread that refreshes this library (None until the first refresh or claim)."""
        return self._writer

    def claim(self) -> None:
        """Make the calling thread the library's only writer (a fresh inference thread taking over
        from an abandoned one). The previous writer's refreshes are refused from now on, including
        one it is in the middle of."""
        me = threading.current_thread()
        with self._lock:
            self._refuse_revoked(me)
            prev, self._writer = self._writer, me
        if prev is not None and prev is not me:
            log.info("face library: %s takes over refreshing from %s", me.name, prev.name)

    def revoke(self, thread: threading.Thread) -> None:
        """The supervisor gave up on ``thread`` (a call that hangs): it may never refresh or claim
        again, not even to finish a refresh it is in; the next thread to claim or refresh the
        library becomes its writer."""
        with self._lock:
            self._revoked.add(thread)
            if self._writer is thread:
                self._writer = None
        log.info("face library: %s may no longer refresh it", thread.name)

    def _refuse_revoked(self, me: threading.Thread) -> None:
        if me in self._revoked:
            raise LibraryWriterError(f"face library refresh refused on thread {me.name!r}: it was abandoned")

    def _check_writer(self, me: threading.Thread) -> None:
        """Called with the lock held: the first refresh claims the library, any other thread is refused."""
        self._refuse_revoked(me)
        if self._writer is None:
            self._writer = me
        elif self._writer is not me:
            raise LibraryWriterError(
                f"face library refresh refused on thread {me.name!r}: "
                f"{self._writer.name!r} is its writer (one writer per library)"
            )

    # -- scanning ------------------------------------------------------------------------------
    def photos(self) -> list[Path]:
        return self._listing()[0]

    def _listing(self) -> tuple[list[Path], bool, str]:
        """(the photos, whether the faces folder was listed, the problem when it was not).

        A folder that is missing, unreadable or not a folder for a moment (a remount, a copy that
        replaces it) is not listed: the photos scanned before are kept (and their cache entries
        are not pruned) and the problem says what is in the way."""
        found = list(self.extra_photos)
        folder = self.folder
        if folder is None:
            return found, True, ""
        kept = [p for p in self._scanned if p not in found]
        try:
            st = folder.stat()
        except FileNotFoundError:
            return (
                [*found, *kept],
                False,
                f"{shown(folder)}: faces folder not found (create it or fix faces.dir)",
            )
        except OSError as exc:
            return (
                [*found, *kept],
                False,
                f"{shown(folder)}: faces folder cannot be read ({exc.strerror}); check permissions",
            )
        if not stat.S_ISDIR(st.st_mode):
            what = "a file" if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode)
            return (
                [*found, *kept],
                False,
                f"faces folder {shown(folder)} is {what}, not a folder (move it away and create the folder, or fix faces.dir)",
            )
        try:
            # Not only regular files: a FIFO or device named like a photo is named as such, never opened.
            found += [p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and not p.is_dir()]
        except OSError as exc:  # unreadable folder: keep what was loaded, say why
            return (
                [*found, *kept],
                False,
                f"{shown(folder)}: faces folder not listed ({exc.strerror}); check permissions",
            )
        return found, True, ""

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
        t0 = self.clock()
        pending = scans = 0
        waited_out = False
        with self._lock:
            self._check_writer(me)
        scanned = {} if model_digest != self._model_digest else self._scanned
        problems: list[str] = []
        photos, listed, folder_problem = self._listing()
        seen: dict[Path, _Scanned] = {}
        jobs: set[PhotoJob] = set()
        for path in photos:
            prev = scanned.get(path)
            try:
                st = path.stat()
            except OSError:
                if not listed and prev is not None:
                    seen[path] = prev  # the folder is away for a moment: keep what it had
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            job: PhotoJob = (path, stamp, model_digest)
            jobs.add(job)
            if prev is not None and prev.stamp == stamp:
                seen[path] = prev
                continue
            if budget_s is not None and scans and self.clock() - t0 > budget_s:
                self._reader.get(job, 0)  # read ahead while the next frames are processed
                read = None
            else:
                wait = None if budget_s is None else (0.0 if waited_out else self.read_wait_s)
                read = self._reader.get(job, wait)
                waited_out = waited_out or read is None
            if read is None:
                pending += 1  # the next refresh scans it
                if prev is not None:
                    seen[path] = prev
                continue
            seen[path] = self._scan_safely(path, stamp, read, analyzer)
            scans += 1
        self._reader.keep_only(jobs)
        for path in set(scanned) - set(seen):
            log.info("face photo removed: %s", shown(path.name))
        if folder_problem:
            kept = sum(1 for p in seen if p not in self.extra_photos)
            problems.append(folder_problem + (f"; keeping the {kept} faces loaded before" if kept else ""))
        names_stamp, (names, order, names_problem) = self._read_names()
        if names_problem:
            problems.append(names_problem)
        entries = []
        for path, found in seen.items():
            if found.entry is None:
                problems.append(found.problem)
                continue
            name = names.get(path.name, shown(path.stem))
            entry = found.entry
            if entry.name != name:
                entry = FaceEntry(entry.key, name, entry.path, entry.latent, entry.thumb_bgr)
            entries.append(entry)
        rank = {f: i for i, f in enumerate(order)}
        extra = {p: i for i, p in enumerate(self.extra_photos)}
        entries.sort(
            key=lambda e: (
                e.path not in extra,
                extra.get(e.path, 0),
                rank.get(e.path.name, len(rank)),
                e.path.name,
            )
        )
        new_entries, new_problems = tuple(entries), tuple(sorted(problems))
        with self._lock:
            self._check_writer(me)  # a fresh thread may have claimed the library meanwhile
            old = self._snapshot
            changed = [e.key + e.name for e in new_entries] != [e.key + e.name for e in old.entries] or (
                new_problems != old.problems
            )
            if changed or pending != old.pending:
                self._snapshot = LibrarySnapshot(
                    self.serial, old.version + 1, new_entries, new_problems, pending
                )
            self._scanned, self._model_digest = seen, model_digest
            self._names_stamp, self._names = names_stamp, (names, order, names_problem)
            # A partial scan knows no photo is gone, nor does a folder that was not listed.
            if (changed or old.pending) and not pending and listed:
                self._prune_cache(new_entries)  # under the lock: only ever by the current writer
        return changed

    def _read_names(self) -> tuple[tuple[int, int] | None, tuple[dict[str, str], list[str], str]]:
        """(stamp of faces.yaml, what it says); re-read only when the stamp changed."""
        if self.folder is None:
            return None, ({}, [], "")
        try:
            st = (self.folder / NAMES_FILE).stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._names_stamp:
            return stamp, self._names
        return stamp, read_names(self.folder)

    def _read_photo(self, path: Path, stamp: tuple[int, int], model_digest: str) -> PhotoRead:
        """On the reader's thread: the photo's bytes (a regular file only, never blocking on a FIFO
        or device, bounded), their cache key, and the cached entry or the decoded picture."""
        name = shown(path.name)
        if stamp[1] > MAX_PHOTO_BYTES:
            return PhotoRead(
                problem=f"{name}: {stamp[1] >> 20} MB is too large for a face photo; use a JPEG under 20 MB"
            )
        try:
            data = read_regular_file(path, MAX_PHOTO_BYTES)
        except FileTooLargeError:
            return PhotoRead(problem=f"{name}: grew too large while being read; use a JPEG under 20 MB")
        except NotRegularFileError as exc:
            st_kind = regular_file_kind(path) or "not a regular file"
            log.debug("%s", exc)
            return PhotoRead(problem=f"{name}: is {st_kind}, not a photo file; replace it with a JPEG or PNG")
        except OSError as exc:
            return PhotoRead(problem=f"{name}: cannot read ({exc.strerror or exc}); check permissions")
        digest = hashlib.sha256(data).hexdigest()
        key = f"{digest[:24]}-{model_digest[:12]}"
        cached = self._load_cache(self.cache_dir / f"{key}.npz")
        if cached is not None:
            return PhotoRead(key, cached=cached)
        try:
            return PhotoRead(key, image=decode_photo(data))
        except PhotoError as exc:
            return PhotoRead(key, problem=f"{name}: {exc}")

    def _scan_safely(
        self, path: Path, stamp: tuple[int, int], read: PhotoRead, analyzer: FaceAnalyzer
    ) -> _Scanned:
        """:meth:`_scan`, with anything it raises turned into a problem naming the photo."""
        if read.problem:
            return self._skip(path, stamp, read.problem)
        try:
            return self._scan(path, stamp, read, analyzer)
        except PhotoError as exc:
            return self._skip(path, stamp, f"{shown(path.name)}: {exc}")
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[-1][:160]
            return self._skip(
                path,
                stamp,
                f"{shown(path.name)}: cannot be used ({type(exc).__name__}: {first}); replace the photo",
            )

    def _scan(self, path: Path, stamp: tuple[int, int], read: PhotoRead, analyzer: FaceAnalyzer) -> _Scanned:
        key = read.key
        if read.cached is not None:
            latent, thumb = read.cached
            log.debug("face cache hit: %s", shown(path.name))
            return _Scanned(stamp, FaceEntry(key, shown(path.stem), path, latent, thumb), "")
        image = read.image
        if image is None:
            raise PhotoError("not a readable image; use a JPEG or PNG")
        faces, used = analyzer.find_source_faces(image)
        if not faces:
            return self._skip(
                path, stamp, f"{shown(path.name)}: no face found; use a clear, frontal photo of one face"
            )
        areas = [f.area_px for f in faces]
        if len(faces) > 1 and areas[1] >= self.similar_size_ratio * areas[0]:
            return self._skip(
                path,
                stamp,
                f"{shown(path.name)}: {len(faces)} faces of similar size; crop the photo to one person",
            )
        latent = np.ascontiguousarray(analyzer.source_latent(used, faces[0]), dtype=np.float32)
        thumb = make_thumbnail(used, faces[0], self.thumb_px)
        self._save_cache(self.cache_dir / f"{key}.npz", latent, thumb)
        log.info("face added: %s", shown(path.name))
        return _Scanned(stamp, FaceEntry(key, shown(path.stem), path, latent, thumb), "")

    def _skip(self, path: Path, stamp: tuple[int, int], problem: str) -> _Scanned:
        log.warning("face photo skipped: %s", problem)
        return _Scanned(stamp, None, problem)

    # -- cache -----------------------------------------------------------------------------------
    def _load_cache(self, path: Path) -> tuple[NDArray[np.float32], FrameBGR] | None:
        """The cached (latent, thumbnail), or None: missing, stale (recomputed and overwritten), or
        corrupt (any bytes: deleted, then recomputed)."""
        try:
            try:  # a regular file only, bounded: a FIFO or device in its place is never opened to block
                data = read_regular_file(path, MAX_CACHE_ENTRY_BYTES)
            except FileNotFoundError:
                return None
            except FileTooLargeError:
                raise ValueError("larger than any cache entry") from None
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                if int(z["version"]) != CACHE_VERSION or int(z["thumb_px"]) != self.thumb_px:
                    return None
                latent = np.asarray(z["latent"])
                thumb = np.asarray(z["thumb"])
            if latent.size == 0 or latent.size > 1 << 20 or not np.all(np.isfinite(latent)):
                raise ValueError("bad latent")
            if thumb.shape != (self.thumb_px, self.thumb_px, 3):
                raise ValueError(f"thumbnail of shape {thumb.shape}")
            return latent.astype(np.float32), np.ascontiguousarray(thumb, dtype=np.uint8)
        except Exception as exc:  # BadZipFile, EOFError, ValueError, KeyError, OSError, ...
            log.warning("face cache entry %s is corrupt (%s); rebuilding it", path.name, type(exc).__name__)
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            return None

    def _prune_cache(self, entries: Sequence[FaceEntry]) -> None:
        """Delete cache entries of photos that are no longer in the library (and stale temp files)."""
        keep = {f"{e.key}.npz" for e in entries}
        try:
            names = os.listdir(self.cache_dir)
        except OSError:
            return
        now = time.time()
        for name in names:
            path = self.cache_dir / name
            with contextlib.suppress(OSError):
                left_over = name.endswith(".tmp") and ".npz." in name and now - path.stat().st_mtime > 3600
                if (_CACHE_NAME.fullmatch(name) and name not in keep) or left_over:
                    path.unlink()
                    log.info("face cache entry pruned: %s", name)

    def _save_cache(self, path: Path, latent: NDArray[np.float32], thumb: FrameBGR) -> None:
        buf = io.BytesIO()
        np.savez(buf, version=CACHE_VERSION, thumb_px=self.thumb_px, latent=latent, thumb=thumb)
        try:
            atomic_write(path, buf.getvalue(), mode=0o600, fsync=True)
        except OSError as exc:  # a read-only cache only costs start-up time
            log.warning("face cache not written (%s): %s", path.parent, exc)


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
