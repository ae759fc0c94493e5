"""The heap handed back to the system (:mod:`kiosk.util.memory`; the render loop's cadence is in
test_render_loop): without glibc nothing happens, and on glibc a trim really gives back free
memory that ``malloc`` kept (the resident size of this process drops)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from kiosk.util import memory
from kiosk.util.memory import trim_heap


def test_without_malloc_trim_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert not trim_heap()


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or memory._malloc_trim() is None, reason="needs glibc"
)
def test_a_trim_gives_back_fragmented_free_heap_memory() -> None:
    """Many small blocks below malloc's mmap threshold, every other one freed: the free half sits
    between live blocks, where malloc keeps it; a trim hands its whole pages back."""
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = []
    for _ in range(20_000):
        p = libc.malloc(16 * 1024)  # 320 MB in all: far over whatever the heap held free before
        ctypes.memset(p, 1, 16 * 1024)  # touched: resident
        blocks.append(p)
    try:
        for p in blocks[::2]:
            libc.free(p)
        before = _rss_kb()
        trim_heap()
        after = _rss_kb()
        assert before - after > 100 * 1024, f"RSS {before // 1024} MB -> {after // 1024} MB after the trim"
    finally:
        for p in blocks[1::2]:
            libc.free(p)
