"""The pluggable processing stage run by the inference thread.

A :class:`Processor` turns the newest captured frame into a :class:`~kiosk.types.SwapResult`
slot. The runtime owns threads and buffers; a processor owns only its models and scratch memory.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from kiosk.types import FrameBGR, SwapResult


class Processor(Protocol):
    """What the inference thread calls once per new frame."""

    #: Human-readable name shown in the debug overlay (e.g. "passthrough", "swap (CPU)").
    name: str

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        """Write the result for ``frame_bgr`` into ``out`` (its ``frame_bgr`` array is preallocated
        with the input's shape; ``faces`` and ``notice`` are to be filled). Must not keep
        references to ``frame_bgr`` after returning."""
        ...


class PassThrough:
    """Shows the camera unchanged, with an optional notice (e.g. why swapping is off)."""

    def __init__(self, notice: str = "") -> None:
        self.name = "passthrough"
        self.notice = notice

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        np.copyto(out.frame_bgr, frame_bgr)
        out.faces.clear()
        out.face_keys.clear()
        out.faces_detected = -1
        out.notice = self.notice


class StageUnavailable(Exception):
    """A processing stage that cannot be built now (a model file missing or corrupt).

    ``notice`` is the one line shown to staff; ``watch`` lists the files whose change (mtime,
    size or inode) makes the inference thread retry at once instead of waiting for its back-off.
    """

    def __init__(self, notice: str, watch: tuple[str, ...] = ()) -> None:
        super().__init__(notice)
        self.notice = notice
        self.watch = watch
