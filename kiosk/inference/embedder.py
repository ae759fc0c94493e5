"""ArcFace embedder (insightface ``w600k_r50``): align to the 112 template, embed, L2-normalise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.kernels import hwc_to_planar
from kiosk.inference.sessions import SessionRunner
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Embedding, FrameBGR, Landmarks5


class ArcFaceEmbedder:
    """``embed(frame_bgr, kps)`` → (512,) float32 unit vector."""

    def __init__(
        self,
        session: Any,
        spec: ModelSpec,
        path: str | Path,
        provider: str,
        *,
        iobinding: bool = True,
        device_id: int = 0,
    ) -> None:
        check_signature(spec, session, path)
        self.session = session
        self.spec = spec
        self.provider = provider
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.output_name = session.get_outputs()[0].name
        self.runner = SessionRunner(
            session, provider, iobinding=iobinding, device_id=device_id, output_names=[self.output_name]
        )
        self.size_px = int(spec.crop_size_px or 112)
        self._dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self._crop = np.zeros((self.size_px, self.size_px, 3), np.uint8)
        self._blob = np.zeros((1, 3, self.size_px, self.size_px), np.float32)
        self._feed = self._blob if self._dtype == np.float32 else self._blob.astype(self._dtype)

    def embed_raw(self, frame_bgr: FrameBGR, kps: Landmarks5) -> NDArray[np.float32]:
        """The model's raw (not normalised) output for the face at ``kps`` (a new array)."""
        m = align_matrix(kps, self.spec.template or "arcface_112", self.size_px)
        warp_crop(frame_bgr, m, self.size_px, out=self._crop)
        spec = self.spec
        hwc_to_planar(self._crop, self._blob[0], rgb=spec.colour == "RGB", mean=spec.mean, std=spec.std)
        if self._feed is not self._blob:
            np.copyto(self._feed, self._blob, casting="same_kind")
        out = self.runner.run({self.input_name: self._feed})
        return np.array(out[0], dtype=np.float32).reshape(-1)

    def warm_up(self) -> float:
        """One run on zeros; the milliseconds it took."""
        self._feed.fill(0)
        return self.runner.warm_up({self.input_name: self._feed})

    def embed(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Embedding:
        """L2-normalised embedding of the face at ``kps``."""
        e = self.embed_raw(frame_bgr, kps)
        n = float(np.linalg.norm(e))
        return (e / n if n > 0 else e).astype(np.float32)
