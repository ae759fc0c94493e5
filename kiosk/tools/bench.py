"""``kiosk bench``: the real threaded runtime, headless, on a synthetic source with faces.

Runs :class:`~kiosk.app.kiosk_app.KioskApp` (capture thread, inference thread, headless GL render loop)
for a number of processed frames and reports:

- per-stage milliseconds of the face pipeline (p50/p95): detect (full frame or the regions around
  tracked faces, with the tracker), align, swap, enhance, CPU paste-back, the whole call, and
  the time inside ONNX Runtime's ``session.run``; the overhead outside the models per frame and
  per face;
- the rate of each thread (capture, processing, render), capture→display latency p50/p95 and the
  frames dropped between the threads;
- allocations per frame in steady state (``tracemalloc`` over the same pipeline, after the run);
- optionally (``--compare-insightface``) insightface 2.1's reference (SCRFD.detect +
  INSwapper.get(paste_back=True) per face) on the same frame and model files, next to ours.

The source is a still frame built in-process: insightface's ``t1.jpg`` (six faces) scaled to the
frame height and centred, delivered at the camera rate. ``--standins`` generates stand-in models
(the test suite's generator, :mod:`kiosk.tools.standins`) into a temporary folder and uses the
real ``det_500m`` from ``../shared/models`` when present, else the stand-in detector (which finds
white squares: the frame then holds white squares instead of the photo). ``--cost-matched`` uses
the cost-matched stand-ins of :mod:`kiosk.tools.standins_cost` instead (the real files'
contracts and compute, random weights; generated once into a cache folder): what a booth would see.
Their detector finds white squares too, so the frame holds white squares.

Live display (``--display synced live``, one run each): ``--motion sway`` moves the frame at
walking speed (a known sine, so the faces move as a visitor does), ``--video`` plays a file
instead, and ``--swap-ms`` makes every swapper call take at least that long (the model runs, then
the thread sleeps the rest: ``time.sleep`` releases the GIL as ONNX Runtime does, so a slow model
is simulated without starving the other threads of the 2-core CI machine). The report adds the
age of the face content on screen (capture of the frame the swap used → display) next to the
picture's capture→display latency, and the live tracker's figures.

The processing stage here is :class:`BenchProcessor`: :meth:`SwapPipeline.process_into` exactly
as the kiosk's processor calls it, with ``--composite cpu`` (paste-back on the CPU) or ``gpu``
(``paste=False``: crops + affines for the renderer's composite shader; the camera frame is
copied into the result slot for the renderer).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import platform
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kiosk.config import KioskConfig, default_config_path, load_config
from kiosk.processing.models import read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.pipelined import PipelinedDetection, open_pipelined
from kiosk.processing.stage import Processor
from kiosk.processing.swap_stage import SwapProcessor
from kiosk.tools.bench_frames import (
    MovingSource,
    StillSource,
    _swap_call,
    faces_frame,
    shared_file,
    slow_swapper,
)
from kiosk.tools.bench_report import (
    STAGES,
    BenchResult,
    _screenshot_path,
    format_display_comparison,
    format_report,
)
from kiosk.types import FrameBGR, SwapResult

log = logging.getLogger(__name__)

COST_MATCHED_FRAMES = 3


def _process_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class BenchProcessor(SwapProcessor):
    """The kiosk's :class:`~kiosk.processing.swap_stage.SwapProcessor` (same composite option, same error
    policy, ``faces_pasted`` set by it) with a recorder of its stage times in ``on_frame``."""

    def __init__(
        self,
        pipe: SwapPipeline,
        composite: str,
        capacity: int,
        skip: int = 5,
        pipelined: PipelinedDetection | None = None,
    ) -> None:
        super().__init__(
            pipe,
            composite=composite,
            on_frame=self._record,
            name=f"bench swap ({pipe.provider}, {composite} composite)",
            pipelined=pipelined,
        )
        self.notice = ""
        self.skip = skip
        self.rows = np.zeros((capacity, len(STAGES) + 3), np.float64)  # + faces, det/face session
        self.count = 0
        self.seen = 0
        self.full_detections = 0
        #: CPU seconds of the whole process (all threads) during each recorded call.
        self.cpu_s: list[float] = []
        self.done = threading.Event()
        #: Clear while a frame is in the pipeline (the bench waits for it before reusing the pipeline).
        self.idle = threading.Event()
        self.idle.set()
        self._det_runners = [pipe.detector.runner] + (
            [pipe.finder.roi_detector.runner] if pipe.finder.roi_detector is not None else []
        )
        self._det_before = 0.0
        self._cpu_before = 0.0

    def process(self, frame_bgr: FrameBGR, out: SwapResult) -> None:
        if self.done.is_set():  # measured enough: start no frame that may take seconds
            return
        self.idle.clear()
        self._det_before = sum(r.run_ms for r in self._det_runners)
        self._cpu_before = _process_cpu_s()
        try:
            super().process(frame_bgr, out)
        finally:
            self.idle.set()

    def _record(self, pipe: SwapPipeline) -> None:
        self.seen += 1
        if self.seen <= self.skip or self.count >= self.rows.shape[0]:
            if self.count >= self.rows.shape[0]:
                self.done.set()
            return
        t = pipe.times
        det_session = sum(r.run_ms for r in self._det_runners) - self._det_before
        self.rows[self.count] = (
            t.detect_ms,
            t.track_ms,
            t.align_ms,
            t.swap_ms,
            t.enhance_ms,
            t.paste_ms,
            t.total_ms,
            t.session_ms,
            t.total_ms - t.session_ms,
            t.mask_ms,
            t.color_ms,
            t.faces,
            det_session,
            t.session_ms - det_session,
        )
        self.full_detections += int(t.full_detection)
        self.cpu_s.append(_process_cpu_s() - self._cpu_before)
        self.count += 1
        if self.count >= self.rows.shape[0]:
            self.done.set()


# -- report -----------------------------------------------------------------------------------------


def _pct(values: NDArray[np.float64]) -> dict[str, float]:
    if values.size == 0:
        return {"p50": math.nan, "p95": math.nan, "mean": math.nan}
    return {
        "p50": round(float(np.percentile(values, 50)), 3),
        "p95": round(float(np.percentile(values, 95)), 3),
        "mean": round(float(values.mean()), 3),
    }


def summarise(proc: BenchProcessor) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    rows = proc.rows[: proc.count]
    stages = {name: _pct(rows[:, i]) for i, name in enumerate(STAGES)}
    faces = rows[:, len(STAGES)]
    det_session = rows[:, len(STAGES) + 1]
    face_session = rows[:, len(STAGES) + 2]
    # align + swap + enhance + paste + mask + colour
    per_face_work = rows[:, 2] + rows[:, 3] + rows[:, 4] + rows[:, 5] + rows[:, 9] + rows[:, 10]
    with np.errstate(invalid="ignore", divide="ignore"):
        face_overhead = (per_face_work - face_session) / np.where(faces > 0, faces, np.nan)
    face_overhead = face_overhead[np.isfinite(face_overhead)]
    detect_overhead = rows[:, 0] - det_session
    total = float(rows[:, 6].sum())
    overhead = {
        "faces_mean": round(float(faces.mean()) if faces.size else 0.0, 2),
        "per_frame_ms_p50": round(float(np.percentile(rows[:, 8], 50)), 3) if rows.size else math.nan,
        "per_frame_ms_p95": round(float(np.percentile(rows[:, 8], 95)), 3) if rows.size else math.nan,
        "per_face_ms_p50": round(float(np.percentile(face_overhead, 50)), 3)
        if face_overhead.size
        else math.nan,
        "per_face_ms_p95": round(float(np.percentile(face_overhead, 95)), 3)
        if face_overhead.size
        else math.nan,
        "detection_ms_p50": round(float(np.percentile(detect_overhead, 50)), 3) if rows.size else math.nan,
        "session_share": round(float(rows[:, 7].sum()) / total, 3) if total > 0 else math.nan,
        "full_detection_share": round(proc.full_detections / max(proc.count, 1), 3),
    }
    return stages, overhead


def measure_allocation(
    pipe: SwapPipeline, frame: FrameBGR, paste: bool, frames: int = 100, warm: int = 10
) -> dict[str, float]:
    """tracemalloc over ``frames`` sequential frames after ``warm`` warm-up frames: the largest transient
    allocation within one frame and the net growth per frame (bytes; ONNX Runtime's own C++
    allocations are not seen by tracemalloc)."""
    out = np.empty_like(frame)
    t0 = time.perf_counter()
    for i in range(warm):
        pipe.process_into(frame, out, paste=paste, t=t0 + i / 30.0)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        peak = 0
        for i in range(warm, warm + frames):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            pipe.process_into(frame, out, paste=paste, t=t0 + i / 30.0)
            peak = max(peak, tracemalloc.get_traced_memory()[1] - before)
        net = (tracemalloc.get_traced_memory()[0] - start) / frames
    finally:
        tracemalloc.stop()
    return {
        "frames": frames,
        "peak_bytes_per_frame": float(peak),
        "net_bytes_per_frame": round(float(net), 1),
        "frame_bytes": float(frame.nbytes),
    }


def compare_insightface(pipe: SwapPipeline, cfg: KioskConfig, frame: FrameBGR, reps: int) -> dict[str, Any]:
    """insightface 2.1's reference on the same frame and model files: SCRFD.detect (same
    det_size, threshold, max faces) + INSwapper.get(paste_back=True) per face, against ours
    (``process_into`` with CPU paste-back, tracking off, sequential in this thread)."""
    try:
        from insightface.app.common import Face as IFace
        from insightface.model_zoo.inswapper import INSwapper
        from insightface.model_zoo.scrfd import SCRFD
    except ImportError:
        return {"error": "insightface is not installed"}
    from kiosk.inference.sessions import ProviderOptions, create_session
    from kiosk.processing.models import model_paths

    paths = model_paths(cfg)
    det_path, swap_path = paths["detector"], paths["swapper"]
    assert det_path is not None and swap_path is not None
    prov = ProviderOptions.of(cfg.models.providers)
    det_session, _ = create_session(det_path, prov, base_dir=cfg.base_dir)
    swap_session, _ = create_session(swap_path, prov, base_dir=cfg.base_dir)
    det = SCRFD(model_file=str(det_path), session=det_session)
    size = cfg.processing.det_size
    det.prepare(0, input_size=(size, size), det_thresh=cfg.processing.det_threshold)
    with contextlib.redirect_stdout(sys.stderr):  # insightface prints the model's input shape
        swapper = INSwapper(model_file=str(swap_path), session=swap_session)
    source = IFace(embedding=np.ones(512, np.float32) / math.sqrt(512.0))

    def reference() -> int:
        bboxes, kpss = det.detect(frame, max_num=pipe.max_faces)
        res = frame.copy()
        for kps in kpss if kpss is not None else []:
            res = swapper.get(res, IFace(kps=kps), source, paste_back=True)
        return len(bboxes)

    tracker = pipe.tracker
    pipe.tracker = None  # the same work as the reference: a full detection every frame
    out = np.empty_like(frame)
    try:
        ours_ms, ref_ms = [], []
        reference()
        pipe.process_into(frame, out)
        for _ in range(reps):  # interleaved, so load on the machine hits both alike
            a = time.perf_counter()
            n_ref = reference()
            b = time.perf_counter()
            pipe.process_into(frame, out)
            c = time.perf_counter()
            ref_ms.append((b - a) * 1e3)
            ours_ms.append((c - b) * 1e3)
    finally:
        pipe.tracker = tracker
    ours, ref = float(np.median(ours_ms)), float(np.median(ref_ms))
    return {
        "faces": n_ref,
        "ours_faces": pipe.times.faces,
        "reps": reps,
        "ours_ms_p50": round(ours, 2),
        "insightface_ms_p50": round(ref, 2),
        "ratio_ours_to_insightface": round(ours / ref, 3) if ref > 0 else math.nan,
    }


# -- configuration ----------------------------------------------------------------------------------
class BenchError(Exception):
    """A bench request this build cannot honour; ``kiosk bench`` prints it and exits 2."""


def bench_config(
    config: Path | None,
    standins_dir: Path | None,
    width: int,
    height: int,
    tracking: bool | None,
    max_faces: int | None,
    cost_matched_dir: Path | None = None,
    enhance: bool | None = None,
    mode: str | None = None,
) -> tuple[KioskConfig, bool]:
    """The config to bench and whether the detector is the stand-in (white squares).

    ``cost_matched_dir``: use the cost-matched stand-ins there (generated when missing).
    ``mode``: ``display.mode`` (synced | live) where this build's config has that key; a
    :class:`BenchError` otherwise."""
    if config is not None:
        cfg = load_config(config)
    else:
        cfg = KioskConfig.model_validate({"processing": {"max_faces": 6, "tracking": True}})
    standin_detector = False
    models = cfg.models
    if standins_dir is not None:
        from kiosk.tools.standins import make_all

        make_all(standins_dir)
        det = shared_file("models", "det_500m.onnx")
        standin_detector = det is None
        models = models.model_copy(
            update={
                "dir": str(standins_dir),
                "detector": str(det) if det is not None else "det_10g.onnx",
                "embedder": "w600k_r50.onnx",
                "swapper": "inswapper_128.onnx",
                "enhancer": "GFPGANv1.4.onnx",
                # generated stand-ins carry no weights' licence; det_500m from ../shared is a
                # development machine's (non-commercial research use, which a bench is)
                "accept_noncommercial_licence": True,
            }
        )
    if cost_matched_dir is not None:
        from kiosk.tools.standins_cost import COST_FILES, generate

        generate(cost_matched_dir, log=log.info, width=None)  # full size, unless a dry run left small ones
        standin_detector = True  # its detector answers like the small stand-in: white squares
        models = models.model_copy(
            update={
                "dir": str(cost_matched_dir),
                "detector": COST_FILES[0],
                "embedder": COST_FILES[1],
                "swapper": COST_FILES[2],
                "enhancer": COST_FILES[3],
                "accept_noncommercial_licence": True,  # generated stand-ins: no weights' licence
            }
        )
    proc_update: dict[str, Any] = {}
    if enhance is not None:
        proc_update["enhance"] = enhance
    if tracking is not None:
        proc_update["tracking"] = tracking
    if max_faces is not None:
        proc_update["max_faces"] = max_faces
    display = cfg.display.model_copy(update={"width": width, "height": height})
    if mode is not None:
        display = type(cfg.display).model_validate({**display.model_dump(), "mode": mode})
    cfg = cfg.model_copy(
        update={
            "models": models,
            "processing": cfg.processing.model_copy(update=proc_update),
            "display": display,
            "source": cfg.source.model_copy(update={"mirror": False}),
        }
    )
    return cfg, standin_detector


def apply_overrides(cfg: KioskConfig, assignments: list[str]) -> KioskConfig:
    """``cfg`` with ``section.key=value`` assignments (values in YAML: ``mask.padding=[0,0,0.1,0]``),
    validated like the file; :class:`~kiosk.config.ConfigError` names a bad one."""
    import yaml

    from kiosk.config import ConfigError

    data = cfg.model_dump(mode="json")
    for item in assignments:
        key, sep, value = item.partition("=")
        parts = key.strip().split(".")
        node = data
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                raise ConfigError("--set", [f"--set {item}: unknown section {part!r} (see kiosk config doc)"])
            node = node[part]
        if not sep or parts[-1] not in node:
            raise ConfigError(
                "--set", [f"--set {item}: expected KEY=VALUE with a known key (see kiosk config doc)"]
            )
        node[parts[-1]] = yaml.safe_load(value)
    from pydantic import ValidationError

    try:
        return KioskConfig.model_validate({**data, "base_dir": cfg.base_dir})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError("--set", [f"--set: {loc}: {first['msg']}"]) from None


def _build_pipeline(cfg: KioskConfig) -> SwapPipeline:
    pipe = SwapPipeline.from_config(cfg)
    src = cfg.processing.source_face
    if src:
        pipe.set_source(read_image(cfg.resolve(src)), key=str(src))
    else:  # any unit latent: what it looks like does not change what it costs
        pipe.use_latent(np.full((1, 512), 1.0 / math.sqrt(512.0), np.float32), "bench")
    return pipe


def run_bench(
    cfg: KioskConfig,
    frame: FrameBGR,
    frames: int,
    composite: str = "gpu",
    camera_fps: float = 30.0,
    insightface_reps: int = 0,
    timeout_s: float = 0.0,
    display_mode: str = "synced",
    motion: str = "none",
    video: Path | None = None,
    swap_ms: float = 0.0,
    screenshot: Path | None = None,
    skip_frames: int = 5,
    alloc_frames: int = 100,
    models_label: str = "config",
) -> BenchResult:
    """Build the pipeline, run the threaded runtime headless for ``frames`` processed frames
    (after ``skip_frames`` unrecorded ones); then ``alloc_frames`` frames under tracemalloc
    (0: skip that). ``timeout_s`` 0: 60 s or 2 s a frame, whichever is longer."""
    from kiosk.app.kiosk_app import KioskApp, RunOptions

    cfg = cfg.model_copy(update={"display": cfg.display.model_copy(update={"mode": display_mode})})
    t0 = time.perf_counter()
    pipe = _build_pipeline(cfg)
    load_ms = (time.perf_counter() - t0) * 1e3
    warm = dict(pipe.warmup_ms)
    warm["load_total"] = load_ms
    original_infer = slow_swapper(pipe, swap_ms) if swap_ms > 0 else None
    # Live display carries the crops onto newer frames in the shader: no CPU paste-back then.
    # processing.pipelined: the detection worker, as the kiosk's processor has it (it used to be
    # reported in the setup but never built here)
    proc = BenchProcessor(
        pipe,
        "gpu" if display_mode == "live" else composite,
        capacity=frames,
        skip=skip_frames,
        pipelined=open_pipelined(cfg, pipe),
    )

    def factory() -> Processor:
        return proc

    limit = timeout_s or max(60.0, frames * 2.0)

    def source() -> Any:
        if video is not None:
            from kiosk.capture.sources import VideoFileSource

            return VideoFileSource(video)
        return MovingSource(frame, camera_fps) if motion == "sway" else StillSource(frame, camera_fps)

    app = KioskApp(
        cfg,
        RunOptions(headless=True, seconds=limit, screenshot=screenshot),
        source_factory=source,
        processor_factory=factory,
    )
    stop_watch = threading.Event()

    def watch() -> None:
        while not stop_watch.wait(0.05):
            if proc.done.is_set():
                app.stop.set()
                return

    watcher = threading.Thread(target=watch, name="bench-watch", daemon=True)
    watcher.start()
    try:
        app.run()
    finally:
        stop_watch.set()
        watcher.join(1.0)
    # The app gives its inference thread 1.5 s to stop; a cost-matched frame on a CPU can take
    # far longer. The pipeline is used below (allocation, insightface): wait for it to be free.
    if not proc.idle.wait(max(limit, 60.0)):
        log.warning("the processing thread is still inside a frame; allocation figures skipped")
        alloc_frames = 0
        insightface_reps = 0
    stats = app.stats()
    proc.close()  # the pipelined detection worker, if any
    if original_infer is not None:
        setattr(pipe.swapper, _swap_call(pipe), original_infer)
    stages, overhead = summarise(proc)
    alloc = (
        measure_allocation(
            pipe, frame, paste=composite == "cpu", frames=alloc_frames, warm=min(10, alloc_frames)
        )
        if alloc_frames > 0
        else {
            "frames": 0,
            "peak_bytes_per_frame": math.nan,
            "net_bytes_per_frame": math.nan,
            "frame_bytes": float(frame.nbytes),
        }
    )
    h, w = frame.shape[:2]
    prov = cfg.models.providers
    result = BenchResult(
        machine={
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
            "provider": pipe.provider,
            "gpu_requested": pipe.gpu_requested,
        },
        setup={
            "frame": f"{w}x{h}",
            "frames_measured": proc.count,
            "camera_fps": camera_fps,
            "composite": "gpu" if display_mode == "live" else composite,
            "display_mode": display_mode,
            "motion": f"video {video.name}" if video is not None else motion,
            "swap_ms_min": swap_ms,
            "tracking": pipe.tracker is not None,
            "detect_every": cfg.processing.detect_every if pipe.tracker is not None else 1,
            "det_size": pipe.detector.det_size,
            "roi_det_size": pipe.finder.roi_detector.det_size
            if pipe.finder.roi_detector is not None
            else None,
            "max_faces": pipe.max_faces,
            "detector": Path(pipe.detector.path).name,
            "swapper": pipe.swapper.spec.id,
            "swapper_licence": pipe.swapper.spec.licence,
            "iobinding": prov.iobinding,
            "cuda_graph": prov.cuda_graph,
            "display_max_fps": cfg.display.max_fps,
            "color_correction": cfg.processing.color_correction,
            "color_strength": cfg.processing.color_strength,
            "mask": cfg.mask.model_dump(mode="json"),
            "models": models_label,
            "enhance": pipe.enhance,
            "pipelined": cfg.processing.pipelined,
        },
        stages_ms=stages,
        overhead=overhead,
        runtime={
            "fps": stats["fps"],
            "latency_ms": {
                "capture_to_display_p50": stats["latency_ms"]["capture_to_display_p50"],
                "capture_to_display_p95": stats["latency_ms"]["capture_to_display_p95"],
                "process_p50": stats["latency_ms"]["process_p50"],
                "process_p95": stats["latency_ms"]["process_p95"],
                "face_age_p50": stats["latency_ms"]["face_age_p50"],
                "face_age_p95": stats["latency_ms"]["face_age_p95"],
            },
            "live": stats["display"]["live"],
            # face x rendered frame shown swapped vs real, per mode on screen (and which one was)
            "screen": stats["display"]["screen"],
            "active_mode": stats["display"]["active_mode"],
            "dropped": stats["dropped"],
            "frames": stats["frames"],
            "duration_s": stats["duration_s"],
            # CPU seconds of the whole process (every thread: ONNX Runtime's pool, render,
            # capture) while one frame was processed: on a loaded machine the wall times above
            # grow with the other load, these much less.
            "cpu_s_per_frame_p50": round(float(np.median(proc.cpu_s)), 3) if proc.cpu_s else None,
        },
        allocation=alloc,
        warmup_ms={k: round(v, 1) for k, v in warm.items()},
    )
    if insightface_reps > 0:
        result.insightface = compare_insightface(pipe, cfg, frame, insightface_reps)
    return result


def cmd_bench(args: Any) -> int:
    """``kiosk bench`` (arguments from :mod:`kiosk.tools.bench_cli`)."""
    logging.basicConfig(
        level=logging.WARNING if args.json else logging.INFO, format="%(levelname)s %(message)s"
    )
    width, height = (int(v) for v in args.size.lower().split("x"))
    cost_matched = bool(getattr(args, "cost_matched", False))
    if cost_matched and args.standins:
        print("kiosk bench: --standins and --cost-matched exclude each other; choose one", file=sys.stderr)
        return 2
    frames = args.frames if args.frames is not None else (COST_MATCHED_FRAMES if cost_matched else 200)
    skip = args.skip_frames if args.skip_frames is not None else (1 if cost_matched else 5)
    alloc = args.alloc_frames if args.alloc_frames is not None else (2 if cost_matched else 100)
    tmp: tempfile.TemporaryDirectory[str] | None = None
    standins_dir = None
    if args.standins:
        tmp = tempfile.TemporaryDirectory(prefix="kiosk-bench-")
        standins_dir = Path(tmp.name)
    cost_dir = None
    if cost_matched:
        from kiosk.tools.standins_cost import default_dir

        cost_dir = Path(args.cost_matched_dir).expanduser() if args.cost_matched_dir else default_dir()
    try:
        config = Path(args.config) if args.config else None
        if config is None and not (args.standins or cost_matched):
            default = default_config_path()
            config = default if default.is_file() else None
        try:
            cfg, standin_detector = bench_config(
                config,
                standins_dir,
                width,
                height,
                # The cost-matched detector answers like the small stand-in, whose white squares
                # are not reliably found again in tracked regions: full detection every frame.
                (False if cost_matched else None) if args.tracking is None else args.tracking,
                args.max_faces,
                cost_matched_dir=cost_dir,
                enhance=args.enhance,
                mode=args.mode,
            )
        except BenchError as e:
            print(f"kiosk bench: {e}", file=sys.stderr)
            return 2
        if args.set:
            cfg = apply_overrides(cfg, args.set)
        if args.cpu:
            prov = cfg.models.providers.model_copy(update={"order": ["cpu"]})
            cfg = cfg.model_copy(update={"models": cfg.models.model_copy(update={"providers": prov})})
        frame = faces_frame(
            width, height, white_squares=standin_detector, photo=Path(args.photo) if args.photo else None
        )
        label = "standins" if args.standins else "config"
        if cost_dir is not None:
            from kiosk.tools.standins_cost import folder_width

            w = folder_width(cost_dir)
            label = (
                "cost-matched"
                if w == 1.0
                else f"cost-matched at width {w:g} (small copies, NOT cost-matched)"
            )
        # A cost-matched frame can take seconds on a CPU: allow two minutes a frame.
        timeout = args.timeout or (60.0 + 120.0 * (frames + skip) if cost_matched else 0.0)
        results = []
        modes = args.display or [cfg.display.mode]
        for mode in modes:
            for composite in args.composite if mode == "synced" else ["gpu"]:
                r = run_bench(
                    cfg,
                    frame,
                    frames,
                    composite=composite,
                    camera_fps=args.camera_fps,
                    insightface_reps=args.insightface_reps if args.compare_insightface else 0,
                    display_mode=mode,
                    motion=args.motion,
                    video=Path(args.video) if args.video else None,
                    swap_ms=args.swap_ms,
                    screenshot=_screenshot_path(args.screenshot, mode, composite),
                    timeout_s=timeout,
                    skip_frames=skip,
                    alloc_frames=alloc,
                    models_label=label,
                )
                results.append(r)
                if not args.json:
                    print(format_report(r), flush=True)
                    print()
        if len(modes) > 1 and not args.json:
            print(format_display_comparison(results))
        if args.json:
            out = [r.as_dict() for r in results]
            print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0
