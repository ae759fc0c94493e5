"""Tracking on synthetic clips with known motion, detected by the real det_500m.

Done-when of the tracking issue: on a still face with camera noise, smoothed keypoint jitter is at
most a third of the raw detector's; on moving faces the smoothed keypoints lag the truth by at most
one frame; no face present in truth is ever without a track (no swap flicker), also when the
detector misses frames (occlusion, random drops). Skipped when the model or photos are absent.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from kiosk.processing.face_search import roi_geometry
from kiosk.processing.tracking import FaceTracker
from kiosk.tools.motion_videos import (
    Clip,
    DetectFn,
    astronaut_scene,
    every_kth,
    group_scene,
    jitter_px,
    lag_frames,
    load_detector,
    make_clip,
    raw_keypoints,
    run_tracker,
)

DET_SIZE = 320
ROI_DET_SIZE = 224
N_FRAMES = 75


@cache
def detectors() -> tuple[DetectFn, DetectFn]:
    full = load_detector(DET_SIZE)
    roi = load_detector(ROI_DET_SIZE)
    if full is None or roi is None:
        pytest.skip("det_500m.onnx not found in ../shared/models")
    return full[0], roi[0]


@cache
def clip(kind: str, scene: str = "astronaut", occlude: tuple[int, ...] = (), frames: int = N_FRAMES) -> Clip:
    sc = astronaut_scene() if scene == "astronaut" else group_scene()
    if sc is None:
        pytest.skip(f"photo for the {scene} scene not found (shared/media or the insightface wheel)")
    full, _ = detectors()
    return make_clip(sc, full, kind, frames, noise_sigma=6.0, occlude_frames=occlude)


def track(c: Clip, drop_prob: float = 0.0, detect_every: int = 5):  # type: ignore[no-untyped-def]
    full, roi = detectors()
    geometry = roi_geometry(c.frames[0].shape, DET_SIZE, ROI_DET_SIZE)
    tracker = FaceTracker(detect_every=detect_every)
    return run_tracker(c, tracker, full, roi, drop_prob=drop_prob, roi=geometry)


@pytest.mark.slow
def test_still_face_jitter_is_at_most_a_third_of_the_raw_detector() -> None:
    c = clip("still")
    full, _ = detectors()
    truth = c.truth_kps[:, 0]
    raw = raw_keypoints(c, full)[:, 0]
    run = track(c)
    raw_jitter = jitter_px(raw, truth)
    smooth_jitter = jitter_px(run.kps[:, 0], truth)
    assert raw_jitter > 0.05  # the noise does move the raw keypoints
    assert smooth_jitter <= raw_jitter / 3, (raw_jitter, smooth_jitter)
    assert run.flicker() == 0
    assert max(run.first_tracked()) <= 2
    assert run.full_detections < N_FRAMES / 3  # regions in between


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pan", "sine"])
def test_moving_face_lags_at_most_one_frame(kind: str) -> None:
    c = clip(kind)
    full, _ = detectors()
    truth = c.truth_kps[:, 0]
    run = track(c)
    assert abs(lag_frames(raw_keypoints(c, full)[:, 0], truth)) <= 0.25  # the measure itself
    lag = lag_frames(run.kps[:, 0], truth)
    assert -0.25 <= lag <= 1.0, lag
    assert run.flicker() == 0
    assert max(run.first_tracked()) <= 2
    assert run.id_switches() == 0
    # Keypoints stay on the face: mean distance to the truth well under the eye distance (~42 px).
    err = np.linalg.norm(run.kps[:, 0] - truth, axis=-1)
    assert float(np.nanmean(err)) < 5.0


@pytest.mark.slow
def test_occluded_frames_hold_the_face() -> None:
    c = clip("pan", occlude=(30, 31, 32))
    full, _ = detectors()
    raw = raw_keypoints(c, full)[:, 0]
    assert np.isnan(raw[30:33]).all()  # the detector really misses the face there
    run = track(c)
    assert run.flicker() == 0
    assert max(run.first_tracked()) <= 2
    assert run.id_switches() == 0


def test_random_missed_detections_do_not_flicker() -> None:
    c = clip("sine")
    run = track(c, drop_prob=0.25)
    assert run.flicker() == 0
    assert max(run.first_tracked()) <= 5  # a track is reported after two detections
    assert run.id_switches() == 0
    assert -0.25 <= lag_frames(run.kps[:, 0], c.truth_kps[:, 0]) <= 1.0


def test_three_faces_keep_their_tracks() -> None:
    c = clip("sine", scene="group")
    assert c.truth_kps.shape[1] == 3
    run = track(c)
    assert run.flicker() == 0
    assert max(run.first_tracked()) <= 2
    assert run.id_switches() == 0
    assert len({int(i) for i in run.track_ids[-1]}) == 3
    for f in range(3):
        assert -0.25 <= lag_frames(run.kps[:, f], c.truth_kps[:, f]) <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("scene", ["astronaut", "group"])
def test_slow_processing_is_as_close_to_the_truth_as_the_raw_detector(scene: str) -> None:
    # Processing at 1/13 of the camera rate (a ~140 ms/face swapper with three faces): between two
    # processed frames the face moves up to 65 px. The tracker must follow (associate, not hold
    # the face where it was, not blend positions 0.43 s apart) and so stay as close to the truth
    # as the raw detector on the same frames. The tracker of old was 11x / 7.5x the raw p95.
    c = clip("sine", scene=scene, frames=13 * 12)
    full, roi = detectors()
    geometry = roi_geometry(c.frames[0].shape, DET_SIZE, ROI_DET_SIZE)
    trk, raw, unreported = every_kth(c, 13, full, roi, geometry)
    p95_trk, p95_raw = float(np.percentile(trk, 95)), float(np.percentile(raw, 95))
    print(f"{scene} sine, every 13th frame: p95 tracker {p95_trk:.2f} px, raw {p95_raw:.2f} px")
    assert unreported == 0
    assert p95_trk <= 1.5 * p95_raw, (p95_trk, p95_raw)
    assert float(np.median(trk)) <= 1.5 * float(np.median(raw))
