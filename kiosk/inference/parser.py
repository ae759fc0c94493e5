"""Face parsing for the occlusion mask: which pixels of a face crop are face, and which are a hand,
a microphone, a cup, hair or background in front of or around it.

The model is BiSeNet trained on CelebAMask-HQ (19 classes, ``bisenet_resnet_34.onnx`` or
``_18``, as FaceFusion's face parser). It sees the face aligned exactly as the swapper's crop (the
128 template scaled to 512), RGB, ImageNet mean/std. :meth:`FaceParser.face_mask` returns a crop-
space mask for a swapper crop of any size: 1 on face, 0 on everything else, with a soft edge that
lies inside the face (an occluder's edge never gets swapped skin painted over it).

Which classes count as face (CelebAMask-HQ ids in the order of yakhyo/face-parsing's
``utils/prepare_labels.py``, background 0; the same ids as FaceFusion's region set): 1 skin, 2/3 brows, 4/5 eyes, 6 glasses, 10 nose,
11 inner mouth, 12/13 lips: what the swapper replaces. Glasses count as face because they sit over
the eyes: masking them out would show the visitor's own eyes through the lenses of the swapped
face (the swapper redraws glasses itself). Not face: 0 background (where a hand or an object in
front of the face is labelled), 7/8 ears and 9 earrings (outside the swapped region anyway), 14
neck, 15 necklace, 16 cloth (a scarf or a collar pulled up), 17 hair (a fringe over the forehead
stays the visitor's), 18 hat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import align_matrix
from kiosk.inference.crop_model import AlignedCropModel
from kiosk.inference.errors import ModelSignatureError
from kiosk.inference.specs import IMAGENET_MEAN, IMAGENET_STD, ModelSpec
from kiosk.types import Affine2x3, Face, FrameBGR

#: CelebAMask-HQ classes that are face (see the module docstring for why these).
FACE_CLASSES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 10, 11, 12, 13)
#: Number of CelebAMask-HQ classes the parser outputs.
N_CLASSES = 19
#: Width of the mask's soft edge, in pixels of a 128 crop (scaled with the crop): the mask rises
#: linearly from 0 on the last non-face pixel to 1 this far inside the face.
EDGE_RAMP_128 = 2.0


class FaceParser(AlignedCropModel):
    """``face_mask(frame_bgr, face, size_px)`` → (size_px, size_px) float32 in [0, 1], aligned like
    the swapper's crop of that size; 1 where the pixel is face. Not thread-safe (reused buffers)."""

    default_size_px = 512
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
        face_classes: tuple[int, ...] = FACE_CLASSES,
    ) -> None:
        super().__init__(session, spec, path, provider, iobinding=iobinding, device_id=device_id)
        out = session.get_outputs()[0]
        n_out = out.shape[1] if len(out.shape) == 4 else None
        if isinstance(n_out, int) and n_out != N_CLASSES:
            raise ModelSignatureError(
                f"{path}: the parser outputs {n_out} classes, expected {N_CLASSES} (CelebAMask-HQ) — "
                "is this a BiSeNet face parser for models.parser?"
            )
        mean = np.asarray(spec.channel_mean or IMAGENET_MEAN, np.float32)
        std = np.asarray(spec.channel_std or IMAGENET_STD, np.float32)
        # (x - mean) / std on 0..255 values as x * scale + offset, per RGB plane.
        self._scale = (1.0 / std).reshape(3, 1, 1).astype(np.float32)
        self._offset = (-mean / std).reshape(3, 1, 1).astype(np.float32)
        self.face_classes = tuple(sorted(set(face_classes)))
        self.other_classes = tuple(c for c in range(N_CLASSES) if c not in self.face_classes)
        s = self.size_px
        self._face_max = np.empty((s, s), np.float32)
        self._other_max = np.empty((s, s), np.float32)
        self._hard = np.empty((s, s), np.bool_)
        self._soft = np.empty((s, s), np.float32)
        self.matrix: Affine2x3 = np.eye(2, 3)

    def parse_logits(self, frame_bgr: FrameBGR, face: Face) -> NDArray[np.float32]:
        """The model's (19, 512, 512) class logits for ``face`` aligned as the swapper's 512 crop
        (valid until the next call); the frame→crop matrix is in :attr:`matrix`."""
        self.matrix = self._load_crop(frame_bgr, face.kps, rgb=True, mean=0.0, std=1.0)
        planes = self._blob[0]
        np.multiply(planes, self._scale, out=planes)
        np.add(planes, self._offset, out=planes)
        if self._feed is not self._blob:
            np.copyto(self._feed, self._blob, casting="same_kind")
        logits = self.runner.run({self.input_name: self._feed})[0]
        return np.asarray(logits[0], np.float32)

    def face_mask_512(self, frame_bgr: FrameBGR, face: Face) -> NDArray[np.bool_]:
        """The hard mask at the parser's 512 crop: True where the most likely class is a face class
        (valid until the next call)."""
        logits = self.parse_logits(frame_bgr, face)
        fmax, omax = self._face_max, self._other_max
        np.copyto(fmax, logits[self.face_classes[0]])
        for c in self.face_classes[1:]:
            np.maximum(fmax, logits[c], out=fmax)
        np.copyto(omax, logits[self.other_classes[0]])
        for c in self.other_classes[1:]:
            np.maximum(omax, logits[c], out=omax)
        np.greater(fmax, omax, out=self._hard)
        return self._hard

    def face_mask(self, frame_bgr: FrameBGR, face: Face, size_px: int) -> NDArray[np.float32]:
        """Crop-space mask (size_px, size_px) float32 in [0, 1] for the swapper's crop of ``size_px``
        of ``face`` in ``frame_bgr`` (the original camera frame, where the occluder is): 1 where the
        pixel is face, 0 on an occluder, background, hair or hat. The edge is a linear ramp
        ``EDGE_RAMP_128`` px of a 128 crop wide (scaled with the crop) lying inside the face, so
        no pixel of an occluder is covered and the edge does not alias. A new array."""
        if size_px <= 0 or size_px % 128 or size_px % 112 == 0:
            raise ValueError(f"face_mask: size_px must be a swapper crop size (128, 256, 512), got {size_px}")
        hard = self.face_mask_512(frame_bgr, face)
        s = self.size_px
        # Distance (px of the 512 crop) from each face pixel to the nearest non-face pixel; 0 on
        # non-face pixels. A linear ramp of it is the soft edge, entirely on the face side.
        dist = cv2.distanceTransform(hard.view(np.uint8), cv2.DIST_L2, 5)
        soft = self._soft
        np.multiply(dist, 128.0 / (EDGE_RAMP_128 * s), out=soft)
        np.minimum(soft, 1.0, out=soft)
        if size_px == s:
            return soft.copy()
        # The swapper's crop of size_px is this crop scaled by size_px/512 about the origin (both
        # templates scale with the crop): warp with exactly that matrix, so pixel positions agree
        # with cv2.warpAffine's convention. The ramp is 8 px wide at 512, so sampling it every
        # 4 px (a 128 crop) keeps it smooth.
        k = size_px / float(s)
        m = np.array([[k, 0.0, 0.0], [0.0, k, 0.0]])
        flags = cv2.INTER_LINEAR
        out = cv2.warpAffine(soft, m, (size_px, size_px), flags=flags, borderMode=cv2.BORDER_REPLICATE)
        return np.clip(np.asarray(out, np.float32), 0.0, 1.0)

    def crop_matrix(self, face: Face, size_px: int) -> Affine2x3:
        """The frame→crop matrix the mask of ``size_px`` is aligned to (the swapper's)."""
        return align_matrix(face.kps, self.spec.template or self.default_template, size_px)
