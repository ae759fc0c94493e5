"""The face library: a folder of source photos, each turned once into a swapper latent and a
thumbnail, cached on disk, and kept in step with the folder while the kiosk runs.

* Each photo's largest face is used. A photo that is unreadable, has no face, or has two faces
  of similar size is skipped with a warning (log + staff view); the rest keep working.
* Any bytes in the folder are safe: a photo that cannot be used is named in a one-line problem and
  skipped (never an exception out of :meth:`FaceLibrary.refresh`). Photos are decoded with bounded
  memory: the size is read from the header first; a large JPEG is decoded at 1/2, 1/4 or 1/8 scale
  by the JPEG decoder itself, anything else over :data:`MAX_PHOTO_PIXELS` is refused.
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
import json
import logging
import os
import re
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.config import ConfigError, KioskConfig, read_text_bounded, safe_yaml
from kiosk.types import Face, FrameBGR
from kiosk.util.atomic import atomic_write

log = logging.getLogger(__name__)

_SERIALS = itertools.count(1)
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
NAMES_FILE = "faces.yaml"
CACHE_VERSION = 1
MAX_PHOTO_BYTES = 64 << 20  # a staff photo is a few MB
MAX_PHOTO_PIXELS = 40_000_000  # decoded at full size up to this (8000x5000); 120 MB as BGR
MAX_PHOTO_SIDE = 100_000  # beyond this a header is nonsense, even for a JPEG decoded at 1/8
_PIL_HEADER_LOCK = threading.Lock()
_CACHE_NAME = re.compile(r"[0-9a-f]{24}-[0-9a-f]{0,12}\.npz")


class PhotoError(ValueError):
    """A photo that cannot be used; the message says why and what to do."""


def decode_photo(data: bytes) -> FrameBGR:
    """Decode an image file's bytes to BGR with bounded memory, or raise :class:`PhotoError`.

    The dimensions come from the header (Pillow reads no pixels in ``Image.open``). Up to
    :data:`MAX_PHOTO_PIXELS` the photo is decoded as it is; a larger JPEG is decoded reduced by
    the JPEG decoder (DCT scaling: the full-size picture never exists in memory); other formats
    that large are refused, since their decoders would need the full-size buffer."""
    from PIL import Image

    if not data:
        raise PhotoError("empty file (0 bytes); copy the photo again")
    try:
        with _PIL_HEADER_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # the size is checked below
            try:
                with Image.open(io.BytesIO(data)) as im:  # header only: no pixels are decoded
                    width, height = im.size
                    fmt = im.format or "?"
            finally:
                Image.MAX_IMAGE_PIXELS = limit
    except Exception:  # UnidentifiedImageError, DecompressionBombError, truncated headers, ...
        raise PhotoError("not a readable image; use a JPEG or PNG") from None
    if width <= 0 or height <= 0 or max(width, height) > MAX_PHOTO_SIDE:
        raise PhotoError(f"claims {width}x{height} pixels, which is absurd; export the photo again")
    pixels = width * height
    flag = cv2.IMREAD_COLOR
    if pixels > MAX_PHOTO_PIXELS:
        reduced = {
            2: cv2.IMREAD_REDUCED_COLOR_2,
            4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8,
        }
        factor = next((f for f in reduced if pixels / (f * f) <= MAX_PHOTO_PIXELS), 0)
        if fmt != "JPEG" or not factor:
            raise PhotoError(
                f"{width}x{height} {fmt} is too large to decode safely "
                f"(over {MAX_PHOTO_PIXELS // 1_000_000} megapixels); scale it down, e.g. to 2000 px wide"
            )
        flag = reduced[factor]
    image = cv2.imdecode(np.frombuffer(data, np.uint8), flag)
    if image is None or image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise PhotoError("not a readable image (damaged or truncated?); use a JPEG or PNG")
    return np.ascontiguousarray(image, dtype=np.uint8)


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


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ModelDigests:
    """SHA-256 of model files, remembered by (path, size, mtime) so big files are hashed once."""

    def __init__(self, cache_file: Path) -> None:
        self.cache_file = cache_file
        try:
            self._known: dict[str, list[object]] = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            self._known = {}

    def digest(self, paths: Sequence[Path]) -> str:
        h = hashlib.sha256()
        changed = False
        for p in paths:
            st = p.stat()
            k = str(p.resolve())
            known = self._known.get(k)
            if known is None or known[:2] != [st.st_size, st.st_mtime_ns]:
                known = [st.st_size, st.st_mtime_ns, file_digest(p)]
                self._known[k] = known
                changed = True
            h.update(str(known[2]).encode())
        if changed:
            try:
                atomic_write(self.cache_file, json.dumps(self._known).encode(), mode=0o600, fsync=True)
            except OSError as exc:  # unwritable cache: hash again next start, nothing worse
                log.warning("model digests not cached (%s): %s", self.cache_file, exc)
        return h.hexdigest()


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
        found = list(self.extra_photos)
        if self.folder is not None and self.folder.is_dir():
            try:
                found += [
                    p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
                ]
            except OSError as exc:  # unreadable folder: keep what was loaded, say why
                log.warning("faces folder not listed (%s): %s", self.folder, exc)
                return [*found, *(p for p in self._scanned if p not in found)]
        return found

    def refresh(self, analyzer: FaceAnalyzer, model_digest: str, budget_s: float | None = None) -> bool:
        """Bring the snapshot in step with the folder. Returns True if anything visible changed.

        Only the writer thread may call this (the first caller becomes it); the work is done on
        locals and published at the end in one step, after checking again that the caller is still
        the writer. Raises :class:`LibraryWriterError` otherwise (nothing is published then).

        ``budget_s``: no new photo scan starts once this many seconds have gone (one scan may run
        past it; the first one always runs, so every refresh makes progress): the photos left are
        counted in the snapshot's ``pending`` (a changed photo keeps its previous entry meanwhile)
        and scanned by the next refreshes. The inference thread refreshes between frames, so a
        folder of new photos (a model run each) never holds a frame for longer than that, which
        the stall supervisor would take for a hung call."""
        me = threading.current_thread()
        t0 = self.clock()
        pending = scans = 0
        with self._lock:
            self._check_writer(me)
        scanned = {} if model_digest != self._model_digest else self._scanned
        problems: list[str] = []
        if self.folder is not None and not self.folder.is_dir():
            problems.append(f"{self.folder}: faces folder not found (create it or fix faces.dir)")
        seen: dict[Path, _Scanned] = {}
        for path in self.photos():
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            prev = scanned.get(path)
            if prev is not None and prev.stamp == stamp:
                seen[path] = prev
            elif budget_s is not None and scans and self.clock() - t0 > budget_s:
                pending += 1  # the next refresh scans it
                if prev is not None:
                    seen[path] = prev
            else:
                seen[path] = self._scan_safely(path, stamp, analyzer, model_digest)
                scans += 1
        for path in set(scanned) - set(seen):
            log.info("face photo removed: %s", path.name)
        names_stamp, (names, order, names_problem) = self._read_names()
        if names_problem:
            problems.append(names_problem)
        entries = []
        for path, found in seen.items():
            if found.entry is None:
                problems.append(found.problem)
                continue
            name = names.get(path.name, path.stem)
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
            if (changed or old.pending) and not pending:  # a partial scan knows no photo is gone
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

    def _scan_safely(
        self, path: Path, stamp: tuple[int, int], analyzer: FaceAnalyzer, model_digest: str
    ) -> _Scanned:
        """:meth:`_scan`, with anything it raises turned into a problem naming the photo."""
        try:
            return self._scan(path, stamp, analyzer, model_digest)
        except PhotoError as exc:
            return self._skip(path, stamp, f"{path.name}: {exc}")
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[-1][:160]
            return self._skip(
                path, stamp, f"{path.name}: cannot be used ({type(exc).__name__}: {first}); replace the photo"
            )

    def _scan(
        self, path: Path, stamp: tuple[int, int], analyzer: FaceAnalyzer, model_digest: str
    ) -> _Scanned:
        if stamp[1] > MAX_PHOTO_BYTES:
            raise PhotoError(f"{stamp[1] >> 20} MB is too large for a face photo; use a JPEG under 20 MB")
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_PHOTO_BYTES + 1)
        except OSError as exc:
            return self._skip(path, stamp, f"{path.name}: cannot read ({exc.strerror}); check permissions")
        if len(data) > MAX_PHOTO_BYTES:
            raise PhotoError("grew too large while being read; use a JPEG under 20 MB")
        digest = hashlib.sha256(data).hexdigest()
        key = f"{digest[:24]}-{model_digest[:12]}"
        cache_file = self.cache_dir / f"{key}.npz"
        cached = self._load_cache(cache_file)
        if cached is not None:
            latent, thumb = cached
            log.debug("face cache hit: %s", path.name)
            return _Scanned(stamp, FaceEntry(key, path.stem, path, latent, thumb), "")
        image = decode_photo(data)
        faces, used = analyzer.find_source_faces(image)
        if not faces:
            return self._skip(
                path, stamp, f"{path.name}: no face found; use a clear, frontal photo of one face"
            )
        areas = [f.area_px for f in faces]
        if len(faces) > 1 and areas[1] >= self.similar_size_ratio * areas[0]:
            return self._skip(
                path, stamp, f"{path.name}: {len(faces)} faces of similar size; crop the photo to one person"
            )
        latent = np.ascontiguousarray(analyzer.source_latent(used, faces[0]), dtype=np.float32)
        thumb = make_thumbnail(used, faces[0], self.thumb_px)
        self._save_cache(cache_file, latent, thumb)
        log.info("face added: %s", path.name)
        return _Scanned(stamp, FaceEntry(key, path.stem, path, latent, thumb), "")

    def _skip(self, path: Path, stamp: tuple[int, int], problem: str) -> _Scanned:
        log.warning("face photo skipped: %s", problem)
        return _Scanned(stamp, None, problem)

    # -- cache -----------------------------------------------------------------------------------
    def _load_cache(self, path: Path) -> tuple[NDArray[np.float32], FrameBGR] | None:
        """The cached (latent, thumbnail), or None: missing, stale (recomputed and overwritten), or
        corrupt (any bytes: deleted, then recomputed)."""
        try:
            if not path.is_file():
                return None
            if path.stat().st_size > 16 << 20:
                raise ValueError("larger than any cache entry")
            with np.load(path, allow_pickle=False) as z:
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
        import io

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
