"""The keepsake store: photos behind random tokens, deleted after a time-to-live.

A photo is a JPEG file named by its token (128 random bits from :mod:`secrets`, URL-safe base64, 22
characters) in one folder, mode 0600, written through a temporary file and a rename so a reader never
sees half a file. The index is in memory; one lock guards it, so the thread that takes photos and the
server's thread that reads them may call in at once. Deletion is the default: each photo goes
``ttl_s`` after it was taken (its token then answers *gone*, HTTP 410); a store full to
``max_photos`` or ``max_mb`` refuses a new photo rather than evict one before its time (only a
reload that lowers the limits deletes the oldest first), and :meth:`KeepsakeStore.open` / :meth:`KeepsakeStore.close` delete
every keepsake in the folder unless ``keep_on_disk``.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path

from kiosk.keepsake.privacy import GONE_FILE, GoneTokens, photo_id
from kiosk.util.atomic import atomic_write

log = logging.getLogger(__name__)

#: A token as :func:`new_token` makes it: 16 random bytes in URL-safe base64 without padding.
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{22}")
_FILE_SUFFIX = ".jpg"
#: A photo's files: the JPEG, and its clip (``keepsake.clip``: an MP4 and a GIF) under the same token.
_SUFFIXES = (_FILE_SUFFIX, ".mp4", ".gif")
#: How often the store is swept (photos past their time-to-live deleted even when nobody asks).
SWEEP_EVERY_S = 1.0
#: Tokens remembered as gone (410) after their photo was deleted, also across a restart (as salted
#: hashes in the folder's GONE_FILE, ~250 kB at most); older ones answer 404.
GONE_MEMORY = 10_000
#: The lock file that makes one kiosk the owner of a keepsake folder (``flock``).
LOCK_NAME = ".lock"


def new_token() -> str:
    """128 random bits, URL-safe (``[A-Za-z0-9_-]{22}``)."""
    return secrets.token_urlsafe(16)


def is_token(text: str) -> bool:
    return TOKEN_RE.fullmatch(text) is not None


class Found(IntEnum):
    """What a token names, as the HTTP status the server answers with."""

    OK = 200
    GONE = 410  # it named a photo that has been deleted (time-to-live, the limits, a restart)
    UNKNOWN = 404


@dataclass(frozen=True)
class KeepsakeRecord:
    """One stored photo. ``created``/``expires`` are wall-clock seconds (the page shows the time)."""

    token: str
    path: Path  # the JPEG
    created: float
    expires: float
    size_bytes: int  # of all its files
    clips: tuple[str, ...] = ()  # the clip's files beside the JPEG, by suffix ("mp4", "gif")

    def file(self, kind: str = "jpg") -> Path | None:
        """The path of the JPEG (``jpg``) or of a clip file it has, else None."""
        return (
            self.path if kind == "jpg" else self.path.with_suffix(f".{kind}") if kind in self.clips else None
        )

    def delete_files(self) -> None:
        """Unlink the JPEG and its clip (OSError but for files already gone)."""
        for path in (self.path, *(self.path.with_suffix(f".{k}") for k in self.clips)):
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Lookup:
    found: Found
    record: KeepsakeRecord | None = None


@dataclass(frozen=True)
class StoreLimits:
    ttl_s: float
    max_photos: int
    max_mb: float
    keep_on_disk: bool = False

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * 1_000_000)


class KeepsakeError(Exception):
    """A photo could not be kept (one line for the staff view)."""


#: What the screen says when the store is full of photos still within their time-to-live.
STORE_FULL = "All photo places are taken right now \u2014 please try again in a few minutes"


class StoreFull(KeepsakeError):
    """``max_photos``/``max_mb`` are reached by photos younger than their ``ttl_s``: none of them
    is evicted for a new one (their visitors were promised that time)."""

    on_screen = STORE_FULL


@dataclass
class StoreCounts:
    added: int = 0
    expired: int = 0  # deleted because their time-to-live ran out
    evicted: int = 0  # deleted early to stay within max_photos / max_mb


class KeepsakeStore:
    """Photos in ``folder`` behind tokens; see the module docstring. ``clock`` returns wall-clock
    seconds (tests pass a fake one)."""

    def __init__(self, folder: Path, limits: StoreLimits, clock: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self._limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._records: OrderedDict[str, KeepsakeRecord] = OrderedDict()  # oldest first
        self._gone = GoneTokens(GONE_MEMORY)
        self._bytes = 0
        self.counts = StoreCounts()
        #: Told ("add", record) and ("gone", token) under the lock, in order (the server process's
        #: mirror of the index); it must not block.
        self.listener: Callable[[tuple[str, object]], None] | None = None
        self._lock_fd: int | None = None  # the folder's lock (held from open to close)

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> KeepsakeStore:
        """Create the folder (0700) and lock it (one owner: :class:`KeepsakeError` when another
        kiosk holds it, and nothing in it is touched); delete every keepsake in it, or with
        ``keep_on_disk`` take them back (their time-to-live counts from the file's time)."""
        self._make_folder()
        self._take_lock()
        found = keepsake_files(self.folder)
        with self._lock:
            self._gone = GoneTokens.load(self.folder / GONE_FILE, GONE_MEMORY)
            if not self._limits.keep_on_disk:
                for path in found:
                    path.unlink(missing_ok=True)
                    if path.suffix == _FILE_SUFFIX:  # a photo of a run that did not exit cleanly
                        self._gone.add(path.name.removesuffix(_FILE_SUFFIX))
                self._save_gone()
                if found:
                    log.info(
                        "keepsakes: %d photo(s) of a previous run deleted from %s", len(found), self.folder
                    )
            else:
                for path in [p for p in found if p.name.endswith(".tmp")]:
                    path.unlink(missing_ok=True)  # an add cut short by a crash
                for path in sorted((p for p in found if p.suffix == _FILE_SUFFIX), key=_mtime):
                    st = path.stat()
                    token = path.name.removesuffix(_FILE_SUFFIX)
                    rec = KeepsakeRecord(
                        token, path, st.st_mtime, st.st_mtime + self._limits.ttl_s, st.st_size
                    )
                    self._records[token] = rec
                    self._bytes += rec.size_bytes
                for path in (p for p in found if p.suffix in _SUFFIXES[1:]):  # clips: with their photo
                    owner = self._records.get(path.name.partition(".")[0])
                    if owner is None:
                        path.unlink(missing_ok=True)
                        continue
                    rec = owner
                    size = path.stat().st_size
                    self._records[rec.token] = replace(
                        rec, clips=(*rec.clips, path.suffix[1:]), size_bytes=rec.size_bytes + size
                    )
                    self._bytes += size
                for rec in self._records.values():
                    self._notify(("add", rec))
        self.sweep()
        return self

    def close(self) -> None:
        """At a clean exit: delete every keepsake unless ``keep_on_disk``; release the folder."""
        try:
            self._close_photos()
        finally:
            self._release_lock()

    def _close_photos(self) -> None:
        if self._lock_fd is None:  # never opened, or another kiosk's folder: not ours to empty
            return
        with self._lock:
            if self._limits.keep_on_disk:
                return
            for rec in self._records.values():
                rec.delete_files()
                self._forget(rec.token)
                self._notify(("gone", rec.token))
            self._records.clear()
            self._bytes = 0
            self._save_gone()
        for path in keepsake_files(self.folder):  # leftovers: a temporary file of an add cut short
            path.unlink(missing_ok=True)

    def set_limits(self, limits: StoreLimits) -> None:
        """New limits from a reloaded config: ``max_*`` apply now, ``ttl_s`` to photos taken from now."""
        with self._lock:
            self._limits = limits
        self.sweep()

    @property
    def limits(self) -> StoreLimits:
        return self._limits

    # -- photos -------------------------------------------------------------------------------
    def add(self, jpeg: bytes) -> KeepsakeRecord:
        """Keep ``jpeg`` under a new token; :class:`StoreFull` when the limits are reached by
        photos still within their time-to-live (none is evicted early for it)."""
        if not jpeg.startswith(b"\xff\xd8"):
            raise KeepsakeError("keepsake: not a JPEG; nothing stored")
        limits = self._limits
        if len(jpeg) > limits.max_bytes:
            raise KeepsakeError(
                f"keepsake: photo of {len(jpeg) / 1e6:.1f} MB is larger than keepsake.max_mb "
                f"({limits.max_mb:g}); raise it"
            )
        self.sweep()  # photos past their time-to-live make room first
        if self.full(len(jpeg)):
            raise StoreFull(
                f"keepsake: the store is full (keepsake.max_photos {limits.max_photos}, max_mb "
                f"{limits.max_mb:g}) of photos younger than ttl_s; none evicted, nothing stored: "
                "raise max_photos/max_mb or lower ttl_s"
            )
        token = new_token()
        path = self.folder / f"{token}{_FILE_SUFFIX}"
        try:
            try:
                atomic_write(path, jpeg, mode=0o600, make_folder=False)
            except FileNotFoundError:  # the folder was deleted while the kiosk runs: made again
                self._make_folder()
                log.warning("keepsakes: %s was missing; created it again", self.folder)
                self._take_lock()  # the old lock went with the old folder
                atomic_write(path, jpeg, mode=0o600, make_folder=False)
        except OSError as exc:
            raise KeepsakeError(f"keepsake: cannot write {self.folder}: {exc.strerror or exc}") from None
        now = self._clock()
        rec = KeepsakeRecord(token, path, now, now + limits.ttl_s, len(jpeg))
        with self._lock:
            self._records[token] = rec
            self._bytes += rec.size_bytes
            self.counts.added += 1
            self._notify(("add", rec))
        self.sweep()
        return rec

    def full(self, size_bytes: int = 0) -> bool:
        """One more photo (of ``size_bytes``) would go over ``max_photos`` or ``max_mb``."""
        limits = self._limits
        with self._lock:
            return len(self._records) + 1 > limits.max_photos or self._bytes + size_bytes > limits.max_bytes

    def lookup(self, token: str) -> Lookup:
        """The record of ``token``; GONE once deleted (time-to-live, limits); UNKNOWN otherwise."""
        if not is_token(token):
            return Lookup(Found.UNKNOWN)
        self.sweep()
        with self._lock:
            rec = self._records.get(token)
            if rec is not None:
                # page and JPEG agree: a photo whose file is gone is gone for both
                return Lookup(Found.OK, rec) if rec.path.exists() else Lookup(Found.GONE)
            return Lookup(Found.GONE if token in self._gone else Found.UNKNOWN)

    def read(self, token: str, kind: str = "jpg") -> tuple[Lookup, bytes | None]:
        """:meth:`lookup` and the bytes of its JPEG or clip file (``kind``: jpg, mp4, gif): a photo
        deleted in between reads as GONE, a clip not (yet) made as UNKNOWN."""
        return read_file(self.lookup(token), kind)

    def add_clip(self, token: str, files: dict[str, bytes]) -> KeepsakeRecord:
        """Keep a clip's ``files`` (by suffix) beside the photo of ``token``, deleted with it;
        :class:`KeepsakeError` when the photo is gone or the clip would go over ``max_mb``."""
        size = sum(len(data) for data in files.values())
        with self._lock:
            rec = self._records.get(token)
            over = rec is not None and self._bytes + size > self._limits.max_bytes
        if rec is None or over:
            why = (
                "its photo was deleted"
                if rec is None
                else f"keepsake.max_mb ({self._limits.max_mb:g}) is reached"
            )
            raise KeepsakeError(f"keepsake: clip of photo {photo_id(token)} not kept: {why}")
        new = replace(rec, clips=tuple(files), size_bytes=rec.size_bytes + size)
        try:
            for kind, data in files.items():
                atomic_write(rec.path.with_suffix(f".{kind}"), data, mode=0o600, make_folder=False)
        except OSError as exc:
            new.delete_files()
            raise KeepsakeError(f"keepsake: cannot write {self.folder}: {exc.strerror or exc}") from None
        with self._lock:
            if self._records.get(token) is not rec:  # deleted (or given a clip) meanwhile
                kept = self._records.get(token)
                for kind in files:
                    if kept is None or kind not in kept.clips:
                        rec.path.with_suffix(f".{kind}").unlink(missing_ok=True)
                raise KeepsakeError(
                    f"keepsake: clip of photo {photo_id(token)} not kept: its photo was deleted"
                )
            self._records[token] = new
            self._bytes += size
            self._notify(("add", new))
        return new

    def sweep(self) -> int:
        """Delete photos past their time-to-live and beyond the limits, oldest first; the number deleted."""
        now = self._clock()
        doomed: list[tuple[KeepsakeRecord, bool]] = []
        with self._lock:
            limits = self._limits
            while self._records:
                oldest = next(iter(self._records.values()))
                expired = oldest.expires <= now
                over = len(self._records) > limits.max_photos or self._bytes > limits.max_bytes
                if not (expired or over):
                    break
                del self._records[oldest.token]
                self._bytes -= oldest.size_bytes
                self._forget(oldest.token)
                doomed.append((oldest, expired))
                if expired:
                    self.counts.expired += 1
                else:
                    self.counts.evicted += 1
            # a photo taken with a longer ttl may sit behind a younger one with a shorter ttl
            for rec in [r for r in self._records.values() if r.expires <= now]:
                del self._records[rec.token]
                self._bytes -= rec.size_bytes
                self._forget(rec.token)
                doomed.append((rec, True))
                self.counts.expired += 1
            for rec, _ in doomed:  # under the lock: a lookup never finds a record whose file is gone
                self._notify(("gone", rec.token))
                try:
                    rec.delete_files()
                except OSError as exc:
                    log.warning("keepsakes: cannot delete %s: %s", rec.path, exc)
            if doomed:
                self._save_gone()
        for rec, expired in doomed:
            log.info("keepsake %s deleted (%s)", photo_id(rec.token), "time-to-live" if expired else "limits")
        return len(doomed)

    def discard(self, token: str) -> None:
        """Delete one photo now (its token answers gone); nothing when it is not kept."""
        with self._lock:
            rec = self._records.pop(token, None)
            if rec is None:
                return
            self._bytes -= rec.size_bytes
            self._forget(token)
            self._notify(("gone", token))
            rec.delete_files()
        log.info("keepsake %s deleted (withdrawn)", photo_id(token))

    def records(self) -> list[KeepsakeRecord]:
        """The kept photos, oldest first."""
        with self._lock:
            return list(self._records.values())

    def total_bytes(self) -> int:
        with self._lock:
            return self._bytes

    # -- helpers ------------------------------------------------------------------------------
    def _make_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.chmod(self.folder, 0o700)
        except OSError as exc:
            log.warning("keepsakes: cannot restrict %s to its owner: %s", self.folder, exc)

    def _take_lock(self) -> None:
        fd = lock_folder(self.folder)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            unlock_folder(self.folder, self._lock_fd)
            self._lock_fd = None

    def _notify(self, message: tuple[str, object]) -> None:
        if self.listener is not None:
            try:
                self.listener(message)
            except Exception:  # noqa: BLE001 - the mirror's loss, never the photo's
                log.exception("keepsakes: the server process could not be told %s", message[0])

    def _forget(self, token: str) -> None:
        self._gone.add(token)

    def _save_gone(self) -> None:
        """Under the lock: the deleted photos' file, for 410 after a restart."""
        self._gone.save(self.folder / GONE_FILE)

    def gone_tokens(self) -> GoneTokens:
        """A copy of the deleted photos' hashes (for the server process's mirror)."""
        with self._lock:
            return self._gone.copy()


def lock_folder(folder: Path) -> int:
    """Hold ``LOCK_NAME`` in ``folder`` (``flock``, released by the kernel if the kiosk dies; the
    file is removed at :meth:`KeepsakeStore.close`, so a lock taken on a file just removed is
    retried); the lock's file descriptor."""
    path = folder / LOCK_NAME
    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise KeepsakeError(f"keepsake: cannot create {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KeepsakeError(
                f"keepsake: {folder} is in use by another kiosk; give each kiosk its own "
                "keepsake folder (KIOSK_KEEPSAKE_DIR)"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the owner removed it as we opened it: take the new one
    else:
        raise KeepsakeError(f"keepsake: cannot lock {path}; remove it and restart the kiosk")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def unlock_folder(folder: Path, fd: int) -> None:
    """Release :func:`lock_folder`'s lock (and remove its file while it is still ours)."""
    try:
        if os.stat(folder / LOCK_NAME).st_ino == os.fstat(fd).st_ino:
            os.unlink(folder / LOCK_NAME)  # still held: nobody else can own it yet
    except OSError:
        pass
    os.close(fd)  # closing the file releases the flock


def keepsake_files(folder: Path) -> list[Path]:
    """The keepsakes (photos, their clips, temporary files of either) in ``folder``; nothing else."""
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    out = []
    for path in entries:
        name = path.name
        stem, _, suffix = name.partition(".")
        photo = f".{suffix}" in _SUFFIXES and is_token(stem)
        partial = name.startswith(".") and name.endswith(".tmp") and is_token(name[1:23])
        if photo or partial:
            out.append(path)
    return out


def read_file(found: Lookup, kind: str) -> tuple[Lookup, bytes | None]:
    """The bytes of ``found``'s JPEG or clip file (``kind``), for the store and its mirror."""
    rec = found.record
    if rec is None:
        return found, None
    path = rec.file(kind)
    if path is None:
        return Lookup(Found.UNKNOWN), None
    try:
        return found, path.read_bytes()
    except OSError:
        return Lookup(Found.GONE), None


def _mtime(path: Path) -> float:
    return path.stat().st_mtime
