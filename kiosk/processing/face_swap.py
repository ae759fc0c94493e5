"""The per-face work of one frame (:class:`FaceSwapStep`): align and swap each face, build its blend
mask, match its colour, paste it back and enhance it; and the crop buffers the results are
written into (:class:`CropBuffers`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import align_matrix
from kiosk.inference.classic import ClassicSwapper
from kiosk.inference.color import ColorCorrector, ColorOptions
from kiosk.inference.mask import MaskBuilder, MaskOptions, crop_keypoints
from kiosk.inference.paste import PasteBack, face_region
from kiosk.inference.swapper import InSwapper
from kiosk.processing.model_set import ModelSet
from kiosk.processing.timing import StageTimes, Stopwatch
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5, SwappedFace

#: Crop buffers per face in flight: a returned crop stays valid for this many calls minus one
#: (the processing triple buffer holds at most three results).
CROP_RING = 4

#: One face's uint8 buffer of a shape: its crop ``(S, S, 3)`` or alpha ``(S, S)``.
Buffer = Callable[[tuple[int, ...]], NDArray[np.uint8]]


class CropBuffers:
    """The arrays the swapped crops and alphas are written into, so a frame allocates none: a ring
    of ``CROP_RING`` sets (one per call), or the arrays of the result a call replaces."""

    def __init__(self) -> None:
        self._ring: list[dict[tuple[int, ...], NDArray[np.uint8]]] = [{} for _ in range(CROP_RING)]
        self._pos = 0

    def for_frame(self, reuse: Sequence[SwappedFace] | None) -> Callable[[int], Buffer]:
        """This call's buffers: ``for_frame(reuse)(i)(shape)`` is face ``i``'s array of ``shape``.
        With ``reuse`` (the replaced result's faces): one of their crops or alphas that fits, else
        a new array (the caller's slot then owns it); without: this call's slot of the ring."""
        self._pos = (self._pos + 1) % CROP_RING
        spare: list[NDArray[np.uint8]] | None = None
        if reuse is not None:
            spare = [sf.crop_bgr for sf in reuse]
            spare += [sf.alpha for sf in reuse if sf.alpha is not None and sf.alpha.flags.writeable]
        return lambda index: functools.partial(self._buffer, index, spare=spare)

    def _buffer(
        self, index: int, shape: tuple[int, ...], spare: list[NDArray[np.uint8]] | None
    ) -> NDArray[np.uint8]:
        if spare is not None:
            for j, buf in enumerate(spare):
                if buf.shape == shape and buf.flags.writeable and buf.flags.c_contiguous:
                    return spare.pop(j)
            return np.zeros(shape, np.uint8)
        ring = self._ring[self._pos]
        key = (index, *shape)
        found = ring.get(key)
        if found is None:
            found = np.zeros(shape, np.uint8)
            ring[key] = found
        return found


class FaceSwapStep:
    """Swap the source in for each face of a frame: align (``align_ms``), swap (``swap_ms``), blend
    mask (``mask_ms``), colour match (``color_ms``), paste back (``paste_ms``) and, with
    ``enhance``, restore (``enhance_ms``).

    Owns the mask builder, the colour corrector (per track), the paste-back, the crop buffers and
    its scratch frames; the models are the pipeline's ``models``."""

    def __init__(
        self,
        models: ModelSet,
        *,
        enhance: bool = False,
        enhance_blend: float = 1.0,
        mask: MaskOptions | None = None,
        color: ColorOptions | None = None,
        swap_resolution: int = 128,
    ) -> None:
        self.models = models
        self.enhance = bool(enhance and models.enhancer is not None)
        self.enhance_blend = float(enhance_blend)
        #: Size of the swapped crop: 128, or 256/512 (k² sub-pixel shifted swapper runs per face).
        self.swap_resolution = int(swap_resolution)
        self.masks = MaskBuilder(mask)
        self.color = ColorCorrector(color)
        self.paste = PasteBack()
        self._crops = CropBuffers()
        self._scratch: FrameBGR = np.zeros((1, 1, 3), np.uint8)
        self._occlusion_scratch: dict[int, NDArray[np.float32]] = {}

    def swap_faces(
        self,
        frame_bgr: FrameBGR,
        out_bgr: FrameBGR | None,
        faces: Sequence[Face],
        ids: Sequence[int | None],
        latents: Sequence[NDArray[np.float32]],
        t: float,
        reuse: Sequence[SwappedFace] | None,
        times: StageTimes,
    ) -> list[SwappedFace]:
        """Each face of ``frame_bgr`` swapped with its latent, as (crop, frame→crop affine, face)
        records; pasted into ``out_bgr`` (a copy of the frame) unless that is None. ``ids``: each
        face's track id (the colour correction follows it); ``t``: the frame's time in seconds."""
        buffers = self._crops.for_frame(reuse)
        use_occlusion = self.masks.options.occlusion and self.models.face_parser is not None
        per_face_alpha = self.masks.needs_buffer(use_occlusion)
        result: list[SwappedFace] = []
        for i, face in enumerate(faces):
            watch = Stopwatch()
            buffer = buffers(i)
            affine, crop = self._swap_face(frame_bgr, face, latents[i], buffer, watch, times)
            occlusion, alpha = self._face_alpha(
                frame_bgr, face, crop, affine, buffer, use_occlusion, per_face_alpha
            )
            times.mask_ms += watch.lap()
            self._correct_colour(ids[i] if i < len(ids) else None, crop, alpha, t)
            if isinstance(self.models.swapper, ClassicSwapper):  # v2: the visitor's eyes and mouth
                self.models.swapper.paste_visitor_parts(crop)  # after the photo's colour correction
            times.color_ms += watch.lap()
            swap_box = None
            if out_bgr is not None:
                swap_box = self.paste.paste(out_bgr, crop, affine, alpha)
                times.paste_ms += watch.lap()
            if self.enhance and self.models.enhancer is not None:
                crop, affine, alpha = self._enhance_face(
                    frame_bgr,
                    out_bgr,
                    face,
                    crop,
                    affine,
                    alpha,
                    occlusion,
                    swap_box,
                    buffer,
                    per_face_alpha,
                    watch,
                    times,
                )
            result.append(SwappedFace(crop_bgr=crop, affine=affine, face=face, alpha=alpha))
        if self.color.options.enabled:
            self.color.forget_except({k for k in ids if k is not None})
        return result

    def warm_up(self) -> float:
        """Paste one crop (compiles the paste kernels): its milliseconds."""
        watch = Stopwatch()
        frame = np.zeros((256, 256, 3), np.uint8)
        self.paste.paste(frame, np.zeros((128, 128, 3), np.uint8), np.eye(2, 3) * 0.5)
        return watch.lap()

    def _swap_face(
        self,
        frame_bgr: FrameBGR,
        face: Face,
        latent: NDArray[np.float32],
        buffer: Buffer,
        watch: Stopwatch,
        times: StageTimes,
    ) -> tuple[Affine2x3, FrameBGR]:
        """Align the visitor's face (``align_ms``) and swap the source in (``swap_ms``): the
        frame→crop affine and the swapped crop at ``swap_resolution``."""
        res = self.swap_resolution
        swapper = self.models.swapper
        if res == swapper.size_px and isinstance(swapper, InSwapper):
            affine = swapper.align(frame_bgr, face.kps)
            times.align_ms += watch.lap()
            crop = swapper.to_bgr(swapper.infer(latent), buffer((res, res, 3)))
        elif isinstance(swapper, ClassicSwapper):  # the visitor's mesh runs on the detector's box
            affine = swapper.align_face(frame_bgr, face, res)
            times.align_ms += watch.lap()
            crop = swapper.infer_tiles(latent, buffer((res, res, 3)), defer_parts=True)
        else:
            affine = swapper.align_tiles(frame_bgr, face.kps, res)
            times.align_ms += watch.lap()
            crop = swapper.infer_tiles(latent, buffer((res, res, 3)))
        times.swap_ms += watch.lap()
        return affine, crop

    def _face_alpha(
        self,
        frame_bgr: FrameBGR,
        face: Face,
        crop: FrameBGR,
        affine: Affine2x3,
        buffer: Buffer,
        use_occlusion: bool,
        per_face_alpha: bool,
    ) -> tuple[NDArray[np.float32] | None, NDArray[np.uint8]]:
        """The crop's blend mask (face shape, mouth, occlusion; times the classic swap's mesh
        alpha when the face was swapped through the mesh): ``(occlusion, alpha)``."""
        size = crop.shape[0]
        occlusion = None
        if use_occlusion:
            assert self.models.face_parser is not None
            occlusion = self.models.face_parser.face_mask(frame_bgr, face, size)
        mesh_alpha = getattr(self.models.swapper, "face_alpha", None)
        if mesh_alpha is not None and mesh_alpha.shape != (size, size):
            mesh_alpha = None
        per_face = per_face_alpha or mesh_alpha is not None
        kps_crop = crop_keypoints(face.kps, affine) if per_face else None
        alpha = self.masks.alpha(size, kps_crop, occlusion, buffer((size, size)) if per_face else None)
        if mesh_alpha is not None:
            # The face's own outline (never a square of the photo), its eyes and mouth the
            # visitor's: the CPU paste and the GPU composite both take this one alpha.
            out = alpha if alpha.flags.writeable else buffer((size, size))
            cv2.multiply(alpha, mesh_alpha, dst=out, scale=1.0 / 255.0)
            alpha = out
        return occlusion, alpha

    def _correct_colour(self, key: int | None, crop: FrameBGR, alpha: NDArray[np.uint8], t: float) -> None:
        """Match the swapped crop's colour to the visitor's own face (per track ``key``), in place."""
        if not self.color.options.enabled:
            return
        swapper = self.models.swapper
        visitor = swapper.aligned_crop if crop.shape[0] == swapper.size_px else swapper.tiles_crop
        self.color.correct(visitor, crop, alpha, key, t)

    def _enhance_face(
        self,
        frame_bgr: FrameBGR,
        out_bgr: FrameBGR | None,
        face: Face,
        crop: FrameBGR,
        affine: Affine2x3,
        alpha: NDArray[np.uint8],
        occlusion: NDArray[np.float32] | None,
        swap_box: tuple[int, int, int, int] | None,
        buffer: Buffer,
        per_face_alpha: bool,
        watch: Stopwatch,
        times: StageTimes,
    ) -> tuple[FrameBGR, Affine2x3, NDArray[np.uint8]]:
        """Restore the swapped face (``enhance_ms``), its mask at the enhancer's size (``mask_ms``)
        and, with ``out_bgr``, its paste over the camera frame (``paste_ms``): the enhanced crop,
        its affine and alpha.

        The enhancer reads the composited frame (CPU paste-back) or, without it, the swapped crop
        pasted into a face-sized scratch frame."""
        enhancer = self.models.enhancer
        assert enhancer is not None
        source = (
            out_bgr if out_bgr is not None else self._paste_scratch(frame_bgr, crop, affine, face.kps, alpha)
        )
        esize = enhancer.size_px
        swap_affine = affine
        crop, affine = enhancer.enhance(source, face.kps, self.enhance_blend, out=buffer((esize, esize, 3)))
        times.enhance_ms += watch.lap()
        if per_face_alpha:
            occ = None if occlusion is None else self._occlusion_into(occlusion, swap_affine, affine, esize)
            alpha = self.masks.alpha(esize, crop_keypoints(face.kps, affine), occ, buffer((esize, esize)))
        else:
            alpha = self.masks.alpha(esize, None)
        times.mask_ms += watch.lap()
        if out_bgr is not None:
            # The enhanced crop goes over the camera frame, as in the composite shader: not over
            # the swapped crop too (that would blend the feathered edge twice).
            if swap_box is not None:
                x0, y0, x1, y1 = swap_box
                out_bgr[y0:y1, x0:x1] = frame_bgr[y0:y1, x0:x1]
            self.paste.paste(out_bgr, crop, affine, alpha)
            times.paste_ms += watch.lap()
        return crop, affine, alpha

    def _occlusion_into(
        self, occlusion: NDArray[np.float32], swap_affine: Affine2x3, affine: Affine2x3, size_px: int
    ) -> NDArray[np.float32]:
        """The swap crop's occlusion mask warped into another crop of the same face (the enhancer's)."""
        buf = self._occlusion_scratch.get(size_px)
        if buf is None:
            buf = self._occlusion_scratch[size_px] = np.zeros((size_px, size_px), np.float32)
        to_frame = np.vstack([cv2.invertAffineTransform(swap_affine), [0.0, 0.0, 1.0]])
        m = np.asarray(affine, np.float64) @ to_frame
        cv2.warpAffine(
            np.asarray(occlusion, np.float32),
            m,
            (size_px, size_px),
            dst=buf,
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=1.0,
        )
        return buf

    def _paste_scratch(
        self,
        frame_bgr: FrameBGR,
        crop: FrameBGR,
        affine: NDArray[np.float64],
        kps: Landmarks5,
        alpha: NDArray[np.uint8] | None = None,
    ) -> FrameBGR:
        """The frame with ``crop`` pasted, for the enhancer when nothing is pasted into an output
        (the GPU composites). Only the enhancer's region is copied into the reused scratch frame."""
        if self._scratch.shape != frame_bgr.shape:
            self._scratch = np.empty_like(frame_bgr)
        scratch = self._scratch
        enhancer = self.models.enhancer
        assert enhancer is not None
        size = enhancer.size_px
        m = align_matrix(kps, enhancer.spec.template or "ffhq_512", size)
        box = face_region(m, size, frame_bgr.shape[:2])
        if box is not None:
            x0, y0, x1, y1 = box
            scratch[y0:y1, x0:x1] = frame_bgr[y0:y1, x0:x1]
        self.paste.paste(scratch, crop, affine, alpha)
        return scratch
