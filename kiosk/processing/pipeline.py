"""The face-swap pipeline: detect → align → swap → (enhance) → paste back, on ONNX Runtime.

Public API::

    from kiosk.config import load_config
    from kiosk.processing.pipeline import SwapPipeline
    pipe = SwapPipeline.from_config(load_config("configs/demo.yaml"))
    pipe.set_source(face_bgr)      # NoFaceError if no face is found in the image
    faces = pipe.detect(frame_bgr) # list[kiosk.types.Face] in frame pixels
    out = pipe.process(frame_bgr)  # composited BGR frame, same shape as the input

:class:`SwapPipeline` wires four collaborators, each owning its own state: the opened models
(:class:`~kiosk.processing.model_set.ModelSet`), the face search with its tracker and region
detector (:class:`~kiosk.processing.face_search.FaceFinder`), the source latents
(:class:`~kiosk.processing.source_latents.SourceLatents`) and the per-face swap, mask, colour,
paste and enhance (:class:`~kiosk.processing.face_swap.FaceSwapStep`).

The inference thread runs it through :class:`kiosk.processing.swap_stage.SwapProcessor`; which
models a config needs is :mod:`kiosk.processing.models`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from kiosk.config import KioskConfig
from kiosk.inference import color as color_mod
from kiosk.inference import mask as mask_mod
from kiosk.inference.classic import ClassicSwapper
from kiosk.inference.color import ColorCorrector, ColorOptions
from kiosk.inference.detector import FaceDetector
from kiosk.inference.embedder import ArcFaceEmbedder
from kiosk.inference.enhancer import GfpganEnhancer
from kiosk.inference.kernels import warm_up as warm_up_kernels
from kiosk.inference.mask import MaskBuilder, MaskOptions, OcclusionParser
from kiosk.inference.sessions import ProviderOptions, SessionRunner
from kiosk.inference.swapper import InSwapper
from kiosk.processing.face_search import FaceFinder
from kiosk.processing.face_swap import CROP_RING, FaceSwapStep
from kiosk.processing.model_set import ModelSet
from kiosk.processing.source_latents import SourceLatents
from kiosk.processing.timing import Detection, StageTimes
from kiosk.processing.tracking import FaceTracker, Policy, TrackingOptions
from kiosk.types import Face, FrameBGR, SwappedFace

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["CROP_RING", "SwapPipeline"]

#: ``processing.assign: per_visitor``: called per frame with the faces' track ids and the faces,
#: returns each face's (source latent, library key).
AssignSources = Callable[[Sequence[int | None], Sequence[Face]], Sequence[tuple[NDArray[np.float32], str]]]


class _Forward(Generic[T]):
    """A collaborator's attribute under the pipeline's old name, typed: ``detector =
    _Forward[FaceDetector]("models")`` reads ``pipe.models.detector``. ``writable``: assigning it
    sets the collaborator's own (one owner, never a copy); else assigning raises AttributeError."""

    def __init__(self, owner: str, attr: str = "", *, writable: bool = False) -> None:
        self.owner, self.attr, self.writable = owner, attr, writable

    def __set_name__(self, cls: type, name: str) -> None:
        self.attr = self.attr or name

    @overload
    def __get__(self, obj: None, cls: type | None = None) -> _Forward[T]: ...
    @overload
    def __get__(self, obj: object, cls: type | None = None) -> T: ...
    def __get__(self, obj: object | None, cls: type | None = None) -> T | _Forward[T]:
        if obj is None:
            return self
        value: T = getattr(getattr(obj, self.owner), self.attr)
        return value

    def __set__(self, obj: object, value: T) -> None:
        if not self.writable:
            raise AttributeError(f"{self.attr} is {self.owner}.{self.attr}, read-only here")
        setattr(getattr(obj, self.owner), self.attr, value)


class SwapPipeline:
    """The four models wired together. Not thread-safe: one instance per thread.

    ``models`` (the opened models), ``finder`` (this frame's faces), ``sources`` (the face swapped
    in) and ``face_step`` (the per-face work) are its collaborators; the attributes forwarded
    below are their state under the names callers have always used."""

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
        self.models = ModelSet(detector, embedder, swapper, enhancer, face_parser, gpu_requested)
        self.finder = FaceFinder(detector, max_faces=max_faces, face_policy=face_policy, tracking=tracking)
        self.sources = SourceLatents(self.models)
        self.face_step = FaceSwapStep(
            self.models,
            enhance=enhance,
            enhance_blend=enhance_blend,
            mask=mask,
            color=color,
            swap_resolution=swap_resolution,
        )
        self.times = StageTimes()
        #: ``processing.assign: per_visitor``: each face's (source latent, library key); None:
        #: every face gets the source set by :meth:`set_source` / :meth:`use_latent`.
        self.assign_sources: AssignSources | None = None
        #: The library key each face of the last :meth:`process_into` was swapped with.
        self.face_keys: list[str] = []
        #: Milliseconds per model of the last :meth:`warm_up` (empty until it ran).
        self.warmup_ms: dict[str, float] = {}

    @classmethod
    def from_config(cls, cfg: KioskConfig, enhance: bool | None = None) -> SwapPipeline:
        """Open the configured models. Raises :class:`ModelError` (missing, corrupt, wrong signature)
        with a one-line message naming the file and the fix."""
        use_enh = cfg.processing.enhance if enhance is None else enhance
        models = ModelSet.open(cfg, use_enh)
        proc = cfg.processing
        pipe = cls(
            models.detector,
            models.embedder,
            models.swapper,
            models.enhancer,
            max_faces=proc.max_faces,
            enhance=use_enh,
            enhance_blend=proc.enhance_blend,
            gpu_requested=models.gpu_requested,
            tracking=TrackingOptions.of(proc) if proc.tracking else None,
            face_policy=proc.face_policy,
            mask=MaskOptions.of(cfg.mask),
            color=ColorOptions.of(proc),
            swap_resolution=proc.swap_resolution,
            face_parser=models.face_parser,
        )
        if ProviderOptions.of(cfg.models.providers).warmup:
            pipe.warm_up()
        return pipe

    # -- the collaborators' state, under the names callers have always used ----------------------
    detector = _Forward[FaceDetector]("models")
    embedder = _Forward[ArcFaceEmbedder | None]("models")
    swapper = _Forward[InSwapper | ClassicSwapper]("models", writable=True)
    enhancer = _Forward[GfpganEnhancer | None]("models")
    face_parser = _Forward[OcclusionParser | None]("models", writable=True)
    gpu_requested = _Forward[str | None]("models")
    provider = _Forward[str]("models")
    classic = _Forward[bool]("models")
    gpu_fallback = _Forward[bool]("models")
    masks = _Forward[MaskBuilder]("face_step", writable=True)
    color = _Forward[ColorCorrector]("face_step")
    #: Whether faces are enhanced (the staff toggle; False without an enhancer).
    enhance = _Forward[bool]("face_step", writable=True)
    enhance_blend = _Forward[float]("face_step")
    swap_resolution = _Forward[int]("face_step")
    tracker = _Forward[FaceTracker | None]("finder", writable=True)
    tracking_options = _Forward[TrackingOptions | None]("finder")
    max_faces = _Forward[int]("finder")
    face_policy = _Forward[Policy]("finder")
    source_face = _Forward[Face | None]("sources", "face")
    source_key = _Forward[str | None]("sources", "key")
    has_source = _Forward[bool]("sources")

    @property
    def runners(self) -> list[SessionRunner]:
        """Every model's session runner (for the time spent inside ONNX Runtime)."""
        roi = self.finder.roi_detector
        return self.models.runners() + ([roi.runner] if roi is not None else [])

    # -- tracking and warm-up --------------------------------------------------------------------
    def set_tracking(self, options: TrackingOptions | None) -> None:
        """Follow faces across frames with ``options`` (see :meth:`FaceFinder.set_tracking`)."""
        self.finder.set_tracking(options)

    def reset_tracking(self) -> None:
        """Forget the tracked faces (a new scene: the source changed or restarted)."""
        self.finder.reset()
        self.face_step.color.reset()

    def warm_up(self) -> dict[str, float]:
        """Run every model once on zeros (and compile the pixel kernels), so the first real frame
        does not pay for engine builds, algorithm searches or JIT compilation. Returns and logs the
        milliseconds per model."""
        t0 = time.perf_counter()
        warm_up_kernels()
        mask_mod.warm_up()
        color_mod.warm_up()
        out = {"kernels": (time.perf_counter() - t0) * 1e3}
        out |= self.finder.warm_up()
        out |= self.models.warm_up(self.face_step.swap_resolution)
        out["paste"] = self.face_step.warm_up()
        self.warmup_ms = out
        log.info(
            "models warmed up in %.0f ms (%s)",
            (time.perf_counter() - t0) * 1e3,
            ", ".join(f"{k} {v:.0f} ms" for k, v in out.items()),
        )
        return out

    # -- source face -----------------------------------------------------------------------------
    def set_source(self, face_bgr: FrameBGR, key: str | None = None) -> Face:
        """Use the largest face in ``face_bgr`` as the face swapped in (see
        :meth:`SourceLatents.set_source`). Raises :class:`NoFaceError` if the image has no face."""
        return self.sources.set_source(face_bgr, key)

    def find_source_faces(self, face_bgr: FrameBGR) -> tuple[list[Face], FrameBGR]:
        """All faces of a source photo, largest first, and the image they refer to (the face library)."""
        return self.sources.find_source_faces(face_bgr)

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]:
        """The swapper's source latent for ``face`` in ``image_bgr``."""
        return self.sources.source_latent(image_bgr, face)

    def use_latent(self, latent: NDArray[np.float32], key: str) -> None:
        """Swap in a precomputed source latent (a face library entry); costs nothing per frame."""
        self.sources.use_latent(latent, key)

    # -- per frame -------------------------------------------------------------------------------
    def detect(self, frame_bgr: FrameBGR) -> list[Face]:
        """Faces in ``frame_bgr``: boxes, scores, 5x2 keypoints in frame pixels, best first."""
        return self.models.detector.detect(frame_bgr)

    def find_faces(self, frame_bgr: FrameBGR, t: float | None = None) -> Detection:
        """The first stage of :meth:`process_into` on its own: this frame's faces and their cost.
        Tracking state advances, so call it once per frame, in frame order."""
        return self.finder.find_faces(frame_bgr, t)

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
        if self.sources.latent is None:
            raise RuntimeError("no source face: call set_source(face_bgr) first")
        if paste and (out_bgr is None or out_bgr.shape != frame_bgr.shape):
            shape = None if out_bgr is None else out_bgr.shape
            raise ValueError(f"out has shape {shape}, frame has {frame_bgr.shape}")
        times = StageTimes()
        session_before = sum(r.run_ms for r in self.runners)
        t0 = time.perf_counter()
        t_frame = t0 if t is None else t
        # 1. this frame's faces (detect_ms, track_ms): found here, or handed in by the worker
        faces, ids = self._frame_faces(frame_bgr, t_frame, detected, times)
        if paste:
            assert out_bgr is not None
            np.copyto(out_bgr, frame_bgr)
        # 2. which source face each one gets
        latents = self._assign_latents(ids, faces)
        # 3. swap, mask, colour, paste and enhance each face (align_ms ... enhance_ms)
        result = self.face_step.swap_faces(
            frame_bgr, out_bgr if paste else None, faces, ids, latents, t_frame, reuse, times
        )
        times.faces = len(faces)
        times.total_ms = (time.perf_counter() - t0) * 1e3
        times.session_ms = sum(r.run_ms for r in self.runners) - session_before
        if detected is not None:
            times.session_ms += detected.session_ms
        self.times = times
        return result

    def _frame_faces(
        self, frame_bgr: FrameBGR, t: float, detected: Detection | None, times: StageTimes
    ) -> tuple[list[Face], list[int | None]]:
        """This frame's faces and their track ids, with what finding them cost in ``times``."""
        if detected is None:
            t0 = time.perf_counter()
            faces = self.finder.find(frame_bgr, t, times)
            times.detect_ms = (time.perf_counter() - t0) * 1e3
            return faces, self.finder.face_ids
        faces = detected.faces
        times.detect_ms, times.track_ms = detected.detect_ms, detected.track_ms
        times.full_detection = detected.full_detection
        ids = list(detected.ids)
        return faces, ids if len(ids) == len(faces) else [None] * len(faces)

    def _assign_latents(self, ids: Sequence[int | None], faces: Sequence[Face]) -> list[NDArray[np.float32]]:
        """Each face's source latent (per visitor, or the one set); sets :attr:`face_keys`."""
        if self.assign_sources is not None:
            sources = self.assign_sources(ids, faces)
            self.face_keys = [key for _, key in sources]
            return [latent for latent, _ in sources]
        assert self.sources.latent is not None
        self.face_keys = [self.sources.key or ""] * len(faces)
        return [self.sources.latent] * len(faces)
