"""Side-by-side: the pipeline's hot path now vs. at an earlier commit, on the same frame and models.

The earlier tree is extracted with ``git archive`` into a temporary folder; each version runs in its
own subprocess, alternately, several rounds (so the load other jobs put on the machine hits both
alike), and reports the median ms per frame of ``SwapPipeline.process_into`` with CPU paste-back,
the time inside ONNX Runtime (``InferenceSession.run`` / ``run_with_iobinding``, timed by the same
wrapper in both) and the difference: the pipeline's own overhead, split into its parts (detector
letterbox, detector post-processing, per-face crop + blob, ``to_bgr``, paste-back, the rest: frame
copy and bookkeeping). Then once more with the model calls returning at once, the CPU time per
frame (OpenCV on one thread): the overhead's work alone, much less sensitive to other jobs than
wall time.

    .venv/bin/python benchmarks/bench_hotpath.py [--before b982620] [--size 1920x1080] [--rounds 5]
        [--color-correction none|mean_std]

The config is the default one (mask ``box``, no mouth, no occlusion) with colour correction as
``--color-correction`` says (default ``none``; the shipped configs use ``mean_std``; its time is in
"rest").

Models: stand-ins (:mod:`kiosk.tools.standins`) with the real ``det_500m`` from ../shared/models
when present. Frame: insightface's t1.jpg (six faces) scaled into the frame.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort

spent = [0.0]
def timed(fn):
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t0
    return wrapper
ort.InferenceSession.run = timed(ort.InferenceSession.run)
ort.InferenceSession.run_with_iobinding = timed(ort.InferenceSession.run_with_iobinding)

from pathlib import Path
from kiosk.config import KioskConfig
try:
    from kiosk.processing.pipeline import SwapPipeline
except ImportError:  # a tree from before the package layout of issue 17
    from kiosk.pipeline import SwapPipeline
models, det, frame_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
color = sys.argv[5] if len(sys.argv) > 5 else "none"
cfg = KioskConfig.model_validate({
    "models": {"dir": models, "detector": det, "swapper": "inswapper_128.onnx",
               "accept_noncommercial_licence": True, "providers": {"order": ["cpu"]}},
    "processing": {"max_faces": 8, "color_correction": color},
    "base_dir": models,
})
pipe = SwapPipeline.from_config(cfg)
latent = np.full((1, 512), 512 ** -0.5, np.float32)
if hasattr(pipe, "use_latent"):
    pipe.use_latent(latent, "bench")
else:
    pipe._latent = latent
frame = np.load(frame_path)
out = np.empty_like(frame)

# Per-part wall time outside session.run: the same methods wrapped in both trees.
from kiosk.inference.detector import FaceDetector
from kiosk.inference.paste import PasteBack
from kiosk.inference.swapper import InSwapper
parts = {}
def part(cls, name, key):
    fn = getattr(cls, name)
    def wrapper(*a, **k):
        s0, t0 = spent[0], time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            parts[key] = parts.get(key, 0.0) + (time.perf_counter() - t0) - (spent[0] - s0)
    setattr(cls, name, staticmethod(wrapper) if isinstance(cls.__dict__.get(name), staticmethod) else wrapper)
part(FaceDetector, "detect", "detect")
part(FaceDetector, "_letterbox", "letterbox")
part(InSwapper, "align", "crop+blob")
part(InSwapper, "to_bgr", "to_bgr")
part(PasteBack, "paste", "paste")
for _ in range(5):
    pipe.process_into(frame, out)
totals, sessions, breakdown = [], [], []
for _ in range(n):
    spent[0] = 0.0
    parts.clear()
    t0 = time.perf_counter()
    pipe.process_into(frame, out)
    totals.append((time.perf_counter() - t0) * 1e3)
    sessions.append(spent[0] * 1e3)
    breakdown.append({k: v * 1e3 for k, v in parts.items()})

# Without the models: ONNX Runtime calls return at once (the bound outputs keep the last real
# frame's values, so the same faces are found); the CPU time per frame (OpenCV on one thread) is then the
# overhead alone, and counts much less of what other jobs on the machine do than wall time.
last = {}
def fake_run(self, names, feeds, *a, **k):
    return last[id(self)]
def record_run(fn):
    def wrapper(self, names, feeds, *a, **k):
        res = fn(self, names, feeds, *a, **k)
        last[id(self)] = res
        return res
    return wrapper
real_run = ort.InferenceSession.run
ort.InferenceSession.run = record_run(real_run)
for _ in range(3):
    pipe.process_into(frame, out)
ort.InferenceSession.run = fake_run
ort.InferenceSession.run_with_iobinding = lambda self, binding, *a, **k: None
import cv2
cv2.setNumThreads(1)  # idle pool threads would count too: one thread, the work alone
for _ in range(3):
    pipe.process_into(frame, out)
cpu = []
for _ in range(n):
    c0 = time.process_time()
    pipe.process_into(frame, out)
    cpu.append((time.process_time() - c0) * 1e3)
print(json.dumps({"total": totals, "session": sessions, "faces": pipe.times.faces, "parts": breakdown, "cpu": cpu}))
"""

PARTS = ("letterbox", "detect post", "crop+blob", "to_bgr", "paste", "rest")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--before", default="b982620", help="commit to compare with (default: before the lean hot path)"
    )
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=30, help="frames per round and version")
    ap.add_argument(
        "--color-correction", default="none", help="processing.color_correction for both trees (default none)"
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kiosk.tools.bench_frames import faces_frame, shared_file
    from kiosk.tools.standins import make_all

    w, h = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="bench_hotpath_") as tmp_name:
        tmp = Path(tmp_name)
        make_all(tmp / "models")
        det = shared_file("models", "det_500m.onnx")
        det_arg = str(det) if det is not None else "det_10g.onnx"
        frame = faces_frame(w, h, white_squares=det is None)
        np.save(tmp / "frame.npy", frame)
        before = tmp / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.before, "kiosk"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        runs: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
        per_part: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
        faces = {}
        for _ in range(args.rounds):
            for name, path in (("before", before), ("now", ROOT)):
                env = dict(os.environ, PYTHONPATH=str(path))
                res = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        WORKER,
                        str(tmp / "models"),
                        det_arg,
                        str(tmp / "frame.npy"),
                        str(args.frames),
                        args.color_correction,
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=str(tmp),
                )
                if res.returncode != 0:
                    raise SystemExit(f"{name} worker failed:\n{res.stderr[-3000:]}")
                data = json.loads(res.stdout.strip().splitlines()[-1])
                faces[name] = data["faces"]
                for key in ("total", "session", "cpu"):
                    runs[name].setdefault(key, []).extend(data[key])
                for total, session, got in zip(data["total"], data["session"], data["parts"], strict=True):
                    split = {
                        "letterbox": got.get("letterbox", 0.0),
                        "detect post": got.get("detect", 0.0) - got.get("letterbox", 0.0),
                        "crop+blob": got.get("crop+blob", 0.0),
                        "to_bgr": got.get("to_bgr", 0.0),
                        "paste": got.get("paste", 0.0),
                    }
                    split["rest"] = (
                        total
                        - session
                        - got.get("detect", 0.0)
                        - sum(split[k] for k in ("crop+blob", "to_bgr", "paste"))
                    )
                    for key, value in split.items():
                        per_part[name].setdefault(key, []).extend([value])
    print(
        f"frame {w}x{h}, faces {faces}, {args.rounds} alternating rounds x {args.frames} frames, "
        f"color_correction {args.color_correction}, load {os.getloadavg()[0]:.1f}"
    )
    print("version   total p50   session p50   outside p50   outside/face")
    med = {}
    for name in ("before", "now"):
        t = np.array(runs[name]["total"])
        s = np.array(runs[name]["session"])
        o = t - s
        med[name] = (np.median(t), np.median(s), np.median(o))
        print(
            f"{name:<8} {np.median(t):9.2f}   {np.median(s):11.2f}   {np.median(o):11.2f}   {np.median(o) / max(faces[name], 1):11.2f}"
        )
    print(
        f"ratio now/before: total {med['now'][0] / med['before'][0]:.3f}, "
        f"outside session.run {med['now'][2] / med['before'][2]:.3f}"
    )
    print("outside session.run per part, ms per frame p50 (min):")
    print("part          " + "".join(f"{name:>18}" for name in ("before", "now")))
    for key in PARTS:
        cells = "".join(
            f"{np.median(per_part[name][key]):10.3f} ({np.min(per_part[name][key]):.3f})"
            for name in ("before", "now")
        )
        print(f"{key:<12}{cells}")
    cpu = {name: np.array(runs[name]["cpu"]) for name in ("before", "now")}
    print(
        "without the models (session calls return at once), CPU ms per frame, one OpenCV thread: "
        + ", ".join(f"{name} p50 {np.median(cpu[name]):.2f} min {cpu[name].min():.2f}" for name in cpu)
        + f"; ratio now/before p50 {np.median(cpu['now']) / np.median(cpu['before']):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
