"""How much of the GIL does the headless render loop leave to the other threads?

    PYTHONPATH=$PWD .venv/bin/python benchmarks/render_gil.py [--frames 90] [--size 1280x720]

The kiosk's own :class:`~kiosk.render.window.OffscreenSurface` and
:class:`~kiosk.render.renderer.Renderer` draw a camera-sized picture every frame (``set_frame``:
the texture upload, ``draw``, ``end_frame``), the way ``kiosk run --headless`` does, while a second
thread runs pure Python (it needs the GIL, as the swap thread's glue between its numba and ONNX
calls does) and counts its loops. Two end-of-frame variants alternate, A B A B, in one run:

* ``finish``: the surface's own ``end_frame``, a ``glFinish`` through ctypes that lets go of the
  GIL while the driver draws (:func:`~kiosk.render.window.gil_free_finish`);
* ``none``: no end of frame (the old ``end_frame``): a software renderer then draws inside the
  next frame's ``Texture.write``, which holds the GIL.

Prints per variant the render rate and the other thread's loops a second, and their ratios
(finish / none). On a GPU driver both are near equal; on Mesa llvmpipe the other thread gets
several times more.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's kiosk

from kiosk.render.options import DisplayOptions  # noqa: E402
from kiosk.render.renderer import Renderer  # noqa: E402
from kiosk.render.window import OffscreenSurface  # noqa: E402


def run(
    surface: OffscreenSurface, renderer: Renderer, frames: list[np.ndarray], finish: bool
) -> tuple[float, float]:
    """(render frames a second, the other thread's loops a second) over ``frames``."""
    stop = threading.Event()
    loops = [0]

    def other() -> None:
        x = 0
        while not stop.is_set():
            for i in range(2000):
                x += i
            loops[0] += 1

    worker = threading.Thread(target=other, daemon=True)
    worker.start()
    t0 = time.perf_counter()
    for frame in frames:
        renderer.set_frame(frame)
        renderer.draw(surface.begin_frame())
        if finish:
            surface.end_frame()
    surface.ctx.finish()
    dt = time.perf_counter() - t0
    stop.set()
    worker.join()
    return len(frames) / dt, loops[0] / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--size", default="1280x720", help="the picture and the surface, WxH")
    ap.add_argument("--rounds", type=int, default=3, help="A B pairs")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.lower().split("x"))
    surface = OffscreenSurface(w, h)
    renderer = Renderer(surface.ctx, DisplayOptions())
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (h, w, 3), np.uint8) for _ in range(4)]
    frames = [frames[i % 4] for i in range(args.frames)]
    print(f"{surface.ctx.info['GL_RENDERER']}, {w}x{h}, {args.frames} frames a run, {args.rounds} rounds")
    got: dict[str, list[tuple[float, float]]] = {"finish": [], "none": []}
    run(surface, renderer, frames[:10], True)  # warm-up: shaders, textures
    for _ in range(args.rounds):
        for name in ("finish", "none"):
            got[name].append(run(surface, renderer, frames, name == "finish"))
    med = {
        k: (statistics.median(f for f, _ in v), statistics.median(o for _, o in v)) for k, v in got.items()
    }
    for name, (fps, other) in med.items():
        print(f"{name:7s}: render {fps:6.1f} fps, the other thread {other:8.0f} loops/s (medians)")
    print(
        f"finish / none: render {med['finish'][0] / med['none'][0]:.2f}x, "
        f"the other thread {med['finish'][1] / med['none'][1]:.2f}x"
    )
    surface.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
