"""The one builder of the kiosk's processing stage (:func:`build_booth_processor`): the face pipeline
driven by the face library and the staff controls. The kiosk, the tests and anything else that
wants the stage from a config use it; ``processing.source_face`` alone is a library of one photo
(:func:`kiosk.booth.faces.make_library`)."""

from __future__ import annotations

import hashlib
import logging

from kiosk.booth.controls import ControlState
from kiosk.booth.faces import FaceLibrary
from kiosk.booth.photo_files import ModelDigests
from kiosk.config import KioskConfig
from kiosk.inference.errors import ModelError
from kiosk.processing.models import licence_notice, missing_models, missing_models_notice, model_paths
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.pipelined import open_pipelined
from kiosk.processing.stage import PassThrough, Processor, StageUnavailable
from kiosk.processing.swap_stage import SwapProcessor, stage_composite

log = logging.getLogger(__name__)


def booth_model_files(cfg: KioskConfig) -> tuple[str, ...]:
    """The model files a booth stage is built from: watched so that a repaired file is retried."""
    return tuple(str(p) for p in model_paths(cfg).values() if p is not None)


def _classic_digest(detector_digest: str, mesh_digest: str = "") -> str:
    """The face cache's model digest of the classic swap: the detector, the face mesh ("" when
    the swap runs without one) and the source layout."""
    from kiosk.inference.classic import SOURCE_PX, SOURCE_VERSION

    tag = f"classic-v{SOURCE_VERSION}-{SOURCE_PX}:{detector_digest}:mesh={mesh_digest}"
    return hashlib.sha256(tag.encode()).hexdigest()


def build_booth_processor(cfg: KioskConfig, library: FaceLibrary, controls: ControlState) -> Processor:
    """The booth's processing stage: a :class:`~kiosk.processing.swap_stage.SwapProcessor` swapping the face staff
    selected (``controls.selected_key``), refreshing the library every ``faces.rescan_s`` on the
    inference thread (the library's one writer; the first refresh is its first call).

    A pass-through when the config asks for none (processing off, no source faces); a source photo
    without a usable face is the library's problem, shown by the stage as its notice.
    :class:`~kiosk.processing.stage.StageUnavailable` when a model file is missing or corrupt: the
    inference thread keeps what it shows (the last working stage, else the notice) and retries
    when one of the model files changes or after its back-off. A caller that wants a stage anyway
    catches it: ``PassThrough(exc.notice)`` shows the camera with that one line."""
    if not cfg.processing.enabled:
        return PassThrough()
    # Missing models first: that is what a fresh install (and the demo) lacks, and the notice says
    # which command fetches them; the build is retried as soon as the files appear.
    watch = booth_model_files(cfg)
    # A non-commercial model the booth has not accepted is never opened (nor asked to be fetched).
    if notice := licence_notice(cfg):
        log.error("%s", notice)
        raise StageUnavailable(notice, watch)
    if missing_models(cfg, include_enhancer=False):  # the enhancer is optional here
        raise StageUnavailable(missing_models_notice(cfg, include_enhancer=False), watch)
    if not cfg.faces.dir and not cfg.processing.source_face:
        return PassThrough("no source faces — set faces.dir (a folder of photos) in the config")
    paths = model_paths(cfg)
    enhancer = paths["enhancer"]
    try:
        pipe = SwapPipeline.from_config(cfg, enhance=enhancer is not None and enhancer.is_file())
        digests = ModelDigests(cfg.resolve(cfg.faces.cache_dir) / "models.json")
        if pipe.classic:
            # The classic "latent" is the photo's aligned face and its mesh: it depends on the
            # detector's keypoints, the mesh model in use and the crop layout, not on any embedder
            # or swapper file. A mesh that failed to open gives entries without a mesh, under
            # another key than those with one.
            assert paths["detector"] is not None
            mesh = getattr(pipe.models.swapper, "mesh", None)
            mesh_digest = digests.digest([mesh.path]) if mesh is not None else ""
            digest = _classic_digest(digests.digest([paths["detector"]]), mesh_digest)
        else:
            digest = digests.digest([p for p in (paths["embedder"], paths["swapper"]) if p is not None])
        pipelined = open_pipelined(cfg, pipe)
    except ModelError as exc:
        log.error("%s", exc)
        raise StageUnavailable(str(exc), watch) from exc
    processor = SwapProcessor(
        pipe,
        # live display moves the crops onto newer frames in the shader: never paste on the CPU then
        composite=stage_composite(cfg),
        pipelined=pipelined,
        library=library,
        controls=controls,
        rescan_s=cfg.faces.rescan_s,
        # New photos are scanned between frames, at most this long per frame: a folder of them
        # never looks like a hung model call to the stall supervisor.
        scan_budget_s=min(1.0, cfg.processing.stall_s / 4),
        model_digest=digest,
        assign=cfg.processing.assign,
    )
    # No refresh here (this runs on the loader thread): the library has one writer, the inference
    # thread, whose first call of the processor loads the faces.
    log.info("face swap ready: %s; faces load on its first frame", processor.name)
    return processor
