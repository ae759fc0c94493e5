"""Side-by-side detector timing on a 1920x1080 frame with six faces (not a timed test).

For each detector file, in one process and interleaved (rep by rep, so machine noise hits all of
them alike): the median milliseconds of one full-frame ``detect`` (letterbox + session + decode +
NMS), and the median per-frame detection time of the pipeline with tracking on (full frame every
``processing.detect_every`` frames, the regions around each face at ``roi_det_size`` in between).
Ratios are against the first file.

    .venv/bin/python benchmarks/bench_detectors.py [--models-dir DIR] [--reps N] [FILE ...]

Default files: det_500m.onnx and retinaface_mnet025_640.onnx from ../shared/models. The embedder
and swapper are the test suite's stand-ins (detection time does not depend on them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import make_frame  # noqa: E402

from kiosk.config import KioskConfig, ModelsConfig, ProcessingConfig, ProvidersConfig  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402
from kiosk.tools import standins  # noqa: E402


def _pipe(detector: Path, standin_dir: Path, tracking: bool, threads: int) -> SwapPipeline:
    prov = ProvidersConfig.model_validate({"order": ["cpu"], "intra_op_threads": threads})
    models = ModelsConfig.model_validate(
        {
            "dir": str(standin_dir),
            "detector": str(detector),
            "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
            "accept_noncommercial_licence": True,
            "providers": prov,
        }
    )
    proc = ProcessingConfig.model_validate({"det_size": 640, "max_faces": 8, "tracking": tracking})
    return SwapPipeline.from_config(KioskConfig.model_validate({"models": models, "processing": proc}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=["det_500m.onnx", "retinaface_mnet025_640.onnx"])
    ap.add_argument("--models-dir", default=str(ROOT.parent / "shared" / "models"))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads")
    args = ap.parse_args(argv)
    paths = [Path(args.models_dir) / f if not Path(f).is_file() else Path(f) for f in args.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"bench_detectors: error: {', '.join(missing)} not found — pass --models-dir", file=sys.stderr)
        return 1
    frame = make_frame()
    with tempfile.TemporaryDirectory() as tmp:
        standins.make_all(Path(tmp))
        full = {p.name: _pipe(p, Path(tmp), False, args.threads) for p in paths}
        tracked = {p.name: _pipe(p, Path(tmp), True, args.threads) for p in paths}
        for pipes in (full, tracked):
            for pipe in pipes.values():
                pipe.set_source(frame)
        found = {n: len(p.detector.detect(frame)) for n, p in full.items()}
        t_full: dict[str, list[float]] = {n: [] for n in full}
        t_tracked: dict[str, list[float]] = {n: [] for n in full}
        for _ in range(5):  # warm-up: bindings, compiled kernels, the trackers' first tracks
            for n in full:
                full[n].detector.detect(frame)
        for i in range(args.reps):
            for n in full:
                a = time.perf_counter()
                full[n].detector.detect(frame)
                t_full[n].append((time.perf_counter() - a) * 1e3)
                tracked[n].process_into(frame, None, paste=False, t=i / 30.0)
                if i >= 2:
                    t_tracked[n].append(tracked[n].times.detect_ms)
    first = paths[0].name
    print(f"1920x1080 frame, six faces; CPU, {args.threads} intra-op threads; medians of {args.reps} reps")
    print(
        f"{'detector':34s} {'faces':>5s} {'full-frame ms':>14s} {'ratio':>6s} {'tracked ms/frame':>17s} {'ratio':>6s}"
    )
    base_f, base_t = statistics.median(t_full[first]), statistics.median(t_tracked[first])
    for n in full:
        mf, mt = statistics.median(t_full[n]), statistics.median(t_tracked[n])
        print(f"{n:34s} {found[n]:5d} {mf:14.1f} {mf / base_f:6.2f} {mt:17.1f} {mt / base_t:6.2f}")
    roi = {n: p.finder.roi_detector for n, p in tracked.items()}
    for n, r in roi.items():
        if r is not None:
            print(f"  {n}: regions at scale {r.det_size} in a {r.input_size}x{r.input_size} input")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
