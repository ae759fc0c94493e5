"""The face-swap pipeline: detect → align → swap → (enhance) → paste back, on ONNX Runtime.

Public API::

    from kiosk.config import load_config
    from kiosk.pipeline import SwapPipeline
    pipe = SwapPipeline.from_config(load_config("configs/demo.yaml"))
    pipe.set_source(face_bgr)      # NoFaceError if no face is found in the image
    faces = pipe.detect(frame_bgr) # list[kiosk.types.Face] in frame pixels
    out = pipe.process(frame_bgr)  # composited BGR frame, same shape as the input

For the kiosk's inference thread, :func:`build_processor` returns a
:class:`~kiosk.processing.Processor`: a :class:`PipelineProcessor`, or a
:class:`~kiosk.processing.PassThrough` whose notice says what is missing and the command that fixes it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.config import KioskConfig
from kiosk.inference.detector import FaceDetector, make_detector
from kiosk.inference.embedder import ArcFaceEmbedder
from kiosk.inference.enhancer import GfpganEnhancer
from kiosk.inference.errors import ImageError, ModelError, NoFaceError
from kiosk.inference.paste import PasteBack
from kiosk.inference.sessions import CPU, PROVIDER_NAMES, create_session
from kiosk.inference.specs import ROLES, Role, spec_for_file
from kiosk.inference.swapper import InSwapper
from kiosk.processing import PassThrough, Processor
from kiosk.types import Face, FrameBGR, SwappedFace, SwapResult

log = logging.getLogger(__name__)

__all__ = [
    "PipelineProcessor",
    "StageTimes",
    "SwapPipeline",
    "build_processor",
    "model_paths",
    "open_detector",
    "missing_models",
    "read_image",
]


def model_paths(cfg: KioskConfig) -> dict[Role, Path | None]:
    """Resolved file of each role. A bare file name lives in ``models.dir``; a value with a folder
    part is a path relative to the config file. ``None``: role disabled (enhancer: null)."""
    out: dict[Role, Path | None] = {}
    models_dir = cfg.resolve(cfg.models.dir)
    for role in ROLES:
        value = getattr(cfg.models, role)
        if value is None:
            out[role] = None
            continue
        p = Path(value).expanduser()
        out[role] = cfg.resolve(p) if (p.is_absolute() or len(p.parts) > 1) else models_dir / p
    return out


def missing_models(cfg: KioskConfig, include_enhancer: bool | None = None) -> list[Path]:
    """Model files the config needs that are not on disk. The enhancer counts only when enabled."""
    need_enh = cfg.processing.enhance if include_enhancer is None else include_enhancer
    out = []
    for role, p in model_paths(cfg).items():
        if p is None or (role == "enhancer" and not need_enh):
            continue
        if not p.is_file():
            out.append(p)
    return out


def read_image(path: str | Path) -> FrameBGR:
    """Read an image as BGR uint8; :class:`ImageError` with a one-line message if it cannot be read."""
    p = Path(path)
    if not p.is_file():
        raise ImageError(f"{p}: image file not found (check the path)")
    data = np.fromfile(str(p), dtype=np.uint8)
    img = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if img is None:
        raise ImageError(f"{p}: cannot decode the image (is it a JPEG/PNG/BMP/WebP file?)")
    return np.asarray(img, dtype=np.uint8)


def open_detector(cfg: KioskConfig) -> FaceDetector:
    """Only the configured detector (what ``kiosk detect`` needs)."""
    p = model_paths(cfg)["detector"]
    assert p is not None
    session, used = create_session(p, cfg.models.providers, base_dir=cfg.base_dir)
    proc = cfg.processing
    return make_detector(
        session, spec_for_file("detector", p), p, used, proc.det_size, proc.det_threshold, proc.max_faces
    )


@dataclass
class StageTimes:
    """Milliseconds spent per stage in the last :meth:`SwapPipeline.process` call (summed over faces)."""

    detect_ms: float = 0.0
    align_ms: float = 0.0
    swap_ms: float = 0.0
    enhance_ms: float = 0.0
    paste_ms: float = 0.0
    faces: int = 0
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class _SourceFace:
    face: Face
    image_bgr: FrameBGR


class SwapPipeline:
    """The four models wired together. Not thread-safe: one instance per thread."""

    def __init__(
        self,
        detector: FaceDetector,
        embedder: ArcFaceEmbedder,
        swapper: InSwapper,
        enhancer: GfpganEnhancer | None = None,
        *,
        max_faces: int = 4,
        enhance: bool = False,
        enhance_blend: float = 1.0,
        gpu_requested: str | None = None,
    ) -> None:
        self.detector = detector
        self.embedder = embedder
        self.swapper = swapper
        self.enhancer = enhancer
        self.max_faces = int(max_faces)
        self.enhance = bool(enhance and enhancer is not None)
        self.enhance_blend = float(enhance_blend)
        self.gpu_requested = gpu_requested
        self.times = StageTimes()
        self._paste = PasteBack()
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
        prov_cfg = cfg.models.providers
        base = cfg.base_dir
        proc = cfg.processing

        def open_role(role: Role) -> tuple[object, str, Path]:
            p = paths[role]
            assert p is not None
            session, used = create_session(p, prov_cfg, base_dir=base)
            return session, used, p

        detector = open_detector(cfg)
        s, used, p = open_role("embedder")
        embedder = ArcFaceEmbedder(s, spec_for_file("embedder", p), p, used)
        s, used, p = open_role("swapper")
        swapper = InSwapper(s, spec_for_file("swapper", p), p, used)
        enhancer = None
        if use_enh and paths["enhancer"] is not None:
            s, used, p = open_role("enhancer")
            enhancer = GfpganEnhancer(s, spec_for_file("enhancer", p), p, used)
        first = prov_cfg.order[0]
        gpu = PROVIDER_NAMES[first] if first != "cpu" else None
        return cls(
            detector,
            embedder,
            swapper,
            enhancer,
            max_faces=proc.max_faces,
            enhance=use_enh,
            enhance_blend=proc.enhance_blend,
            gpu_requested=gpu,
        )

    @property
    def provider(self) -> str:
        """The provider the swapper (the heaviest model) actually runs on."""
        return self.swapper.provider

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
            emb = self.embedder.embed(face.image_bgr, face.face.kps)
            self._latents[key] = self.swapper.latent(emb)
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
        faces.sort(key=_box_area, reverse=True)
        return faces, image

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]:
        """The swapper's source latent for ``face`` in ``image_bgr`` (embedding @ emap, normalised)."""
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

    def process_into(self, frame_bgr: FrameBGR, out_bgr: FrameBGR) -> list[SwappedFace]:
        """Composite into the preallocated ``out_bgr`` (same shape as ``frame_bgr``); return the swapped
        faces (crop, frame→crop affine, detection) for a GPU compositor."""
        if self._latent is None:
            raise RuntimeError("no source face: call set_source(face_bgr) first")
        if out_bgr.shape != frame_bgr.shape:
            raise ValueError(f"out has shape {out_bgr.shape}, frame has {frame_bgr.shape}")
        t = StageTimes()
        t0 = time.perf_counter()
        faces = self.detector.detect(frame_bgr)[: self.max_faces]
        t1 = time.perf_counter()
        t.detect_ms = (t1 - t0) * 1e3
        np.copyto(out_bgr, frame_bgr)
        result: list[SwappedFace] = []
        for face in faces:
            a = time.perf_counter()
            affine = self.swapper.align(frame_bgr, face.kps)
            b = time.perf_counter()
            crop = self.swapper.to_bgr(self.swapper.infer(self._latent))
            c = time.perf_counter()
            self._paste.paste(out_bgr, crop, affine)
            d = time.perf_counter()
            t.align_ms += (b - a) * 1e3
            t.swap_ms += (c - b) * 1e3
            t.paste_ms += (d - c) * 1e3
            if self.enhance and self.enhancer is not None:
                crop, affine = self.enhancer.enhance(out_bgr, face.kps, self.enhance_blend)
                e = time.perf_counter()
                self._paste.paste(out_bgr, crop, affine)
                f = time.perf_counter()
                t.enhance_ms += (e - d) * 1e3
                t.paste_ms += (f - e) * 1e3
            result.append(SwappedFace(crop_bgr=crop, affine=affine, face=face))
        t.faces = len(faces)
        self.times = t
        return result


def _box_area(face: Face) -> float:
    b = face.box_xyxy
    return float((b[2] - b[0]) * (b[3] - b[1]))


class PipelineProcessor:
    """:class:`~kiosk.processing.Processor` running :class:`SwapPipeline` on each new frame."""

    def __init__(self, pipe: SwapPipeline, notice: str = "") -> None:
        self.pipe = pipe
        fallback = " — GPU FALLBACK" if pipe.gpu_fallback else ""
        self.name = f"swap ({pipe.provider}{fallback})"
        if pipe.gpu_fallback and not notice:
            notice = f"{pipe.gpu_requested} unavailable: running on CPU (slow) — run: kiosk doctor"
        self.notice = notice
        self._error_logged = False

    def select_source(self, face_bgr: FrameBGR, key: str | None = None) -> Face:
        """Switch the face swapped in (latents are cached per ``key``)."""
        return self.pipe.set_source(face_bgr, key)

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        try:
            faces = self.pipe.process_into(frame_bgr, out.frame_bgr)
        except Exception as exc:  # keep showing the camera whatever a model does
            if not self._error_logged:
                log.exception("face swap failed; showing the camera unchanged")
                self._error_logged = True
            if out.frame_bgr.shape == frame_bgr.shape:
                np.copyto(out.frame_bgr, frame_bgr)
            out.faces.clear()
            out.notice = f"swap error: {str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}"
            return
        out.faces[:] = faces
        out.notice = self.notice


def build_processor(cfg: KioskConfig) -> Processor:
    """The processor for the inference thread. Never raises for a missing or broken model or source
    face: it returns a :class:`PassThrough` whose one-line notice names the problem and the fix."""
    if not cfg.processing.enabled:
        return PassThrough(notice="")
    missing = missing_models(cfg)
    if missing:
        folder = cfg.resolve(cfg.models.dir)
        names = ", ".join(p.name for p in missing)
        return PassThrough(notice=f"models missing: {names} in {folder} — run: kiosk models fetch")
    if not cfg.processing.source_face:
        return PassThrough(
            notice="no source face configured — set processing.source_face to a photo in the config"
        )
    try:
        pipe = SwapPipeline.from_config(cfg)
    except ModelError as exc:
        log.error("%s", exc)
        return PassThrough(notice=f"{exc}")
    src_path = cfg.resolve(cfg.processing.source_face)
    try:
        image = read_image(src_path)
        pipe.set_source(image, key=str(src_path))
    except ImageError as exc:
        return PassThrough(notice=f"source face: {exc}")
    except NoFaceError:
        return PassThrough(notice=f"no face found in {src_path} — use a clear frontal photo")
    proc = PipelineProcessor(pipe)
    log.info("face swap ready: %s, source %s", proc.name, src_path)
    return proc
