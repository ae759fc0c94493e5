"""GFPGAN v1.4 face restoration on a 512 crop aligned to the FFHQ template, with blend strength."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Affine2x3, FrameBGR, Landmarks5


class GfpganEnhancer:
    """``enhance(frame_bgr, kps, blend)`` → (512x512 BGR crop, frame→crop matrix)."""

    def __init__(self, session: Any, spec: ModelSpec, path: str | Path, provider: str) -> None:
        check_signature(spec, session, path)
        self.session = session
        self.spec = spec
        self.provider = provider
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        self.output_name = session.get_outputs()[0].name
        self._dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        self.size_px = int(spec.crop_size_px or 512)
        self._crop = np.zeros((self.size_px, self.size_px, 3), np.uint8)
        self._blob = np.zeros((1, 3, self.size_px, self.size_px), np.float32)

    def enhance(self, frame_bgr: FrameBGR, kps: Landmarks5, blend: float = 1.0) -> tuple[FrameBGR, Affine2x3]:
        m = align_matrix(kps, self.spec.template or "ffhq_512", self.size_px)
        warp_crop(frame_bgr, m, self.size_px, out=self._crop)
        np.copyto(self._blob[0], self._crop.transpose(2, 0, 1)[::-1], casting="unsafe")
        self._blob -= np.float32(self.spec.mean)
        self._blob *= np.float32(1.0 / self.spec.std)
        pred = self.session.run(
            [self.output_name], {self.input_name: self._blob.astype(self._dtype, copy=False)}
        )[0]
        rgb = np.asarray(pred, np.float32)[0].transpose(1, 2, 0)
        out = np.clip((rgb + 1.0) * 127.5, 0, 255)
        bgr = np.ascontiguousarray(np.rint(out[:, :, ::-1]).astype(np.uint8))
        if blend < 1.0:
            bgr = cv2.addWeighted(bgr, float(blend), self._crop, 1.0 - float(blend), 0.0)
        return bgr, m
