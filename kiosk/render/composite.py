"""Face crops for the GPU paste-back in ``shaders/frame.frag``.

The processing thread publishes, per face, the swapped (or enhanced) crop, its 2x3 frame→crop
affine and its crop-space alpha (:class:`~kiosk.types.SwappedFace`, alpha from
:mod:`kiosk.inference.mask`; None: the default feathered square). Here crop and alpha go into one
RGBA 2D texture array (one layer per face, each crop at its layer's top-left, BGR bytes read as
RGB by the swizzle, the mask in alpha) and the affines into uniform arrays; the frame shader maps
each frame pixel into every crop, samples colour and alpha there (bilinear, as the CPU
paste-back's ``cv2.warpAffine`` of the same RGBA crop) and blends. The array grows (layers, side)
only when a result needs more than it has, so a steady stream of results reuses one texture.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import cv2
import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.mask import MaskBuilder
from kiosk.render.shaders import uniform
from kiosk.types import SwappedFace

log = logging.getLogger(__name__)

#: Faces composited per frame (the size of the uniform arrays in ``shaders/frame.frag``).
MAX_FACES = 32
#: Texture unit of the crop array (the frame is on unit 0).
CROPS_UNIT = 1
#: cv2.mixChannels pairs: crop B, G, R and the alpha into one RGBA layer.
_INTERLEAVE = [0, 0, 1, 1, 2, 2, 3, 3]


class FaceCrops:
    """The crop texture array and per-face uniforms of the frame program. Main (GL) thread only."""

    def __init__(self, ctx: moderngl.Context, program: moderngl.Program) -> None:
        self._ctx = ctx
        uniform(program, "u_crops").value = CROPS_UNIT
        self._u_count = uniform(program, "u_face_count")
        self._u_layer_size = uniform(program, "u_crop_layer_size")
        self._u_affine_x = uniform(program, "u_affine_x")
        self._u_affine_y = uniform(program, "u_affine_y")
        self._u_crop_size = uniform(program, "u_crop_size")
        self._texture: moderngl.TextureArray | None = None
        self._affine_x = np.zeros((MAX_FACES, 3), np.float32)
        self._affine_y = np.zeros((MAX_FACES, 3), np.float32)
        self._sizes = np.ones(MAX_FACES, np.float32)
        self._default_mask = MaskBuilder()
        self._rgba: dict[int, NDArray[np.uint8]] = {}
        self.count = 0
        #: How many crop texture arrays were created (only when more layers or a larger side are needed).
        self.textures_created = 0
        self._warned_overflow = False

    @property
    def layout(self) -> tuple[int, int] | None:
        """(side, layers) of the crop array, None before the first face."""
        if self._texture is None:
            return None
        w, _, layers = self._texture.size
        return w, layers

    def set(self, faces: Sequence[SwappedFace]) -> None:
        """Upload the crops and affines of ``faces`` (at most :data:`MAX_FACES`; the rest are dropped)."""
        if len(faces) > MAX_FACES:
            if not self._warned_overflow:
                log.warning("%d faces in one frame; compositing the first %d", len(faces), MAX_FACES)
                self._warned_overflow = True
            faces = faces[:MAX_FACES]
        side = 0
        for f in faces:
            crop = f.crop_bgr
            if (
                crop.ndim != 3
                or crop.shape[2] != 3
                or crop.dtype != np.uint8
                or crop.shape[0] != crop.shape[1]
            ):
                raise ValueError(f"expected a square (S, S, 3) uint8 BGR crop, got {crop.shape} {crop.dtype}")
            if np.shape(f.affine) != (2, 3):
                raise ValueError(f"expected a 2x3 frame→crop affine, got shape {np.shape(f.affine)}")
            if f.alpha is not None and (f.alpha.shape != crop.shape[:2] or f.alpha.dtype != np.uint8):
                raise ValueError(
                    f"expected a {crop.shape[:2]} uint8 alpha, got {f.alpha.shape} {f.alpha.dtype}"
                )
            side = max(side, crop.shape[0])
        self.count = len(faces)
        if not faces:
            return
        tex = self._ensure(side, len(faces))
        for i, f in enumerate(faces):
            s = f.crop_bgr.shape[0]
            rgba = self._rgba.get(s)
            if rgba is None:
                rgba = self._rgba[s] = np.zeros((s, s, 4), np.uint8)
            alpha = self._default_mask.static_alpha(s) if f.alpha is None else f.alpha
            cv2.mixChannels([f.crop_bgr, alpha], [rgba], _INTERLEAVE)  # 5x faster than two slices
            tex.write(rgba, viewport=(0, 0, i, s, s, 1), alignment=1)
            a = np.asarray(f.affine, dtype=np.float64)
            self._affine_x[i] = a[0]
            self._affine_y[i] = a[1]
            self._sizes[i] = s

    def _ensure(self, side: int, layers: int) -> moderngl.TextureArray:
        tex = self._texture
        if tex is not None:
            w, _, n = tex.size
            if w >= side and n >= layers:
                return tex
            side, layers = max(side, w), max(layers, n)
            tex.release()
        layers = min(MAX_FACES, 1 << (layers - 1).bit_length())  # room to grow: 1, 2, 4, ...
        tex = self._ctx.texture_array((side, side, layers), 4, dtype="f1", alignment=1)
        tex.swizzle = "BGRA"
        tex.filter = (moderngl.LINEAR, moderngl.LINEAR)
        tex.repeat_x = tex.repeat_y = False
        self._texture = tex
        self.textures_created += 1
        return tex

    def bind(self) -> None:
        """Set the uniforms and bind the crop array for the next frame draw."""
        self._u_count.value = self.count
        if self.count and self._texture is not None:
            self._texture.use(CROPS_UNIT)
            self._u_layer_size.value = float(self._texture.size[0])
            self._u_affine_x.write(self._affine_x.tobytes())
            self._u_affine_y.write(self._affine_y.tobytes())
            self._u_crop_size.write(self._sizes.tobytes())

    def clear(self) -> None:
        self.count = 0

    def release(self) -> None:
        if self._texture is not None:
            self._texture.release()
            self._texture = None
        self.count = 0
