"""One kiosk per booth: ``kiosk run`` holds an exclusive lock on its config file while it runs.

An autostart script and a technician's manual start on one config would fight over the camera
and rewrite the same metrics file. The lock is ``flock(LOCK_EX | LOCK_NB)`` on the config file
itself, opened read-only (the kiosk user may not write ``/etc/faceswap-kiosk``): it is released by
the kernel whenever the process ends, however it ends (a crash or SIGKILL leaves no stale lock
file behind). The second kiosk refuses in one line naming the first one's pid, read from
``/proc/locks``. Only ``kiosk run`` locks: ``kiosk swap``, ``detect``, ``doctor``, ``config`` and the
others read the same config beside a running kiosk.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from kiosk.config import KioskConfig


class BoothLocked(RuntimeError):
    """Another kiosk holds this config's lock; ``str()`` is the one-line refusal."""


def holder_pid(fd: int) -> int | None:
    """The pid holding a flock on the file open as ``fd`` (from /proc/locks), None if unknown."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiting lock has "->" after "1:")
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == inode:
            with contextlib.suppress(ValueError):
                return int(parts[4])
    return None


class BoothLock:
    """The lock of one running kiosk (see the module docstring)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, cfg: KioskConfig, config_path: Path) -> BoothLock:
        """Take the lock on ``config_path``; :class:`BoothLocked` if another kiosk holds it. A config
        that cannot be opened again (it was read a moment ago) is not locked."""
        del cfg  # the config file is the booth's identity
        path = config_path.resolve()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
        except OSError:
            return cls(path, None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = holder_pid(fd)
            os.close(fd)
            who = f"pid {pid}" if pid is not None else "another process"
            raise BoothLocked(
                f"another kiosk ({who}) is already running on {path}: not starting a second one "
                "(stop it first: sudo systemctl stop faceswap-kiosk, or kill "
                + (str(pid) if pid else "it")
                + ")"
            ) from None
        except OSError:  # a file system without locks: run unlocked
            os.close(fd)
            return cls(path, None)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
