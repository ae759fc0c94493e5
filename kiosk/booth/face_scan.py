"""One photo turned into a library entry: what the photo reader found (its cache entry, or its
decoded picture run through the face models) becomes a :class:`FaceEntry`, or a one-line problem
naming the photo (never an exception out of :meth:`PhotoScanner.scan`).

* The photo's largest face is used. A photo that is unreadable, has no face, or has two faces of
  similar size is skipped with a warning (log + staff view).
* A new entry's latent and thumbnail are written to the :class:`~kiosk.booth.face_cache.LatentCache`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.booth.face_cache import LatentCache
from kiosk.booth.photo_files import PhotoError, PhotoRead
from kiosk.types import Face, FrameBGR
from kiosk.util.files import shown

log = logging.getLogger(__name__)


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
        if read.cached is not None:
            latent, thumb = read.cached
            log.debug("face cache hit: %s", shown(path.name))
            return Scanned(stamp, FaceEntry(key, shown(path.stem), path, latent, thumb), "")
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
        self._cache.save(key, latent, thumb)
        log.info("face added: %s", shown(path.name))
        return Scanned(stamp, FaceEntry(key, shown(path.stem), path, latent, thumb), "")

    @staticmethod
    def _skip(stamp: tuple[int, int], problem: str) -> Scanned:
        log.warning("face photo skipped: %s", problem)
        return Scanned(stamp, None, problem)
