"""Where the swapped face lands on screen: live (carried by the tracker) vs synced vs stale positions.

    .venv/bin/python benchmarks/live_alignment.py [--detector det.onnx] [--det-size 320] [--result-frames 13]
        [--frames 90] [--tracking] [--png out.png]

Clips (kiosk/tools/motion_videos.py): real photos (the NASA astronaut, one face; insightface's t1.jpg,
three faces) animated with known motion at walking speed (pan: 120 px/s at 640 px, start and stop;
sine: up to 157 px/s with a 4 degree rocking rotation), camera noise, 640x480 at 30 fps; "still bg"
rows move only an ellipse around each face over a still room. The processing stage takes
``--result-frames`` camera frames per result (13: a ~140 ms/face swapper with three faces) and then
starts on the newest frame; its result carries the detector's keypoints on its frame (``--tracking``:
the keypoints of kiosk.processing.tracking fed the processed frames only, as the pipeline is with
``processing.tracking: true``). Replayed frame by frame (motion_videos.simulate_live):
deterministic, no clocks. The detector is ``--detector`` (an SCRFD ONNX file, default
../shared/models/det_500m.onnx; e.g. ../shared/models/det_2.5g.onnx) at ``--det-size`` (320); it
gives the results' keypoints, the clip's truth (its keypoints on the clean first frame carried by the
known motion), the "detector" column and the floor row.

Strategies, per displayed frame:
  live    the newest camera frame; the newest result's keypoints carried by kiosk.capture.live.LiveTracker
  stale   the newest camera frame; the newest result's keypoints as they were (Deep-Live-Cam)
  synced  the newest result's own frame and keypoints (the picture is that many frames old)

Columns (keypoint distance in px, p50/p95 over keypoints x faces x frames):
  truth     against the clip's true keypoints on the frame shown
  detector  against the detector run on the frame shown (synced: the same detection, 0 by construction)
  tracker   live only: against the result's own keypoints moved by the true motion (the tracker's
            error alone, without the detector's)
  age       frames between the picture's capture and the display (latency of the picture)
  real      share of face-frames shown as the visitor's real face (live: carried position not trusted)
The last line per clip ("<detector> alone") is the detector's own error (on each frame against the truth):
the floor under every strategy's "truth" column.
``--png OUT.png`` also draws, with the kiosk's own renderer and composite shader (headless EGL),
one displayed frame of the sine clip (``--png-scene group|astronaut``) in each strategy, the swapped crops tinted so they
can be seen: live | stale | synced.
Needs the detector file and the photos; says so and exits 2 when they are absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's kiosk, also where it is not installed

from kiosk.tools.motion_videos import (  # noqa: E402
    SHARED,
    Clip,
    DetectFn,
    LiveRun,
    astronaut_scene,
    group_scene,
    kp_errors,
    load_detector,
    make_clip,
    p50_p95,
    raw_keypoints,
    simulate_live,
    tracked_results,
    truth_carried,
)

DEFAULT_DETECTOR = SHARED / "models" / "det_500m.onnx"


def shown_on(run: LiveRun, per_frame: np.ndarray, synced: bool) -> np.ndarray:
    """Per displayed frame, ``per_frame`` (T, F, 5, 2) of the frame on screen."""
    out = np.full_like(run.stale, np.nan)
    for i, n in enumerate(run.synced_frame):
        if n >= 0:
            out[i] = per_frame[n] if synced else per_frame[i]
    return out


def report(name: str, clip: Clip, run: LiveRun, detected: np.ndarray, det_label: str) -> list[str]:
    has = run.anchor_frame >= 0
    faces_present = ~np.isnan(run.stale[..., 0, 0])
    real = float(np.isnan(run.live[..., 0, 0])[faces_present].mean()) if faces_present.any() else 0.0
    ages = (np.arange(len(clip.frames)) - run.synced_frame)[has]
    rows = []
    for label, kps, synced in (
        ("live", run.live, False),
        ("stale", run.stale, False),
        ("synced", run.synced, True),
    ):
        truth = kp_errors(kps, shown_on(run, clip.truth_kps, synced))
        det = kp_errors(kps, shown_on(run, detected, synced))
        tracker = (
            p50_p95(kp_errors(run.live, truth_carried(clip, run))) if label == "live" else "       -       "
        )
        age = 0.0 if not synced else float(np.median(ages))
        share = real if label == "live" else 0.0
        rows.append(
            f"  {name:<28} {label:<7} {p50_p95(truth)}   {p50_p95(det)}   {tracker}   {age:5.1f}   {100 * share:4.1f} %"
        )
    floor = kp_errors(detected, clip.truth_kps)
    alone = f"{det_label} alone"
    rows.append(f"  {name:<28} {alone:<15}{p50_p95(floor)}   (detector on every frame vs truth)")
    if sum(run.dropped.values()):
        rows.append(f"  {name:<28} live faces dropped to the real face: {run.dropped}")
    return rows


def draw_strategies(clip: Clip, detect: DetectFn, result_frames: int, track_px: int, out: Path) -> None:
    """Render one frame, at the largest motion since the result's frame, in the three strategies."""
    import cv2

    from kiosk.capture.live import LiveAnchor, LiveFace, LiveOptions, LiveTracker
    from kiosk.config import DisplayConfig
    from kiosk.inference.align import align_matrix, warp_crop
    from kiosk.render.renderer import Renderer
    from kiosk.render.window import OffscreenSurface
    from kiosk.types import Face, SwappedFace

    tracker = LiveTracker(LiveOptions(track_px=track_px))
    pending, job = None, 0
    best: tuple[float, int, int, list[SwappedFace], list[SwappedFace]] | None = None
    for i, frame in enumerate(clip.frames):
        if pending is not None:
            tracker.submit(pending)
            pending = None
        tracker.update(frame, i, i / clip.fps)
        if i == job + result_frames:
            faces = []
            for f in detect(clip.frames[job]):
                a = align_matrix(f.kps, "arcface_128", 128)
                crop = warp_crop(clip.frames[job], a, 128).copy()
                crop[..., 2] = np.maximum(crop[..., 2], 200)  # tinted: the "swapped" face
                cv2.rectangle(crop, (18, 18), (110, 110), (0, 255, 255), 2)
                faces.append(LiveFace(crop, a, f.kps, f.box_xyxy))
            pending = LiveAnchor(job, job / clip.fps, tuple(faces))
            job = i
        a = tracker.anchor
        if a is None or not a.faces:
            continue
        moved = float(np.abs(clip.truth_kps[i] - clip.truth_kps[a.seq]).max())
        if best is None or moved > best[0]:
            live: list[SwappedFace] = []
            tracker.carried_faces(live)
            stale = [SwappedFace(f.crop_bgr, f.affine, Face(f.box_xyxy, 1.0, f.kps)) for f in a.faces]
            best = (moved, i, a.seq, live, stale)
    assert best is not None
    moved, i, n, live, stale = best
    h, w = clip.frames[0].shape[:2]
    surface = OffscreenSurface(w, h)
    renderer = Renderer(surface.ctx, DisplayConfig(fit="fit"))
    panels = []
    for label, frame, faces in (
        ("live: newest frame, faces carried", clip.frames[i], live),
        ("stale: newest frame, old positions", clip.frames[i], stale),
        ("synced: the result's frame", clip.frames[n], stale),
    ):
        renderer.set_frame(frame, faces)
        size = surface.begin_frame()
        renderer.draw(size)
        rgb = np.ascontiguousarray(surface.read_rgb())
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])
        cv2.putText(bgr, label, (10, 24), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2)
        panels.append(bgr)
    renderer.release()
    surface.close()
    cv2.imwrite(str(out), np.hstack(panels))
    print(f"wrote {out}: frame {i}, {moved:.0f} px of motion since the result's frame (result of frame {n})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--result-frames", type=int, default=13, help="camera frames per result (13 ≈ 3 x 140 ms)"
    )
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument(
        "--detector",
        type=Path,
        default=DEFAULT_DETECTOR,
        help="SCRFD detector file for the results, the truth and the detector column (default: %(default)s)",
    )
    ap.add_argument("--det-size", type=int, default=320)
    ap.add_argument("--noise", type=float, default=6.0)
    ap.add_argument("--track-px", type=int, default=320, help="width of the tracker's grey image")
    ap.add_argument("--png", type=Path, help="draw one frame of the three-face sine clip per strategy")
    ap.add_argument(
        "--png-scene", choices=("group", "astronaut"), default="group", help="clip of the picture"
    )
    ap.add_argument("--only-png", action="store_true", help="just the picture, no table")
    ap.add_argument(
        "--tracking",
        action="store_true",
        help="results carry the pipeline's tracked keypoints (processing.tracking: true) instead of "
        "the detector's own: kiosk.processing.tracking fed the result frames only, as the pipeline is",
    )
    ap.add_argument("--roi-det-size", type=int, default=224, help="with --tracking: region detector size")
    ap.add_argument(
        "--write-video",
        type=Path,
        help="write the three-face clip (--clip-kind, --frames) as an MP4 at 30 fps and exit "
        "(the clip benchmarks/live_share.py plays through the whole kiosk)",
    )
    ap.add_argument("--clip-kind", choices=("pan", "sine"), default="sine", help="with --write-video")
    args = ap.parse_args(argv)

    loaded = load_detector(args.det_size, args.detector)
    single, group = astronaut_scene(), group_scene()
    if loaded is None or single is None or group is None:
        missing = [f"{args.detector} (--detector)"] if loaded is None else []
        missing += ["../shared/media/astronaut_eileen_collins_nasa.png"] if single is None else []
        missing += ["insightface's t1.jpg (pip install insightface)"] if group is None else []
        print(f"live_alignment: needs {', '.join(missing)}")
        return 2
    detect, desc = loaded
    if args.write_video is not None:
        import cv2

        clip = make_clip(group, detect, args.clip_kind, args.frames, noise_sigma=args.noise)
        h, w = clip.frames[0].shape[:2]
        writer = cv2.VideoWriter(str(args.write_video), cv2.VideoWriter.fourcc(*"mp4v"), clip.fps, (w, h))
        for frame in clip.frames:
            writer.write(frame)
        writer.release()
        print(
            f"wrote {args.write_video}: group {args.clip_kind}, {len(clip.frames)} frames {w}x{h} at 30 fps"
        )
        return 0
    det_label = args.detector.stem
    roi_loaded = load_detector(args.roi_det_size, args.detector) if args.tracking else None
    roi_detect = roi_loaded[0] if roi_loaded is not None else None
    if args.png is not None:
        photo = group if args.png_scene == "group" else single
        clip = make_clip(photo, detect, "sine", args.frames, noise_sigma=args.noise)
        draw_strategies(clip, detect, args.result_frames, args.track_px, args.png)
        if args.only_png:
            return 0
    print(
        f"detector: {desc}; a result every {args.result_frames} frames at 30 fps; tracker at {args.track_px} px"
        + ("; results from kiosk.processing.tracking (processing.tracking: true)" if args.tracking else "")
    )
    print(
        f"  {'clip':<28} {'shown':<7} {'truth p50/p95':>15}   {'detector p50/p95':>15}   "
        f"{'tracker p50/p95':>15}   {'age':>5}   real"
    )
    for scene_name, scene in (("astronaut", single), ("group (3 faces)", group)):
        for kind in ("pan", "sine"):
            for still_bg in (False, True):
                clip = make_clip(
                    scene, detect, kind, args.frames, noise_sigma=args.noise, still_background=still_bg
                )
                results = (
                    tracked_results(clip, detect, roi_detect, args.det_size, args.roi_det_size)
                    if roi_detect is not None
                    else detect
                )
                run = simulate_live(clip, results, args.result_frames, track_px=args.track_px)
                detected = raw_keypoints(clip, detect)
                name = f"{scene_name} {kind}" + (" still bg" if still_bg else "")
                for line in report(name, clip, run, detected, det_label):
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
