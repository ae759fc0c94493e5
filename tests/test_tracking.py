"""Unit tests of kiosk.processing.tracking with synthetic detections (no models needed)."""

from __future__ import annotations

import numpy as np
import pytest

from kiosk.processing.face_search import (
    detect_and_track,
    detect_in_regions,
    merge_faces,
    nms_faces,
    roi_geometry,
    select_faces,
)
from kiosk.processing.one_euro import OneEuroFilter
from kiosk.processing.tracking import FaceTracker, Track, box_iou
from kiosk.types import Face

FPS = 30.0
# Five points of a 100 px face whose box is (0, 0, 100, 120), relative to its top-left corner.
KPS_REL = np.array([[30, 45], [70, 45], [50, 70], [35, 90], [65, 90]], np.float32)


def face_at(x: float, y: float, size: float = 100.0, score: float = 0.9) -> Face:
    s = size / 100.0
    return Face(
        box_xyxy=np.array([x, y, x + 100 * s, y + 120 * s], np.float32),
        score=score,
        kps=(KPS_REL * s + np.array([x, y], np.float32)).astype(np.float32),
    )


# -- OneEuroFilter -------------------------------------------------------------------------------


def test_first_value_passes_through_and_constant_stays_constant() -> None:
    f = OneEuroFilter(min_cutoff=1.0, beta=0.1)
    x = np.array([[10.0, 20.0], [30.0, 40.0]])
    np.testing.assert_array_equal(f(x, 0.0), x)
    for i in range(1, 10):
        np.testing.assert_allclose(f(x, i / FPS), x)


def test_still_noise_is_reduced_at_least_threefold() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([[100.0, 50.0]] * 5)
    f = OneEuroFilter(min_cutoff=0.5, beta=0.07)
    raw = truth + rng.normal(0, 0.3, (300, 5, 2))  # about det_500m's keypoint noise
    out = np.stack([f(r, i / FPS) for i, r in enumerate(raw)])
    assert out[30:].std(axis=0).mean() < raw[30:].std(axis=0).mean() / 3


def test_fast_ramp_has_less_than_a_frame_of_lag_but_plain_lowpass_lags() -> None:
    t = np.arange(90) / FPS
    x = np.stack([np.array([[v, 0.0]]) for v in 150.0 * t])  # 5 px/frame
    adaptive = OneEuroFilter(min_cutoff=0.5, beta=0.07)
    plain = OneEuroFilter(min_cutoff=0.5, beta=0.0)
    ya = np.stack([adaptive(v, ti) for v, ti in zip(x, t, strict=True)])
    yp = np.stack([plain(v, ti) for v, ti in zip(x, t, strict=True)])
    lag_adaptive = (x[-1, 0, 0] - ya[-1, 0, 0]) / 5.0
    lag_plain = (x[-1, 0, 0] - yp[-1, 0, 0]) / 5.0
    assert lag_adaptive < 1.0
    assert lag_plain > 5.0


def test_shared_speed_axis_moves_both_coordinates_alike() -> None:
    f = OneEuroFilter(min_cutoff=0.5, beta=0.1, speed_axis=-1)
    for i in range(30):
        out = f(np.array([[5.0 * i, 0.0]]), i / FPS)
    g = OneEuroFilter(min_cutoff=0.5, beta=0.1, speed_axis=-1)
    for i in range(30):
        out2 = g(np.array([[0.0, 5.0 * i]]), i / FPS)
    assert out[0, 0] == pytest.approx(out2[0, 1])


def test_repeated_timestamp_changes_nothing_and_reset_restarts() -> None:
    f = OneEuroFilter()
    f(np.array([1.0]), 0.0)
    y = f(np.array([2.0]), 0.1)
    np.testing.assert_array_equal(f(np.array([50.0]), 0.1), y)
    f.reset()
    np.testing.assert_array_equal(f(np.array([50.0]), 0.2), [50.0])
    assert f.velocity is not None and f.value is not None


def test_invalid_filter_parameters() -> None:
    with pytest.raises(ValueError):
        OneEuroFilter(min_cutoff=0.0)
    with pytest.raises(ValueError):
        OneEuroFilter(beta=-1.0)


# -- FaceTracker ---------------------------------------------------------------------------------


def test_ids_follow_two_moving_faces() -> None:
    tr = FaceTracker()
    ids_seen: list[tuple[int, int]] = []
    for i in range(40):
        a = face_at(50 + 6 * i, 100)
        b = face_at(500 - 6 * i, 300)
        tracks = tr.update([b, a] if i % 2 else [a, b], i / FPS)
        if i == 0:
            assert tracks == [] and len(tr.tentative) == 2  # reported from the second detection
            continue
        assert len(tracks) == 2
        by_y = sorted(tracks, key=lambda t: float(t.face.box_xyxy[1]))
        ids_seen.append((by_y[0].id, by_y[1].id))
    assert len(set(ids_seen)) == 1


def test_fast_motion_matches_by_keypoints_when_iou_is_low() -> None:
    tr = FaceTracker(iou_threshold=0.3, kps_gate=0.5, min_hits=1)
    tr.update([face_at(0, 0)], 0.0)
    # A 55 px jump of a 100x120 face: IoU 0.29, mean keypoint distance 0.46 of the face size.
    tracks = tr.update([face_at(55, 0)], 1 / FPS)
    assert [t.id for t in tracks] == [1]
    # A face 70 px away is another face.
    tracks = tr.update([face_at(55, 0), face_at(125, 0)], 2 / FPS)
    assert sorted(t.id for t in tracks) == [1, 2]


def test_missed_face_is_held_in_place_then_dropped() -> None:
    tr = FaceTracker(max_missed=3)
    for i in range(5):
        tr.update([face_at(100, 100)], i / FPS)
    held = tr.tracks[0].face
    for k in range(1, 4):
        tracks = tr.update([], (4 + k) / FPS)
        assert len(tracks) == 1 and tracks[0].missed == k
        np.testing.assert_array_equal(tracks[0].face.kps, held.kps)
    assert tr.update([], 8 / FPS) == []


def test_a_one_frame_detection_is_never_reported() -> None:
    tr = FaceTracker(max_missed=5, min_hits=2)
    assert tr.update([face_at(100, 100)], 0.0) == []
    assert tr.update([], 1 / FPS) == []
    assert tr.tentative == [] and tr.needs_full_detection(7)
    # with min_hits=1 it is reported at once and held
    tr = FaceTracker(max_missed=5, min_hits=1)
    assert len(tr.update([face_at(100, 100)], 0.0)) == 1
    assert len(tr.update([], 1 / FPS)) == 1


def test_reacquired_track_keeps_its_id_and_new_face_gets_fresh_filter() -> None:
    tr = FaceTracker(max_missed=5)
    for i in range(5):
        tr.update([face_at(100, 100)], i / FPS)
    tr.update([], 5 / FPS)
    tracks = tr.update([face_at(102, 100), face_at(400, 100)], 6 / FPS)
    assert [t.id for t in tracks] == [1]
    new = tr.tentative[0]
    assert new.id == 2
    np.testing.assert_array_equal(new.face.kps, face_at(400, 100).kps)  # no smoothing from elsewhere
    assert new.hits == 1 and new.age == 1


def test_duplicate_detection_does_not_start_a_track() -> None:
    tr = FaceTracker()
    tr.update([face_at(100, 100)], 0.0)
    tracks = tr.update([face_at(101, 100), face_at(102, 101, score=0.5)], 1 / FPS)
    assert len(tracks) == 1


def test_needs_full_detection_schedule() -> None:
    tr = FaceTracker(detect_every=4, max_missed=3)
    assert tr.needs_full_detection(1)  # no tracks yet
    for i in range(3):
        tr.update([face_at(100, 100)], i / FPS)
    assert [tr.needs_full_detection(i) for i in range(1, 9)] == [False, False, False, True] * 2
    tr.update([], 3 / FPS)  # missed: look everywhere
    assert tr.needs_full_detection(9)
    for k in range(4):
        tr.update([], (4 + k) / FPS)
    assert tr.tracks == []
    assert tr.needs_full_detection(10)


def test_lost_track_requests_one_full_detection() -> None:
    tr = FaceTracker(detect_every=100)
    for i in range(3):
        tr.update([face_at(100, 100)], i / FPS)
    tr.update([face_at(100, 100), face_at(400, 100)], 3 / FPS)  # young second track
    tr.update([face_at(100, 100)], 4 / FPS)  # young track dropped at its first miss
    assert len(tr.tracks) == 1
    assert tr.needs_full_detection(5)
    assert not tr.needs_full_detection(6)


def test_search_regions_cover_the_face_and_stay_in_the_frame() -> None:
    tr = FaceTracker(region_scale=2.0)
    tr.update([face_at(10, 300)], 0.0)
    (x0, y0, x1, y1) = tr.search_regions((480, 640, 3))[0]
    assert 0 <= x0 < 10 and x1 > 110 and y0 < 300 and y1 == 480


def test_fixed_regions_are_aligned_sticky_and_move_with_the_face() -> None:
    tr = FaceTracker()
    size, align = roi_geometry((480, 640), det_size=320, roi_det_size=160)
    assert (size, align) == (320, 64)
    tr.update([face_at(250, 150)], 0.0)
    r0 = tr.search_regions((480, 640), size, align)[0]
    assert r0[0] % 64 == 0 and r0[1] % 64 == 0 and r0[2] - r0[0] == 320
    tr.update([face_at(252, 151)], 1 / FPS)
    assert tr.search_regions((480, 640), size, align)[0] == r0
    for i in range(2, 30):
        tr.update([face_at(250 + 8 * i, 150)], i / FPS)
    r1 = tr.search_regions((480, 640), size, align)[0]
    box = tr.tracks[0].face.box_xyxy
    assert r1 != r0 and r1[0] <= box[0] and (box[2] <= r1[2] or r1[2] == 640)


def test_invalid_tracker_parameters() -> None:
    with pytest.raises(ValueError):
        FaceTracker(detect_every=0)
    with pytest.raises(ValueError):
        FaceTracker(min_hits=0)


# -- regions and detection helpers ---------------------------------------------------------------


def test_detect_in_regions_maps_back_and_merges_duplicates() -> None:
    frame = np.zeros((480, 640, 3), np.uint8)
    shapes: list[tuple[int, ...]] = []

    def fake_detect(crop: np.ndarray) -> list[Face]:
        shapes.append(crop.shape)
        return [face_at(20, 30)]  # crop coordinates

    regions = [(100, 50, 300, 250), (101, 51, 301, 251), (400, 200, 640, 480)]
    faces = detect_in_regions(fake_detect, frame, regions)
    boxes = sorted(tuple(np.round(f.box_xyxy).astype(int)) for f in faces)
    assert boxes == [(120, 80, 220, 200), (420, 230, 520, 350)]
    np.testing.assert_allclose(faces[0].kps - faces[0].box_xyxy[:2], KPS_REL)
    padded = detect_in_regions(fake_detect, frame, [(500, 300, 640, 480)], pad_to=256)
    assert shapes[-1] == (256, 256, 3) and len(padded) == 1


def test_nms_and_merge_and_iou() -> None:
    a, b, c = face_at(0, 0, score=0.5), face_at(5, 0, score=0.9), face_at(300, 0)
    kept = nms_faces([a, b, c])
    assert kept[0] is b and len(kept) == 2
    assert len(merge_faces([a], [b, c])) == 2
    iou = box_iou(np.array([[0, 0, 10, 10]]), np.array([[0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]]))
    np.testing.assert_allclose(iou, [[1.0, 1 / 3, 0.0]])


def test_detect_and_track_uses_regions_between_full_detections() -> None:
    calls: list[tuple[int, int]] = []
    frame = np.zeros((480, 640, 3), np.uint8)

    def full(img: np.ndarray) -> list[Face]:
        calls.append(img.shape[:2])
        return [face_at(250, 150)]

    tr = FaceTracker(detect_every=3)
    geometry = roi_geometry((480, 640), 320, 160)
    x0, y0, _, _ = tr.region_for(face_at(250, 150).box_xyxy, (480, 640), *geometry)
    assert (x0, y0) == (128, 64)

    def roi(img: np.ndarray) -> list[Face]:
        calls.append(img.shape[:2])
        return [face_at(250 - x0, 150 - y0)]  # crop coordinates

    for i in range(6):
        tracks = detect_and_track(tr, frame, i, i / FPS, full, roi, geometry)
        if i == 0:
            assert tracks == []
            continue
        assert len(tracks) == 1 and tracks[0].id == 1
        np.testing.assert_allclose(tracks[0].face.box_xyxy, [250, 150, 350, 270], atol=1e-4)
    full_calls = sum(1 for s in calls if s == (480, 640))
    assert full_calls == 2  # frames 0 and 3


# -- select_faces --------------------------------------------------------------------------------


def track(i: int, x: float, y: float, size: float) -> Track:
    f = face_at(x, y, size)
    return Track(id=i, face=f, raw=f, age=10, missed=0, hits=10)


def test_select_all_largest_central() -> None:
    shape = (480, 640, 3)
    small_centre = track(1, 270, 180, 80)  # centre (310, 228)
    big_side = track(2, 0, 0, 150)
    mid = track(3, 450, 300, 100)
    tracks = [small_centre, big_side, mid]
    assert [t.id for t in select_faces(tracks, "all", shape, 4)] == [2, 3, 1]
    assert [t.id for t in select_faces(tracks, "all", shape, 2)] == [2, 3]
    assert [t.id for t in select_faces(tracks, "largest", shape, 4)] == [2]
    assert [t.id for t in select_faces(tracks, "central", shape, 4)] == [1]
    assert select_faces([], "all", shape, 4) == []
    with pytest.raises(ValueError):
        select_faces(tracks, "nearest", shape, 4)  # type: ignore[arg-type]


def test_selection_hysteresis_keeps_the_previous_choice() -> None:
    shape = (480, 640, 3)
    a = track(1, 100, 100, 100)
    b = track(2, 400, 100, 105)  # 10% larger area: not enough to switch
    assert [t.id for t in select_faces([a, b], "largest", shape, 1, previous_ids=[1])] == [1]
    assert [t.id for t in select_faces([a, b], "largest", shape, 1)] == [2]
    c = track(3, 400, 100, 130)  # 69% larger: switch
    assert [t.id for t in select_faces([a, c], "largest", shape, 1, previous_ids=[1])] == [3]
    # all: a chosen face keeps its place when max_faces is reached
    assert [t.id for t in select_faces([a, b], "all", shape, 1, previous_ids=[1])] == [1]
    # central: keep the previous one unless another is clearly nearer
    left = track(1, 200, 180, 100)  # centre x 250
    right = track(2, 340, 180, 100)  # centre x 390: 70 vs 70 px from 320
    assert [t.id for t in select_faces([left, right], "central", shape, 1, previous_ids=[2])] == [2]


# -- slow processing: one update a second ----------------------------------------------------------


def test_slow_updates_follow_faces_that_moved_more_than_their_spacing() -> None:
    # Three 40 px faces 60 px apart sway 125 px between two updates a second apart (a booth whose
    # models process one frame a second): each detection is nearer its neighbour's old place than
    # its own. The tracks must keep their faces and report where the faces are now, neither held
    # at the old place nor blended with it.
    tr = FaceTracker()
    xs = [100.0, 225.0, 350.0, 225.0, 100.0, 225.0, 350.0]
    first_ids: list[int] | None = None
    for n, x in enumerate(xs):
        faces = [face_at(x + 60 * k, 150, size=40) for k in range(3)]
        tracks = tr.update(faces[::-1] if n % 2 else faces, float(n))
        if n == 0:
            continue
        assert len(tracks) == 3 and all(t.missed == 0 for t in tracks)
        by_x = sorted(tracks, key=lambda t: float(t.face.box_xyxy[0]))
        ids = [t.id for t in by_x]
        first_ids = first_ids or ids
        assert ids == first_ids, n
        for t, f in zip(by_x, faces, strict=True):
            np.testing.assert_allclose(t.face.kps, f.kps, atol=1e-4)
    assert tr.restarts >= 3 * (len(xs) - 1)


def test_slow_update_does_not_hold_a_missed_face_where_it_was() -> None:
    # At camera rate a missed face is held for max_missed frames; a second after its last
    # detection the visitor is elsewhere, so the face is dropped (shown real) instead.
    tr = FaceTracker(max_missed=5)
    for n in range(3):
        tr.update([face_at(100 + 50 * n, 100)], float(n))
    assert len(tr.tracks) == 1
    assert tr.update([], 3.0) == []
    assert tr.needs_full_detection(4, 4.0)


def test_slow_updates_search_the_whole_frame_then_regions_again_at_camera_rate() -> None:
    tr = FaceTracker(detect_every=100)
    for i in range(3):
        tr.update([face_at(100, 100)], i / FPS)
    assert tr.regions_trusted(3 / FPS) and not tr.needs_full_detection(3, 3 / FPS)
    assert not tr.regions_trusted(2 / FPS + 0.5) and tr.needs_full_detection(3, 2 / FPS + 0.5)

    calls = {"full": 0, "roi": 0}
    target = face_at(400, 200)

    def full(img: np.ndarray) -> list[Face]:
        calls["full"] += 1
        return [target]

    def roi(img: np.ndarray) -> list[Face]:
        calls["roi"] += 1
        # A region holds whatever is in it; here: the face, in the crop's pixels, if it is inside.
        return [target] if img.shape[0] >= 320 else []

    tracks = detect_and_track(tr, np.zeros((480, 640, 3), np.uint8), 3, 2 / FPS + 0.5, full, roi, (320, 32))
    # Not the region on the old place (it would miss the face): the whole frame, then the face's
    # own region (refined, so its keypoints come from the same kind of detection as usual).
    assert calls == {"full": 1, "roi": 1}
    assert [t.id for t in tracks] == [1]


def test_restart_passes_the_value_through_with_the_given_velocity() -> None:
    f = OneEuroFilter(min_cutoff=0.5, beta=0.0)
    f(np.zeros((5, 2)), 0.0)
    f(np.ones((5, 2)), 1 / FPS)
    out = f.restart(np.full((5, 2), 40.0), 1.0, np.full((5, 2), 12.0))
    np.testing.assert_array_equal(out, np.full((5, 2), 40.0))
    assert f.velocity is not None and float(f.velocity[0, 0]) == 12.0
    assert float(f(np.full((5, 2), 40.0), 1.0 + 1 / FPS)[0, 0]) == 40.0
