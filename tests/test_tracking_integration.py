"""Tracking inside :class:`SwapPipeline`: smoothed keypoints on the swapped faces, region detection
between full-frame detections, held faces (no flicker), the faces policy.

The clips are made here from a real photo moved with a known sub-pixel motion plus camera-like
gaussian noise, so the truth is known: the keypoints found once on the clean, unmoved frame,
carried along by the motion. Detector: the real ``det_500m`` (skipped when ../shared/models is
absent); the embedder and swapper are stand-ins (their output does not matter here).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from inference_fixtures import SHARED_MODELS, insightface_image, make_cfg

from kiosk.processing.models import read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.types import Face

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

FPS = 30.0
W, H = 640, 480
PHOTO = Path("/work/shared/media/astronaut_eileen_collins_nasa.png")
NOISE_SIGMA = 4.0
Motion = Callable[[float], tuple[float, float]]


def _photo() -> np.ndarray:
    for p in (SHARED_MODELS.parent / "media" / PHOTO.name, PHOTO):
        if p.is_file():
            return read_image(p)
    pytest.skip("astronaut photo (../shared/media) not present")


def _base_frame() -> np.ndarray:
    photo = _photo()
    frame = np.full((H, W, 3), 90, np.uint8)
    frame[:, 64 : 64 + 512] = photo[16 : 16 + H]
    return frame


def _clip(motion: Motion, frames: int, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """Frames of the photo translated by ``motion(t)`` with noise, and the per-frame offsets."""
    base = _base_frame()
    rng = np.random.default_rng(seed)
    out, offsets = [], []
    for i in range(frames):
        dx, dy = motion(i / FPS)
        m = np.array([[1.0, 0.0, dx], [0.0, 1.0, dy]])
        moved = cv2.warpAffine(base, m, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        noise = np.asarray(rng.normal(0.0, NOISE_SIGMA, moved.shape), np.float32)
        noisy = np.asarray(moved, np.float32) + noise
        out.append(np.clip(noisy, 0, 255).astype(np.uint8))
        offsets.append((dx, dy))
    return out, np.array(offsets)


def _pipe(standin_dir: Path, tracking: bool, **processing: object) -> SwapPipeline:
    det = SHARED_MODELS / "det_500m.onnx"
    if not det.is_file():
        pytest.skip(f"{det} not present")
    cfg = make_cfg(standin_dir, detector=str(det))
    proc = cfg.processing.model_copy(update={"tracking": tracking, **processing})
    pipe = SwapPipeline.from_config(cfg.model_copy(update={"processing": proc}))
    pipe.use_latent(np.full((1, 512), 1.0 / math.sqrt(512.0), np.float32), "test")
    return pipe


#: A track is reported from its second detection (a one-frame false detection is never swapped), so
#: with tracking the face appears on frame 1; every measure starts there for both runs.
FIRST = 1


def _run(pipe: SwapPipeline, frames: list[np.ndarray]) -> list[list[Face]]:
    pipe.reset_tracking()
    return [
        [sf.face for sf in pipe.process_into(f, None, paste=False, t=i / FPS)] for i, f in enumerate(frames)
    ]


def _kps(per_frame: list[list[Face]]) -> np.ndarray:
    """(T, 5, 2) keypoints of the one face, from frame ``FIRST`` on (earlier rows: NaN)."""
    assert all(len(fs) == 1 for fs in per_frame[FIRST:]), [len(fs) for fs in per_frame]
    out = np.full((len(per_frame), 5, 2), np.nan)
    for i, fs in enumerate(per_frame[FIRST:], start=FIRST):
        out[i] = fs[0].kps
    return out


def _switches(counts: list[int]) -> int:
    """Times the number of swapped faces changed after the face first appeared."""
    first = next((i for i, c in enumerate(counts) if c), len(counts))
    return int(np.count_nonzero(np.diff(counts[first:])))


def _jitter_px(kps: np.ndarray, offsets: np.ndarray, skip: int = 5) -> float:
    """Mean over the ten coordinates of the standard deviation of (keypoint − known motion)."""
    resid = kps[FIRST + skip :] - offsets[FIRST + skip :, None, :]
    return float(resid.std(axis=0).mean())


def _lag_frames(kps: np.ndarray, motion: Motion, skip: int = 8) -> float:
    """The delay s (frames, 0.05 steps) for which the keypoints best follow the motion s frames ago."""
    base = kps[FIRST + skip :].mean(axis=1)  # centroid of the five points
    t = np.arange(FIRST + skip, kps.shape[0]) / FPS
    best_s, best_err = 0.0, math.inf
    for s in np.arange(-2.0, 4.0001, 0.05):
        truth = np.array([motion(tt - s / FPS) for tt in t])
        err = float(np.mean(np.linalg.norm((base - base.mean(0)) - (truth - truth.mean(0)), axis=1)))
        if err < best_err:
            best_s, best_err = float(s), err
    return best_s


def _still(_t: float) -> tuple[float, float]:
    return 0.0, 0.0


def _sine(t: float) -> tuple[float, float]:
    return 40.0 * math.sin(2 * math.pi * 0.5 * t), 10.0 * math.sin(2 * math.pi * 0.35 * t)


def _pan(t: float) -> tuple[float, float]:
    return -60.0 + 120.0 * t, 0.0  # 4 px per frame


# -- jitter, lag, flicker ---------------------------------------------------------------------------
@pytest.mark.slow
def test_smoothed_jitter_is_at_most_a_third_of_the_raw_detector(standin_dir: Path) -> None:
    frames, offsets = _clip(_still, 60)
    raw = _jitter_px(_kps(_run(_pipe(standin_dir, tracking=False), frames)), offsets)
    smooth = _jitter_px(_kps(_run(_pipe(standin_dir, tracking=True), frames)), offsets)
    print(f"still face, noise sigma {NOISE_SIGMA}: jitter raw {raw:.3f} px, smoothed {smooth:.3f} px")
    assert raw > 0.05  # the noise does move the raw detector's keypoints
    assert smooth <= raw / 3.0, (raw, smooth)


@pytest.mark.slow
def test_moving_face_lags_at_most_one_frame(standin_dir: Path) -> None:
    # A sine: the delay that best aligns the keypoints with the known motion.
    frames, _ = _clip(_sine, 60, seed=1)
    raw = _lag_frames(_kps(_run(_pipe(standin_dir, tracking=False), frames)), _sine)
    tracked = _lag_frames(_kps(_run(_pipe(standin_dir, tracking=True), frames)), _sine)
    print(f"sine 40 px @ 0.5 Hz: lag raw {raw:.2f} frames, tracked {tracked:.2f} frames")
    assert abs(raw) <= 0.5
    assert tracked - raw <= 1.0, (raw, tracked)
    # A steady pan at 4 px/frame: a delay is a constant offset behind the raw detector (which has
    # none: it sees each frame on its own), in frames = offset / speed.
    frames, _ = _clip(_pan, 45, seed=1)
    raw_x = _kps(_run(_pipe(standin_dir, tracking=False), frames))[:, :, 0].mean(axis=1)
    tracked_x = _kps(_run(_pipe(standin_dir, tracking=True), frames))[:, :, 0].mean(axis=1)
    behind = float(np.mean((raw_x - tracked_x)[FIRST + 8 :])) / 4.0
    print(f"pan 4 px/frame: tracked face {behind:.2f} frames behind the raw detector")
    assert behind <= 1.0


@pytest.mark.slow
def test_no_flicker_when_detections_are_missed(standin_dir: Path) -> None:
    frames, _ = _clip(_sine, 60, seed=2)
    rng = np.random.default_rng(5)
    drop = rng.random(200) < 0.2  # one detection call in five returns nothing

    def flaky(pipe: SwapPipeline) -> None:
        calls = iter(range(10_000))
        for det in (pipe.detector, pipe.finder.roi_detector):
            if det is None:
                continue
            real = det.detect

            def detect(frame: np.ndarray, real=real) -> list[Face]:  # type: ignore[no-untyped-def]
                return [] if drop[next(calls) % drop.size] else real(frame)

            det.detect = detect  # type: ignore[method-assign,assignment]

    counts = {}
    for tracking in (False, True):
        pipe = _pipe(standin_dir, tracking=tracking)
        flaky(pipe)
        counts[tracking] = [len(fs) for fs in _run(pipe, frames)]
    switches = {k: _switches(v) for k, v in counts.items()}
    print(f"swapped/not-swapped switches over 60 frames: raw {switches[False]}, tracked {switches[True]}")
    assert switches[False] > 0  # the raw detector does flicker with these misses
    assert switches[True] == 0 and counts[True][FIRST] == 1


@pytest.mark.slow
def test_clean_clips_do_not_flicker(standin_dir: Path) -> None:
    pipe = _pipe(standin_dir, tracking=True)
    for motion in (_still, _sine, _pan):
        frames, _ = _clip(motion, 45, seed=3)
        assert [len(fs) for fs in _run(pipe, frames)][FIRST:] == [1] * (45 - FIRST), motion.__name__


# -- detection schedule and policy -------------------------------------------------------------------
def test_full_frame_detection_only_every_n_frames(standin_dir: Path) -> None:
    pipe = _pipe(standin_dir, tracking=True, detect_every=5)
    assert pipe.finder.roi_detector is not None and pipe.finder.roi_detector.det_size == 192
    frames, _ = _clip(_still, 30, seed=4)
    full0, roi0 = pipe.detector.runner.runs, pipe.finder.roi_detector.runner.runs
    per_frame = _run(pipe, frames)
    full = pipe.detector.runner.runs - full0
    roi = pipe.finder.roi_detector.runner.runs - roi0
    assert all(len(fs) == 1 for fs in per_frame[FIRST:])
    assert full == 6, full  # frames 0, 5, 10, 15, 20, 25
    assert 29 <= roi <= 31, roi  # one small region per frame (and the new face's on frame 0)


def test_face_policy_picks_one_face_and_keeps_it(standin_dir: Path) -> None:
    t1 = read_image(insightface_image("t1.jpg"))
    frame = np.zeros((720, 1280, 3), np.uint8)
    s = 720 / t1.shape[0]
    big = cv2.resize(t1, (int(t1.shape[1] * s), 720))
    frame[:, (1280 - big.shape[1]) // 2 :][:, : big.shape[1]] = big
    for policy in ("largest", "central"):
        for tracking in (False, True):
            pipe = _pipe(standin_dir, tracking=tracking, face_policy=policy, max_faces=8)
            faces = [
                [sf.face for sf in pipe.process_into(frame, None, paste=False, t=i / FPS)] for i in range(6)
            ]
            assert all(len(fs) == 1 for fs in faces[FIRST:]), (policy, tracking)
            centres = np.array([fs[0].box_xyxy.reshape(2, 2).mean(0) for fs in faces[FIRST:]])
            assert np.ptp(centres, axis=0).max() < 5.0  # the same face every frame
    every = _pipe(standin_dir, tracking=True, max_faces=8)
    assert [len(every.process_into(frame, None, paste=False, t=i / FPS)) for i in range(3)] == [0, 6, 6]
