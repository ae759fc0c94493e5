"""One photo turned into a library entry: what the photo reader found (its cache entry, or its
decoded picture run through the face models) becomes a :class:`FaceEntry`, or a one-line problem
naming the photo (never an exception out of :meth:`PhotoScanner.scan`).

* The photo's largest face is used. A photo that is unreadable, has no face, or has two faces of
  similar size is skipped with a warning (log + staff view).
* A new entry's latent and thumbnail are written to the :class:`~kiosk.booth.face_cache.LatentCache`;
  the entry keeps only the thumbnail's JPEG and reads its latent back from there when it is worn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.booth.face_cache import LatentCache, LatentStore
from kiosk.booth.photo_files import PhotoError, PhotoRead
from kiosk.types import Face, FrameBGR
from kiosk.util.files import shown

log = logging.getLogger(__name__)


class FaceAnalyzer(Protocol):
    """What the library needs from the pipeline (see :class:`kiosk.processing.pipeline.SwapPipeline`)."""

    def find_source_faces(self, face_bgr: FrameBGR) -> tuple[list[Face], FrameBGR]: ...

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]: ...


class FaceEntry:
    """One face of the library: what the running kiosk needs of its photo, and no more.

    The thumbnail is held as a small JPEG (a few KB; decoded when the carousel shows it) and the
    latent is read back from the disk cache when the face is swapped in (a :class:`LatentStore`;
    only the few used last stay in memory), so a library of 1,000 photos costs tens of MB, not
    the gigabyte their latents and thumbnails would take. Given the arrays (a cache that cannot
    be written, tests) the entry holds them. Immutable."""

    __slots__ = ("_latent", "_store", "_thumb", "_thumb_jpg", "key", "name", "path")

    def __init__(
        self,
        key: str,  # photo SHA-256 (hex, shortened) + model digest: changes when either changes
        name: str,
        path: Path,
        latent: NDArray[np.float32] | None = None,
        thumb_bgr: FrameBGR | None = None,
        *,
        store: LatentStore | None = None,
        thumb_jpg: bytes = b"",
    ) -> None:
        if latent is None and store is None:
            raise ValueError("a face entry needs its latent or the store it is read back from")
        if thumb_bgr is None and not thumb_jpg:
            raise ValueError("a face entry needs its thumbnail")
        self.key, self.name, self.path = key, name, path
        self._latent, self._store = latent, store
        self._thumb, self._thumb_jpg = thumb_bgr, thumb_jpg

    @property
    def latent(self) -> NDArray[np.float32] | None:
        """The swapper's latent; None when it is read back and its cache entry is gone (the
        library scans the photo again on its next refresh)."""
        if self._latent is not None:
            return self._latent
        assert self._store is not None
        return self._store.latent(self.key)

    @property
    def holds_latent(self) -> bool:
        """Whether the latent is held in memory by the entry (not read back from the disk cache)."""
        return self._latent is not None

    @property
    def thumb_bgr(self) -> FrameBGR:
        """The thumbnail (decoded from its JPEG at each call when the entry holds only that)."""
        if self._thumb is not None:
            return self._thumb
        img = cv2.imdecode(np.frombuffer(self._thumb_jpg, np.uint8), cv2.IMREAD_COLOR)
        return np.ascontiguousarray(img, dtype=np.uint8)

    def thumbnail(self) -> FrameBGR:
        """:attr:`thumb_bgr` (a method, to hand out as the carousel's loader)."""
        return self.thumb_bgr

    def held_bytes(self) -> int:
        """The bytes of pixels and latent this entry holds in memory."""
        held = len(self._thumb_jpg)
        held += self._thumb.nbytes if self._thumb is not None else 0
        return held + (self._latent.nbytes if self._latent is not None else 0)

    def renamed(self, name: str) -> FaceEntry:
        return FaceEntry(
            self.key,
            name,
            self.path,
            self._latent,
            self._thumb,
            store=self._store,
            thumb_jpg=self._thumb_jpg,
        )

    def __setattr__(self, attr: str, value: object) -> None:
        if hasattr(self, "_thumb_jpg"):  # set once, in __init__
            raise AttributeError("FaceEntry is immutable")
        object.__setattr__(self, attr, value)

    def __repr__(self) -> str:
        return f"FaceEntry({self.key!r}, {self.name!r}, {str(self.path)!r})"


#: JPEG quality of the thumbnails the entries hold (a 160 px thumbnail: ~6 KB).
THUMB_JPEG_QUALITY = 92


def compact_entry(
    key: str, name: str, path: Path, latent: NDArray[np.float32], thumb: FrameBGR, store: LatentStore | None
) -> FaceEntry:
    """The entry of a photo whose latent and thumbnail are ``latent`` and ``thumb``: with a
    ``store`` (the cache entry is on disk) it holds only the thumbnail's JPEG."""
    ok, jpg = cv2.imencode(".jpg", thumb, [cv2.IMWRITE_JPEG_QUALITY, THUMB_JPEG_QUALITY])
    if store is None or not ok:
        return FaceEntry(key, name, path, latent, thumb)
    return FaceEntry(key, name, path, store=store, thumb_jpg=jpg.tobytes())


@dataclass(frozen=True)
class Scanned:
    """A photo as one scan left it: its entry, or the problem that kept it out."""

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


class PhotoScanner:
    """Runs the face models on what the photo reader found, for the library's writer thread."""

    def __init__(self, cache: LatentCache, similar_size_ratio: float) -> None:
        self._cache = cache
        self.similar_size_ratio = similar_size_ratio
        #: Reads the entries' latents back from the cache (see :class:`FaceEntry`).
        self.store = LatentStore(cache)

    def scan(self, path: Path, stamp: tuple[int, int], read: PhotoRead, analyzer: FaceAnalyzer) -> Scanned:
        """The photo at ``path`` as an entry, with anything that goes wrong (also anything the
        models raise) turned into a problem naming the photo."""
        if read.problem:
            return self._skip(stamp, read.problem)
        try:
            return self._scan(path, stamp, read, analyzer)
        except PhotoError as exc:
            return self._skip(stamp, f"{shown(path.name)}: {exc}")
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[-1][:160]
            return self._skip(
                stamp,
                f"{shown(path.name)}: cannot be used ({type(exc).__name__}: {first}); replace the photo",
            )

    def _scan(self, path: Path, stamp: tuple[int, int], read: PhotoRead, analyzer: FaceAnalyzer) -> Scanned:
        key = read.key
        if read.cached is not None:  # the latent stays in the cache until the face is worn
            log.debug("face cache hit: %s", shown(path.name))
            ok, jpg = cv2.imencode(".jpg", read.cached, [cv2.IMWRITE_JPEG_QUALITY, THUMB_JPEG_QUALITY])
            if not ok:
                raise PhotoError("its cached thumbnail cannot be encoded; replace the photo")
            return Scanned(
                stamp, FaceEntry(key, shown(path.stem), path, store=self.store, thumb_jpg=jpg.tobytes()), ""
            )
        image = read.image
        if image is None:
            raise PhotoError("not a readable image; use a JPEG or PNG")
        faces, used = analyzer.find_source_faces(image)
        if not faces:
            return self._skip(
                stamp, f"{shown(path.name)}: no face found; use a clear, frontal photo of one face"
            )
        areas = [f.area_px for f in faces]
        if len(faces) > 1 and areas[1] >= self.similar_size_ratio * areas[0]:
            return self._skip(
                stamp,
                f"{shown(path.name)}: {len(faces)} faces of similar size; crop the photo to one person",
            )
        latent = np.ascontiguousarray(analyzer.source_latent(used, faces[0]), dtype=np.float32)
        thumb = make_thumbnail(used, faces[0], self._cache.thumb_px)
        store = self.store if self._cache.save(key, latent, thumb) else None
        log.info("face added: %s", shown(path.name))
        return Scanned(stamp, compact_entry(key, shown(path.stem), path, latent, thumb, store), "")

    @staticmethod
    def _skip(stamp: tuple[int, int], problem: str) -> Scanned:
        log.warning("face photo skipped: %s", problem)
        return Scanned(stamp, None, problem)
