"""ArcFace embedder (insightface ``w600k_r50``): align to the 112 template, embed, L2-normalise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Embedding, FrameBGR, Landmarks5


class ArcFaceEmbedder:
    """``embed(frame_bgr, kps)`` → (512,) float32 unit vector."""

    def __init__(self, session: Any, spec: ModelSpec, path: str | Path, provider: str) -> None:
        check_signature(spec, session, path)
        self.session = session
        self.spec = spec
        self.provider = provider
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.output_name = session.get_outputs()[0].name
        self.size_px = int(spec.crop_size_px or 112)
        self._dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self._crop = np.zeros((self.size_px, self.size_px, 3), np.uint8)
        self._blob = np.zeros((1, 3, self.size_px, self.size_px), np.float32)

    def embed_raw(self, frame_bgr: FrameBGR, kps: Landmarks5) -> NDArray[np.float32]:
        """The model's raw (not normalised) output for the face at ``kps``."""
        m = align_matrix(kps, self.spec.template or "arcface_112", self.size_px)
        warp_crop(frame_bgr, m, self.size_px, out=self._crop)
        chw = self._crop.transpose(2, 0, 1)
        np.copyto(self._blob[0], chw[::-1] if self.spec.colour == "RGB" else chw, casting="unsafe")
        self._blob -= np.float32(self.spec.mean)
        self._blob *= np.float32(1.0 / self.spec.std)
        out = self.session.run(
            [self.output_name], {self.input_name: self._blob.astype(self._dtype, copy=False)}
        )
        return np.asarray(out[0], dtype=np.float32).reshape(-1)

    def embed(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Embedding:
        """L2-normalised embedding of the face at ``kps``."""
        e = self.embed_raw(frame_bgr, kps)
        n = float(np.linalg.norm(e))
        return (e / n if n > 0 else e).astype(np.float32)
