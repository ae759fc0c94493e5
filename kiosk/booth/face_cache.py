"""The face library's cache on disk: one ``.npz`` per photo and model set holding the swapper
latent and the thumbnail, so a photo runs the models once, not at every start.

An entry's key is the photo's SHA-256 and a digest of the models the latent depends on
(embedder and swapper), so a changed photo or model never meets a stale entry. Entries are
written atomically; one that is stale (another cache version or thumbnail size) is ignored and
overwritten, a corrupt one (any bytes, or a FIFO or device in its place) is deleted and rebuilt.
:meth:`LatentCache.prune` deletes the entries of photos no longer in the library.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from kiosk.types import FrameBGR
from kiosk.util.atomic import atomic_write
from kiosk.util.files import FileTooLargeError, open_regular, read_regular_file

log = logging.getLogger(__name__)

CACHE_VERSION = 1
MAX_CACHE_ENTRY_BYTES = 16 << 20  # an entry is a latent and a thumbnail: a few hundred KB
_CACHE_NAME = re.compile(r"[0-9a-f]{24}-[0-9a-f]{0,12}\.npz")


def cache_key(photo_sha256: str, model_digest: str) -> str:
    """The entry name of a photo (its SHA-256, hex) under a model set: changes when either does."""
    return f"{photo_sha256[:24]}-{model_digest[:12]}"


class LatentCache:
    """(latent, thumbnail) by cache key in ``cache_dir``, for thumbnails of ``thumb_px``."""

    def __init__(self, cache_dir: Path, thumb_px: int) -> None:
        self.cache_dir = cache_dir
        self.thumb_px = thumb_px

    def load(self, key: str) -> tuple[NDArray[np.float32], FrameBGR] | None:
        """The cached (latent, thumbnail), or None: missing, stale (recomputed and overwritten), or
        corrupt (any bytes: deleted, then recomputed)."""
        path = self.cache_dir / f"{key}.npz"
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

    def load_thumb(self, key: str) -> FrameBGR | None:
        """The cached thumbnail alone, or None (missing, stale or corrupt, as :meth:`load`).

        What a start with a warm cache reads of each photo's entry: the zip's directory and the
        thumbnail member, not the latent (0.8 MB for the classic swap), which stays on disk until
        the face is worn (:class:`LatentStore`; a latent found corrupt then is scanned again)."""
        path = self.cache_dir / f"{key}.npz"
        try:
            try:  # a regular file only: a FIFO or device in its place is never opened to block
                fd = open_regular(path)
            except FileNotFoundError:
                return None
            with os.fdopen(fd, "rb") as f:
                if os.fstat(fd).st_size > MAX_CACHE_ENTRY_BYTES:
                    raise ValueError("larger than any cache entry")
                with np.load(f, allow_pickle=False) as z:  # members are read when asked for
                    if int(z["version"]) != CACHE_VERSION or int(z["thumb_px"]) != self.thumb_px:
                        return None
                    if "latent" not in z.files:
                        raise ValueError("no latent")
                    thumb = np.asarray(z["thumb"])
            if thumb.shape != (self.thumb_px, self.thumb_px, 3):
                raise ValueError(f"thumbnail of shape {thumb.shape}")
            return np.ascontiguousarray(thumb, dtype=np.uint8)
        except Exception as exc:  # BadZipFile, EOFError, ValueError, KeyError, OSError, ...
            log.warning("face cache entry %s is corrupt (%s); rebuilding it", path.name, type(exc).__name__)
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            return None

    def save(self, key: str, latent: NDArray[np.float32], thumb: FrameBGR) -> bool:
        """Write the entry; False when it could not be written (the caller keeps it in memory)."""
        path = self.cache_dir / f"{key}.npz"
        buf = io.BytesIO()
        np.savez(buf, version=CACHE_VERSION, thumb_px=self.thumb_px, latent=latent, thumb=thumb)
        try:
            atomic_write(path, buf.getvalue(), mode=0o600, fsync=True)
        except OSError as exc:  # a read-only cache only costs start-up time and memory
            log.warning("face cache not written (%s): %s", path.parent, exc)
            return False
        return True

    def load_latent(self, key: str) -> NDArray[np.float32] | None:
        """The cached latent alone (see :meth:`load`), or None."""
        found = self.load(key)
        return None if found is None else found[0]

    def prune(self, keep: Iterable[str]) -> None:
        """Delete the entries whose key is not in ``keep`` (photos that are no longer in the
        library), and temp files left over from a write that died."""
        kept = {f"{key}.npz" for key in keep}
        try:
            names = os.listdir(self.cache_dir)
        except OSError:
            return
        now = time.time()
        for name in names:
            path = self.cache_dir / name
            with contextlib.suppress(OSError):
                left_over = name.endswith(".tmp") and ".npz." in name and now - path.stat().st_mtime > 3600
                if (_CACHE_NAME.fullmatch(name) and name not in kept) or left_over:
                    path.unlink()
                    log.info("face cache entry pruned: %s", name)


class LatentStore:
    """The latents of the library's entries read back from the :class:`LatentCache` when they
    are swapped in, so the running kiosk holds only the few it wears (a classic latent is a
    256×256 crop: 0.8 MB as float32, 0.8 GB for 1,000 photos if all were held).

    The :attr:`capacity` latents used last stay in memory (a face switched back to, the faces
    :mod:`per_visitor <kiosk.processing.swap_stage>` hands out); any thread may ask. A latent whose
    cache entry is gone or corrupt when it is asked for is None and its key is remembered in
    :meth:`take_lost`, for the library's writer to scan the photo again."""

    def __init__(self, cache: LatentCache, capacity: int = 8) -> None:
        self.cache = cache
        self.capacity = capacity
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lost: set[str] = set()
        #: How many latents were read back from the disk.
        self.reads = 0

    def latent(self, key: str) -> NDArray[np.float32] | None:
        with self._lock:
            found = self._recent.get(key)
            if found is not None:
                self._recent.move_to_end(key)
                return found
        latent = self.cache.load_latent(key)  # outside the lock: a disk read
        with self._lock:
            self.reads += 1
            if latent is None:
                self._lost.add(key)
                return None
            self._recent[key] = latent
            self._recent.move_to_end(key)
            while len(self._recent) > self.capacity:
                self._recent.popitem(last=False)
        return latent

    def held(self) -> int:
        """How many latents are in memory now."""
        with self._lock:
            return len(self._recent)

    def take_lost(self) -> set[str]:
        """The keys whose cache entry was missing when asked for since the last call."""
        with self._lock:
            lost, self._lost = self._lost, set()
            return lost
