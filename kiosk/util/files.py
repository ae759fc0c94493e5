"""Reading files that staff (or anyone with a USB stick) can put in the kiosk's folders.

Config files, face photos, model files and cache entries are read only when they are regular
files, and opened so that a FIFO, a socket or a device in their place can never block the
reader: the path is checked with ``stat`` (``S_ISREG``) before ``open``, opened with
``O_NONBLOCK`` (an ``open`` of a FIFO with no writer would wait forever), and checked again with
``fstat`` on the open descriptor (the path may have been swapped between the two). Every read is
bounded by a byte limit.

:func:`shown` turns any path (also one whose name is not valid UTF-8) into text that every log
handler and the on-screen font can write: undecodable bytes appear as ``\\xff``.

This module imports nothing of the kiosk.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: ``O_NONBLOCK`` where the platform has it (everywhere the kiosk runs); ``O_CLOEXEC`` likewise.
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


class NotRegularFileError(OSError):
    """The path is there but is not a regular file (a folder, FIFO, socket or device)."""


class FileTooLargeError(OSError):
    """The file holds more bytes than the reader accepts."""


def shown(path: str | os.PathLike[str] | bytes) -> str:
    """``path`` as printable text: undecodable bytes of its name as ``\\xNN`` escapes (never a
    lone surrogate, which a UTF-8 log file or the screen's font cannot write)."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def kind_of(mode: int) -> str:
    """A file type in words (``a FIFO``, ``a folder``...) for a one-line problem."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse(path: str | os.PathLike[str], mode: int) -> NotRegularFileError:
    what = kind_of(mode)
    return NotRegularFileError(f"{shown(path)} is {what}, not a regular file; replace it with a file")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (before and after the
    open: a FIFO or device is never opened in a way that can block). The caller closes it.

    Raises :class:`NotRegularFileError`, or the ``OSError`` of ``stat``/``open``."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st.st_mode)
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise _refuse(path, st.st_mode)
        if _FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # a regular file never blocks; plain reads from here on
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``.

    Raises :class:`NotRegularFileError` (a folder, FIFO, socket or device in its place: never
    blocks on it), :class:`FileTooLargeError` (more than ``max_bytes``), or the ``OSError`` of
    the ``stat``/``open``/``read`` (``FileNotFoundError``, ``PermissionError``...)."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb", buffering=0) as f:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise FileTooLargeError(f"{shown(path)} is {size} bytes, more than the {max_bytes} accepted")
        chunks: list[bytes] = []
        left = max_bytes + 1  # one more: a file that grew while being read is caught too
        while left > 0:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise FileTooLargeError(f"{shown(path)} grew past the {max_bytes} bytes accepted while being read")
    return data


def regular_file_kind(path: Path) -> str:
    """``""`` for a regular file (or nothing there at all); otherwise what is there, in words
    (``a FIFO (named pipe)``, ``a folder``...), symlinks followed."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return "" if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode)
