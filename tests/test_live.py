"""Live display: carrying a slow result's faces onto newer frames (kiosk.capture.live), deterministically.

Clips with known motion are replayed frame by frame as the threads would see them
(``motion_videos.simulate_live``: a result takes N camera frames, then processing starts on the
newest frame); no clocks, so nothing here depends on the machine's load. The textured clips need
no files; the photo clips use the real det_500m and skip without ../shared.
"""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np
import pytest

from kiosk.capture.geometry import apply_affine, compose
from kiosk.capture.live import LiveAnchor, LiveFace, LiveOptions, LiveTracker
from kiosk.tools.motion_videos import (
    Clip,
    Scene,
    astronaut_scene,
    group_scene,
    kp_errors,
    load_detector,
    make_clip,
    simulate_live,
    tracked_results,
    truth_carried,
)
from kiosk.types import Face, SwappedFace, SwapResult

#: A swapper of ~140 ms a face with three faces: about 13 frames at 30 fps per result.
RESULT_FRAMES = 13
BOX = np.array([270.0, 170.0, 370.0, 290.0], np.float32)
KPS = np.array([[297, 212], [343, 212], [320, 238], [301, 262], [339, 262]], np.float32)


def texture(h: int, w: int, seed: int) -> np.ndarray:
    """Smooth random texture (like skin and clothes at camera resolution), 3 channels."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 6, w // 6, 3)).astype(np.uint8)
    big = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    return np.asarray(cv2.GaussianBlur(big, (0, 0), 1.5), np.uint8)


def fixed_face(_img: np.ndarray) -> list[Face]:
    return [Face(BOX, 0.9, KPS)]


def two_faces(_img: np.ndarray) -> list[Face]:
    shift = np.array([-150.0, 0.0], np.float32)
    return [Face(BOX, 0.9, KPS), Face(BOX + np.tile(shift, 2), 0.8, KPS + shift)]


@cache
def texture_clip(kind: str, n: int = 75) -> Clip:
    scene = Scene(texture(600, 800, 7), np.array([[1.0, 0.0, -80.0], [0.0, 1.0, -60.0]]))
    return make_clip(scene, fixed_face, kind, n, noise_sigma=3.0)


def p95(x: np.ndarray) -> float:
    return float(np.percentile(x, 95))


def p50(x: np.ndarray) -> float:
    return float(np.percentile(x, 50))


@pytest.mark.parametrize("kind", ["pan", "sine"])
def test_carried_keypoints_follow_the_motion_stale_ones_do_not(kind: str) -> None:
    c = texture_clip(kind)
    run = simulate_live(c, None, RESULT_FRAMES)
    live = kp_errors(run.live, c.truth_kps)
    stale = kp_errors(run.stale, c.truth_kps)
    assert run.results >= 4
    assert live.size >= 0.8 * stale.size  # trusted nearly everywhere (no flicker to the real face)
    assert sum(run.dropped.values()) == 0, run.dropped
    assert p95(live) <= 1.0, p95(live)
    # Deep-Live-Cam's stale positions are a whole result's motion behind (4 px a frame on the pan).
    assert p50(stale) >= 10 * max(p50(live), 0.2), (p50(stale), p50(live))
    assert p95(stale) >= 20.0


def test_faces_listed_in_any_order_keep_their_own_tracks() -> None:
    scene = Scene(texture(600, 800, 11), np.array([[1.0, 0.0, -80.0], [0.0, 1.0, -60.0]]))
    c = make_clip(scene, two_faces, "sine", 75, noise_sigma=3.0)
    run = simulate_live(c, None, RESULT_FRAMES, shuffle_seed=3)
    live = kp_errors(run.live, c.truth_kps)
    assert run.results >= 4 and sum(run.dropped.values()) == 0, run.dropped
    assert live.size >= 0.8 * kp_errors(run.stale, c.truth_kps).size
    assert p95(live) <= 1.0, p95(live)


def test_carried_affine_maps_the_new_frame_onto_the_same_crop_pixels() -> None:
    """The crop's frame→crop affine A (frame N) becomes A ∘ T⁻¹ on frame M, so the face's
    keypoints on frame M land where they were in the crop."""
    c = texture_clip("pan")
    tracker = LiveTracker()
    a = np.array([[1.2, 0.1, -300.0], [-0.1, 1.2, -190.0]])
    crop = np.zeros((128, 128, 3), np.uint8)
    n0 = 12
    for i in range(n0 + 1):
        tracker.update(c.frames[i], i, i / 30)
    tracker.submit(LiveAnchor(n0, n0 / 30, (LiveFace(crop, a, c.truth_kps[n0, 0].astype(np.float32), BOX),)))
    for i in range(n0 + 1, n0 + 20):
        tracker.update(c.frames[i], i, i / 30)
    out: list[SwappedFace] = []
    tracker.carried_faces(out)
    assert len(out) == 1
    in_crop_now = apply_affine(out[0].affine, c.truth_kps[n0 + 19, 0])
    in_crop_then = apply_affine(a, c.truth_kps[n0, 0])
    assert np.abs(in_crop_now - in_crop_then).max() < 1.0
    assert out[0].crop_bgr is crop  # the crop is shared, not copied per frame
    np.testing.assert_allclose(out[0].face.kps, c.truth_kps[n0 + 19, 0], atol=1.0)


def test_a_cut_to_other_content_shows_the_real_face_until_the_next_result() -> None:
    c = texture_clip("pan")
    cut = 30
    other = texture(480, 640, 99)
    frames = c.frames[:cut] + [other.copy() for _ in c.frames[cut:]]
    clip = Clip("cut", frames, c.truth_kps, c.truth_boxes, c.occluded)
    run = simulate_live(clip, None, RESULT_FRAMES)
    assert run.dropped["track"] >= 1
    after = [i for i in range(cut, len(frames)) if run.anchor_frame[i] < cut]
    assert after, "the cut must fall between two results"
    assert np.isnan(run.live[after]).all()  # never a face floating where the head was
    assert not np.isnan(run.stale[after]).all()  # the stale strategy keeps drawing it there


def test_a_result_older_than_max_age_shows_the_real_face() -> None:
    c = texture_clip("pan")
    run = simulate_live(c, None, result_frames=40, max_age_s=1.0)  # 40 frames = 1.33 s per result
    assert run.dropped["old"] >= 1
    assert np.isnan(run.live[40 + 31 : 80]).all()  # older than 30 frames: not shown


def test_non_consecutive_frames_and_unknown_result_frames_drop_the_faces() -> None:
    c = texture_clip("still", 20)
    tracker = LiveTracker(LiveOptions(track_px=320))
    face = LiveFace(np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), KPS, BOX)
    for i in range(6):
        tracker.update(c.frames[i], i, i / 30)
    tracker.submit(LiveAnchor(3, 0.1, (face,)))
    tracker.update(c.frames[6], 6, 0.2)
    assert tracker.transforms[0] is not None
    tracker.update(c.frames[7], 9, 0.3)  # frames 7 and 8 never came: the motion in between is unknown
    assert tracker.transforms == [None] and tracker.counts.dropped["gap"] == 1
    tracker.submit(LiveAnchor(2, 0.1, (face,)))  # its frame is before the gap: not in the ring
    tracker.update(c.frames[8], 10, 0.33)
    assert tracker.transforms == [None] and tracker.counts.dropped["gap"] == 2


def test_fast_motion_is_not_trusted() -> None:
    # 40 px a frame on a 100 px face: far past MAX_STEP_FRAC even where Lucas–Kanade still follows.
    base = texture(480, 640, 3)
    frames = [np.roll(base, 40 * i, axis=1) for i in range(6)]
    tracker = LiveTracker()
    face = LiveFace(np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), KPS, BOX)
    tracker.update(frames[0], 0, 0.0)
    tracker.submit(LiveAnchor(0, 0.0, (face,)))
    for i in range(1, 6):
        tracker.update(frames[i], i, i / 30)
    assert tracker.transforms == [None]
    assert tracker.counts.dropped["fast"] + tracker.counts.dropped["track"] == 1


def test_anchor_is_a_copy_of_the_result_slot() -> None:
    crop = np.full((16, 16, 3), 7, np.uint8)
    res = SwapResult(np.zeros((4, 4, 3), np.uint8), seq=5, t_capture=1.5)
    res.faces.append(SwappedFace(crop, np.eye(2, 3), Face(BOX, 0.9, KPS)))
    anchor = LiveAnchor.from_result(res)
    crop[:] = 0  # the slot is reused for the next result
    assert anchor.seq == 5 and anchor.t_capture == 1.5
    assert int(anchor.faces[0].crop_bgr[0, 0, 0]) == 7


def test_carry_error_is_measured_against_the_next_result() -> None:
    c = texture_clip("pan")
    tracker = LiveTracker()
    job = 0
    for i, frame in enumerate(c.frames):
        if i == job + RESULT_FRAMES:
            kps = c.truth_kps[job, 0].astype(np.float32)
            box = c.truth_boxes[job, 0].astype(np.float32)
            face = LiveFace(np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), kps, box)
            tracker.submit(LiveAnchor(job, job / 30, (face,)))
            job = i
        tracker.update(frame, i, i / 30)
    assert tracker.counts.carry_error_px.count >= 3
    err, stale = tracker.counts.carry_error_px.percentile(95), tracker.counts.stale_error_px.percentile(95)
    assert err is not None and stale is not None
    assert err < 1.0 and stale > 20 * max(err, 0.1)


# -- the real detector on photos --------------------------------------------------------------------


@cache
def detector():  # type: ignore[no-untyped-def]
    d = load_detector(320)
    if d is None:
        pytest.skip("det_500m.onnx not found in ../shared/models")
    return d[0]


@pytest.mark.slow
@pytest.mark.parametrize("scene_name", ["astronaut", "group"])
def test_photo_clips_live_is_as_good_as_the_detector_stale_is_far_off(scene_name: str) -> None:
    scene = astronaut_scene() if scene_name == "astronaut" else group_scene()
    if scene is None:
        pytest.skip(f"photo for the {scene_name} scene not found")
    det = detector()
    c = make_clip(scene, det, "sine", 75)
    run = simulate_live(c, det, RESULT_FRAMES)
    tracker_only = kp_errors(run.live, truth_carried(c, run))
    live = kp_errors(run.live, c.truth_kps)
    stale = kp_errors(run.stale, c.truth_kps)
    assert p95(tracker_only) <= 1.0, p95(tracker_only)
    # The result's own detector error is what remains: synced shows that same error on its frame.
    synced = np.concatenate(
        [kp_errors(run.synced[i], c.truth_kps[f]) for i, f in enumerate(run.synced_frame) if f >= 0]
    )
    assert p95(live) <= p95(synced) + 1.0, (p95(live), p95(synced))
    assert p50(stale) >= 5 * p50(live)


@pytest.mark.slow
@pytest.mark.parametrize("scene_name", ["astronaut", "group"])
def test_with_tracking_on_every_result_finds_its_track_and_lands_on_the_face(scene_name: str) -> None:
    # processing.tracking: true, a result every 13 frames: the results carry the pipeline
    # tracker's keypoints, computed on the processed frames only. Each result's face must lie on
    # its live track (one track per face, none restarted from a wrong place) and land on the face
    # as well as with the detector's own keypoints. The old tracker held faces at their old place
    # at this rate (live 33-38 px p95 on these clips, the bench's live tracks restarted).
    scene = astronaut_scene() if scene_name == "astronaut" else group_scene()
    if scene is None:
        pytest.skip(f"photo for the {scene_name} scene not found")
    det = detector()
    roi = load_detector(224)
    assert roi is not None
    c = make_clip(scene, det, "sine", 90)
    plain = simulate_live(c, det, RESULT_FRAMES)
    run = simulate_live(c, tracked_results(c, det, roi[0], 320, 224), RESULT_FRAMES)
    faces = c.truth_kps.shape[1]
    assert run.tracks_started == faces, run.tracks_started
    assert sum(run.dropped.values()) == 0, run.dropped
    live, reference = kp_errors(run.live, c.truth_kps), kp_errors(plain.live, c.truth_kps)
    # All but the first result's faces (a track is reported from its second detection).
    assert live.size >= reference.size - RESULT_FRAMES * 5 * faces, (live.size, reference.size)
    assert p95(live) <= p95(reference) + 1.0, (p95(live), p95(reference))


def test_compose_order() -> None:
    a = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    b = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 0.0]])
    p = np.array([[1.0, 1.0]])
    np.testing.assert_allclose(apply_affine(compose(a, b), p), apply_affine(a, apply_affine(b, p)))


def test_similarity_fit_recovers_a_known_motion() -> None:
    from kiosk.capture.geometry import similarity

    rng = np.random.default_rng(0)
    src = rng.uniform(0, 100, (30, 2))
    m = np.asarray(cv2.getRotationMatrix2D((40.0, 60.0), 7.0, 1.1), np.float64)
    m[:, 2] += (3.0, -2.0)
    np.testing.assert_allclose(similarity(src, apply_affine(m, src)), m, atol=1e-9)


def test_a_tracker_error_still_publishes_the_frame_without_swaps(monkeypatch: pytest.MonkeyPatch) -> None:
    from kiosk.capture.live import AnchorSlot, new_live_frame
    from kiosk.capture.live_feed import LiveFeed
    from kiosk.sync import TripleBuffer

    anchors: TripleBuffer[AnchorSlot] = TripleBuffer(AnchorSlot)
    out = TripleBuffer(new_live_frame)
    feed = LiveFeed(anchors, out)
    c = texture_clip("still", 20)
    feed.on_frame(c.frames[0], 0, 0.0)

    def broken(*_a: object) -> None:
        raise RuntimeError("tracker bug")

    monkeypatch.setattr(feed.tracker, "update", broken)
    with pytest.raises(RuntimeError):
        feed.on_frame(c.frames[1], 1, 0.03)
    shown = out.read()
    assert shown is not None and shown.seq == 1 and shown.faces == []
    assert np.array_equal(shown.frame_bgr, c.frames[1])
    feed.on_frame(c.frames[2], 2, 0.06)  # a fresh tracker takes over
    assert out.read() is not None


def test_anchor_carries_each_faces_alpha_mask() -> None:
    """A face-shaped or mouth mask (crop space) travels with the crop onto the live frame."""
    from kiosk.capture.live import LiveAnchor
    from kiosk.types import Face, SwappedFace, SwapResult

    crop = np.full((128, 128, 3), 200, np.uint8)
    alpha = np.zeros((128, 128), np.uint8)
    alpha[20:100, 30:90] = 255
    shared = np.full((128, 128), 255, np.uint8)
    shared.flags.writeable = False
    face = Face(np.array([10, 10, 60, 60], np.float32), 0.9, np.zeros((5, 2), np.float32))
    result = SwapResult(
        np.zeros((72, 128, 3), np.uint8),
        seq=7,
        faces=[SwappedFace(crop, np.eye(2, 3), face, alpha), SwappedFace(crop, np.eye(2, 3), face, shared)],
    )
    anchor = LiveAnchor.from_result(result)
    alpha[:] = 0  # the slot's buffer is reused for a later result
    own, box = anchor.faces
    assert own.alpha is not None and own.alpha[50, 50] == 255 and own.alpha[0, 0] == 0
    assert box.alpha is shared


def test_age_limit_follows_the_arrival_age_and_the_result_interval() -> None:
    """kiosk.capture.live_stats.AgeLimit: arrival age + AGE_PERIODS periods (medians), at least
    AGE_MIN_S; a fixed ``max_age_s`` wins."""
    from kiosk.capture.live_stats import AGE_MIN_S, AGE_PERIODS, AgeLimit

    age = AgeLimit()
    assert age.seconds() == float("inf")  # before any result nothing is too old
    age.arrived(0.0, 1.0)  # 1 s old; the arrival age stands in for the period
    assert age.seconds() == 1.0 + AGE_PERIODS * 1.0
    age.arrived(1.0, 1.5)  # 0.5 s old, 0.5 s after the first
    assert age.seconds() == max(AGE_MIN_S, 0.75 + AGE_PERIODS * 0.5)
    assert AgeLimit(1.5).seconds() == 1.5


def test_a_result_older_than_150_frames_is_still_carried_onto_the_current_frame() -> None:
    """A stage at 0.25 results a second hands results in ~4 s old: 240 frames at 60 fps, past the
    old fixed ring of 150 frames (then: ``gap``, the real face). The ring is sized by time and by
    the arrival age, so the result is brought forward to now and lands on the face."""
    fps, n0, late = 60.0, 10, 250
    base = texture(480, 640, 5)
    # gentle camera motion: a sway of 12 px and 6 px over 2 s, sub-pixel (the clip tools are slower)
    shift = [
        np.array([12 * np.sin(np.pi * i / fps), 6 * np.sin(0.5 * np.pi * i / fps)]) for i in range(late + 12)
    ]
    frames = [cv2.warpAffine(base, np.array([[1.0, 0, d[0]], [0, 1.0, d[1]]]), (640, 480)) for d in shift]
    tracker = LiveTracker()
    for i in range(late + 1):
        tracker.update(frames[i], i, i / fps)
    face = LiveFace(np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), KPS + shift[n0].astype(np.float32), BOX)
    tracker.submit(LiveAnchor(n0, n0 / fps, (face,)))
    for i in range(late + 1, late + 12):
        tracker.update(frames[i], i, i / fps)
    assert tracker.counts.dropped == dict.fromkeys(("track", "fast", "old", "gap"), 0), tracker.counts.dropped
    (kps,) = tracker.carried_kps()
    assert kps is not None
    assert float(np.abs(kps - (KPS + shift[late + 11])).max()) < 1.0
    assert tracker.stats()["ring_frames"] == late + 12  # it keeps 1.5 × 4 + 1 s now: all of them


def test_the_ring_is_sized_by_the_arrival_age_within_its_memory_budget() -> None:
    flat = np.full((480, 640, 3), 128, np.uint8)  # 320 × 240 grey: 75 KiB a frame
    small = LiveTracker(LiveOptions(ring_mb=1.0))
    for i in range(40):
        small.update(flat, i, i / 30)
    s = small.stats()
    assert s["ring_frames"] == 2**20 // (320 * 240) and s["ring_mb"] <= s["ring_budget_mb"] == 1.0, s

    tracker = LiveTracker()  # the default budget, 64 MB
    face = LiveFace(np.zeros((8, 8, 3), np.uint8), np.eye(2, 3), KPS, BOX)
    for i in range(400):
        tracker.update(flat, i, i / 30)
    assert tracker.stats()["ring_frames"] == 400  # before any result its age is unknown: the budget
    tracker.submit(LiveAnchor(385, 385 / 30, (face,)))  # arrives 0.5 s old: the ring keeps 5 s
    for i in range(400, 420):
        tracker.update(flat, i, i / 30)
    assert 150 <= tracker.stats()["ring_frames"] <= 153, tracker.stats()
    tracker.submit(LiveAnchor(300, 300 / 30, (face,)))  # 4 s old: then 1.5 × 4 + 1 = 7 s
    for i in range(420, 800):
        tracker.update(flat, i, i / 30)
    s = tracker.stats()
    assert 210 <= s["ring_frames"] <= 213 and 6.9 <= s["ring_s"] <= 7.2, s
    assert s["ring_mb"] <= s["ring_budget_mb"] == 64.0


def test_drops_to_the_real_face_are_counted_per_cause() -> None:
    stats = LiveTracker().stats()
    assert stats["faces_dropped_to_real"] == {"track": 0, "fast": 0, "old": 0, "gap": 0, "total": 0}
    assert stats["faces_real_frames_by_reason"] == {"track": 0, "fast": 0, "old": 0, "gap": 0}
    assert {"ring_frames", "ring_s", "ring_mb", "ring_budget_mb"} <= stats.keys()


def test_display_live_ring_mb_reaches_the_tracker() -> None:
    from kiosk.app.wiring import live_options
    from kiosk.config.schema import DisplayConfig

    opts = live_options(DisplayConfig(mode="live", live_ring_mb=8))
    assert opts is not None and opts.ring_mb == 8.0
    assert LiveTracker(opts).stats()["ring_budget_mb"] == 8.0
