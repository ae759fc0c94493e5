"""Reading the library's photos off the disk: a photo decoded within bounds (or a one-line
:class:`PhotoError`), what reading one photo finds (:func:`read_photo`: its cache entry or its
decoded picture), the photo-reader thread that does that for new photos so the inference thread
only runs the models on them, and the SHA-256 of model files (remembered, so a big file is hashed
once)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kiosk.booth.face_cache import LatentCache, cache_key
from kiosk.types import FrameBGR
from kiosk.util.atomic import atomic_write
from kiosk.util.files import (
    FileTooLargeError,
    NotRegularFileError,
    open_regular,
    read_regular_file,
    regular_file_kind,
    shown,
)
from kiosk.util.images import ImageDecodeError, decode_image

log = logging.getLogger(__name__)

MAX_PHOTO_BYTES = 64 << 20  # a staff photo is a few MB


class PhotoError(ValueError):
    """A photo that cannot be used; the message says why and what to do."""


def decode_photo(data: bytes) -> FrameBGR:
    """Decode an image file's bytes to BGR within :data:`~kiosk.util.images.DECODE_BUDGET_BYTES`,
    or raise :class:`PhotoError`.

    The size, mode and (for a JPEG) progressive mode come from the header (Pillow reads no pixels
    in ``Image.open``); what would need more memory than the budget is refused before any pixel
    is decoded, whatever the format (a progressive JPEG counts its full-size coefficient buffer,
    which the decoder holds even at 1/8 scale). A large JPEG is decoded reduced by the JPEG
    decoder itself (see :func:`kiosk.util.images.decode_image`)."""
    try:
        return decode_image(data)
    except ImageDecodeError as exc:
        raise PhotoError(str(exc)) from None


#: One photo to read: (path, (mtime_ns, size), model digest).
PhotoJob = tuple[Path, tuple[int, int], str]


@dataclass(frozen=True)
class PhotoRead:
    """What the photo reader found: the cache key and the cached thumbnail (the latent stays in the
    cache on disk until the face is worn), or the decoded picture, or a one-line problem naming
    the photo."""

    key: str = ""
    cached: FrameBGR | None = None
    image: FrameBGR | None = None
    problem: str = ""


def read_photo(path: Path, stamp: tuple[int, int], model_digest: str, cache: LatentCache) -> PhotoRead:
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
    key = cache_key(hashlib.sha256(data).hexdigest(), model_digest)
    cached = cache.load_thumb(key)  # a warm start reads no latent and decodes no photo
    if cached is not None:
        return PhotoRead(key, cached=cached)
    try:
        return PhotoRead(key, image=decode_photo(data))
    except PhotoError as exc:
        return PhotoRead(key, problem=f"{name}: {exc}")


class PhotoReader:
    """Reads, hashes, looks up in the cache and decodes the library's new photos on its own
    thread, so the inference thread (the library's writer) only runs the models on them.

    One photo at a time, in the order asked; at most :attr:`MAX_READY` decoded pictures wait to
    be taken (each is within the decode budget), so a folder of new photos never piles up in
    memory. A failed read is remembered by (path, stamp, models): asking again, also from a fresh
    inference thread after an abandoned one, answers at once without reading the file again,
    until the file changes. The thread stops after :attr:`IDLE_S` without work and starts again
    with the next request."""

    MAX_READY = 2
    IDLE_S = 5.0

    def __init__(self, work: Callable[[Path, tuple[int, int], str], PhotoRead]) -> None:
        self._work = work
        self._cond = threading.Condition()
        self._queue: list[PhotoJob] = []
        self._wanted: set[PhotoJob] = set()  # someone waits for these: they skip the MAX_READY limit
        self._done: dict[PhotoJob, PhotoRead] = {}
        self._failed: dict[PhotoJob, PhotoRead] = {}
        self._busy: PhotoJob | None = None
        self._busy_since = 0.0  # monotonic time the read in progress started
        self._thread: threading.Thread | None = None

    def get(self, job: PhotoJob, wait_s: float | None) -> PhotoRead | None:
        """The read of ``job`` if it is done (asking for it first if it is not queued yet); waits
        up to ``wait_s`` for it (None: until it is done; 0: not at all; not at all either while a
        read has been going on for longer than ``wait_s``: a large photo, decoded meanwhile)."""
        with self._cond:
            found = self._take(job)
            if found is not None:
                return found
            if job not in self._queue and job != self._busy:
                self._queue.append(job)
            if wait_s and self._busy is not None and time.monotonic() - self._busy_since > wait_s:
                wait_s = 0  # a long read is in progress: waiting once was enough, go on with the frame
            if wait_s != 0 and job in self._queue:  # first in line: it is what the caller waits for
                self._queue.remove(job)
                self._queue.insert(0, job)
                self._wanted.add(job)
            self._start()
            self._cond.notify_all()
            if wait_s == 0:
                return None
            try:
                self._cond.wait_for(lambda: job in self._done or job in self._failed, wait_s)
            finally:
                self._wanted.discard(job)
            return self._take(job)

    def keep_only(self, jobs: set[PhotoJob]) -> None:
        """Forget queued jobs and results that are not in ``jobs`` (photos changed or removed)."""
        with self._cond:
            self._queue = [j for j in self._queue if j in jobs]
            for table in (self._done, self._failed):
                for j in [j for j in table if j not in jobs]:
                    del table[j]

    def _take(self, job: PhotoJob) -> PhotoRead | None:  # holding self._cond
        return self._done.pop(job, None) or self._failed.get(job)

    def _start(self) -> None:  # holding self._cond
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="photo-reader", daemon=True)
            self._thread.start()

    def _can_work(self) -> bool:  # holding self._cond
        if not self._queue:
            return False
        ready = sum(r.image is not None for r in self._done.values())
        return ready < self.MAX_READY or self._queue[0] in self._wanted

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(self._can_work, self.IDLE_S):
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
                job = self._busy = self._queue.pop(0)
                self._busy_since = time.monotonic()
            try:
                read = self._work(*job)
            except Exception as exc:  # never end the reader: the photo gets the problem
                first = (str(exc).strip().splitlines() or [""])[-1][:160]
                read = PhotoRead(
                    problem=f"{shown(job[0].name)}: cannot be used ({type(exc).__name__}: {first}); replace the photo"
                )
            with self._cond:
                self._busy = None
                (self._failed if read.problem else self._done)[job] = read
                self._cond.notify_all()


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as f:  # a FIFO or device at the path never blocks
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ModelDigests:
    """SHA-256 of model files, remembered by (path, size, mtime) so big files are hashed once."""

    def __init__(self, cache_file: Path) -> None:
        self.cache_file = cache_file
        try:  # a regular file only (never blocking on a FIFO), bounded
            self._known: dict[str, list[object]] = json.loads(read_regular_file(cache_file, 4 << 20))
        except (OSError, ValueError):
            self._known = {}
        if not isinstance(self._known, dict):
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
