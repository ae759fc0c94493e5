"""The face tracker at slow processing rates: fed every k-th camera frame, against the raw detector.

    .venv/bin/python benchmarks/tracking_rate.py [--every 1 2 4 13 30] [--frames 300] [--det-size 320]

When the models are slow, the pipeline processes one camera frame in k (a ~140 ms/face swapper with
three faces: k ≈ 13 at 30 fps), so the tracker sees faces that moved k frames' worth since its last
update. Clips (kiosk/tools/motion_videos.py): real photos (the NASA astronaut; insightface's t1.jpg, three
faces) moved at walking speed, 640x480 at 30 fps with camera noise. For each k, frames 0, k, 2k, …
go through ``detect_and_track`` exactly as the pipeline calls it (its own frame counter, the
frame's capture time, a full detection every ``--detect-every`` processed frames and
scale-consistent regions in between), and the raw detector runs on the same frames.

Columns: keypoint distance to the truth in px, p50 / p95 over keypoints × faces × processed frames,
for the tracker and the raw detector, their ratio at p95, and the face-frames the tracker did not
report (a face that is there but not swapped). Needs ../shared/models/det_500m.onnx and the photos;
says so and exits 2 when they are absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's kiosk, also where it is not installed

from kiosk.processing.face_search import roi_geometry  # noqa: E402
from kiosk.tools.motion_videos import (  # noqa: E402
    astronaut_scene,
    every_kth,
    group_scene,
    load_detector,
    make_clip,
    p50_p95,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, nargs="+", default=[1, 2, 4, 13, 30])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--det-size", type=int, default=320)
    ap.add_argument("--roi-det-size", type=int, default=224)
    ap.add_argument("--detect-every", type=int, default=5)
    ap.add_argument("--noise", type=float, default=6.0)
    ap.add_argument("--kinds", nargs="+", default=["sine"], choices=["sine", "pan"])
    args = ap.parse_args(argv)

    full = load_detector(args.det_size)
    roi_det = load_detector(args.roi_det_size)
    single, group = astronaut_scene(), group_scene()
    if full is None or roi_det is None or single is None or group is None:
        print(
            "needs ../shared/models/det_500m.onnx, shared/media/astronaut_eileen_collins_nasa.png and insightface"
        )
        return 2
    detect, desc = full
    print(f"detector: {desc}; regions at {args.roi_det_size}; detect_every {args.detect_every}")
    print(
        f"  {'clip':<22} {'k':>3} {'fps':>5}  {'tracker p50/p95':>15}  {'raw p50/p95':>15}  "
        f"{'p95 ratio':>9}  unreported"
    )
    for scene_name, scene in (("astronaut", single), ("group (3 faces)", group)):
        for kind in args.kinds:
            clip = make_clip(scene, detect, kind, args.frames, noise_sigma=args.noise)
            roi = roi_geometry(clip.frames[0].shape, args.det_size, args.roi_det_size)
            for k in args.every:
                trk, raw, missing = every_kth(clip, k, detect, roi_det[0], roi, args.detect_every)
                ratio = np.percentile(trk, 95) / np.percentile(raw, 95) if trk.size and raw.size else np.nan
                print(
                    f"  {scene_name + ' ' + kind:<22} {k:>3} {clip.fps / k:5.1f}  {p50_p95(trk)}  {p50_p95(raw)}  "
                    f"{ratio:9.2f}  {missing}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
