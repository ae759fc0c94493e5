"""Array aliases and the small immutable records that cross thread boundaries.

Pixels live in preallocated numpy arrays owned by triple-buffer slots; the records here
only carry metadata plus references to those arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: (H, W, 3) uint8, OpenCV channel order.
FrameBGR = NDArray[np.uint8]
#: (5, 2) float32 keypoints in pixels: left eye, right eye, nose, left mouth, right mouth.
Landmarks5 = NDArray[np.float32]
#: (512,) float32, L2-normalised ArcFace embedding.
Embedding = NDArray[np.float32]
#: (2, 3) float64/float32 affine matrix mapping frame pixels to crop pixels.
Affine2x3 = NDArray[np.float64]


@dataclass(frozen=True)
class Face:
    """One detected face in frame pixels."""

    box_xyxy: NDArray[np.float32]
    score: float
    kps: Landmarks5

    @property
    def area_px(self) -> float:
        """Area of the box in square pixels (0 for a degenerate box)."""
        b = self.box_xyxy
        return float(max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0))


@dataclass
class CapturedFrame:
    """A slot of the capture triple buffer. ``frame_bgr`` is reused between publications."""

    frame_bgr: FrameBGR
    seq: int = 0
    #: time.perf_counter() at which the frame was read from the source.
    t_capture: float = 0.0


@dataclass
class SwappedFace:
    """A swapped face crop, the affine that maps frame pixels to crop pixels, and the crop-space
    alpha it is blended with (:mod:`kiosk.inference.mask`; None: the default feathered square)."""

    crop_bgr: FrameBGR
    affine: Affine2x3
    face: Face
    #: (S, S) uint8, the crop's size: 255 = the swapped pixel, 0 = the visitor's. May be a shared
    #: read-only array (the face-independent box mask) or a buffer reused like ``crop_bgr``.
    alpha: NDArray[np.uint8] | None = None


@dataclass
class SwapResult:
    """A slot of the processing triple buffer: the composited frame and what it came from."""

    frame_bgr: FrameBGR
    seq: int = 0
    t_capture: float = 0.0
    t_processed: float = 0.0
    faces: list[SwappedFace] = field(default_factory=list)
    #: True when ``frame_bgr`` already has the faces pasted in (CPU); False: the renderer composites them.
    faces_pasted: bool = False
    #: Faces the detector saw in this frame; -1 when no detection ran (pass-through).
    faces_detected: int = -1
    #: Short human message from the processing stage (e.g. "models missing: run kiosk models fetch").
    notice: str = ""
    #: The face library key each of ``faces`` was swapped with (the carousel marks the faces on
    #: screen; ``processing.assign: per_visitor`` gives each visitor their own).
    face_keys: list[str] = field(default_factory=list)
