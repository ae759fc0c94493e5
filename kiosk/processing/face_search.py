"""Detection as the tracker asks for it, once per frame: the whole frame or crops around the faces
(:func:`detect_in_regions`), merged (:func:`merge_faces`), fed to the tracker
(:func:`detect_and_track`), and the faces-in-view policy (:func:`select_faces`: all / largest /
central, with hysteresis). :class:`FaceFinder` owns that per-frame plan's state (the tracker, the
region detector, the chosen faces): the first step of the pipeline, or the whole work of the
pipelined detection worker. Everything here is per-frame work of one thread."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence

import numpy as np

from kiosk.inference.detector import FaceDetector
from kiosk.processing.timing import Detection, StageTimes
from kiosk.processing.tracking import (
    DetectFn,
    DetectManyFn,
    FaceTracker,
    Policy,
    Region,
    Track,
    TrackingOptions,
    box_iou,
    face_size,
)
from kiosk.types import Face, FrameBGR


def roi_geometry(
    frame_shape: Sequence[int], det_size: int, roi_det_size: int, max_stride: int = 32
) -> tuple[int, int]:
    """``(size_px, align_px)`` for :meth:`FaceTracker.search_regions` and :func:`detect_in_regions`.

    A full-frame detector with input ``det_size`` scales the frame by ``det_size / max(h, w)``.
    A region of ``size_px = roi_det_size / scale`` frame pixels, run through the same model with
    input ``roi_det_size``, is scaled identically; corners on multiples of ``align_px =
    max_stride / scale`` keep the anchor grid where it is on the full frame.
    """
    h, w = int(frame_shape[0]), int(frame_shape[1])
    scale = det_size / max(h, w)
    size_px = int(round(roi_det_size / scale))
    align_px = max(int(round(max_stride / scale)), 1)
    return size_px, align_px


def nms_faces(faces: Iterable[Face], iou: float = 0.4) -> list[Face]:
    """Greedy non-maximum suppression of faces by score (keeps IoU <= ``iou``), best first."""
    items = sorted(faces, key=lambda f: -f.score)
    keep: list[Face] = []
    for f in items:
        if keep and float(box_iou(f.box_xyxy, np.stack([k.box_xyxy for k in keep])).max()) > iou:
            continue
        keep.append(f)
    return keep


def detect_in_regions(
    detect_fn: DetectFn,
    frame: FrameBGR,
    regions: Sequence[Region],
    nms_iou: float = 0.4,
    pad_to: int | None = None,
    detect_many: DetectManyFn | None = None,
) -> list[Face]:
    """Run ``detect_fn`` on each crop of ``frame`` and return the faces in frame pixels.

    ``pad_to``: crops cut short by the frame's right or bottom edge are padded with black to this
    square size (as a top-left letterbox pads the full frame), so the detector's scale stays the
    same. Faces found twice (overlapping regions) are merged by NMS, highest score first.
    ``detect_many``: detects in all the crops at once instead (see
    :meth:`~kiosk.inference.detector.FaceDetector.detect_many`).
    """
    crops: list[FrameBGR] = []
    origins: list[tuple[int, int]] = []
    for x0, y0, x1, y1 in regions:
        crop = frame[y0:y1, x0:x1]
        if crop.shape[0] < 2 or crop.shape[1] < 2:
            continue
        if pad_to is not None and (crop.shape[0] < pad_to or crop.shape[1] < pad_to):
            padded = np.zeros((max(pad_to, crop.shape[0]), max(pad_to, crop.shape[1]), 3), frame.dtype)
            padded[: crop.shape[0], : crop.shape[1]] = crop
            crop = padded
        crops.append(crop)
        origins.append((x0, y0))
    if not crops:
        return []
    per_crop = detect_many(crops) if detect_many is not None else [detect_fn(c) for c in crops]
    found: list[Face] = []
    for (x0, y0), faces in zip(origins, per_crop, strict=True):
        off = np.array([x0, y0], np.float32)
        for f in faces:
            found.append(
                Face(
                    box_xyxy=(np.asarray(f.box_xyxy, np.float32) + np.tile(off, 2)).astype(np.float32),
                    score=f.score,
                    kps=(np.asarray(f.kps, np.float32) + off).astype(np.float32),
                )
            )
    return nms_faces(found, nms_iou)


def merge_faces(primary: Sequence[Face], extra: Iterable[Face], iou: float = 0.5) -> list[Face]:
    """``primary`` plus the faces of ``extra`` that overlap none of them by more than ``iou``."""
    out = list(primary)
    for f in extra:
        if out and float(box_iou(f.box_xyxy, np.stack([k.box_xyxy for k in out])).max()) > iou:
            continue
        out.append(f)
    return out


def detect_and_track(
    tracker: FaceTracker,
    frame: FrameBGR,
    frame_idx: int,
    t: float,
    detect_fn: DetectFn,
    roi_detect_fn: DetectFn | None = None,
    roi: tuple[int, int] | None = None,
    roi_detect_many: DetectManyFn | None = None,
) -> list[Track]:
    """One frame of detection as the tracker asks, then :meth:`FaceTracker.update`.

    Without ``roi_detect_fn``: ``detect_fn`` on the full frame when
    :meth:`FaceTracker.needs_full_detection` says so, else on crops scaled to each face.

    With ``roi_detect_fn`` (the same model at a small input size) and ``roi`` (``(size_px,
    align_px)`` from :func:`roi_geometry`): tracked faces are detected in their own
    scale-consistent regions on every frame, and the full frame is searched on the due frames
    only for new or lost faces. A tracked face's keypoints therefore always come from the same
    kind of detection; switching between full-frame and crop detections would add their small
    difference in bias as periodic jitter. ``roi_detect_many``: detects in all regions at once
    (a fixed-size detector's tiles), instead of ``roi_detect_fn`` once per region.

    When the frames come so far apart that a face may have left the region around where it was
    (:meth:`FaceTracker.regions_trusted`: slow processing), the whole frame is searched and every
    face found is re-detected in a region of its own, as a new face is: a region placed on the old
    position could hold half a face, or a neighbour's.
    """
    trusted = tracker.regions_trusted(t)
    full = tracker.needs_full_detection(frame_idx, t)
    size_px, align_px = roi if roi is not None else (None, 1)
    if roi_detect_fn is None:
        if full:
            faces = detect_fn(frame)
        else:
            faces = detect_in_regions(detect_fn, frame, tracker.search_regions(frame.shape))
        return tracker.update(faces, t)
    faces = []
    if trusted:
        regions = tracker.search_regions(frame.shape, size_px, align_px)
        faces = detect_in_regions(roi_detect_fn, frame, regions, pad_to=size_px, detect_many=roi_detect_many)
    if full:
        new = merge_faces(faces, detect_fn(frame))[len(faces) :]
        if new:
            # Re-detect new faces in their own regions too, so their tracks start on the same
            # kind of detection they will be updated with.
            new_regions = [tracker.region_for(f.box_xyxy, frame.shape, size_px, align_px) for f in new]
            refined = detect_in_regions(
                roi_detect_fn, frame, new_regions, pad_to=size_px, detect_many=roi_detect_many
            )
            new = merge_faces(merge_faces([], refined), new)
        faces = merge_faces(faces, new)
    return tracker.update(faces, t)


def _area(track: Track) -> float:
    return track.face.area_px


def _centre_dist(track: Track, cx: float, cy: float) -> float:
    b = track.face.box_xyxy
    return math.hypot((b[0] + b[2]) / 2.0 - cx, (b[1] + b[3]) / 2.0 - cy)


def select_faces(
    tracks: Sequence[Track],
    policy: Policy,
    frame_shape: Sequence[int],
    max_faces: int,
    previous_ids: Iterable[int] = (),
    hysteresis: float = 0.2,
) -> list[Track]:
    """The tracks to swap under ``policy``.

    all: up to ``max_faces``, largest first, but faces chosen last frame (``previous_ids``) keep
    their place, so a face does not drop out just because another one grew a little.
    largest / central: the one biggest / nearest-the-centre face; the previous choice is kept
    unless another is better by more than ``hysteresis`` (a fraction of area; of face size in
    distance), so two similar faces do not alternate frame by frame.
    """
    if not tracks or max_faces < 1:
        return []
    prev = set(previous_ids)
    if policy == "all":
        ordered = sorted(tracks, key=lambda tr: (tr.id not in prev, -_area(tr), tr.id))
        return ordered[:max_faces]
    if policy == "largest":
        best = max(tracks, key=lambda tr: (_area(tr), -tr.id))
        held = [tr for tr in tracks if tr.id in prev]
        if held:
            keep = max(held, key=_area)
            if _area(keep) * (1.0 + hysteresis) >= _area(best):
                return [keep]
        return [best]
    if policy == "central":
        cy, cx = float(frame_shape[0]) / 2.0, float(frame_shape[1]) / 2.0
        best = min(tracks, key=lambda tr: (_centre_dist(tr, cx, cy), tr.id))
        held = [tr for tr in tracks if tr.id in prev]
        if held:
            keep = min(held, key=lambda tr: _centre_dist(tr, cx, cy))
            margin = hysteresis * face_size(best.face.box_xyxy)
            if _centre_dist(keep, cx, cy) <= _centre_dist(best, cx, cy) + margin:
                return [keep]
        return [best]
    raise ValueError(f"unknown face policy {policy!r}: use all, largest or central")


class FaceFinder:
    """This frame's faces to swap: detected on the whole frame or, when tracking, in regions around
    the tracked faces (ROI vs full frame, as the tracker plans it), tracked and smoothed, and chosen
    by ``processing.face_policy`` (at most ``max_faces``).

    Owns the tracker, the region detector and the chosen track ids; holds the full-frame
    ``detector`` it is given. One per thread: the pipeline's own, or the pipelined detection
    worker's (with a second session of the detector), so the tracker sees every frame in order."""

    def __init__(
        self,
        detector: FaceDetector,
        *,
        max_faces: int = 4,
        face_policy: Policy = "all",
        tracking: TrackingOptions | None = None,
    ) -> None:
        self.detector = detector
        self.max_faces = int(max_faces)
        self.face_policy: Policy = face_policy
        self.tracker: FaceTracker | None = None
        self.tracking_options: TrackingOptions | None = None
        #: The detector of the regions around tracked faces (the same model at ``roi_det_size``);
        #: None without tracking, or when a fixed-size export cannot hold that size.
        self.roi_detector: FaceDetector | None = None
        #: Each face of the last :meth:`find`: its track id (None without tracking).
        self.face_ids: list[int | None] = []
        self._frame_idx = 0
        self._chosen_ids: list[int] = []
        if tracking is not None:
            self.set_tracking(tracking)

    def set_tracking(self, options: TrackingOptions | None) -> None:
        """Follow faces across frames with ``options`` (``None``: detect every frame, no smoothing).

        Tracked faces are detected in a small region around each face on every frame (the same
        model at ``roi_det_size``, at the full-frame scale), the whole frame is searched every
        ``detect_every`` frames or when a face is lost, the five keypoints are One-Euro smoothed
        before alignment, and a face whose detection is missed stays swapped (held where it was)
        for ``hold_frames`` frames (and at most as long as that many frames take at 30 fps). Below
        10 processed frames a second every frame is searched whole and positions are not smoothed
        across frames that far apart (see :class:`~kiosk.processing.tracking.FaceTracker`)."""
        self.tracking_options = options
        if options is None:
            self.tracker = None
            self.roi_detector = None
            return
        self.tracker = FaceTracker(
            min_cutoff=options.min_cutoff,
            beta=options.beta,
            max_missed=options.hold_frames,
            detect_every=options.detect_every,
        )
        roi = self.detector.resized(options.roi_det_size)
        # A fixed-size export letterboxes the regions into its own input (as tiles of one run); if
        # it could not hold roi_det_size, regions would go through the full model instead.
        self.roi_detector = None if roi.det_size != options.roi_det_size else roi
        self._frame_idx = 0
        self._chosen_ids = []

    def reset(self) -> None:
        """Forget the tracked faces (a new scene: the source changed or restarted)."""
        if self.tracker is not None:
            self.tracker.reset()
        self._frame_idx = 0
        self._chosen_ids = []

    def warm_up(self) -> dict[str, float]:
        """Run each detector twice on zeros: milliseconds per detector (``detector``, ``detector_roi``)."""
        out: dict[str, float] = {}
        for name, det in (("detector", self.detector), ("detector_roi", self.roi_detector)):
            if det is not None:
                zeros = np.zeros((det.det_size, det.det_size, 3), np.uint8)
                a = time.perf_counter()
                det.detect(zeros)
                det.detect(zeros)
                out[name] = (time.perf_counter() - a) * 1e3
        return out

    def run_ms(self) -> float:
        """Milliseconds the detectors spent inside ONNX Runtime so far."""
        roi = self.roi_detector
        return self.detector.runner.run_ms + (roi.runner.run_ms if roi is not None else 0.0)

    def find_faces(self, frame_bgr: FrameBGR, t: float | None = None) -> Detection:
        """The first stage of :meth:`~kiosk.processing.pipeline.SwapPipeline.process_into` on its
        own: this frame's faces and their cost. Tracking state advances, so call it once per frame,
        in frame order."""
        before = self.run_ms()
        t0 = time.perf_counter()
        times = StageTimes()
        faces = self.find(frame_bgr, t0 if t is None else t, times)
        return Detection(
            faces,
            detect_ms=(time.perf_counter() - t0) * 1e3,
            track_ms=times.track_ms,
            session_ms=self.run_ms() - before,
            full_detection=times.full_detection,
            ids=tuple(self.face_ids),
        )

    def find(self, frame_bgr: FrameBGR, t: float, times: StageTimes) -> list[Face]:
        """This frame's faces to swap (``t``: its time in seconds, for the smoothing); sets
        :attr:`face_ids`, ``times.track_ms`` and ``times.full_detection``."""
        if self.tracker is None:
            faces = self._untracked_faces(frame_bgr)
            self.face_ids = [None] * len(faces)
            return faces
        return self._tracked_faces(frame_bgr, t, times)

    def _untracked_faces(self, frame_bgr: FrameBGR) -> list[Face]:
        faces = self.detector.detect(frame_bgr)
        if self.face_policy != "all" and len(faces) > 1:
            pseudo = [Track(i, f, f, 1, 0, 1) for i, f in enumerate(faces)]
            faces = [tr.face for tr in select_faces(pseudo, self.face_policy, frame_bgr.shape, 1)]
        return faces[: self.max_faces]

    def _tracked_faces(self, frame_bgr: FrameBGR, t: float, times: StageTimes) -> list[Face]:
        assert self.tracker is not None
        roi_det = self.roi_detector
        roi = roi_geometry(frame_bgr.shape, self.detector.det_size, roi_det.det_size) if roi_det else None
        before = self.run_ms()
        a = time.perf_counter()
        full_runs = self.detector.runner.runs
        tracks = detect_and_track(
            self.tracker,
            frame_bgr,
            self._frame_idx,
            t,
            self.detector.detect,
            roi_det.detect if roi_det is not None else None,
            roi,
            roi_det.detect_many if roi_det is not None and roi_det.tiles_per_run > 1 else None,
        )
        self._frame_idx += 1
        times.full_detection = self.detector.runner.runs != full_runs
        chosen = select_faces(tracks, self.face_policy, frame_bgr.shape, self.max_faces, self._chosen_ids)
        self._chosen_ids = [tr.id for tr in chosen]
        self.face_ids = list(self._chosen_ids)
        # The tracker's own time: the detection call minus the time the detectors spent.
        times.track_ms = (time.perf_counter() - a) * 1e3 - (self.run_ms() - before)
        return [tr.face for tr in chosen]
