"""Leaving the process cleanly whatever threads are stuck in native code.

A thread inside ONNX Runtime (an abandoned hung call, a model still loading) cannot be joined or
interrupted. A normal interpreter exit then destroys ONNX Runtime's C++ thread pools while that
thread still uses them: ``terminate called without an active exception``, SIGABRT, exit status
134 and a core dump under systemd, instead of the status the kiosk chose (0 on SIGTERM, 3 for
the recovery exit, 4 when the display went away). So once the kiosk has flushed what must reach
the disk (logs, the metrics file with ``faceswap_kiosk_up 0``, the stats file, screenshots), it
leaves with :func:`leave`: ``os._exit``, no interpreter teardown, no C++ static destructors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from typing import NoReturn

#: Exit statuses of ``kiosk run`` (systemd's ``Restart=always`` restarts every one but 0 and 2 by
#: operator choice; see docs/operations.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_RECOVERY = 3  # processing did not recover (also: the display could not be opened)
EXIT_DISPLAY_LOST = 4  # the X server went away while running
EXIT_LOCKED = 5  # another kiosk runs on this booth's config


def other_threads() -> list[threading.Thread]:
    """Python threads still alive besides the calling one (any may be inside native code)."""
    me = threading.current_thread()
    return [t for t in threading.enumerate() if t is not me and t.is_alive()]


def flush() -> None:
    """Write out every log handler and the standard streams (never raises)."""
    for handler in list(logging.getLogger().handlers):
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def leave(status: int) -> NoReturn:
    """Flush the logs and standard streams and end the process now with ``status``, without the
    interpreter's teardown (which aborts while a thread is inside ONNX Runtime)."""
    flush()
    with contextlib.suppress(Exception):
        logging.shutdown()
    os._exit(status)
