"""The face library: a folder of source photos, each turned once into a swapper latent and a
thumbnail, cached on disk, and kept in step with the folder while the kiosk runs.

* Each photo's largest face is used. A photo that is unreadable, has no face, or has two faces
  of similar size is skipped with a warning (log + staff view); the rest keep working.
* Cache entries are keyed by the photo's SHA-256 and a digest of the models the latent depends
  on (embedder and swapper), written atomically, and ignored when stale.
* :meth:`FaceLibrary.refresh` runs on the inference thread (it needs the models); it costs one
  ``stat`` per photo when nothing changed. The main thread only reads :attr:`entries`, an
  immutable tuple replaced as a whole.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
import yaml
from numpy.typing import NDArray

from kiosk.config import KioskConfig
from kiosk.types import Face, FrameBGR

log = logging.getLogger(__name__)

_SERIALS = itertools.count(1)
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
NAMES_FILE = "faces.yaml"
CACHE_VERSION = 1


class FaceAnalyzer(Protocol):
    """What the library needs from the pipeline (see :class:`kiosk.pipeline.SwapPipeline`)."""

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
                atomic_write(self.cache_file, json.dumps(self._known).encode())
            except OSError as exc:  # unwritable cache: hash again next start, nothing worse
                log.warning("model digests not cached (%s): %s", self.cache_file, exc)
        return h.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, [], f"{path}: cannot read ({first}); file names are used as names"
    names: dict[str, str] = {}
    order: list[str] = []
    if isinstance(data, dict):
        items = [{"file": k, "name": v} for k, v in data.items()]
    elif isinstance(data, list):
        items = data
    else:
        return {}, [], f"{path}: expected a list of {{file, name}} or a mapping file: name"
    for item in items:
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
        self.entries: tuple[FaceEntry, ...] = ()
        self.problems: tuple[str, ...] = ()
        self.version = 0  # bumped whenever entries or problems change
        self.serial = next(_SERIALS)  # tells one library from its replacement after a config reload
        self._scanned: dict[Path, _Scanned] = {}
        self._names_stamp: tuple[int, int] | None = None
        self._names: tuple[dict[str, str], list[str], str] = ({}, [], "")
        self._model_digest = ""

    # -- scanning ------------------------------------------------------------------------------
    def photos(self) -> list[Path]:
        found = list(self.extra_photos)
        if self.folder is not None and self.folder.is_dir():
            found += [p for p in self.folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]
        return found

    def refresh(self, analyzer: FaceAnalyzer, model_digest: str) -> bool:
        """Bring the entries in step with the folder. Returns True if anything visible changed."""
        if model_digest != self._model_digest:
            self._model_digest = model_digest
            self._scanned.clear()
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
            prev = self._scanned.get(path)
            seen[path] = (
                prev if prev is not None and prev.stamp == stamp else self._scan(path, stamp, analyzer)
            )
        for path in set(self._scanned) - set(seen):
            log.info("face photo removed: %s", path.name)
        names, order, names_problem = self._read_names()
        if names_problem:
            problems.append(names_problem)
        entries = []
        for path, scanned in seen.items():
            if scanned.entry is None:
                problems.append(scanned.problem)
                continue
            name = names.get(path.name, path.stem)
            entry = scanned.entry
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
        self._scanned = seen
        new_entries, new_problems = tuple(entries), tuple(sorted(problems))
        changed = [e.key + e.name for e in new_entries] != [e.key + e.name for e in self.entries] or (
            new_problems != self.problems
        )
        if changed:
            self.entries, self.problems = new_entries, new_problems
            self.version += 1
        return changed

    def _read_names(self) -> tuple[dict[str, str], list[str], str]:
        if self.folder is None:
            return {}, [], ""
        try:
            st = (self.folder / NAMES_FILE).stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._names_stamp:
            self._names_stamp = stamp
            self._names = read_names(self.folder)
        return self._names

    def _scan(self, path: Path, stamp: tuple[int, int], analyzer: FaceAnalyzer) -> _Scanned:
        try:
            data = path.read_bytes()
        except OSError as exc:
            return self._skip(path, stamp, f"{path.name}: cannot read ({exc.strerror}); check permissions")
        digest = hashlib.sha256(data).hexdigest()
        key = f"{digest[:24]}-{self._model_digest[:12]}"
        cache_file = self.cache_dir / f"{key}.npz"
        cached = self._load_cache(cache_file)
        if cached is not None:
            latent, thumb = cached
            log.debug("face cache hit: %s", path.name)
            return _Scanned(stamp, FaceEntry(key, path.stem, path, latent, thumb), "")
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            return self._skip(path, stamp, f"{path.name}: not a readable image; use a JPEG or PNG")
        faces, used = analyzer.find_source_faces(np.ascontiguousarray(image, dtype=np.uint8))
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
        try:
            with np.load(path) as z:
                if int(z["version"]) != CACHE_VERSION or int(z["thumb_px"]) != self.thumb_px:
                    return None
                return z["latent"].astype(np.float32), z["thumb"].astype(np.uint8)
        except (OSError, KeyError, ValueError):
            return None

    def _save_cache(self, path: Path, latent: NDArray[np.float32], thumb: FrameBGR) -> None:
        import io

        buf = io.BytesIO()
        np.savez(buf, version=CACHE_VERSION, thumb_px=self.thumb_px, latent=latent, thumb=thumb)
        try:
            atomic_write(path, buf.getvalue())
        except OSError as exc:  # a read-only cache only costs start-up time
            log.warning("face cache not written (%s): %s", path.parent, exc)

    def index_of(self, key: str) -> int | None:
        for i, e in enumerate(self.entries):
            if e.key == key:
                return i
        return None


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
