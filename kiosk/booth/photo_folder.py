"""The faces folder kept in step with the disk: which photos it holds, what ``faces.yaml`` calls
them and in which order, and the rescan that reads only what changed.

* The bookkeeping is by file stamp (mtime, size): a photo whose stamp is unchanged is not read
  again, also one that failed (its problem is kept), until the file changes.
* A folder that is missing, unreadable or not a folder for a moment (a remount, a copy that
  replaces it) is not listed: the photos scanned before are kept (and, as the library does not
  prune the cache after such a scan, their cache entries too) and the problem says what is in the
  way. Only a scan that listed the folder knows a photo is gone.
* New and changed photos are read on the :class:`~kiosk.booth.photo_files.PhotoReader`'s thread;
  the writer thread runs the models on what was read (:class:`~kiosk.booth.face_scan.PhotoScanner`),
  within the refresh's :class:`ScanBudget`.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kiosk.booth.face_cache import LatentCache
from kiosk.booth.face_scan import FaceAnalyzer, FaceEntry, PhotoScanner, Scanned
from kiosk.booth.photo_files import PhotoJob, PhotoRead, PhotoReader, read_photo
from kiosk.config import ConfigError, read_text_bounded, safe_yaml
from kiosk.util.files import kind_of, shown

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp"})
NAMES_FILE = "faces.yaml"

#: What ``faces.yaml`` says: (names by file, ordered files, problem).
FaceNames = tuple[dict[str, str], list[str], str]


def read_names(folder: Path) -> FaceNames:
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


@dataclass(frozen=True)
class ScanBudget:
    """How long one refresh may scan: no new photo scan starts once ``budget_s`` seconds of
    ``clock`` have gone since ``started`` (None: no limit, every photo is read and scanned now),
    and the photo reader is waited for at most ``read_wait_s``."""

    clock: Callable[[], float]
    started: float
    budget_s: float | None
    read_wait_s: float

    def spent(self) -> bool:
        return self.budget_s is not None and self.clock() - self.started > self.budget_s

    def left_s(self) -> float:
        """Seconds of the budget left (0 when spent; only with a budget)."""
        assert self.budget_s is not None
        return max(self.budget_s - (self.clock() - self.started), 0.0)


@dataclass(frozen=True)
class Rescan:
    """What one pass over the folder found."""

    seen: dict[Path, Scanned]  # every photo the library has now, in listing order
    pending: int  # photos new or changed, not scanned yet (the budget ran out)
    listed: bool  # False: the folder was away; the photos seen before are kept
    folder_problem: str  # why the folder was not listed


class PhotoFolder:
    """The faces folder (None: none) and the extra photos (``processing.source_face``)."""

    def __init__(self, folder: Path | None, extra_photos: tuple[Path, ...]) -> None:
        self.folder = folder
        self.extra_photos = extra_photos

    def listing(self, known: Iterable[Path]) -> tuple[list[Path], bool, str]:
        """(the photos, whether the faces folder was listed, the problem when it was not).

        A folder that is not listed keeps the ``known`` photos (those scanned before)."""
        found = list(self.extra_photos)
        folder = self.folder
        if folder is None:
            return found, True, ""
        kept = [p for p in known if p not in found]
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

    def read_names(
        self, stamp_before: tuple[int, int] | None, names_before: FaceNames
    ) -> tuple[tuple[int, int] | None, FaceNames]:
        """(stamp of faces.yaml, what it says); read again only when the stamp is not
        ``stamp_before`` (else ``names_before``)."""
        if self.folder is None:
            return None, ({}, [], "")
        try:
            st = (self.folder / NAMES_FILE).stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == stamp_before:
            return stamp, names_before
        return stamp, read_names(self.folder)

    def contents(self, scan: Rescan, names: FaceNames) -> tuple[tuple[FaceEntry, ...], tuple[str, ...]]:
        """The library's entries (named and ordered as ``faces.yaml`` says: the extra photos
        first, then the listed files, then the rest by file name) and its problems (sorted)."""
        by_file, order, names_problem = names
        problems: list[str] = []
        if scan.folder_problem:
            kept = sum(1 for p in scan.seen if p not in self.extra_photos)
            problems.append(
                scan.folder_problem + (f"; keeping the {kept} faces loaded before" if kept else "")
            )
        if names_problem:
            problems.append(names_problem)
        entries = []
        for path, found in scan.seen.items():
            if found.entry is None:
                problems.append(found.problem)
                continue
            name = by_file.get(path.name, shown(path.stem))
            entry = found.entry
            if entry.name != name:
                entry = entry.renamed(name)
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
        return tuple(entries), tuple(sorted(problems))


class FolderScan:
    """The rescan of a :class:`PhotoFolder`: owns the photo reader (its thread) and the scanner."""

    def __init__(self, folder: PhotoFolder, cache: LatentCache, similar_size_ratio: float) -> None:
        self.folder = folder
        self.scanner = PhotoScanner(cache, similar_size_ratio)

        def read(path: Path, stamp: tuple[int, int], model_digest: str) -> PhotoRead:
            return read_photo(path, stamp, model_digest, cache)

        self._reader = PhotoReader(read)

    def rescan(
        self,
        known: Iterable[Path],
        previous: Mapping[Path, Scanned],
        analyzer: FaceAnalyzer,
        model_digest: str,
        budget: ScanBudget,
    ) -> Rescan:
        """Bring ``previous`` (the last scan under these models) in step with the folder.
        ``known``: every photo scanned before, kept while the folder is away.

        The first new photo is always waited for and scanned, so every refresh makes progress; the
        reader is waited for (what is left of the budget, at least ``read_wait_s``, a photo) until
        the budget is spent, then the rest are only asked of the reader (read ahead while the next
        frames are processed) and counted as pending, a changed photo keeping its previous entry
        meanwhile."""
        pending = asked = 0  # photos new or changed not scanned yet; reads waited for
        photos, listed, folder_problem = self.folder.listing(known)
        seen: dict[Path, Scanned] = {}
        jobs: set[PhotoJob] = set()
        for path in photos:
            prev = previous.get(path)
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
            if asked and budget.spent():
                self._reader.get(job, 0)  # read ahead while the next frames are processed
                read = None
            else:
                # Waited for, a read at a time, while the budget lasts (the reader decodes the next
                # photo while this thread scans one: on a busy machine a decode takes longer than
                # read_wait_s, and giving up after one scanned two photos a frame); a read still
                # going when the budget is spent (a large photo) is decoded meanwhile, scanned later.
                wait = None if budget.budget_s is None else max(budget.read_wait_s, budget.left_s())
                read = self._reader.get(job, wait)
                asked += 1
            if read is None:
                pending += 1  # the next refresh scans it
                if prev is not None:
                    seen[path] = prev
                continue
            seen[path] = self.scanner.scan(path, stamp, read, analyzer)
        self._reader.keep_only(jobs)
        for path in set(previous) - set(seen):
            log.info("face photo removed: %s", shown(path.name))
        return Rescan(seen, pending, listed, folder_problem)
