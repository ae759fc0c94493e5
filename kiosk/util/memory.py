"""Freed heap memory handed back to the system, so a booth's resident memory stays flat all day.

glibc's ``malloc`` keeps what a program frees in its arenas (one per thread that allocates, up to
eight per core) to hand out again. The kiosk's threads free and allocate buffers of many sizes
(frames, crops, photo decodes, ONNX Runtime's per-call tensors, a fresh stage after a fault), so
the arenas fragment: free pieces pile up between live ones that ``malloc`` cannot reuse for the
next, larger request and does not return on its own. In a 13-minute fault soak in a real window
the memory in use stayed at 118 MB while the free memory held in the arenas crept from 17 to
23 MB, and with it the resident size (448 → 456 MB: 50 MB/h after the warm-up).

``malloc_trim(0)`` gives every free page of every arena back to the system (the top of each heap
and, since glibc 2.8, whole free pages in the middle), keeping what is in use. :class:`HeapTrimmer`
calls it now and then from the render loop (every 30 s: a call took 1.3 ms on average on the demo
booth, under the arenas' locks, so not once a frame). With it, the same soak side by side with one
without: 0.0 MB/h after warm-up (445 → 441 MB). Where the C library is not glibc (musl, macOS)
there is no ``malloc_trim`` and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

_UNSET: object = object()
_trim: Callable[[int], int] | None | object = _UNSET


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    global _trim
    if _trim is _UNSET:
        found: Callable[[int], int] | None = None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            fn = libc.malloc_trim
            fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            found = fn
        except (OSError, AttributeError):  # no glibc: musl, macOS
            found = None
        _trim = found
    return _trim  # type: ignore[return-value]


def trim_heap() -> bool:
    """Hand the heap's free pages back to the system now; True if any memory was released."""
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False


class HeapTrimmer:
    """:func:`trim_heap` at most every ``every_s`` seconds (0: never), called from a loop that runs
    anyway; counts the calls and their time (for the stats)."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._next = clock() + every_s
        self.calls = 0
        self.total_ms = 0.0

    @property
    def available(self) -> bool:
        return _malloc_trim() is not None

    def maybe_trim(self) -> bool:
        """Trim if it is due; True if it ran."""
        if self.every_s <= 0:
            return False
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self.every_s
        if not self.available:
            return False
        t0 = time.perf_counter()
        trim_heap()
        self.calls += 1
        self.total_ms += (time.perf_counter() - t0) * 1000.0
        return True
