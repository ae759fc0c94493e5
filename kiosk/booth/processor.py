"""The kiosk's processing stage: the face pipeline driven by the face library and staff controls."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from kiosk.booth.controls import ControlState
from kiosk.booth.faces import FaceLibrary, ModelDigests
from kiosk.config import KioskConfig
from kiosk.inference.errors import ModelError
from kiosk.pipeline import SwapPipeline, missing_models_notice, model_paths, stage_label
from kiosk.processing import PassThrough, Processor
from kiosk.types import FrameBGR, SwapResult

if TYPE_CHECKING:
    from kiosk.pipelined import PipelinedDetection

log = logging.getLogger(__name__)


class BoothProcessor:
    """Swaps the face staff selected (``controls.selected_key``) into every frame.

    Runs on the inference thread, which also owns the pipeline; the library is refreshed from
    here every ``faces.rescan_s`` (a ``stat`` per photo unless something changed). Exceptions
    propagate to the inference thread, which passes frames through and rebuilds this stage.
    """

    def __init__(
        self,
        pipe: SwapPipeline,
        library: FaceLibrary,
        controls: ControlState,
        cfg: KioskConfig,
        model_digest: str,
        pipelined: PipelinedDetection | None = None,
    ) -> None:
        self.pipe = pipe
        self.pipelined = pipelined
        self.library = library
        self.controls = controls
        self.rescan_s = cfg.faces.rescan_s
        # Live display moves the crops onto newer frames in the shader: never paste on the CPU then.
        self.gpu_composite = cfg.display.composite == "gpu" or cfg.display.mode == "live"
        self.model_digest = model_digest
        self.name, self.notice = stage_label(pipe)
        folder = str(library.folder) if library.folder else "faces.dir"
        self._no_faces = PassThrough(f"no usable face photos — add photos to {folder}")
        self._next_scan = time.monotonic() + self.rescan_s

    @property
    def result_lag(self) -> int:
        """Frames between the one handed to :meth:`process` and the one its result shows."""
        return self.pipelined.result_lag if self.pipelined is not None else 0

    def close(self) -> None:
        """Stop the detection worker (pipelined); also done when the processor is dropped."""
        if self.pipelined is not None:
            self.pipelined.close()

    def refresh_library(self) -> None:
        self.library.refresh(self.pipe, self.model_digest)
        self._next_scan = time.monotonic() + self.rescan_s

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        if time.monotonic() >= self._next_scan:
            self.refresh_library()
        entries = self.library.entries
        if not entries:
            self._no_faces.process(frame_bgr, out)
            return
        key = self.controls.selected_key
        entry = next((e for e in entries if e.key == key), entries[0])
        if self.pipe.source_key != entry.key:
            self.pipe.use_latent(entry.latent, entry.key)
        self.pipe.enhance = self.controls.enhance_enabled and self.pipe.enhancer is not None
        detected = None
        if self.pipelined is not None:  # swap the previous frame while this one is detected
            job = self.pipelined.next(frame_bgr)
            frame_bgr, detected = job.frame_bgr, job.wait()
        if self.gpu_composite:
            # The renderer pastes the crops in its shader; publish the camera frame as it is.
            faces = self.pipe.process_into(frame_bgr, None, paste=False, reuse=out.faces, detected=detected)
            np.copyto(out.frame_bgr, frame_bgr)
        else:
            faces = self.pipe.process_into(frame_bgr, out.frame_bgr, detected=detected)
        out.faces[:] = faces
        out.faces_pasted = not self.gpu_composite
        out.faces_detected = self.pipe.times.faces
        out.notice = self.notice


def build_booth_processor(cfg: KioskConfig, library: FaceLibrary, controls: ControlState) -> Processor:
    """The booth's processing stage, or a pass-through whose notice names what is missing and the fix."""
    if not cfg.processing.enabled:
        return PassThrough()
    missing = missing_models_notice(cfg, include_enhancer=False)  # the enhancer is optional here
    if missing:
        return PassThrough(missing)
    if not cfg.faces.dir and not cfg.processing.source_face:
        return PassThrough("no source faces — set faces.dir (a folder of photos) in the config")
    paths = model_paths(cfg)
    enhancer = paths["enhancer"]
    try:
        pipe = SwapPipeline.from_config(cfg, enhance=enhancer is not None and enhancer.is_file())
        digest = ModelDigests(cfg.resolve(cfg.faces.cache_dir) / "models.json").digest(
            [p for p in (paths["embedder"], paths["swapper"]) if p is not None]
        )
    except ModelError as exc:
        log.error("%s", exc)
        return PassThrough(str(exc))
    pipelined = None
    if cfg.processing.pipelined:
        from kiosk.pipelined import PipelinedDetection

        try:
            pipelined = PipelinedDetection.from_config(cfg, pipe)
        except ModelError as exc:
            log.error("%s", exc)
            return PassThrough(str(exc))
    processor = BoothProcessor(pipe, library, controls, cfg, digest, pipelined)
    processor.refresh_library()
    log.info("face swap ready: %s, %d faces", processor.name, len(library.entries))
    return processor
