"""Cost of the classic swap per face at 1080p, stage by stage, measured in the pipeline.

    python benchmarks/classic_cost.py [--frames 40] [--resolution 128]

A 1920x1080 frame with the NASA portrait's face at booth size (about 330 px between brow and chin),
the bundled YuNet, the face mask, mean_std colour correction. Prints the median milliseconds per
face of each stage for the GPU-composite path (the kiosk's default: no CPU paste) and for the CPU
paste-back (``kiosk swap``, snapshots, ``display.composite: cpu``), beside the detector's time on
the same frames, so the figures read as ratios on whatever machine runs them.
"""

from __future__ import annotations

import argparse
import statistics

import cv2
import numpy as np

from kiosk.capture.demo_visitor import source_face_path, visitor_photo_path
from kiosk.config import parse_config
from kiosk.processing.models import read_image
from kiosk.processing.pipeline import SwapPipeline


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--resolution", type=int, default=128, choices=(128, 256, 512))
    args = ap.parse_args()
    cfg = parse_config(
        "models: {swapper: classic, providers: {order: [cpu]}}\n"
        f"processing: {{color_correction: mean_std, swap_resolution: {args.resolution}}}\n"
        "mask: {shape: face, mouth: 0.5}\n",
        "<bench>",
        env=False,
    )
    pipe = SwapPipeline.from_config(cfg)
    pipe.set_source(read_image(source_face_path()))
    portrait = cv2.resize(read_image(visitor_photo_path()), (1080, 1080), interpolation=cv2.INTER_CUBIC)
    frame = np.ascontiguousarray(cv2.copyMakeBorder(portrait, 0, 0, 420, 420, cv2.BORDER_REPLICATE))
    out = np.empty_like(frame)
    for paste in (False, True):
        rows: dict[str, list[float]] = {
            k: [] for k in ("detect", "align", "swap", "mask", "colour", "paste", "total")
        }
        for i in range(args.frames + 3):
            pipe.process_into(frame, out if paste else None, paste=paste)
            t = pipe.times
            if i < 3 or t.faces != 1:
                continue
            for k, v in (
                ("detect", t.detect_ms),
                ("align", t.align_ms),
                ("swap", t.swap_ms),
                ("mask", t.mask_ms),
                ("colour", t.color_ms),
                ("paste", t.paste_ms),
                ("total", t.total_ms),
            ):
                rows[k].append(v)
        med = {k: statistics.median(v) for k, v in rows.items() if v}
        face = sum(med[k] for k in ("align", "swap", "mask", "colour", "paste"))
        what = "CPU paste-back" if paste else "GPU composite (no CPU paste)"
        print(
            f"{what}, 1920x1080, crop {args.resolution}: per face {face:.2f} ms "
            f"(align {med['align']:.2f}, swap {med['swap']:.2f}, mask {med['mask']:.2f}, "
            f"colour {med['colour']:.2f}, paste {med['paste']:.2f}); detector {med['detect']:.1f} ms; "
            f"per face / detector = {face / med['detect']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
