"""Face restoration (GFPGAN v1.4 at 512, GPEN-BFR at 256 or 512) on a crop aligned to the FFHQ
template scaled to the model's size, blended over the swapped face with ``processing.enhance_blend``.

The models share one contract: input [1,3,S,S] RGB ``(x/255 − 0.5)/0.5``, output [1,3,S,S] in
[−1, 1]; the spec (picked by file name) gives S, the template and the normalisation."""

from __future__ import annotations

import cv2
import numpy as np

from kiosk.inference.crop_model import AlignedCropModel
from kiosk.inference.kernels import planar_to_bgr
from kiosk.types import Affine2x3, FrameBGR, Landmarks5


class GfpganEnhancer(AlignedCropModel):
    """``enhance(frame_bgr, kps, blend)`` → (SxS BGR crop, frame→crop matrix); S from the spec
    (512 for GFPGAN, 256/512 for GPEN-BFR)."""

    default_size_px = 512
    default_template = "ffhq_512"

    def enhance(
        self, frame_bgr: FrameBGR, kps: Landmarks5, blend: float = 1.0, out: FrameBGR | None = None
    ) -> tuple[FrameBGR, Affine2x3]:
        """Restored face as an SxS BGR crop (into ``out`` when given) and the frame→crop matrix.
        ``blend`` < 1 mixes the restored crop with the aligned input (the swapped face) at that
        strength: 0 returns the input crop unchanged."""
        m = self._load_crop(frame_bgr, kps, rgb=True, mean=self.spec.mean, std=self.spec.std)
        pred = self.runner.run({self.input_name: self._feed})[0]
        if out is None:
            out = np.empty((self.size_px, self.size_px, 3), np.uint8)
        # (x + 1) * 127.5, clipped and rounded, RGB planes → BGR, in one pass.
        planar_to_bgr(np.asarray(pred[0], np.float32), out, add=1.0, mul=127.5, rounding=True)
        if blend < 1.0:
            cv2.addWeighted(out, float(blend), self._crop, 1.0 - float(blend), 0.0, dst=out)
        return out, m
