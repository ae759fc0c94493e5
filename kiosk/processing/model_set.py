"""The opened models of one pipeline (:class:`ModelSet`): opening them from a config, the provider
they run on, their session runners and their warm-up. Which files a config needs is
:mod:`kiosk.processing.models`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kiosk.config import KioskConfig
from kiosk.inference.align import arcface_template
from kiosk.inference.classic import ClassicSwapper
from kiosk.inference.detector import FaceDetector
from kiosk.inference.embedder import ArcFaceEmbedder
from kiosk.inference.enhancer import GfpganEnhancer
from kiosk.inference.errors import LicenceError
from kiosk.inference.mask import OcclusionParser
from kiosk.inference.sessions import CPU, PROVIDER_NAMES, ProviderOptions, SessionRunner, create_session
from kiosk.inference.specs import Role, spec_for_file
from kiosk.inference.swapper import InSwapper
from kiosk.processing.models import (
    licence_problems,
    model_paths,
    open_detector,
    open_mesh,
    open_parser,
    swapper_mode,
)


@dataclass
class ModelSet:
    """The opened models of one :class:`~kiosk.processing.pipeline.SwapPipeline`: the detector, the
    embedder (None for the classic swap), the swapper, the enhancer and the occlusion face parser
    (None when off), and the GPU provider the config asked for.

    The pipeline's collaborators (face search, source latents, the per-face swap) hold this one
    object, never copies of its models, so a model replaced on the pipeline (a test's stand-in
    parser, ``kiosk identity``'s classic swapper) is the one every step uses."""

    detector: FaceDetector
    embedder: ArcFaceEmbedder | None
    swapper: InSwapper | ClassicSwapper
    enhancer: GfpganEnhancer | None = None
    #: Occlusion masks come from this parser when ``mask.occlusion`` is on (None: no occlusion).
    face_parser: OcclusionParser | None = None
    #: The GPU provider ``models.providers`` put first (None: the CPU was asked for).
    gpu_requested: str | None = None

    @classmethod
    def open(cls, cfg: KioskConfig, enhance: bool) -> ModelSet:
        """Open the configured models (the enhancer only with ``enhance``). Raises
        :class:`ModelError` (missing, corrupt, wrong signature) with a one-line message naming the
        file and the fix; :class:`LicenceError` for a non-commercial model the config has not
        accepted (the one place every caller, the booth, ``kiosk swap``, ``bench``, ``detect``,
        opens models through, so none runs such weights by accident)."""
        if problems := licence_problems(cfg, enhance):
            raise LicenceError(problems[0])
        paths = model_paths(cfg)
        prov_cfg = ProviderOptions.of(cfg.models.providers)
        iob, dev = prov_cfg.iobinding, prov_cfg.device_id

        def open_role(role: Role, cuda_graph: bool = False) -> tuple[object, str, Path]:
            p = paths[role]
            assert p is not None
            session, used = create_session(p, prov_cfg, base_dir=cfg.base_dir, cuda_graph=cuda_graph)
            return session, used, p

        detector = open_detector(cfg)
        embedder: ArcFaceEmbedder | None = None
        swapper: InSwapper | ClassicSwapper
        if swapper_mode(cfg) == "classic":  # no weights, no embedder: the photo's own face
            swapper = ClassicSwapper(mesh=open_mesh(cfg))  # the mesh, or None: the five keypoints
        else:
            s, used, p = open_role("embedder")
            embedder = ArcFaceEmbedder(s, spec_for_file("embedder", p), p, used, iobinding=iob, device_id=dev)
            s, used, p = open_role("swapper", cuda_graph=True)  # the one fixed-shape model per frame
            swapper = InSwapper(s, spec_for_file("swapper", p), p, used, iobinding=iob, device_id=dev)
        enhancer = None
        if enhance and paths["enhancer"] is not None:
            s, used, p = open_role("enhancer")
            enhancer = GfpganEnhancer(s, spec_for_file("enhancer", p), p, used, iobinding=iob, device_id=dev)
        first = prov_cfg.order[0]
        # mask.occlusion: the face parser (models.parser; a missing file is a missing model).
        return cls(
            detector,
            embedder,
            swapper,
            enhancer,
            face_parser=open_parser(cfg),
            gpu_requested=PROVIDER_NAMES[first] if first != "cpu" else None,
        )

    @property
    def classic(self) -> bool:
        """The classic swap (the library photo's own face), not a neural swapper."""
        return isinstance(self.swapper, ClassicSwapper)

    @property
    def provider(self) -> str:
        """The provider the swapper (the heaviest model) actually runs on; for the classic swap,
        which runs no model, the detector's."""
        return self.detector.provider if self.classic else self.swapper.provider

    @property
    def gpu_fallback(self) -> bool:
        """True when a GPU provider was requested but the models run on the CPU."""
        return self.gpu_requested is not None and self.provider == CPU

    def runners(self) -> list[SessionRunner]:
        """Every model's session runner but the region detector's (the face search owns that one)."""
        out = [self.detector.runner]
        if self.embedder is not None:
            out.append(self.embedder.runner)
        if self.swapper.runner is not None:  # InSwapper, or the classic swap's face mesh
            out.append(self.swapper.runner)
        if self.enhancer is not None:
            out.append(self.enhancer.runner)
        runner = getattr(self.face_parser, "runner", None)  # a FaceParser (fakes in tests have none)
        if isinstance(runner, SessionRunner):
            out.append(runner)
        return out

    def warm_up(self, swap_resolution: int) -> dict[str, float]:
        """Run the embedder, the swapper (also as ``swap_resolution`` tiles when that is not its own
        size) and the enhancer once on zeros: milliseconds per model. The detectors are the face
        search's to warm up."""
        out: dict[str, float] = {}
        if self.embedder is not None:
            out["embedder"] = self.embedder.warm_up()
        out["swapper"] = self.swapper.warm_up()
        if swap_resolution != self.swapper.size_px and isinstance(self.swapper, InSwapper):
            a = time.perf_counter()
            zeros = np.zeros((swap_resolution, swap_resolution, 3), np.uint8)
            kps = arcface_template(self.swapper.size_px)  # any non-degenerate five points
            self.swapper.align_tiles(zeros, kps, swap_resolution)
            self.swapper.infer_tiles(np.zeros((1, 512), np.float32))
            out["swapper_tiles"] = (time.perf_counter() - a) * 1e3
        if self.enhancer is not None:
            out["enhancer"] = self.enhancer.warm_up()
        return out
