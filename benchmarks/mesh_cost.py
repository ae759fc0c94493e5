"""Cost of the classic swap v2 (the face mesh) per face at 720p, beside the 5-point classic swap.

    python benchmarks/mesh_cost.py [--frames 60] [--height 720] [--faces 1] [--threads 1]

A 1280x720 frame (``--height`` scales it, 16:9) with the NASA portrait's face at booth size (the
portrait fills the frame's height), ``--faces`` copies of it side by side, the bundled YuNet, the
face mask, mean_std colour correction, the bundled photo swapped in. For each path (5-point,
mesh) and each composite (the GPU composite: no CPU paste; the CPU paste-back) prints the median
milliseconds per face of the per-face work (align + mesh + warp + mask + colour + paste: what the
issue calls "mesh + warp + blend"), of the mesh model's session run alone, and the detector's time
on the same frames, with the machine's load average (``os.getloadavg``) before and after, so the
figures read as ratios on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's kiosk

from kiosk.capture.demo_visitor import source_face_path, visitor_photo_path  # noqa: E402
from kiosk.config import parse_config  # noqa: E402
from kiosk.processing.models import read_image  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402

MESH = "package:data/models/face_mesh_468.onnx"


def frame_of(height: int, faces: int) -> np.ndarray:
    """A 16:9 frame of ``height`` with ``faces`` portraits side by side (each the frame's height,
    or narrower so they fit)."""
    width = height * 16 // 9
    side = min(height, width // faces)
    portrait = cv2.resize(read_image(visitor_photo_path()), (side, side), interpolation=cv2.INTER_CUBIC)
    row = np.hstack([portrait] * faces)
    top = (height - side) // 2
    left = (width - row.shape[1]) // 2
    return np.ascontiguousarray(
        cv2.copyMakeBorder(
            row, top, height - side - top, left, width - row.shape[1] - left, cv2.BORDER_REPLICATE
        )
    )


def measure(
    mesh: bool, paste: bool, frame: np.ndarray, frames: int, threads: int, faces: int
) -> dict[str, float]:
    cfg = parse_config(
        f"models: {{swapper: classic, enhancer: null, mesh: {MESH if mesh else 'null'}, "
        f"providers: {{order: [cpu], intra_op_threads: {threads}}}}}\n"
        f"processing: {{color_correction: mean_std, max_faces: {faces}}}\n"
        "mask: {shape: face}\n",
        "<bench>",
        env=False,
    )
    pipe = SwapPipeline.from_config(cfg)
    pipe.set_source(read_image(source_face_path()))
    runner = pipe.models.swapper.runner
    out = np.empty_like(frame)
    rows: dict[str, list[float]] = {k: [] for k in ("detect", "face", "mesh", "swap", "align")}
    for i in range(frames + 3):
        before = runner.run_ms if runner is not None else 0.0
        pipe.process_into(frame, out if paste else None, paste=paste)
        t = pipe.times
        if i < 3 or t.faces != faces:
            continue
        n = t.faces
        rows["detect"].append(t.detect_ms)
        rows["face"].append((t.align_ms + t.swap_ms + t.mask_ms + t.color_ms + t.paste_ms) / n)
        rows["align"].append(t.align_ms / n)
        rows["swap"].append(t.swap_ms / n)
        rows["mesh"].append(((runner.run_ms if runner is not None else 0.0) - before) / n)
    if not rows["face"]:
        raise SystemExit(f"no frame had {faces} faces swapped")
    return {k: statistics.median(v) for k, v in rows.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--faces", type=int, default=1, choices=(1, 2, 3))
    ap.add_argument("--threads", type=int, default=1, help="the mesh session's intra-op threads")
    args = ap.parse_args()
    frame = frame_of(args.height, args.faces)
    load0 = os.getloadavg()
    print(f"{frame.shape[1]}x{frame.shape[0]}, {args.faces} face(s), {os.cpu_count()} CPUs, "
          f"load average {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}")  # fmt: skip
    for paste in (False, True):
        got = {
            mesh: measure(mesh, paste, frame, args.frames, args.threads, args.faces) for mesh in (False, True)
        }
        what = "CPU paste-back" if paste else "GPU composite (no CPU paste)"
        five, v2 = got[False], got[True]
        print(
            f"{what}: per face 5-point {five['face']:.2f} ms, mesh {v2['face']:.2f} ms "
            f"(of which the mesh model {v2['mesh']:.2f} ms, align {v2['align']:.2f} incl. the mesh, "
            f"warp {v2['swap']:.2f}); detector {v2['detect']:.1f} ms; "
            f"mesh / 5-point = {v2['face'] / max(five['face'], 1e-6):.1f}, "
            f"mesh per face / detector = {v2['face'] / v2['detect']:.3f}"
        )
    load1 = os.getloadavg()
    print(f"load average after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
