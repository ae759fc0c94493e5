"""Detection as the tracker asks for it, once per frame: the whole frame or crops around the faces
(:func:`detect_in_regions`), merged (:func:`merge_faces`), fed to the tracker
(:func:`detect_and_track`), and the faces-in-view policy (:func:`select_faces`: all / largest /
central, with hysteresis). Everything here is per-frame work of the inference thread."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from kiosk.processing.tracking import (
    DetectFn,
    DetectManyFn,
    FaceTracker,
    Policy,
    Region,
    Track,
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
