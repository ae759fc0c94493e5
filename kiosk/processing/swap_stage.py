"""The processing stage the inference thread runs around :class:`~kiosk.processing.pipeline.SwapPipeline`:
:class:`SwapProcessor` (the booth, a fixed ``processing.source_face``, ``kiosk bench``), its label
with the swapper's licence and where it composites. The one builder of the stage from a config is
:func:`kiosk.processing.booth_stage.build_booth_processor`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from kiosk.config import KioskConfig
from kiosk.inference import jit
from kiosk.processing.assign import VisitorFaces
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.pipelined import PipelinedDetection
from kiosk.processing.stage import PassThrough
from kiosk.types import Face, FrameBGR, SwapResult

if TYPE_CHECKING:
    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import FaceEntry, FaceLibrary, LibrarySnapshot

log = logging.getLogger(__name__)


def short_licence(licence: str) -> str:
    """A model licence in a few words, for the status line: ``MIT``, ``non-commercial only``."""
    low = licence.lower()
    if "non-commercial" in low:
        return "non-commercial only"
    for name in ("MIT", "Apache-2.0"):
        if name.lower() in low:
            return name
    return licence.split(";")[0][:40]


def stage_label(pipe: SwapPipeline) -> tuple[str, str]:
    """A processing stage's name for the overlay and the status line (the swap mode, the provider,
    the swapper's licence) and its standing notice, which says loudly when a requested GPU
    provider fell back to the CPU."""
    mode = "classic swap" if pipe.classic else "swap"
    licence = f" · {short_licence(pipe.swapper.spec.licence)}"
    if pipe.classic and pipe.gpu_fallback:
        # The classic swap runs no model; the small detector on the CPU is no reason to warn staff.
        log.warning(
            "%s unavailable: the detector runs on the CPU (the classic swap runs no model)",
            pipe.gpu_requested,
        )
        return f"{mode} ({pipe.provider}){licence}", ""
    if not pipe.gpu_fallback:
        return f"{mode} ({pipe.provider}){licence}", ""
    return (
        f"{mode} ({pipe.provider} — GPU FALLBACK){licence}",
        f"{pipe.gpu_requested} unavailable: running on CPU (slow) — run: kiosk doctor",
    )


class SwapProcessor:
    """The one :class:`~kiosk.processing.stage.Processor` around :class:`SwapPipeline`: the booth, the
    kiosk with a fixed ``processing.source_face`` and ``kiosk bench`` all run this class.

    Options: ``composite`` ``"cpu"`` pastes the crops into ``out.frame_bgr`` (``faces_pasted``
    True); ``"gpu"`` publishes the camera frame and the crops for the shader (``faces_pasted``
    False). ``library`` + ``controls``: swap the face staff selected (``controls.selected_key``),
    refreshing the library every ``rescan_s`` on the thread that calls :meth:`process` (its one
    writer), at most ``scan_budget_s`` of new photo scans per frame (the rest on the next frames);
    without them the source set on ``pipe`` is used. ``on_frame``: called with the pipeline after
    each successful frame (the bench records its stage times there).

    Error policy: this class catches nothing. A model call that raises propagates to the
    inference thread, whose ladder (:mod:`kiosk.processing.thread`) decides: skip that frame, rebuild the
    stage, or keep the last working one.
    """

    def __init__(
        self,
        pipe: SwapPipeline,
        *,
        composite: str = "cpu",
        notice: str = "",
        library: FaceLibrary | None = None,
        controls: ControlState | None = None,
        rescan_s: float = 2.0,
        scan_budget_s: float | None = None,
        model_digest: str = "",
        on_frame: Callable[[SwapPipeline], None] | None = None,
        name: str = "",
        pipelined: PipelinedDetection | None = None,
        assign: str = "selected",
    ) -> None:
        self.pipe = pipe
        #: ``processing.assign``: "per_visitor" gives each tracked visitor their own library face.
        self.assign = assign
        self._visitors = VisitorFaces()
        self.pipelined = pipelined
        label, fallback_notice = stage_label(pipe)
        self.name = name or label
        self.notice = notice or fallback_notice
        self.paste = composite != "gpu"
        self.library = library
        self.controls = controls
        self.rescan_s = rescan_s
        self.scan_budget_s = scan_budget_s
        self.model_digest = model_digest
        self.on_frame = on_frame
        folder = str(getattr(library, "folder", "") or "faces.dir")
        self._no_faces = PassThrough(f"no usable face photos — add photos to {folder}")
        self._next_scan = time.monotonic() + rescan_s
        self._claimed = False  # whether this processor's thread has claimed the library

    @property
    def result_lag(self) -> int:
        """Frames between the one handed to :meth:`process` and the one its result shows."""
        return self.pipelined.result_lag if self.pipelined is not None else 0

    def close(self) -> None:
        """Stop the detection worker (pipelined); also done when the processor is dropped."""
        if self.pipelined is not None:
            self.pipelined.close()

    def select_source(self, face_bgr: FrameBGR, key: str | None = None) -> Face:
        """Switch the face swapped in (latents are cached per ``key``)."""
        return self.pipe.set_source(face_bgr, key)

    def refresh_library(self) -> None:
        """Refresh the library on the calling thread, its one writer (see
        :class:`kiosk.booth.faces.FaceLibrary`): the first call claims the library for this
        thread, so a fresh inference thread takes over from an abandoned one, which can never
        publish again."""
        if self.library is not None:
            first = not self._claimed
            if first:
                self.library.claim()
                self._claimed = True
            was_pending = self.library.snapshot.pending
            self.library.refresh(self.pipe, self.model_digest, self.scan_budget_s)
            faces = self.library.snapshot
            if first or (was_pending and not faces.pending):
                log.info(
                    "faces loaded: %d (%d skipped%s)",
                    len(faces.entries),
                    len(faces.problems),
                    f", {faces.pending} still to scan" if faces.pending else "",
                )
            if faces.pending:  # the scan budget ran out: go on with the next frame
                self._next_scan = time.monotonic()
                return
        self._next_scan = time.monotonic() + self.rescan_s

    def _select(self) -> bool:
        """Point the pipeline at the selected library face; False when the library is empty.
        The first call (on the inference thread, never the loader) does the first refresh."""
        if self.library is None:
            return True
        if not self._claimed or time.monotonic() >= self._next_scan:
            self.refresh_library()
        faces = self.library.snapshot  # once: the key is resolved against this snapshot
        if not faces.entries:
            return False
        key = self.controls.selected_key if self.controls is not None else ""
        entry = faces.entry(key) or faces.entries[0]
        if self.pipe.source_key != entry.key:
            latent = entry.latent  # read back from the face cache (the library holds few latents)
            if latent is None:  # its cache entry is gone: the next refresh scans the photo again
                log.warning("face %s: its cache entry is gone; scanning the photo again", entry.name)
                self._next_scan = 0.0
                return self.pipe.has_source
            self.pipe.use_latent(latent, entry.key)
        self.pipe.assign_sources = (
            self._visitor_sources(faces, entry) if self.assign == "per_visitor" else None
        )
        if self.controls is not None:
            self.pipe.enhance = self.controls.enhance_enabled and self.pipe.enhancer is not None
        return True

    def _visitor_sources(
        self, faces: LibrarySnapshot, selected: FaceEntry
    ) -> Callable[[Sequence[int | None], Sequence[Face]], list[tuple[NDArray[np.float32], str]]]:
        """per_visitor: each visitor's (latent, key), counted from the selected face in ``faces``."""
        entries = faces.entries
        base = faces.index_of(selected.key) or 0

        def sources(
            ids: Sequence[int | None], found: Sequence[Face]
        ) -> list[tuple[NDArray[np.float32], str]]:
            picks = [
                entries[(base + o) % len(entries)] for o in self._visitors.offsets(ids, found, len(entries))
            ]
            out = []
            for e in picks:
                latent, key = e.latent, e.key
                if latent is None:  # its cache entry is gone (scanned again): the selected face meanwhile
                    self._next_scan = 0.0
                    latent, key = self.pipe.sources.latent, self.pipe.source_key or ""
                    assert latent is not None, "_select sets a source before the visitors get theirs"
                out.append((latent, key))
            return out

        return sources

    def _notice_into(self, out: SwapResult) -> None:
        """The stage's standing notice, and the kernel cache's problem when its folder could not be
        used (:mod:`kiosk.inference.jit`: the swap goes on, compiled in memory)."""
        cache = jit.cache_problem()
        out.notice = f"{self.notice} · {cache}" if cache and self.notice else (self.notice or cache)

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        if not self._select():
            self._no_faces.process(frame_bgr, out)
            return
        detected = None
        if self.pipelined is not None:  # swap the previous frame while this one is detected
            job = self.pipelined.next(frame_bgr)
            frame_bgr, detected = job.frame_bgr, job.wait()  # the frame this result shows
        if self.paste:
            faces = self.pipe.process_into(frame_bgr, out.frame_bgr, reuse=out.faces, detected=detected)
        else:
            # The renderer pastes the crops in its shader; publish the camera frame as it is.
            faces = self.pipe.process_into(frame_bgr, None, paste=False, reuse=out.faces, detected=detected)
            np.copyto(out.frame_bgr, frame_bgr)
        out.faces[:] = faces
        out.face_keys[:] = self.pipe.face_keys
        out.faces_pasted = self.paste
        out.faces_detected = self.pipe.times.faces
        self._notice_into(out)
        if self.on_frame is not None:
            self.on_frame(self.pipe)


def stage_composite(cfg: KioskConfig) -> str:
    """Where the processing stage's faces are pasted: ``display.composite``, except that the live
    display always composites on the GPU (it moves the crops onto newer frames in the shader)."""
    return "gpu" if cfg.display.composite == "gpu" or cfg.display.mode == "live" else "cpu"
