"""One atomic file write: a reader sees the old file or the new one, never a part of either."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(
    path: Path, data: bytes | str, *, mode: int = 0o644, fsync: bool = False, make_folder: bool = True
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) through a temporary file in the same
    folder (a rename across file systems is not atomic) and ``os.replace``.

    The temporary name starts with a dot and ends in ``.tmp``, so a collector of ``*.prom`` or a
    scan of ``*.jpg`` never picks it up half-written. ``mode`` is the new file's permission bits;
    ``fsync`` flushes the data to the disk before the rename (for files that must survive a power
    cut, such as caches). The folder is created when missing unless ``make_folder`` is false (then a
    missing folder is an error); on any error the temporary file is removed and the error raised."""
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
