"""ArcFace embedder (insightface ``w600k_r50``): align to the 112 template, embed, L2-normalise."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.crop_model import AlignedCropModel
from kiosk.types import Embedding, FrameBGR, Landmarks5


class ArcFaceEmbedder(AlignedCropModel):
    """``embed(frame_bgr, kps)`` → (512,) float32 unit vector."""

    default_size_px = 112
    default_template = "arcface_112"

    def embed_raw(self, frame_bgr: FrameBGR, kps: Landmarks5) -> NDArray[np.float32]:
        """The model's raw (not normalised) output for the face at ``kps`` (a new array)."""
        spec = self.spec
        self._load_crop(frame_bgr, kps, rgb=spec.colour == "RGB", mean=spec.mean, std=spec.std)
        out = self.runner.run({self.input_name: self._feed})
        return np.array(out[0], dtype=np.float32).reshape(-1)

    def embed(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Embedding:
        """L2-normalised embedding of the face at ``kps``."""
        e = self.embed_raw(frame_bgr, kps)
        n = float(np.linalg.norm(e))
        return (e / n if n > 0 else e).astype(np.float32)
