"""Keypoint jitter, lag and flicker: the raw detector next to the tracker, on clips with known motion.

    .venv/bin/python benchmarks/jitter.py [--det-size 320] [--roi-det-size 224] [--beta 0.07] ...

Clips (kiosk/tools/motion_videos.py): a real photo animated with known motion plus gaussian sensor
noise, 640x480 at 30 fps; the truth is the clean first frame's detection carried by the motion.
Needs ../shared/models/det_500m.onnx and the photos; says so and exits 2 when they are absent.

Columns: jitter = mean over keypoints and axes of the std of the keypoint error (px); rms = root
mean square keypoint error (px); lag = time shift that best aligns the keypoints with the truth
(frames, positive = behind); flicker = frames a face that is there is not tracked after its first
tracked frame; first = first tracked frame; ids = track id changes; full/roi = detector calls.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's kiosk, also where it is not installed

from kiosk.processing.face_search import roi_geometry  # noqa: E402
from kiosk.processing.tracking import FaceTracker  # noqa: E402
from kiosk.tools.motion_videos import (  # noqa: E402
    astronaut_scene,
    group_scene,
    jitter_px,
    lag_frames,
    load_detector,
    make_clip,
    raw_keypoints,
    rms_error_px,
    run_tracker,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--det-size", type=int, default=320)
    ap.add_argument("--roi-det-size", type=int, default=224, help="0: crops scaled to the face instead")
    ap.add_argument("--min-cutoff", type=float, default=0.5)
    ap.add_argument("--beta", type=float, default=0.07)
    ap.add_argument("--d-cutoff", type=float, default=1.0)
    ap.add_argument("--detect-every", type=int, default=5)
    ap.add_argument("--max-missed", type=int, default=5)
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--noise", type=float, default=6.0, help="sensor noise std, grey levels")
    ap.add_argument("--drop", type=float, default=0.25, help="detection drop rate of the 'drops' row")
    args = ap.parse_args(argv)

    full = load_detector(args.det_size)
    roi = load_detector(args.roi_det_size) if args.roi_det_size else None
    single, group = astronaut_scene(), group_scene()
    if full is None or single is None:
        print("needs ../shared/models/det_500m.onnx and shared/media/astronaut_eileen_collins_nasa.png")
        return 2
    detect, desc = full
    print(f"detector: {desc}; regions: {roi[1] if roi else 'face-scaled crops, same detector'}")
    print(
        f"tracker: min_cutoff={args.min_cutoff} beta={args.beta} d_cutoff={args.d_cutoff} "
        f"detect_every={args.detect_every} max_missed={args.max_missed}; "
        f"{args.frames} frames 640x480, noise sigma {args.noise}"
    )
    cases = [
        ("still", single, "still", (), 0.0),
        ("pan", single, "pan", (), 0.0),
        ("sine", single, "sine", (), 0.0),
        ("pan+occluded 30-32", single, "pan", (30, 31, 32), 0.0),
        (f"sine+drops {args.drop:.0%}", single, "sine", (), args.drop),
    ]
    if group is not None:
        cases.append(("3 faces sine", group, "sine", (), 0.0))
    head = (
        f"{'clip':20} {'face':>4} | {'jitter raw':>10} {'smooth':>7} {'ratio':>6} | {'rms raw':>7} "
        f"{'smooth':>7} | {'lag raw':>7} {'smooth':>7} | {'flicker':>7} {'first':>5} {'ids':>3} "
        f"{'full':>4} {'roi':>4} {'ms/frame':>8}"
    )
    print(head)
    print("-" * len(head))
    for name, scene, kind, occ, drop in cases:
        clip = make_clip(scene, detect, kind, args.frames, noise_sigma=args.noise, occlude_frames=occ)
        raw = raw_keypoints(clip, detect)
        tracker = FaceTracker(
            min_cutoff=args.min_cutoff,
            beta=args.beta,
            d_cutoff=args.d_cutoff,
            detect_every=args.detect_every,
            max_missed=args.max_missed,
        )
        geometry = roi_geometry(clip.frames[0].shape, args.det_size, args.roi_det_size) if roi else None
        t0 = time.perf_counter()
        run = run_tracker(clip, tracker, detect, roi[0] if roi else None, drop_prob=drop, roi=geometry)
        ms = (time.perf_counter() - t0) * 1000 / len(clip.frames)
        first = run.first_tracked()
        for f in range(clip.truth_kps.shape[1]):
            truth = clip.truth_kps[:, f]
            jr, js = jitter_px(raw[:, f], truth), jitter_px(run.kps[:, f], truth)
            moving = kind != "still"
            lr = f"{lag_frames(raw[:, f], truth):7.2f}" if moving and not occ else f"{'-':>7}"
            ls = f"{lag_frames(run.kps[:, f], truth):7.2f}" if moving else f"{'-':>7}"
            tail = (
                f"{run.flicker():7d} {max(first):5d} {run.id_switches():3d} {run.full_detections:4d} "
                f"{run.roi_detections:4d} {ms:8.1f}"
                if f == 0
                else ""
            )
            print(
                f"{name if f == 0 else '':20} {f:4d} | {jr:10.3f} {js:7.3f} {js / jr:6.2f} | "
                f"{rms_error_px(raw[:, f], truth):7.2f} {rms_error_px(run.kps[:, f], truth):7.2f} | "
                f"{lr} {ls} | {tail}"
            )
    print(
        "\nraw = det_500m on the full frame, every frame; smooth = FaceTracker output (regions between "
        "full detections). On moving clips, jitter includes the detector's position-dependent error."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
