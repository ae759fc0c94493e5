"""What processing one frame cost, by named step (:class:`StageTimes`, filled lap by lap with a
:class:`Stopwatch`), and one frame's faces found ahead of the swap (:class:`Detection`, with what
finding them cost): the records the pipeline, the pipelined detector and ``kiosk bench`` share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kiosk.types import Face


@dataclass
class StageTimes:
    """Milliseconds spent per stage in the last :meth:`~kiosk.processing.pipeline.SwapPipeline.process` call (summed over faces).

    ``detect_ms`` includes the region detections and the tracker's update when tracking is on
    (``track_ms`` is the tracker's own share). ``session_ms`` is the time spent inside ONNX Runtime
    (``session.run``) over all models; ``total_ms`` the whole call, so ``total_ms - session_ms`` is
    the pipeline's own overhead. ``full_detection``: the full frame was searched this frame.
    """

    detect_ms: float = 0.0
    align_ms: float = 0.0
    swap_ms: float = 0.0
    enhance_ms: float = 0.0
    paste_ms: float = 0.0
    #: Building the per-face alpha (face shape, mouth, occlusion; 0 for the cached box) and
    #: asking the face parser for occlusion masks.
    mask_ms: float = 0.0
    #: Colour correction of the swapped crops.
    color_ms: float = 0.0
    faces: int = 0
    extra: dict[str, float] = field(default_factory=dict)
    track_ms: float = 0.0
    session_ms: float = 0.0
    total_ms: float = 0.0
    full_detection: bool = True


class Stopwatch:
    """Milliseconds since the last lap: ``times.swap_ms += watch.lap()`` names each step's timing."""

    def __init__(self) -> None:
        self._t = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        ms, self._t = (now - self._t) * 1e3, now
        return ms


@dataclass(frozen=True)
class Detection:
    """One frame's faces to swap (detected, tracked, chosen by the policy) and what finding them
    cost: :meth:`SwapPipeline.find_faces`, handed to :meth:`SwapPipeline.process_into` by a
    pipelined processor (:mod:`kiosk.processing.pipelined`)."""

    faces: list[Face]
    detect_ms: float = 0.0
    track_ms: float = 0.0
    session_ms: float = 0.0
    full_detection: bool = True
    #: Each face's track id (None without tracking): colour correction and per-visitor faces follow it.
    ids: tuple[int | None, ...] = ()
