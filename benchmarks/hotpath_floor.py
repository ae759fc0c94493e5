"""The floor under the hot path: what the pixel work of one 1080p frame of six faces costs on this
machine when nothing but OpenCV's own calls (and the copy) are left, next to the pipeline itself.

    .venv/bin/python benchmarks/hotpath_floor.py [--size 1920x1080] [--repeat 200] [--threads 1 2]

Same frame and faces as ``benchmarks/bench_hotpath.py`` (insightface's t1.jpg scaled into the
frame, the six faces det_500m finds; stand-in models for the rest; without ../shared/models or
insightface's photos the
stand-in detector on six white squares, as bench_hotpath.py does: its boxes are about twice the
size, see the header line; the ns per pixel carry over). It first prints the pipeline's
time outside ``session.run`` per frame (``process_into`` with CPU paste-back, wall clock, the
real model calls timed by one wrapper), the figure the 1 ms goal is about. For each number of OpenCV
threads it times, best of ``--repeat``:

- ``copy``: the frame copied into the output buffer (CPU paste-back composites into a copy);
- ``letterbox``: the detector input the pipeline writes (its fused kernel), and plain
  ``cv2.resize`` to 640x360 (no float conversion) for comparison;
- ``crop warps``: six 128x128 ``cv2.warpAffine`` crops (3 channels, bilinear) of the faces, the
  swapper's input before any conversion;
- ``paste warps``: six 4-channel ``cv2.warpAffine`` of a 128 crop with its mask into each face's
  box in the frame, the paste-back's sampling before any blending (and the 3-channel warp alone);

then the sum of those minima, which is what the six-face frame costs before a single byte of
normalisation, blending, detection decoding or bookkeeping, and the pipeline's own overhead
(``process_into`` with every ``session.run`` returning at once, CPU time per frame, min / p50).
Prints ns per output pixel of each warp, so the figures carry to other face sizes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def best_ms(fn: Callable[[], object], repeat: int, clock: Callable[[], float] = time.perf_counter) -> float:
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument(
        "--detector", help="the real det_500m.onnx (default: ../shared/models/det_500m.onnx when present)"
    )
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="OpenCV thread counts to try")
    args = ap.parse_args()

    import onnxruntime as ort

    from kiosk.config import KioskConfig
    from kiosk.inference.kernels import paste_geometry
    from kiosk.processing.pipeline import SwapPipeline
    from kiosk.tools.bench_frames import _insightface_image, faces_frame, shared_file
    from kiosk.tools.standins import make_all

    # Time inside ONNX Runtime, as bench_hotpath.py measures it: every run through one wrapper.
    spent = [0.0]

    def timed(fn: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*a: object, **k: object) -> object:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0

        return wrapper

    ort.InferenceSession.run = timed(ort.InferenceSession.run)  # type: ignore[method-assign]
    ort.InferenceSession.run_with_iobinding = timed(ort.InferenceSession.run_with_iobinding)  # type: ignore[method-assign]
    det = Path(args.detector) if args.detector else shared_file("models", "det_500m.onnx")
    if _insightface_image("t1.jpg") is None:
        det = None  # no photo of faces for the real detector: the stand-in and its white squares
    w, h = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="hotpath_floor_") as tmp_name:
        models = Path(tmp_name) / "models"
        make_all(models)
        cfg = KioskConfig.model_validate(
            {
                "models": {
                    "dir": str(models),
                    "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
                    "accept_noncommercial_licence": True,
                    "detector": str(det) if det is not None else "det_10g.onnx",
                    "providers": {"order": ["cpu"]},
                },
                "processing": {"max_faces": 8, "color_correction": "none"},
                "base_dir": str(models),
            }
        )
        pipe = SwapPipeline.from_config(cfg)
        pipe.use_latent(np.full((1, 512), 512**-0.5, np.float32), "bench")
        frame = faces_frame(w, h, white_squares=det is None)
        out = np.empty_like(frame)
        faces = pipe.process_into(frame, out)
        outside = []
        for i in range(5 + max(args.repeat // 4, 10)):
            spent[0] = 0.0
            t0 = time.perf_counter()
            pipe.process_into(frame, out)
            if i >= 5:
                outside.append((time.perf_counter() - t0 - spent[0]) * 1e3)

        # The pipeline's overhead alone: every session.run returns its last real outputs at once.
        last: dict[int, object] = {}
        real_run = ort.InferenceSession.run

        def record(
            self: ort.InferenceSession, names: object, feeds: object, *a: object, **k: object
        ) -> object:
            res = real_run(self, names, feeds, *a, **k)  # type: ignore[arg-type]
            last[id(self)] = res
            return res

        ort.InferenceSession.run = record  # type: ignore[method-assign,assignment]
        for _ in range(3):
            pipe.process_into(frame, out)
        ort.InferenceSession.run = lambda self, names, feeds, *a, **k: last[id(self)]  # type: ignore[method-assign,assignment,misc]
        ort.InferenceSession.run_with_iobinding = lambda self, binding, *a, **k: None  # type: ignore[method-assign,assignment,misc]

    if not faces:
        print(f"hotpath_floor: no face found in the bench frame (detector {det})", file=sys.stderr)
        return 2
    boxes, mats = [], []
    for sf in faces:
        box = paste_geometry(sf.affine, 128, frame.shape[:2], np.zeros(4, np.int64), inv := np.zeros((2, 3)))
        if box is not None:
            boxes.append(box)
            mats.append(inv)
    px_paste = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in boxes)
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, (128, 128, 4), np.uint8)
    rgb = np.ascontiguousarray(rgba[:, :, :3])
    scratch4 = [np.empty((y1 - y0, x1 - x0, 4), np.uint8) for x0, y0, x1, y1 in boxes]
    scratch3 = [np.empty((y1 - y0, x1 - x0, 3), np.uint8) for x0, y0, x1, y1 in boxes]
    crop = np.empty((128, 128, 3), np.uint8)
    small = np.empty((360 * h // 1080, 640 * w // 1920, 3), np.uint8)
    affines = [sf.affine for sf in faces]

    def crops() -> None:
        for m in affines:
            cv2.warpAffine(frame, m, (128, 128), dst=crop, borderValue=0.0)

    def paste4() -> None:
        for inv, (x0, y0, x1, y1), dst in zip(mats, boxes, scratch4, strict=True):
            cv2.warpAffine(rgba, inv, (x1 - x0, y1 - y0), dst=dst, flags=cv2.INTER_LINEAR, borderValue=0)

    def paste3() -> None:
        for inv, (x0, y0, x1, y1), dst in zip(mats, boxes, scratch3, strict=True):
            cv2.warpAffine(rgb, inv, (x1 - x0, y1 - y0), dst=dst, flags=cv2.INTER_LINEAR, borderValue=0)

    print(
        f"frame {w}x{h}, {len(faces)} faces, face boxes {[f'{x1 - x0}x{y1 - y0}' for x0, y0, x1, y1 in boxes]} "
        f"({px_paste} px to paste), OpenCV {cv2.__version__}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, best of {args.repeat}"
        + (
            ""
            if det is not None
            else "; no det_500m or no insightface t1.jpg: stand-in detector, white squares"
        )
    )
    print(
        f"pipeline outside session.run (wall, OpenCV default threads, real model calls): "
        f"p50 {np.median(outside):.2f} ms, min {min(outside):.2f} ms"
    )
    print(
        "OpenCV threads   copy  letterbox (cv2.resize)  crop warps  paste warps 4ch (3ch)   floor   pipeline CPU ms min / p50"
    )
    for n in args.threads:
        cv2.setNumThreads(n)
        copy = best_ms(lambda: np.copyto(out, frame), args.repeat)
        letter = best_ms(lambda: pipe.detector._letterbox(frame), args.repeat)
        resize = best_ms(lambda: cv2.resize(frame, (small.shape[1], small.shape[0]), dst=small), args.repeat)
        crop_ms = best_ms(crops, args.repeat)
        p4 = best_ms(paste4, args.repeat)
        p3 = best_ms(paste3, args.repeat)
        floor = copy + letter + crop_ms + p4
        cpu = []
        for _ in range(max(args.repeat // 4, 10)):
            c0 = time.process_time()
            pipe.process_into(frame, out)
            cpu.append((time.process_time() - c0) * 1e3)
        print(
            f"{n:>14}  {copy:5.2f}  {letter:5.2f} ({resize:4.2f})        {crop_ms:5.2f}       {p4:5.2f} ({p3:4.2f})"
            f"           {floor:5.2f}   {min(cpu):.2f} / {np.median(cpu):.2f}"
        )
        if n == args.threads[0]:
            print(
                f"{'':>14}  per pixel: crop warp {crop_ms * 1e6 / (len(affines) * 128 * 128):.1f} ns, "
                f"paste warp 4ch {p4 * 1e6 / px_paste:.1f} ns, 3ch {p3 * 1e6 / px_paste:.1f} ns"
            )
    print(
        "floor = copy + letterbox + crop warps + 4-channel paste warps: the work left with no "
        "conversion, blend, decode or bookkeeping at all (the goal is 1 ms for all of it)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
