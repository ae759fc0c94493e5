"""The X server going away (TERM or KILL of Xorg/Xvfb, a crashed session): a clean, reported exit.

Xlib's default IO error handler prints "XIO: fatal IO error" and calls ``exit(1)`` from inside
whatever X call noticed (glfw's event poll, the buffer swap): no log line, no ``STOPPING=1``, the
metrics file still says ``faceswap_kiosk_up 1``, and the C exit runs ONNX Runtime's destructors
under a thread still inside a model call (a traceback, or the abort of status 134).

:func:`install` sets our own handler on the process's libX11 (``XSetIOErrorHandler`` through
ctypes; glfw loads the same ``libX11.so.6``). Xlib allows the handler no return to the caller, so
it runs the kiosk's last words (:func:`on_lost`: one log line, ``STOPPING=1``, the metrics file
with ``up 0``, the stats file) and leaves the process with :data:`EXIT_DISPLAY_LOST`, non-zero so
systemd restarts the kiosk (its session waits for the display to come back).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

from kiosk.appliance.exit import EXIT_DISPLAY_LOST, leave

log = logging.getLogger(__name__)

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_installed: object = None  # the ctypes callback: must outlive every X call
_last_words: Callable[[str], None] | None = None


def on_lost(callback: Callable[[str], None] | None) -> None:
    """``callback(display)`` runs once when the X connection is lost, then the process exits with
    :data:`EXIT_DISPLAY_LOST`. None (no kiosk running): one log line, then Xlib's own ``exit(1)``."""
    global _last_words
    _last_words = callback


def _handle(_display: int | None) -> int:
    name = os.environ.get("DISPLAY", "?")
    last_words = _last_words
    if last_words is None:  # no kiosk running (before or after its run): Xlib exits as it always did
        log.error("display %s went away (the X server closed the connection)", name)
        return 0
    try:
        last_words(name)
    except BaseException:  # noqa: BLE001 — nothing may stop the exit below
        log.exception("while reporting the lost display")
    leave(EXIT_DISPLAY_LOST)


def install() -> bool:
    """Set the handler (once per process) on libX11; False where there is no libX11 (Wayland only,
    macOS, Windows)."""
    global _installed
    if _installed is not None:
        return True
    lib = None
    for name in ("libX11.so.6", ctypes.util.find_library("X11")):
        if name:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
    if lib is None:
        return False
    callback = _HANDLER(_handle)
    lib.XSetIOErrorHandler.restype = ctypes.c_void_p
    lib.XSetIOErrorHandler.argtypes = [_HANDLER]
    lib.XSetIOErrorHandler(callback)
    _installed = callback
    return True
