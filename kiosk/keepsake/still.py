"""The keepsake's picture: the swapped still of the frame on screen, at the camera's resolution.

The render loop only copies what it shows (:meth:`Picture.copy_of`: the frame and, when the screen
composites them on the GPU, the swapped crops with their affines and masks: a few milliseconds,
no pixel work); :func:`composite` pastes the crops on the CPU with the same paste-back as the
processing stage (:mod:`kiosk.inference.paste`, whose mask is the composite shader's) and
:func:`encode_jpeg` encodes it, both on the keepsake flow's worker thread. The enhancer, when it
is on, has already produced the crops the screen shows, so the still carries it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from kiosk.types import FrameBGR, SwappedFace

#: JPEG quality of a keepsake (a 1280x720 swapped still: about 150-250 kB).
JPEG_QUALITY = 90


@dataclass(frozen=True)
class Picture:
    """A private copy of the picture on screen: the frame, and the faces still to paste on it
    (empty when the frame already has them, a CPU composite)."""

    frame_bgr: FrameBGR
    faces: tuple[SwappedFace, ...] = ()

    @classmethod
    def copy_of(cls, frame_bgr: FrameBGR, faces: Sequence[SwappedFace] | None = None) -> Picture:
        """Copy ``frame_bgr`` and ``faces`` (their arrays belong to a triple-buffer slot that the
        next read hands back to its writer)."""
        copies = tuple(
            SwappedFace(
                crop_bgr=f.crop_bgr.copy(),
                affine=np.array(f.affine, np.float64),
                face=f.face,
                alpha=None if f.alpha is None else f.alpha.copy(),
            )
            for f in faces or ()
        )
        return cls(np.array(frame_bgr, np.uint8, copy=True), copies)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return int(self.frame_bgr.shape[1]), int(self.frame_bgr.shape[0])


def composite(picture: Picture) -> FrameBGR:
    """The still: the picture's frame with its faces pasted (in place on the private copy)."""
    if picture.faces:
        from kiosk.inference.paste import PasteBack  # numba kernels: imported on the worker thread

        paste = PasteBack()
        for f in picture.faces:
            paste.paste(picture.frame_bgr, f.crop_bgr, f.affine, f.alpha)
    return picture.frame_bgr


def encode_jpeg(bgr: FrameBGR, quality: int = JPEG_QUALITY) -> bytes:
    """``bgr`` as JPEG bytes; OSError when OpenCV cannot encode it."""
    ok, data = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise OSError("JPEG encoding of the keepsake failed")
    return bytes(data.tobytes())
