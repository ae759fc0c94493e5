"""What the models fed one aligned face crop share: the embedder, the swapper and the enhancer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.kernels import hwc_to_planar
from kiosk.inference.sessions import SessionRunner
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Affine2x3, FrameBGR, Landmarks5


class AlignedCropModel:
    """Checks the session against ``spec``, binds its first input and output, and owns the reused
    crop, float blob and feed (fp16 copy for fp16 models) of the first input."""

    #: Crop size and alignment template when the spec does not name them.
    default_size_px = 112
    default_template = "arcface_112"

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
        self._dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self.size_px = int(spec.crop_size_px or self.default_size_px)
        self._crop = np.zeros((self.size_px, self.size_px, 3), np.uint8)
        self._blob = np.zeros((1, 3, self.size_px, self.size_px), np.float32)
        self._feed = self._blob if self._dtype == np.float32 else self._blob.astype(self._dtype)

    @property
    def aligned_crop(self) -> FrameBGR:
        """The last aligned input crop (BGR uint8, ``size_px`` square); overwritten by the next call."""
        return self._crop

    def _load_crop(
        self, frame_bgr: FrameBGR, kps: Landmarks5, *, rgb: bool, mean: float, std: float
    ) -> Affine2x3:
        """Align the face at ``kps`` into the reused crop and input blob; the frame→crop matrix."""
        m = align_matrix(kps, self.spec.template or self.default_template, self.size_px)
        warp_crop(frame_bgr, m, self.size_px, out=self._crop)
        hwc_to_planar(self._crop, self._blob[0], rgb=rgb, mean=mean, std=std)
        if self._feed is not self._blob:
            np.copyto(self._feed, self._blob, casting="same_kind")
        return m

    def warm_up(self) -> float:
        """One run on zeros; the milliseconds it took."""
        self._feed.fill(0)
        return self.runner.warm_up({self.input_name: self._feed})
