"""InSwapper 128: the target face aligned to the 128 template + the source latent → the swapped crop.

``emap`` is read from the model's last initializer (as insightface does); a source's latent
``normalise(e @ emap)`` is computed once per source embedding and cached by the caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import numpy_helper

from kiosk.inference.crop_model import AlignedCropModel
from kiosk.inference.errors import ModelCorruptError, ModelSignatureError
from kiosk.inference.kernels import planar_to_bgr
from kiosk.inference.specs import ModelSpec
from kiosk.types import Affine2x3, Embedding, FrameBGR, Landmarks5


def load_emap(path: str | Path) -> NDArray[np.float32]:
    """The swapper's ``emap``: the last initializer of the graph, 512x512."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelCorruptError(
            f"{path}: cannot read the ONNX graph ({exc}) — run: kiosk models fetch"
        ) from None
    if not model.graph.initializer:
        raise ModelSignatureError(
            f"{path}: swapper has no initializers, so no emap (expected emap 512x512 last)"
        )
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.shape != (512, 512):
        raise ModelSignatureError(
            f"{path}: the last initializer (emap) must be 512x512, got {emap.shape} — is this inswapper_128?"
        )
    return emap


class InSwapper(AlignedCropModel):
    """``swap(frame_bgr, kps, latent)`` → (128x128 BGR crop, frame→crop 2x3 matrix)."""

    default_size_px = 128
    default_template = "arcface_128"

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
        super().__init__(session, spec, path, provider, iobinding=iobinding, device_id=device_id)
        self.emap = load_emap(path)
        self.target_name = self.input_name
        self.source_name = session.get_inputs()[1].name
        self._latent_of: NDArray[np.float32] | None = None
        self._latent_feed = np.zeros((1, 512), self._dtype)

    def latent(self, embedding: Embedding) -> NDArray[np.float32]:
        """Source latent (1, 512): ``e @ emap`` normalised, ``e`` the unit source embedding."""
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        lat = e @ self.emap
        lat /= np.linalg.norm(lat)
        return lat.astype(np.float32)

    def align(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Affine2x3:
        """Warp the target face into the reused 128 crop and input blob; return the frame→crop matrix."""
        return self._load_crop(frame_bgr, kps, rgb=True, mean=0.0, std=self.spec.std)

    def infer(self, latent: NDArray[np.float32]) -> NDArray[np.float32]:
        """Run the model on the aligned blob: (1,3,128,128) RGB in [0,1]. With IOBinding the array
        is the runner's reused output buffer: valid until the next call."""
        if latent is not self._latent_of:  # a new source face: copy it into the bound input once
            np.copyto(self._latent_feed, np.asarray(latent).reshape(1, -1), casting="same_kind")
            self._latent_of = latent
        feeds = {self.target_name: self._feed, self.source_name: self._latent_feed}
        out = self.runner.run(feeds)[0]
        return out if out.dtype == np.float32 else out.astype(np.float32)

    def warm_up(self) -> float:
        """One run on zeros (captures the CUDA graph when enabled); the milliseconds it took."""
        self._feed.fill(0)
        self._latent_of = None
        self._latent_feed.fill(0)
        return self.runner.warm_up({self.target_name: self._feed, self.source_name: self._latent_feed})

    @staticmethod
    def to_bgr(pred: NDArray[np.float32], out: FrameBGR | None = None) -> FrameBGR:
        """Model output → a 128x128 BGR uint8 crop (insightface's clip-and-truncate), into ``out``
        when given (one fused pass), else a new array."""
        if out is None:
            out = np.empty((pred.shape[2], pred.shape[3], 3), np.uint8)
        return planar_to_bgr(np.asarray(pred[0], np.float32), out, add=0.0, mul=255.0)

    def swap_raw(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], Affine2x3]:
        """Raw model output (1,3,128,128) RGB in [0,1] (a new array) and the frame→crop matrix."""
        m = self.align(frame_bgr, kps)
        return np.array(self.infer(latent), np.float32), m

    def swap(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32]
    ) -> tuple[FrameBGR, Affine2x3]:
        """Swapped face as a new 128x128 BGR uint8 crop, and the frame→crop matrix."""
        m = self.align(frame_bgr, kps)
        return self.to_bgr(self.infer(latent)), m
