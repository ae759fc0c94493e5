"""GFPGAN v1.4 face restoration on a 512 crop aligned to the FFHQ template, with blend strength."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.kernels import hwc_to_planar, planar_to_bgr
from kiosk.inference.sessions import SessionRunner
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Affine2x3, FrameBGR, Landmarks5


class GfpganEnhancer:
    """``enhance(frame_bgr, kps, blend)`` → (512x512 BGR crop, frame→crop matrix)."""

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
        self.size_px = int(spec.crop_size_px or 512)
        self._crop = np.zeros((self.size_px, self.size_px, 3), np.uint8)
        self._blob = np.zeros((1, 3, self.size_px, self.size_px), np.float32)
        self._feed = self._blob if self._dtype == np.float32 else self._blob.astype(self._dtype)

    def enhance(
        self, frame_bgr: FrameBGR, kps: Landmarks5, blend: float = 1.0, out: FrameBGR | None = None
    ) -> tuple[FrameBGR, Affine2x3]:
        """Restored face as a 512x512 BGR crop (into ``out`` when given) and the frame→crop matrix."""
        m = align_matrix(kps, self.spec.template or "ffhq_512", self.size_px)
        warp_crop(frame_bgr, m, self.size_px, out=self._crop)
        spec = self.spec
        hwc_to_planar(self._crop, self._blob[0], rgb=True, mean=spec.mean, std=spec.std)
        if self._feed is not self._blob:
            np.copyto(self._feed, self._blob, casting="same_kind")
        pred = self.runner.run({self.input_name: self._feed})[0]
        if out is None:
            out = np.empty((self.size_px, self.size_px, 3), np.uint8)
        # (x + 1) * 127.5, clipped and rounded, RGB planes → BGR, in one pass.
        planar_to_bgr(np.asarray(pred[0], np.float32), out, add=1.0, mul=127.5, rounding=True)
        if blend < 1.0:
            cv2.addWeighted(out, float(blend), self._crop, 1.0 - float(blend), 0.0, dst=out)
        return out, m

    def warm_up(self) -> float:
        """One run on zeros; the milliseconds it took."""
        self._feed.fill(0)
        return self.runner.warm_up({self.input_name: self._feed})
