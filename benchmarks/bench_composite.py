"""The GPU composite's cost with the renderer: this tree (RGBA crops, the shader samples the mask)
against an earlier commit (RGB crops, the shader computed the box mask), side by side.

Each run draws a 1920x1080 frame with N face crops (128 px, ~220 px on screen) into an offscreen
framebuffer with the kiosk's Renderer on a headless EGL context, and reports the median ms of
the crops' upload alone (``FaceCrops.set``), of ``set_frame`` (frame + crops upload) and of
``draw`` + ``ctx.finish()``. The trees alternate in
subprocesses, so both see the same machine load.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_composite.py --against 3b8c9b0 [--faces 6] [--reps 40]

On a software renderer (Mesa llvmpipe, as in CI) the draw time is CPU time; on a real GPU both are
far smaller, but the ratio shows what the change costs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(faces_n: int, reps: int, alpha_kind: str) -> dict[str, float]:
    """Runs inside the tree on ``sys.path``: median ms per frame of upload and of draw."""
    import dataclasses
    import math

    import moderngl
    import numpy as np

    from kiosk.config import DisplayConfig
    from kiosk.render.renderer import Renderer
    from kiosk.types import Face, SwappedFace

    ctx = moderngl.create_standalone_context(require=330, backend="egl")
    w, h = 1920, 1080
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    has_alpha = "alpha" in {f.name for f in dataclasses.fields(SwappedFace)}
    faces = []
    for i in range(faces_n):
        crop = rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)
        s, a = 128 / 220.0, math.radians(10 * i - 25)
        cx, cy = 200 + (i % 3) * 600, 300 + (i // 3) * 450
        m = np.array([[s * math.cos(a), s * math.sin(a)], [-s * math.sin(a), s * math.cos(a)]])
        t = np.array([64.0, 64.0]) - m @ np.array([cx, cy])
        affine = np.hstack([m, t[:, None]])
        face = Face(np.zeros(4, np.float32), 1.0, np.zeros((5, 2), np.float32))
        kw = {}
        if has_alpha and alpha_kind == "face":
            from kiosk.inference.align import arcface_template
            from kiosk.inference.mask import MaskOptions, build_alpha

            kw["alpha"] = build_alpha(128, MaskOptions(shape="face", mouth=1.0), arcface_template(128))
        faces.append(SwappedFace(crop_bgr=crop, affine=affine, face=face, **kw))
    rb = ctx.renderbuffer((w, h), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayConfig(fit="fit"))
    up, draw, crops = [], [], []
    for i in range(reps + 5):
        a0 = time.perf_counter()
        renderer.face_crops.set(faces)  # the crops alone (set_frame below uploads them again)
        ctx.finish()
        a = time.perf_counter()
        renderer.set_frame(frame, faces)
        b = time.perf_counter()
        fbo.use()
        renderer.draw((w, h))
        ctx.finish()
        c = time.perf_counter()
        if i >= 5:
            crops.append((a - a0) * 1e3)
            up.append((b - a) * 1e3)
            draw.append((c - b) * 1e3)
    renderer.release()
    return {
        "crops_ms": float(np.median(crops)),
        "upload_ms": float(np.median(up)),
        "draw_ms": float(np.median(draw)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="3b8c9b0", help="earlier commit to compare with")
    ap.add_argument("--faces", type=int, default=6)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.faces, args.reps, args.child)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        old.mkdir()
        archive = Path(tmp) / "old.tar"
        subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), args.against], check=True)
        with tarfile.open(archive) as tf:
            tf.extractall(old, filter="data")
        runs: dict[str, list[dict[str, float]]] = {}
        variants = [
            ("earlier commit, 0 faces", old, "none", 0),
            ("this tree, 0 faces", ROOT, "none", 0),
            (f"earlier commit, {args.faces} faces (box)", old, "none", args.faces),
            (f"this tree, {args.faces} faces, default box alpha", ROOT, "none", args.faces),
            (f"this tree, {args.faces} faces, face+mouth alpha", ROOT, "face", args.faces),
        ]
        for _ in range(args.rounds):
            for name, tree, kind, n in variants:
                env = {**os.environ, "PYTHONPATH": str(tree)}
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--faces", str(n)]
                out = subprocess.run(
                    [*cmd, "--reps", str(args.reps)], env=env, capture_output=True, text=True, cwd=tree
                )
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return 1
                runs.setdefault(name, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"1920x1080 frame, 128 px crops, medians of {args.reps} frames x {args.rounds} rounds")
    print(f"{'variant':<44} {'crops ms':>9} {'upload ms':>10} {'draw ms':>9}")
    for name, rs in runs.items():
        cr = statistics.median(r["crops_ms"] for r in rs)
        up = statistics.median(r["upload_ms"] for r in rs)
        dr = statistics.median(r["draw_ms"] for r in rs)
        print(f"{name:<44} {cr:9.2f} {up:10.2f} {dr:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
