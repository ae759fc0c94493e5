"""The face-swap pipeline: detect → align → swap → (enhance) → paste back, on ONNX Runtime.

Public API::

    from kiosk.config import load_config
    from kiosk.processing.pipeline import SwapPipeline
    pipe = SwapPipeline.from_config(load_config("configs/demo.yaml"))
    pipe.set_source(face_bgr)      # NoFaceError if no face is found in the image
    faces = pipe.detect(frame_bgr) # list[kiosk.types.Face] in frame pixels
    out = pipe.process(frame_bgr)  # composited BGR frame, same shape as the input

The inference thread runs it through :class:`kiosk.processing.swap_stage.SwapProcessor`; which
models a config needs, and opening them, is :mod:`kiosk.processing.models`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.config import KioskConfig
from kiosk.inference import color as color_mod
from kiosk.inference import mask as mask_mod
from kiosk.inference.align import align_matrix, arcface_template
from kiosk.inference.classic import ClassicSwapper
from kiosk.inference.color import ColorCorrector, ColorOptions
from kiosk.inference.detector import FaceDetector
from kiosk.inference.embedder import ArcFaceEmbedder
from kiosk.inference.enhancer import GfpganEnhancer
from kiosk.inference.errors import ImageError, NoFaceError
from kiosk.inference.kernels import warm_up as warm_up_kernels
from kiosk.inference.mask import MaskBuilder, MaskOptions, OcclusionParser, crop_keypoints
from kiosk.inference.paste import PasteBack, face_region
from kiosk.inference.sessions import CPU, PROVIDER_NAMES, ProviderOptions, SessionRunner, create_session
from kiosk.inference.specs import Role, spec_for_file
from kiosk.inference.swapper import InSwapper
from kiosk.processing.face_search import detect_and_track, roi_geometry, select_faces
from kiosk.processing.models import model_paths, open_detector, open_parser, swapper_mode
from kiosk.processing.timing import Detection, StageTimes, Stopwatch
from kiosk.processing.tracking import FaceTracker, Policy, Track, TrackingOptions
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5, SwappedFace

log = logging.getLogger(__name__)


CROP_RING = 4


@dataclass
class _SourceFace:
    face: Face
    image_bgr: FrameBGR


class SwapPipeline:
    """The four models wired together. Not thread-safe: one instance per thread."""

    def __init__(
        self,
        detector: FaceDetector,
        embedder: ArcFaceEmbedder | None,
        swapper: InSwapper | ClassicSwapper,
        enhancer: GfpganEnhancer | None = None,
        *,
        max_faces: int = 4,
        enhance: bool = False,
        enhance_blend: float = 1.0,
        gpu_requested: str | None = None,
        tracking: TrackingOptions | None = None,
        face_policy: Policy = "all",
        mask: MaskOptions | None = None,
        color: ColorOptions | None = None,
        face_parser: OcclusionParser | None = None,
        swap_resolution: int = 128,
    ) -> None:
        self.detector = detector
        self.embedder = embedder
        self.swapper = swapper
        self.enhancer = enhancer
        self.max_faces = int(max_faces)
        self.enhance = bool(enhance and enhancer is not None)
        self.enhance_blend = float(enhance_blend)
        self.gpu_requested = gpu_requested
        self.face_policy: Policy = face_policy
        #: Size of the swapped crop: 128, or 256/512 (k² sub-pixel shifted swapper runs per face).
        self.swap_resolution = int(swap_resolution)
        self.times = StageTimes()
        self._paste = PasteBack()
        self.masks = MaskBuilder(mask)
        self.color = ColorCorrector(color)
        #: Occlusion masks come from this parser when ``mask.occlusion`` is on (None: no occlusion).
        self.face_parser: OcclusionParser | None = face_parser
        self._face_ids: list[int | None] = []
        #: ``processing.assign: per_visitor``: called per frame with the faces' track ids and the
        #: faces, returns each face's (source latent, library key); None: every face gets the
        #: source set by :meth:`set_source` / :meth:`use_latent`.
        self.assign_sources: (
            Callable[[Sequence[int | None], Sequence[Face]], Sequence[tuple[NDArray[np.float32], str]]] | None
        ) = None
        #: The library key each face of the last :meth:`process_into` was swapped with.
        self.face_keys: list[str] = []
        self._occlusion_scratch: dict[int, NDArray[np.float32]] = {}
        self.tracker: FaceTracker | None = None
        self.tracking_options: TrackingOptions | None = None
        self._roi_detector: FaceDetector | None = None
        self._frame_idx = 0
        self._chosen_ids: list[int] = []
        self._crop_ring: list[dict[tuple[int, ...], NDArray[np.uint8]]] = [{} for _ in range(CROP_RING)]
        self._ring_pos = 0
        self._scratch: FrameBGR = np.zeros((1, 1, 3), np.uint8)
        #: Milliseconds per model of the last :meth:`warm_up` (empty until it ran).
        self.warmup_ms: dict[str, float] = {}
        if tracking is not None:
            self.set_tracking(tracking)
        self._latent: NDArray[np.float32] | None = None
        self._source_key: str | None = None
        self._latents: dict[str, NDArray[np.float32]] = {}
        self.source_face: Face | None = None

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_config(cls, cfg: KioskConfig, enhance: bool | None = None) -> SwapPipeline:
        """Open the configured models. Raises :class:`ModelError` (missing, corrupt, wrong signature)
        with a one-line message naming the file and the fix."""
        paths = model_paths(cfg)
        use_enh = cfg.processing.enhance if enhance is None else enhance
        prov_cfg = ProviderOptions.of(cfg.models.providers)
        base = cfg.base_dir
        proc = cfg.processing

        def open_role(role: Role, cuda_graph: bool = False) -> tuple[object, str, Path]:
            p = paths[role]
            assert p is not None
            session, used = create_session(p, prov_cfg, base_dir=base, cuda_graph=cuda_graph)
            return session, used, p

        iob, dev = prov_cfg.iobinding, prov_cfg.device_id
        detector = open_detector(cfg)
        embedder: ArcFaceEmbedder | None = None
        swapper: InSwapper | ClassicSwapper
        if swapper_mode(cfg) == "classic":  # no weights, no embedder: the photo's own face
            swapper = ClassicSwapper()
        else:
            s, used, p = open_role("embedder")
            embedder = ArcFaceEmbedder(s, spec_for_file("embedder", p), p, used, iobinding=iob, device_id=dev)
            s, used, p = open_role("swapper", cuda_graph=True)  # the one fixed-shape model per frame
            swapper = InSwapper(s, spec_for_file("swapper", p), p, used, iobinding=iob, device_id=dev)
        enhancer = None
        if use_enh and paths["enhancer"] is not None:
            s, used, p = open_role("enhancer")
            enhancer = GfpganEnhancer(s, spec_for_file("enhancer", p), p, used, iobinding=iob, device_id=dev)
        first = prov_cfg.order[0]
        gpu = PROVIDER_NAMES[first] if first != "cpu" else None
        pipe = cls(
            detector,
            embedder,
            swapper,
            enhancer,
            max_faces=proc.max_faces,
            enhance=use_enh,
            enhance_blend=proc.enhance_blend,
            gpu_requested=gpu,
            tracking=TrackingOptions.of(proc) if proc.tracking else None,
            face_policy=proc.face_policy,
            mask=MaskOptions.of(cfg.mask),
            color=ColorOptions.of(proc),
            swap_resolution=proc.swap_resolution,
            # mask.occlusion: the face parser (models.parser; a missing file is a missing model).
            face_parser=open_parser(cfg),
        )
        if prov_cfg.warmup:
            pipe.warm_up()
        return pipe

    # -- tracking and warm-up --------------------------------------------------------------------
    def set_tracking(self, options: TrackingOptions | None) -> None:
        """Follow faces across frames with ``options`` (``None``: detect every frame, no smoothing).

        Tracked faces are detected in a small region around each face on every frame (the same
        model at ``roi_det_size``, at the full-frame scale), the whole frame is searched every
        ``detect_every`` frames or when a face is lost, the five keypoints are One-Euro smoothed
        before alignment, and a face whose detection is missed stays swapped (held where it was)
        for ``hold_frames`` frames (and at most as long as that many frames take at 30 fps). Below
        10 processed frames a second every frame is searched whole and positions are not smoothed
        across frames that far apart (see :class:`~kiosk.processing.tracking.FaceTracker`)."""
        self.tracking_options = options
        if options is None:
            self.tracker = None
            self._roi_detector = None
            return
        self.tracker = FaceTracker(
            min_cutoff=options.min_cutoff,
            beta=options.beta,
            max_missed=options.hold_frames,
            detect_every=options.detect_every,
        )
        roi = self.detector.resized(options.roi_det_size)
        # A fixed-size export letterboxes the regions into its own input (as tiles of one run); if
        # it could not hold roi_det_size, regions would go through the full model instead.
        self._roi_detector = None if roi.det_size != options.roi_det_size else roi
        self._frame_idx = 0
        self._chosen_ids = []

    def reset_tracking(self) -> None:
        """Forget the tracked faces (a new scene: the source changed or restarted)."""
        if self.tracker is not None:
            self.tracker.reset()
        self._frame_idx = 0
        self._chosen_ids = []
        self.color.reset()

    def warm_up(self) -> dict[str, float]:
        """Run every model once on zeros (and compile the pixel kernels), so the first real frame
        does not pay for engine builds, algorithm searches or JIT compilation. Returns and logs the
        milliseconds per model."""
        t0 = time.perf_counter()
        warm_up_kernels()
        mask_mod.warm_up()
        color_mod.warm_up()
        out = {"kernels": (time.perf_counter() - t0) * 1e3}
        for name, det in (("detector", self.detector), ("detector_roi", self._roi_detector)):
            if det is not None:
                zeros = np.zeros((det.det_size, det.det_size, 3), np.uint8)
                a = time.perf_counter()
                det.detect(zeros)
                det.detect(zeros)
                out[name] = (time.perf_counter() - a) * 1e3
        if self.embedder is not None:
            out["embedder"] = self.embedder.warm_up()
        out["swapper"] = self.swapper.warm_up()
        if self.swap_resolution != self.swapper.size_px and isinstance(self.swapper, InSwapper):
            a = time.perf_counter()
            zeros = np.zeros((self.swap_resolution, self.swap_resolution, 3), np.uint8)
            kps = arcface_template(self.swapper.size_px)  # any non-degenerate five points
            self.swapper.align_tiles(zeros, kps, self.swap_resolution)
            self.swapper.infer_tiles(np.zeros((1, 512), np.float32))
            out["swapper_tiles"] = (time.perf_counter() - a) * 1e3
        if self.enhancer is not None:
            out["enhancer"] = self.enhancer.warm_up()
        a = time.perf_counter()
        frame = np.zeros((256, 256, 3), np.uint8)
        self._paste.paste(frame, np.zeros((128, 128, 3), np.uint8), np.eye(2, 3) * 0.5)
        out["paste"] = (time.perf_counter() - a) * 1e3
        self.warmup_ms = out
        log.info(
            "models warmed up in %.0f ms (%s)",
            (time.perf_counter() - t0) * 1e3,
            ", ".join(f"{k} {v:.0f} ms" for k, v in out.items()),
        )
        return out

    @property
    def runners(self) -> list[SessionRunner]:
        """Every model's session runner (for the time spent inside ONNX Runtime)."""
        out = [self.detector.runner]
        if self.embedder is not None:
            out.append(self.embedder.runner)
        if isinstance(self.swapper, InSwapper):  # the classic swapper runs no model
            out.append(self.swapper.runner)
        if self._roi_detector is not None:
            out.append(self._roi_detector.runner)
        if self.enhancer is not None:
            out.append(self.enhancer.runner)
        runner = getattr(self.face_parser, "runner", None)  # a FaceParser (fakes in tests have none)
        if isinstance(runner, SessionRunner):
            out.append(runner)
        return out

    @property
    def provider(self) -> str:
        """The provider the swapper (the heaviest model) actually runs on; for the classic swap,
        which runs no model, the detector's."""
        if self.classic:
            return self.detector.provider
        return self.swapper.provider

    @property
    def classic(self) -> bool:
        """The classic swap (the library photo's own face), not a neural swapper."""
        return isinstance(self.swapper, ClassicSwapper)

    @property
    def gpu_fallback(self) -> bool:
        """True when a GPU provider was requested but the models run on the CPU."""
        return self.gpu_requested is not None and self.provider == CPU

    # -- source face -----------------------------------------------------------------------------
    def set_source(self, face_bgr: FrameBGR, key: str | None = None) -> Face:
        """Use the largest face in ``face_bgr`` as the face swapped in. Its latent is computed once
        and cached under ``key`` (default: a hash of the pixels), so switching back costs nothing.
        Raises :class:`NoFaceError` if the image has no face."""
        if face_bgr is None or face_bgr.ndim != 3 or face_bgr.shape[2] != 3:
            raise ImageError("source face: expected a BGR image of shape (H, W, 3)")
        if key is None:
            key = hashlib.blake2b(np.ascontiguousarray(face_bgr).data, digest_size=16).hexdigest()
        face = self._find_source_face(face_bgr)
        if key not in self._latents:
            self._latents[key] = self.source_latent(face.image_bgr, face.face)
        self._latent = self._latents[key]
        self._source_key = key
        self.source_face = face.face
        return face.face

    def find_source_faces(self, face_bgr: FrameBGR) -> tuple[list[Face], FrameBGR]:
        """All faces of a source photo, largest first, and the image they refer to (the photo, or
        the photo with a border when the face filled it). Used by the face library."""
        faces = self.detector.detect(face_bgr)
        image = face_bgr
        if not faces:
            # An already tightly cropped face (e.g. a 112x112 aligned crop) fills the frame and is
            # missed by the detector; give it a border and look again.
            pad = max(face_bgr.shape[:2]) // 2 + 8
            border = cv2.copyMakeBorder(face_bgr, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(0, 0, 0))
            image = np.asarray(border, dtype=np.uint8)
            faces = self.detector.detect(image)
        faces.sort(key=lambda f: f.area_px, reverse=True)
        return faces, image

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]:
        """The swapper's source latent for ``face`` in ``image_bgr``: embedding @ emap, normalised
        (InSwapper), or the photo's face aligned to the swap template with its keypoints (classic)."""
        if isinstance(self.swapper, ClassicSwapper):
            return self.swapper.source_latent(image_bgr, face.kps)
        assert self.embedder is not None, "a neural swapper needs the embedder"
        return self.swapper.latent(self.embedder.embed(image_bgr, face.kps))

    def use_latent(self, latent: NDArray[np.float32], key: str) -> None:
        """Swap in a precomputed source latent (a face library entry); costs nothing per frame."""
        self._latents[key] = latent
        self._latent = latent
        self._source_key = key

    @property
    def source_key(self) -> str | None:
        return self._source_key

    def _find_source_face(self, face_bgr: FrameBGR) -> _SourceFace:
        faces, image = self.find_source_faces(face_bgr)
        if not faces:
            raise NoFaceError(
                "no face found in the source image — use a clear, frontal, well-lit photo of one face"
            )
        return _SourceFace(faces[0], image)

    @property
    def has_source(self) -> bool:
        return self._latent is not None

    # -- per frame -------------------------------------------------------------------------------
    def detect(self, frame_bgr: FrameBGR) -> list[Face]:
        """Faces in ``frame_bgr``: boxes, scores, 5x2 keypoints in frame pixels, best first."""
        return self.detector.detect(frame_bgr)

    def process(self, frame_bgr: FrameBGR, out: FrameBGR | None = None) -> FrameBGR:
        """Swap every detected face (up to ``max_faces``) and return the composited frame (a new array,
        or ``out`` if given). The input is never modified."""
        if out is None:
            out = np.empty_like(frame_bgr)
        self.process_into(frame_bgr, out)
        return out

    def process_into(
        self,
        frame_bgr: FrameBGR,
        out_bgr: FrameBGR | None,
        *,
        paste: bool = True,
        t: float | None = None,
        reuse: list[SwappedFace] | None = None,
        detected: Detection | None = None,
    ) -> list[SwappedFace]:
        """Swap the faces of ``frame_bgr``; return them as (crop, frame→crop affine, face) records.

        ``paste=True``: also composite into the preallocated ``out_bgr`` (same shape as the frame)
        on the CPU. ``paste=False``: ``out_bgr`` is not touched (may be ``None``) and the frame is
        neither copied nor pasted into: a GPU compositor draws the crops over the camera frame.

        ``t``: the frame's time in seconds (for the tracker's smoothing; default: now).
        ``reuse``: the faces this result replaces (e.g. the triple-buffer slot's previous faces):
        their crop arrays are written again instead of the pipeline's own ring of crop buffers.
        Without it a returned crop stays valid for the next ``CROP_RING - 1`` calls.
        ``detected``: this frame's faces, already found by :meth:`find_faces` (on another thread,
        by another pipeline with its own detector session): no detection runs here.
        """
        if self._latent is None:
            raise RuntimeError("no source face: call set_source(face_bgr) first")
        if paste and (out_bgr is None or out_bgr.shape != frame_bgr.shape):
            shape = None if out_bgr is None else out_bgr.shape
            raise ValueError(f"out has shape {shape}, frame has {frame_bgr.shape}")
        times = StageTimes()
        session_before = sum(r.run_ms for r in self.runners)
        t0 = time.perf_counter()
        if detected is None:
            faces = self._find_faces(frame_bgr, t0 if t is None else t, times)
            times.detect_ms = (time.perf_counter() - t0) * 1e3
        else:
            faces = detected.faces
            times.detect_ms, times.track_ms = detected.detect_ms, detected.track_ms
            times.full_detection = detected.full_detection
            ids = list(detected.ids)
            self._face_ids = ids if len(ids) == len(faces) else [None] * len(faces)
        if paste:
            assert out_bgr is not None
            np.copyto(out_bgr, frame_bgr)
        self._ring_pos = (self._ring_pos + 1) % CROP_RING
        spare: list[NDArray[np.uint8]] | None = None
        if reuse is not None:
            spare = [sf.crop_bgr for sf in reuse]
            spare += [sf.alpha for sf in reuse if sf.alpha is not None and sf.alpha.flags.writeable]
        use_occlusion = self.masks.options.occlusion and self.face_parser is not None
        per_face_alpha = self.masks.needs_buffer(use_occlusion)
        sources = self.assign_sources(self._face_ids, faces) if self.assign_sources is not None else None
        self.face_keys = (
            [key for _, key in sources] if sources is not None else [self._source_key or ""] * len(faces)
        )
        t_frame = t0 if t is None else t
        result: list[SwappedFace] = []
        for i, face in enumerate(faces):
            watch = Stopwatch()
            buffer = functools.partial(self._crop_buffer, i, spare=spare)  # this face's crop/alpha arrays
            latent = sources[i][0] if sources is not None else self._latent
            affine, crop = self._swap_face(frame_bgr, face, latent, buffer, watch, times)
            occlusion, alpha = self._face_alpha(
                frame_bgr, face, crop, affine, buffer, use_occlusion, per_face_alpha
            )
            times.mask_ms += watch.lap()
            self._correct_colour(i, crop, alpha, t_frame)
            times.color_ms += watch.lap()
            swap_box = None
            if paste:
                assert out_bgr is not None
                swap_box = self._paste.paste(out_bgr, crop, affine, alpha)
                times.paste_ms += watch.lap()
            if self.enhance and self.enhancer is not None:
                crop, affine, alpha = self._enhance_face(
                    frame_bgr,
                    out_bgr if paste else None,
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
            self.color.forget_except({k for k in self._face_ids if k is not None})
        times.faces = len(faces)
        times.total_ms = (time.perf_counter() - t0) * 1e3
        times.session_ms = sum(r.run_ms for r in self.runners) - session_before
        if detected is not None:
            times.session_ms += detected.session_ms
        self.times = times
        return result

    def _swap_face(
        self,
        frame_bgr: FrameBGR,
        face: Face,
        latent: NDArray[np.float32],
        buffer: Callable[[tuple[int, ...]], NDArray[np.uint8]],
        watch: Stopwatch,
        times: StageTimes,
    ) -> tuple[Affine2x3, FrameBGR]:
        """Align the visitor's face (``align_ms``) and swap the source in (``swap_ms``): the
        frame→crop affine and the swapped crop at ``swap_resolution``."""
        res = self.swap_resolution
        if res == self.swapper.size_px and isinstance(self.swapper, InSwapper):
            affine = self.swapper.align(frame_bgr, face.kps)
            times.align_ms += watch.lap()
            crop = self.swapper.to_bgr(self.swapper.infer(latent), buffer((res, res, 3)))
        else:
            affine = self.swapper.align_tiles(frame_bgr, face.kps, res)
            times.align_ms += watch.lap()
            crop = self.swapper.infer_tiles(latent, buffer((res, res, 3)))
        times.swap_ms += watch.lap()
        return affine, crop

    def _face_alpha(
        self,
        frame_bgr: FrameBGR,
        face: Face,
        crop: FrameBGR,
        affine: Affine2x3,
        buffer: Callable[[tuple[int, ...]], NDArray[np.uint8]],
        use_occlusion: bool,
        per_face_alpha: bool,
    ) -> tuple[NDArray[np.float32] | None, NDArray[np.uint8]]:
        """The crop's blend mask (face shape, mouth, occlusion): ``(occlusion, alpha)``."""
        size = crop.shape[0]
        occlusion = None
        if use_occlusion:
            assert self.face_parser is not None
            occlusion = self.face_parser.face_mask(frame_bgr, face, size)
        kps_crop = crop_keypoints(face.kps, affine) if per_face_alpha else None
        alpha = self.masks.alpha(size, kps_crop, occlusion, buffer((size, size)) if per_face_alpha else None)
        return occlusion, alpha

    def _correct_colour(self, i: int, crop: FrameBGR, alpha: NDArray[np.uint8], t: float) -> None:
        """Match the swapped crop's colour to the visitor's own face (per track), in place."""
        if not self.color.options.enabled:
            return
        key = self._face_ids[i] if i < len(self._face_ids) else None
        size = crop.shape[0]
        visitor = self.swapper.aligned_crop if size == self.swapper.size_px else self.swapper.tiles_crop
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
        buffer: Callable[[tuple[int, ...]], NDArray[np.uint8]],
        per_face_alpha: bool,
        watch: Stopwatch,
        times: StageTimes,
    ) -> tuple[FrameBGR, Affine2x3, NDArray[np.uint8]]:
        """Restore the swapped face (``enhance_ms``), its mask at the enhancer's size (``mask_ms``)
        and, with ``out_bgr``, its paste over the camera frame (``paste_ms``): the enhanced crop,
        its affine and alpha.

        The enhancer reads the composited frame (CPU paste-back) or, without it, the swapped crop
        pasted into a face-sized scratch frame."""
        assert self.enhancer is not None
        source = (
            out_bgr if out_bgr is not None else self._paste_scratch(frame_bgr, crop, affine, face.kps, alpha)
        )
        esize = self.enhancer.size_px
        swap_affine = affine
        crop, affine = self.enhancer.enhance(
            source, face.kps, self.enhance_blend, out=buffer((esize, esize, 3))
        )
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
            self._paste.paste(out_bgr, crop, affine, alpha)
            times.paste_ms += watch.lap()
        return crop, affine, alpha

    def find_faces(self, frame_bgr: FrameBGR, t: float | None = None) -> Detection:
        """The first stage of :meth:`process_into` on its own: this frame's faces and their cost.
        Tracking state advances, so call it once per frame, in frame order."""
        before = self._detector_run_ms()
        t0 = time.perf_counter()
        times = StageTimes()
        faces = self._find_faces(frame_bgr, t0 if t is None else t, times)
        return Detection(
            faces,
            detect_ms=(time.perf_counter() - t0) * 1e3,
            track_ms=times.track_ms,
            session_ms=self._detector_run_ms() - before,
            full_detection=times.full_detection,
            ids=tuple(self._face_ids),
        )

    def _detector_run_ms(self) -> float:
        roi = self._roi_detector
        return self.detector.runner.run_ms + (roi.runner.run_ms if roi is not None else 0.0)

    def _find_faces(self, frame_bgr: FrameBGR, t: float, times: StageTimes) -> list[Face]:
        """This frame's faces to swap: detected (and tracked and smoothed), chosen by the policy.
        Sets ``_face_ids``: each face's track id (None without tracking)."""
        if self.tracker is None:
            faces = self._untracked_faces(frame_bgr)
            self._face_ids = [None] * len(faces)
            return faces
        return self._tracked_faces(frame_bgr, t, times)

    def _untracked_faces(self, frame_bgr: FrameBGR) -> list[Face]:
        faces = self.detector.detect(frame_bgr)
        if self.face_policy != "all" and len(faces) > 1:
            pseudo = [Track(i, f, f, 1, 0, 1) for i, f in enumerate(faces)]
            faces = [tr.face for tr in select_faces(pseudo, self.face_policy, frame_bgr.shape, 1)]
        return faces[: self.max_faces]

    def _tracked_faces(self, frame_bgr: FrameBGR, t: float, times: StageTimes) -> list[Face]:
        assert self.tracker is not None
        roi_det = self._roi_detector
        roi = roi_geometry(frame_bgr.shape, self.detector.det_size, roi_det.det_size) if roi_det else None
        before = self._detector_run_ms()
        a = time.perf_counter()
        full_runs = self.detector.runner.runs
        tracks = detect_and_track(
            self.tracker,
            frame_bgr,
            self._frame_idx,
            t,
            self.detector.detect,
            roi_det.detect if roi_det is not None else None,
            roi,
            roi_det.detect_many if roi_det is not None and roi_det.tiles_per_run > 1 else None,
        )
        self._frame_idx += 1
        times.full_detection = self.detector.runner.runs != full_runs
        chosen = select_faces(tracks, self.face_policy, frame_bgr.shape, self.max_faces, self._chosen_ids)
        self._chosen_ids = [tr.id for tr in chosen]
        self._face_ids = list(self._chosen_ids)
        # The tracker's own time: the detection call minus the time the detectors spent.
        times.track_ms = (time.perf_counter() - a) * 1e3 - (self._detector_run_ms() - before)
        return [tr.face for tr in chosen]

    def _crop_buffer(
        self, index: int, shape: tuple[int, ...], spare: list[NDArray[np.uint8]] | None
    ) -> NDArray[np.uint8]:
        """A uint8 buffer of ``shape`` for face ``index``'s crop ``(S, S, 3)`` or alpha ``(S, S)``.
        With ``spare`` (the replaced result's crops and alphas): one of them that fits, else a new
        array (the caller's slot then owns it); without: this call's slot of the pipeline's ring."""
        if spare is not None:
            for j, buf in enumerate(spare):
                if buf.shape == shape and buf.flags.writeable and buf.flags.c_contiguous:
                    return spare.pop(j)
            return np.zeros(shape, np.uint8)
        ring = self._crop_ring[self._ring_pos]
        key = (index, *shape)
        found = ring.get(key)
        if found is None:
            found = np.zeros(shape, np.uint8)
            ring[key] = found
        return found

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
        assert self.enhancer is not None
        size = self.enhancer.size_px
        m = align_matrix(kps, self.enhancer.spec.template or "ffhq_512", size)
        box = face_region(m, size, frame_bgr.shape[:2])
        if box is not None:
            x0, y0, x1, y1 = box
            scratch[y0:y1, x0:x1] = frame_bgr[y0:y1, x0:x1]
        self._paste.paste(scratch, crop, affine, alpha)
        return scratch
