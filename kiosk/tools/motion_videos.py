"""Synthetic clips with known face motion, for measuring tracking jitter, lag and flicker (the
tracking tests and the benchmarks ``benchmarks/jitter.py``, ``live_alignment.py``, ``tracking_rate.py``).

A real photo is animated with a known per-frame affine motion and camera-like gaussian noise.
The truth keypoints are the keypoints the detector finds once on the clean, un-moved first frame,
carried along by the same known motion, so every frame's true keypoints are known exactly
(up to the detector's bias on that one clean frame, which a per-axis std or a time shift ignores).

Photos and models are read from the environment at test time and are never committed:
``../shared/media/astronaut_eileen_collins_nasa.png``, insightface's ``t1.jpg`` (6 faces),
``../shared/models/det_500m.onnx``. Helpers return ``None`` when one is absent so tests can skip.

Also here: the jitter / lag / flicker measures, and the live display replayed frame by frame
(:func:`simulate_live`). Not part of the running kiosk.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.types import Face

REPO = Path(__file__).resolve().parents[2]  # the checkout (kiosk/tools/motion_videos.py)
SHARED = REPO.parent / "shared"
FPS = 30.0
FRAME_W, FRAME_H = 640, 480

DetectFn = Callable[[NDArray[np.uint8]], list[Face]]


def shared_file(*parts: str) -> Path | None:
    """A file under ``../shared`` (beside the checkout), or ``None`` when it is absent."""
    p = SHARED.joinpath(*parts)
    return p if p.is_file() else None


def insightface_image(name: str) -> Path | None:
    """An image shipped inside the installed insightface wheel, or ``None``."""
    spec = importlib.util.find_spec("insightface")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "data" / "images" / name
        if p.is_file():
            return p
    return None


# -- detector ------------------------------------------------------------------------------------


def load_detector(det_size: int = 320, path: Path | None = None) -> tuple[DetectFn, str] | None:
    """A real detector as ``detect(image_bgr) -> list[Face]`` and a description, or ``None``.

    ``path``: the ONNX file (default ``../shared/models/det_500m.onnx``); ``None`` is returned when
    it is absent. Uses the project's detector for the file's spec (``kiosk.inference.specs``) when it
    (``kiosk.inference.detector``, which reproduces insightface's SCRFD decoding) on the CPU.
    """
    if path is None:
        path = shared_file("models", "det_500m.onnx")
    if path is None or not path.is_file():
        return None
    import onnxruntime as ort

    from kiosk.inference.detector import make_detector
    from kiosk.inference.specs import spec_for_file

    spec = spec_for_file("detector", path)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # dynamic input sizes make ORT warn about shapes on every run
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    det = make_detector(sess, spec, path, "cpu", det_size=det_size)
    det.detect(np.zeros((64, 64, 3), np.uint8))  # the first run is slow: keep it out of any timing
    return det.detect, f"kiosk.inference.detector.{type(det).__name__}({spec.id}, det_size={det_size})"


# -- clips ---------------------------------------------------------------------------------------


@dataclass
class Clip:
    """Frames and the true keypoints of every face in every frame."""

    name: str
    frames: list[NDArray[np.uint8]]
    #: (T, F, 5, 2) float64 true keypoints in frame pixels.
    truth_kps: NDArray[np.float64]
    #: (T, F, 4) float64 true boxes (the clean detection's box carried by the motion).
    truth_boxes: NDArray[np.float64]
    #: (T,) bool: frames where the faces are (partly) hidden on purpose, truth still says present.
    occluded: NDArray[np.bool_]
    fps: float = FPS

    @property
    def times(self) -> NDArray[np.float64]:
        return np.arange(len(self.frames), dtype=np.float64) / self.fps


@dataclass
class Scene:
    """A photo placed in the frame (``base`` maps photo pixels to frame-0 pixels)."""

    photo: NDArray[np.uint8]
    base: NDArray[np.float64]  # 2x3


def astronaut_scene() -> Scene | None:
    """One face, about 95 px wide, near the centre of a 640x480 frame."""
    p = shared_file("media", "astronaut_eileen_collins_nasa.png")
    if p is None:
        return None
    photo = cv2.imread(str(p), cv2.IMREAD_COLOR)
    if photo is None:
        return None
    # Face centre in the 512x512 photo is about (225, 120); put it at (300, 220).
    base = np.array([[1.0, 0.0, 75.0], [0.0, 1.0, 100.0]])
    return Scene(np.asarray(photo, np.uint8), base)


def group_scene() -> Scene | None:
    """Three faces of insightface's t1.jpg (x 220..860, y 100..580 of the photo)."""
    p = insightface_image("t1.jpg")
    if p is None:
        return None
    photo = cv2.imread(str(p), cv2.IMREAD_COLOR)
    if photo is None:
        return None
    base = np.array([[1.0, 0.0, -220.0], [0.0, 1.0, -100.0]])
    return Scene(np.asarray(photo, np.uint8), base)


def _compose(d: NDArray[np.float64], m: NDArray[np.float64]) -> NDArray[np.float64]:
    """``d ∘ m`` for 2x3 affines."""
    d3 = np.vstack([d, [0.0, 0.0, 1.0]])
    m3 = np.vstack([m, [0.0, 0.0, 1.0]])
    return (d3 @ m3)[:2]


def _apply(m: NDArray[np.float64], pts: NDArray[np.float64]) -> NDArray[np.float64]:
    return pts @ m[:, :2].T + m[:, 2]


def motion(
    kind: str, n_frames: int, centre: tuple[float, float] = (320.0, 240.0)
) -> list[NDArray[np.float64]]:
    """Per-frame 2x3 frame-space motions ``D_t`` of a named kind (applied after the scene's base).

    still: no motion. pan: still for 10 frames, then 4 px/frame (120 px/s at 30 fps) to the right
    for 50 frames, then still (starting and stopping makes a time lag measurable: a constant-speed
    ramp alone cannot tell a lag from an offset). sine: x = 50 sin(2 pi t / 2 s) with y = 15 sin(2 pi t / 1.5 s) and a 4 degree rocking rotation.
    """
    out = []
    cx, cy = centre
    for i in range(n_frames):
        t = i / FPS
        if kind == "still":
            dx = dy = ang = 0.0
        elif kind == "pan":
            dx, dy, ang = -100.0 + 4.0 * min(max(i - 10, 0), 50), 0.0, 0.0
        elif kind == "sine":
            dx = 50.0 * math.sin(2 * math.pi * t / 2.0)
            dy = 15.0 * math.sin(2 * math.pi * t / 1.5)
            ang = 4.0 * math.sin(2 * math.pi * t / 2.5)
        else:
            raise ValueError(f"unknown motion {kind!r}")
        rot = np.asarray(cv2.getRotationMatrix2D((cx, cy), ang, 1.0), np.float64)
        rot[0, 2] += dx
        rot[1, 2] += dy
        out.append(rot)
    return out


def render(
    scene: Scene, d: NDArray[np.float64], noise_sigma: float, rng: np.random.Generator
) -> NDArray[np.uint8]:
    """One frame: the photo moved by ``d ∘ base``, plus gaussian sensor noise (grey levels)."""
    m = _compose(d, scene.base)
    frame = np.asarray(
        cv2.warpAffine(
            scene.photo, m, (FRAME_W, FRAME_H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101
        ),
        np.uint8,
    )
    if noise_sigma > 0:
        noisy = frame.astype(np.float32) + np.asarray(rng.normal(0.0, noise_sigma, frame.shape), np.float32)
        frame = np.clip(noisy + 0.5, 0, 255).astype(np.uint8)
    return frame


def make_clip(
    scene: Scene,
    detect: DetectFn,
    kind: str,
    n_frames: int = 60,
    noise_sigma: float = 6.0,
    occlude_frames: Sequence[int] = (),
    seed: int = 0,
    name: str | None = None,
    still_background: bool = False,
) -> Clip:
    """Animate ``scene`` with motion ``kind``; truth = clean frame-0 detections carried by the motion.

    ``occlude_frames``: frames where each face is covered by a grey block (the detector misses it;
    the face is still there in truth). ``still_background``: only an ellipse around each face (1.8x
    its box, feathered) moves; the rest stays as on frame 0, as a room behind a visitor does.
    """
    rng = np.random.default_rng(seed)
    moves = motion(kind, n_frames)
    clean0 = render(scene, moves[0], 0.0, rng)
    faces0 = sorted(detect(clean0), key=lambda f: float(f.box_xyxy[0]))
    if not faces0:
        raise RuntimeError("the detector found no face on the clean first frame")
    # Truth: frame-0 detections carried to frame t by D_t ∘ D_0⁻¹.
    inv0 = np.asarray(cv2.invertAffineTransform(moves[0]), np.float64)
    kps0 = np.stack([_apply(inv0, f.kps.astype(np.float64)) for f in faces0])  # (F,5,2)
    boxes0 = np.stack([f.box_xyxy.astype(np.float64) for f in faces0])  # (F,4)
    boxes0 = _apply(inv0, boxes0.reshape(-1, 2)).reshape(-1, 4)
    frames, truth_kps, truth_boxes = [], [], []
    occluded = np.zeros(n_frames, bool)
    for i, d in enumerate(moves):
        kps = np.stack([_apply(d, k) for k in kps0])
        corners = _apply(d, boxes0.reshape(-1, 2)).reshape(-1, 2, 2)
        boxes = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
        if still_background:
            frame = _moving_faces_on_still_background(scene, d, moves[0], boxes, noise_sigma, rng)
        else:
            frame = render(scene, d, noise_sigma, rng)
        if i in occlude_frames:
            occluded[i] = True
            for b in boxes:
                x0, y0, x1, y1 = (int(round(v)) for v in b)
                frame[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = 128
        frames.append(frame)
        truth_kps.append(kps)
        truth_boxes.append(boxes)
    return Clip(
        name=name or kind,
        frames=frames,
        truth_kps=np.stack(truth_kps),
        truth_boxes=np.stack(truth_boxes),
        occluded=occluded,
    )


def _moving_faces_on_still_background(
    scene: Scene,
    d: NDArray[np.float64],
    d0: NDArray[np.float64],
    boxes: NDArray[np.float64],
    noise_sigma: float,
    rng: np.random.Generator,
) -> NDArray[np.uint8]:
    moved = render(scene, d, 0.0, rng).astype(np.float32)
    still = render(scene, d0, 0.0, rng).astype(np.float32)
    mask = np.zeros((FRAME_H, FRAME_W), np.float32)
    for b in boxes:
        centre = (int(round((b[0] + b[2]) / 2)), int(round((b[1] + b[3]) / 2)))
        axes = (int(round(0.9 * (b[2] - b[0]))), int(round(0.9 * (b[3] - b[1]))))
        cv2.ellipse(mask, centre, axes, 0.0, 0.0, 360.0, 1.0, -1)
    mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), 4.0), np.float32)[..., None]
    frame = moved * mask + still * (1.0 - mask)
    if noise_sigma > 0:
        frame += np.asarray(rng.normal(0.0, noise_sigma, frame.shape), np.float32)
    return np.clip(frame + 0.5, 0, 255).astype(np.uint8)


# -- measures ------------------------------------------------------------------------------------


def jitter_px(kps: NDArray[np.float64], truth: NDArray[np.float64], skip: int = 5) -> float:
    """Mean over keypoints and axes of the std over time of the keypoint error. (T,5,2) inputs."""
    err = kps[skip:] - truth[skip:]
    return float(np.nanstd(err, axis=0).mean())


def rms_error_px(kps: NDArray[np.float64], truth: NDArray[np.float64], skip: int = 5) -> float:
    """Root mean square keypoint distance to the truth."""
    err = kps[skip:] - truth[skip:]
    return float(np.sqrt(np.nanmean(np.sum(err**2, axis=-1))))


def lag_frames(
    kps: NDArray[np.float64],
    truth: NDArray[np.float64],
    max_shift: float = 4.0,
    step: float = 0.05,
    skip: int = 5,
) -> float:
    """The time shift (frames, positive = behind the truth) that best aligns ``kps`` with ``truth``.

    ``kps(t)`` is compared with ``truth(t - s)`` (linearly interpolated) after removing each
    keypoint's constant offset (detector bias), for ``s`` on a grid in ``[-max_shift, max_shift]``.
    """
    n = kps.shape[0]
    t = np.arange(n, dtype=np.float64)
    flat_k = kps.reshape(n, -1)
    flat_t = truth.reshape(n, -1)
    valid = np.asarray(~np.isnan(flat_k).any(axis=1), bool)
    best_s, best_e = 0.0, math.inf
    lo = skip + int(math.ceil(max_shift))
    hi = n - int(math.ceil(max_shift))
    for s in np.arange(-max_shift, max_shift + step / 2, step):
        idx = np.arange(lo, hi)
        idx = idx[valid[idx]]
        shifted = np.stack([np.interp(idx - s, t, flat_t[:, j]) for j in range(flat_t.shape[1])], axis=1)
        err = flat_k[idx] - shifted
        err = err - err.mean(axis=0)
        e = float(np.mean(err**2))
        if e < best_e:
            best_s, best_e = float(s), e
    return best_s


def match_to_truth(
    boxes: list[NDArray[np.float32]], truth_boxes: NDArray[np.float64], min_iou: float = 0.3
) -> list[int]:
    """For each true face, the index in ``boxes`` that overlaps it most (IoU >= ``min_iou``), else -1."""
    out = []
    for tb in truth_boxes:
        best, best_iou = -1, min_iou
        for j, b in enumerate(boxes):
            ix = max(0.0, min(tb[2], b[2]) - max(tb[0], b[0]))
            iy = max(0.0, min(tb[3], b[3]) - max(tb[1], b[1]))
            inter = ix * iy
            union = (tb[2] - tb[0]) * (tb[3] - tb[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
            iou = inter / union if union > 0 else 0.0
            if iou >= best_iou:
                best, best_iou = j, iou
        out.append(best)
    return out


# -- running a tracker on a clip -----------------------------------------------------------------


@dataclass
class TrackRun:
    """What a tracker reported on a clip, per true face: (T, F, 5, 2) keypoints, NaN where absent."""

    kps: NDArray[np.float64]
    track_ids: NDArray[np.int64]  # (T, F), -1 where no track covers the face
    full_detections: int
    roi_detections: int

    def first_tracked(self) -> list[int]:
        """Per true face, the first frame it had a track (``len`` of the clip if never)."""
        n = self.track_ids.shape[0]
        return [int(np.argmax(col >= 0)) if (col >= 0).any() else n for col in self.track_ids.T]

    def flicker(self) -> int:
        """Frames × faces where a face that is there in truth has no track (is not swapped) after
        it was first tracked: every such frame is a swapped → real → swapped blink.

        The start, before a track is confirmed (``FaceTracker.min_hits``), is checked with
        :meth:`first_tracked` instead.
        """
        n = 0
        for f, first in enumerate(self.first_tracked()):
            n += int(np.sum(self.track_ids[first:, f] < 0))
        return n

    def id_switches(self) -> int:
        """Times a true face's track id changed from one covered frame to the next."""
        n = 0
        for f in range(self.track_ids.shape[1]):
            ids = [int(i) for i in self.track_ids[:, f] if i >= 0]
            n += sum(1 for a, b in zip(ids, ids[1:], strict=False) if a != b)
        return n


def raw_keypoints(clip: Clip, detect: DetectFn) -> NDArray[np.float64]:
    """The detector alone, full frame, every frame: (T, F, 5, 2), NaN where a face was missed."""
    n, nf = clip.truth_kps.shape[:2]
    out = np.full((n, nf, 5, 2), np.nan)
    for i, frame in enumerate(clip.frames):
        faces = detect(frame)
        idx = match_to_truth([f.box_xyxy for f in faces], clip.truth_boxes[i])
        for k, j in enumerate(idx):
            if j >= 0:
                out[i, k] = faces[j].kps
    return out


def run_tracker(
    clip: Clip,
    tracker: object,
    detect: DetectFn,
    roi_detect: DetectFn | None = None,
    drop_prob: float = 0.0,
    seed: int = 1,
    roi: tuple[int, int] | None = None,
) -> TrackRun:
    """Run ``kiosk.processing.face_search.detect_and_track`` over ``clip``; optionally drop detections at random."""
    from kiosk.processing.face_search import detect_and_track
    from kiosk.processing.tracking import FaceTracker

    assert isinstance(tracker, FaceTracker)
    rng = np.random.default_rng(seed)
    counts = {"full": 0, "roi": 0}

    def dropping(fn: DetectFn, key: str) -> DetectFn:
        def wrapped(img: NDArray[np.uint8]) -> list[Face]:
            counts[key] += 1
            faces = fn(img)
            if drop_prob > 0:
                faces = [f for f in faces if rng.random() >= drop_prob]
            return faces

        return wrapped

    full_fn = dropping(detect, "full")
    roi_fn = dropping(roi_detect or detect, "roi")
    n, nf = clip.truth_kps.shape[:2]
    kps = np.full((n, nf, 5, 2), np.nan)
    ids = np.full((n, nf), -1, np.int64)
    for i, (frame, t) in enumerate(zip(clip.frames, clip.times, strict=True)):
        tracks = detect_and_track(tracker, frame, i, float(t), full_fn, roi_fn, roi)
        idx = match_to_truth([tr.face.box_xyxy for tr in tracks], clip.truth_boxes[i])
        for k, j in enumerate(idx):
            if j >= 0:
                kps[i, k] = tracks[j].face.kps
                ids[i, k] = tracks[j].id
    return TrackRun(kps=kps, track_ids=ids, full_detections=counts["full"], roi_detections=counts["roi"])


def every_kth(
    clip: Clip,
    k: int,
    detect: DetectFn,
    roi_detect: DetectFn,
    roi: tuple[int, int],
    detect_every: int = 5,
    skip: int = 2,
    tracker: object | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The tracker fed frames 0, k, 2k, … of ``clip`` as the pipeline feeds it when processing runs
    at 1/k of the camera rate (its own frame counter, the frames' times), and the raw detector on
    the same frames: per-keypoint distances to the truth (px) of each, from the ``skip``-th
    processed frame on (a track is reported from its second detection), and the number of
    face-frames the tracker left unreported. ``tracker``: a ``FaceTracker`` to use (default: one
    with the pipeline's settings and ``detect_every``)."""
    from kiosk.processing.face_search import detect_and_track
    from kiosk.processing.tracking import FaceTracker

    tracker = tracker if tracker is not None else FaceTracker(detect_every=detect_every)
    assert isinstance(tracker, FaceTracker)
    trk: list[float] = []
    raw: list[float] = []
    missing = 0
    for n, i in enumerate(range(0, len(clip.frames), k)):
        frame = clip.frames[i]
        tracks = detect_and_track(tracker, frame, n, float(clip.times[i]), detect, roi_detect, roi)
        faces = detect(frame)
        if n < skip:
            continue
        truth = clip.truth_kps[i]
        for kind, boxes, kps_of, out in (
            ("trk", [tr.face.box_xyxy for tr in tracks], [tr.face.kps for tr in tracks], trk),
            ("raw", [f.box_xyxy for f in faces], [f.kps for f in faces], raw),
        ):
            idx = match_to_truth(boxes, clip.truth_boxes[i])
            for f, j in enumerate(idx):
                if j < 0:
                    missing += kind == "trk"
                    continue
                out.extend(np.linalg.norm(np.asarray(kps_of[j], np.float64) - truth[f], axis=1).tolist())
    return np.array(trk), np.array(raw), missing


# -- live display: carrying a slow result onto newer frames -----------------------------------------


@dataclass
class LiveRun:
    """Per displayed frame and true face: the keypoints each display strategy puts on screen.

    ``live``: the newest result's keypoints carried onto the newest frame by
    :class:`kiosk.capture.live.LiveTracker` (NaN where it did not trust them: the real face is shown);
    ``stale``: the newest result's keypoints on the newest frame (Deep-Live-Cam's strategy);
    ``synced``: the newest result's keypoints on its own frame, which is what is shown then
    (``synced_frame``). All (T, F, 5, 2), NaN before the first result.
    """

    live: NDArray[np.float64]
    stale: NDArray[np.float64]
    synced: NDArray[np.float64]
    synced_frame: NDArray[np.int64]  # (T,) frame shown in synced mode, -1 before the first result
    anchor_frame: NDArray[np.int64]  # (T,) frame the newest result was computed on
    dropped: dict[str, int]
    results: int
    #: Tracks the live tracker started: one per face when every result's face finds its track.
    tracks_started: int = 0


def simulate_live(
    clip: Clip,
    detect: DetectFn | None,
    result_frames: int,
    track_px: int = 320,
    max_age_s: float = 1.5,
    shuffle_seed: int | None = None,
) -> LiveRun:
    """Replay ``clip`` as the kiosk's threads would see it, deterministically (no clocks).

    The processing stage takes ``result_frames`` camera frames per result and then starts on the
    newest frame (a swapper of 140 ms a face and three faces is about 13 frames at 30 fps). Its
    result for frame N carries the detector's keypoints on frame N (``detect``; None: the truth).
    Every camera frame goes through the tracker, as in the capture thread. ``shuffle_seed``: list
    each result's faces in a random order (a detector orders them by score, not by position).
    """
    from kiosk.capture.live import LiveAnchor, LiveFace, LiveOptions, LiveTracker

    tracker = LiveTracker(LiveOptions(track_px=track_px, max_age_s=max_age_s))
    n, nf = clip.truth_kps.shape[:2]
    live = np.full((n, nf, 5, 2), np.nan)
    stale = np.full((n, nf, 5, 2), np.nan)
    synced = np.full((n, nf, 5, 2), np.nan)
    synced_frame = np.full(n, -1, np.int64)
    anchor_frame = np.full(n, -1, np.int64)
    crop = np.zeros((8, 8, 3), np.uint8)
    job = 0  # frame the processing stage is working on
    newest: tuple[int, list[int]] | None = None  # (frame, truth face index per anchor face)
    pending_owners_by_seq: dict[int, list[int]] = {}
    pending: LiveAnchor | None = None
    for i, frame in enumerate(clip.frames):
        t = i / clip.fps
        if pending is not None:  # published while frame i-1 was being read: carried from frame i
            tracker.submit(pending)
            pending = None
        tracker.update(frame, i, t)
        if i == job + result_frames:  # the result for ``job`` is published now; the stage goes on
            # with the newest frame, which the tracker has already seen with the older result
            if detect is None:
                faces = [
                    Face(
                        clip.truth_boxes[job, k].astype(np.float32),
                        1.0,
                        clip.truth_kps[job, k].astype(np.float32),
                    )
                    for k in range(nf)
                ]
            else:
                faces = detect(clip.frames[job])
            idx = match_to_truth([f.box_xyxy for f in faces], clip.truth_boxes[job])
            owners = [k for k, j in enumerate(idx) if j >= 0]
            if shuffle_seed is not None:
                np.random.default_rng(shuffle_seed + job).shuffle(owners)
            faces = [faces[idx[k]] for k in owners]
            pending_owners_by_seq[job] = owners
            lf = tuple(LiveFace(crop, np.eye(2, 3), f.kps, f.box_xyxy) for f in faces)
            pending = LiveAnchor(job, job / clip.fps, lf)
            job = i
        if tracker.anchor is not None and (newest is None or newest[0] != tracker.anchor.seq):
            newest = (tracker.anchor.seq, pending_owners_by_seq[tracker.anchor.seq])
        if newest is None or tracker.anchor is None:
            continue
        n_frame, owners = newest
        anchor_frame[i] = n_frame
        synced_frame[i] = n_frame
        for f, (k, kps) in enumerate(zip(owners, tracker.carried_kps(), strict=True)):
            src = tracker.anchor.faces[f].kps.astype(np.float64)
            stale[i, k] = src
            synced[i, k] = src
            if kps is not None:
                live[i, k] = kps
    return LiveRun(
        live,
        stale,
        synced,
        synced_frame,
        anchor_frame,
        dict(tracker.counts.dropped),
        tracker.counts.anchors_seen,
        tracker.counts.tracks_born,
    )


def tracked_results(
    clip: Clip, detect: DetectFn, roi_detect: DetectFn, det_size: int, roi_det_size: int
) -> DetectFn:
    """For :func:`simulate_live`: the faces a result carries with ``processing.tracking: true``,
    the pipeline's tracker fed the processed frames only (in order, with their times), as the
    pipeline feeds it. Call it with frames of ``clip``, in order."""
    from kiosk.processing.face_search import detect_and_track, roi_geometry
    from kiosk.processing.tracking import FaceTracker

    tracker = FaceTracker()
    index = {id(f): i for i, f in enumerate(clip.frames)}
    geometry = roi_geometry(clip.frames[0].shape, det_size, roi_det_size)
    count = [0]

    def results(frame: NDArray[np.uint8]) -> list[Face]:
        i = index[id(frame)]
        tracks = detect_and_track(tracker, frame, count[0], i / clip.fps, detect, roi_detect, geometry)
        count[0] += 1
        return [tr.face for tr in tracks]

    return results


def p50_p95(x: NDArray[np.float64]) -> str:
    """``x``'s median and 95th percentile as "p50 / p95" for the benchmarks' tables (15 columns)."""
    if x.size == 0:
        return "   -   /   -   "
    return f"{np.percentile(x, 50):6.2f} / {np.percentile(x, 95):6.2f}"


def kp_errors(kps: NDArray[np.float64], ref: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-keypoint distances (px) where both are known, flattened."""
    d = np.linalg.norm(kps - ref, axis=-1).reshape(-1)
    return d[~np.isnan(d)]


def truth_carried(clip: Clip, run: LiveRun) -> NDArray[np.float64]:
    """The result's own keypoints moved by the clip's true motion from the result's frame to the
    displayed one: what a perfect tracker would show (so ``live`` minus this is the tracker's error
    alone, without the detector's)."""
    out = np.full_like(run.stale, np.nan)
    for i, n_frame in enumerate(run.anchor_frame):
        if n_frame < 0:
            continue
        src = clip.truth_kps[n_frame].reshape(-1, 2)
        dst = clip.truth_kps[i].reshape(-1, 2)
        m, _ = cv2.estimateAffinePartial2D(src, dst, method=cv2.LMEDS)
        if m is not None:
            out[i] = _apply(np.asarray(m, np.float64), run.stale[i].reshape(-1, 2)).reshape(
                run.stale[i].shape
            )
    return out
