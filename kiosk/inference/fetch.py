"""Model files on disk: status (present, SHA-256 verified), and fetching with resume.

``fetch_model`` downloads into ``<file>.part`` (resuming with an HTTP Range request), shows a
progress bar on stderr, checks the SHA-256 against the spec and only then renames the file into
place (``os.replace``, atomic). A source may be the spec's public URLs, a mirror base URL
(``http://lan-box:8000/models/`` + file name) or a folder (e.g. a USB stick).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kiosk.inference.specs import ModelSpec

CHUNK = 1 << 20


class FetchError(Exception):
    """A model could not be fetched; the message is one line naming the file and the cause.
    ``no_network``: no source could even be reached (no route, DNS, refused, timed out)."""

    def __init__(self, message: str, *, no_network: bool = False) -> None:
        super().__init__(message)
        self.no_network = no_network


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class ModelStatus:
    role: str
    spec: ModelSpec
    path: Path
    present: bool
    #: True: hash matches a published one; False: it does not; None: not checked or no published hash.
    verified: bool | None
    size_bytes: int | None
    sha256: str | None = None

    @property
    def state(self) -> str:
        if not self.present:
            return "missing"
        if self.verified is True:
            return "ok"
        if self.verified is False:
            return "CORRUPT (sha256 mismatch)"
        return "unverified (no published sha256)"


def check_file(role: str, spec: ModelSpec, path: Path, hash_it: bool = True) -> ModelStatus:
    """Status of one model file; hashing reads the whole file."""
    if not path.is_file():
        return ModelStatus(role, spec, path, False, None, None)
    size = path.stat().st_size
    if not hash_it:
        return ModelStatus(role, spec, path, True, None, size)
    digest = file_sha256(path)
    verified = (digest in spec.known_hashes) if spec.known_hashes else None
    return ModelStatus(role, spec, path, True, verified, size, digest)


class _Progress:
    """A one-line progress bar on stderr (only redrawn a few times per second)."""

    def __init__(self, name: str, total: int | None, done: int = 0, stream: IO[str] | None = None) -> None:
        self.name, self.total, self.done = name, total, done
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.start_done = done
        self._last = 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= 0.2:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = (self.done - self.start_done) / max(now - self.start, 1e-6) / 1e6
        mb = self.done / 1e6
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"\r  {self.name} [{bar:<30}] {frac * 100:5.1f}% {mb:8.1f}/{self.total / 1e6:.1f} MB {rate:6.1f} MB/s"
        else:
            text = f"\r  {self.name} {mb:8.1f} MB {rate:6.1f} MB/s"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        self._draw(time.monotonic())
        self.stream.write("\n")
        self.stream.flush()


def _is_url(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in ("http", "https", "file")


def _download(url: str, part: Path, name: str, expected_size: int | None, show: bool) -> None:
    """Download ``url`` into ``part``, resuming from what ``part`` already holds."""
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "faceswap-kiosk"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to fetch: the .part is complete
            return
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        network = urllib.parse.urlparse(url).scheme in ("http", "https")
        raise FetchError(f"{url}: cannot connect ({reason})", no_network=network) from None
    with resp:
        status = getattr(resp, "status", 200)
        if have and status != 206:
            have = 0  # server ignored the Range header: start again
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else expected_size
        bar = _Progress(name, total, have) if show else None
        try:
            with open(part, "ab" if have else "wb") as out:
                while True:
                    block = resp.read(CHUNK)
                    if not block:
                        break
                    out.write(block)
                    if bar:
                        bar.update(len(block))
        except (OSError, urllib.error.URLError) as exc:
            raise FetchError(
                f"{url}: download interrupted ({exc}); run the command again to resume"
            ) from None
        finally:
            if bar:
                bar.close()


def _copy(src: Path, part: Path, name: str, show: bool) -> None:
    if not src.is_file():
        raise FetchError(f"{src}: not found in the folder given with --from")
    total = src.stat().st_size
    bar = _Progress(name, total) if show else None
    with open(src, "rb") as fin, open(part, "wb") as fout:
        while True:
            block = fin.read(CHUNK)
            if not block:
                break
            fout.write(block)
            if bar:
                bar.update(len(block))
    if bar:
        bar.close()
    shutil.copystat(src, part, follow_symlinks=True)


def fetch_model(
    spec: ModelSpec,
    dest: Path,
    source: str | None = None,
    show_progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> str:
    """Put ``spec``'s file at ``dest``. Returns "present", "fetched" or "fetched (unverified)".

    ``source``: None (the spec's public URLs), a mirror base URL or a folder. Raises
    :class:`FetchError` with a one-line message when no source gives a good file."""
    say = log or (lambda _msg: None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_file() and spec.known_hashes and file_sha256(dest) in spec.known_hashes:
        return "present"
    part = dest.with_name(dest.name + ".part")
    if source is not None:
        # The name the config uses first, then the spec's (a model published under two names).
        names = list(dict.fromkeys((dest.name, spec.file)))
        if _is_url(source):
            candidates = [urllib.parse.urljoin(source.rstrip("/") + "/", n) for n in names]
        else:
            candidates = [str(Path(source).expanduser() / n) for n in names]
    else:
        candidates = list(spec.urls)
    if not candidates:
        raise FetchError(
            f"{spec.file}: no public URL is known for this file — copy it into {dest.parent} "
            "or use --from FOLDER_OR_MIRROR_URL"
        )
    errors: list[str] = []
    unreached = 0  # sources that could not be reached at all
    for cand in candidates:
        try:
            if _is_url(cand):
                say(f"{spec.file}: downloading {cand}")
                _download(cand, part, spec.file, spec.size_bytes, show_progress)
            else:
                say(f"{spec.file}: copying {cand}")
                _copy(Path(cand), part, spec.file, show_progress)
        except FetchError as exc:
            errors.append(str(exc))
            unreached += exc.no_network
            continue
        digest = file_sha256(part)
        if spec.known_hashes and digest not in spec.known_hashes:
            part.unlink(missing_ok=True)
            errors.append(f"{cand}: sha256 mismatch (got {digest}, expected {spec.sha256})")
            continue
        os.replace(part, dest)
        return "fetched" if spec.known_hashes else "fetched (unverified: no published sha256)"
    raise FetchError(f"{spec.file}: " + "; ".join(errors), no_network=unreached == len(candidates))
