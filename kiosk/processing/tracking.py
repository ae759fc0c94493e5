"""Face tracking between detections: association, keypoint smoothing, held faces, ROI detection.

The inference thread calls, once per frame::

    tracks = detect_and_track(tracker, frame_bgr, frame_idx, t, detector.detect, roi_detect)
    chosen = select_faces(tracks, cfg.policy, frame_bgr.shape, cfg.max_faces, previous_ids)

- :class:`OneEuroFilter` smooths the five keypoints and the box corners of each track: a low
  cutoff (steady) when the face is still, a cutoff that rises with speed (no lag) when it moves.
- :class:`FaceTracker` associates detections with tracks by IoU (keypoint distance breaks ties
  and rescues fast motion), starts new tracks with fresh filters, and holds a track in place for
  ``max_missed`` frames after a missed detection, so a swapped face does not flicker back to the
  real one. It says when a full-frame detection is due (:meth:`FaceTracker.needs_full_detection`)
  and where to look in between (:meth:`FaceTracker.search_regions`). Its gates and holds are in
  time and face sizes, so it works the same when slow models process one frame a second: the
  gates grow with the time since a face was seen, frames that far apart are searched whole and
  not blended, and a missed face is not held where the visitor was a second ago.
- :func:`detect_in_regions` runs a detector on crops and maps the faces back to the frame.
- :func:`select_faces` applies the faces-in-view policy (all / largest / central) with hysteresis.

Everything here is per-frame state owned by the inference thread; nothing is shared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from kiosk.processing.one_euro import OneEuroFilter
from kiosk.types import Face, FrameBGR

Policy = Literal["all", "largest", "central"]
Region = tuple[int, int, int, int]
DetectFn = Callable[[FrameBGR], list[Face]]
#: Detects in several crops at once (a fixed-size detector's region tiles): one list per crop.
DetectManyFn = Callable[[list[FrameBGR]], list[list[Face]]]

_TWO_PI = 2.0 * math.pi
#: Face sizes per second from which the smoother's lag is added back (fully from twice that).
LEAD_FROM = 0.25


@dataclass(frozen=True)
class Track:
    """A face followed across frames. ``face`` is smoothed (box and keypoints); ``raw`` is the last detection.

    ``age``: frames since the track started. ``missed``: consecutive frames without a detection
    (0 = detected this frame; > 0 = held in place). ``hits``: detections matched in total.
    """

    id: int
    face: Face
    raw: Face
    age: int
    missed: int
    hits: int


def box_iou(a: NDArray[np.floating], b: NDArray[np.floating]) -> NDArray[np.float64]:
    """IoU matrix of boxes ``a`` (N,4) and ``b`` (M,4), xyxy, continuous coordinates."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def face_size(box: NDArray[np.floating]) -> float:
    return float(max(box[2] - box[0], box[3] - box[1], 1.0))


def _pack(face: Face) -> NDArray[np.float64]:
    """Keypoints and box corners as one (7, 2) array: what a track's filter smooths."""
    return np.concatenate(
        [np.asarray(face.kps, np.float64).reshape(5, 2), np.asarray(face.box_xyxy, np.float64).reshape(2, 2)]
    )


def _unpack(points: NDArray[np.float64], score: float) -> Face:
    return Face(
        box_xyxy=points[5:7].reshape(4).astype(np.float32),
        score=float(score),
        kps=points[:5].astype(np.float32),
    )


class _TrackState:
    __slots__ = ("filter", "face", "hits", "id", "missed", "raw", "age", "t", "region")

    def __init__(self, track_id: int, face: Face, t: float, filt: OneEuroFilter) -> None:
        self.id = track_id
        self.filter = filt
        self.filter.reset()
        self.face = _unpack(self.filter(_pack(face), t), face.score)
        self.raw = face
        self.hits = 1
        self.missed = 0
        self.age = 1
        self.t = t
        self.region: Region | None = None

    def record(self) -> Track:
        return Track(self.id, self.face, self.raw, self.age, self.missed, self.hits)

    @property
    def size(self) -> float:
        return face_size(np.asarray(self.raw.box_xyxy, np.float64))

    def predicted_points(self, t: float) -> NDArray[np.float64]:
        """Where the last raw detection's points would be at ``t`` moving at the filter's velocity."""
        pts = _pack(self.raw)
        vel = self.filter.velocity
        if vel is None:
            return pts
        dt = min(max(t - self.t, 0.0), 0.5)
        return pts + vel * dt


@dataclass(frozen=True)
class TrackingOptions:
    """How :class:`~kiosk.processing.pipeline.SwapPipeline` follows faces between frames (``processing.*`` in the config)."""

    detect_every: int = 5
    roi_det_size: int = 192
    min_cutoff: float = 0.5
    beta: float = 0.07
    hold_frames: int = 5

    @classmethod
    def of(cls, proc: Any) -> TrackingOptions:
        """From the ``processing:`` config section."""
        return cls(
            detect_every=proc.detect_every,
            roi_det_size=proc.roi_det_size,
            min_cutoff=proc.smoothing_min_cutoff,
            beta=proc.smoothing_beta,
            hold_frames=proc.hold_frames,
        )


class FaceTracker:
    """Follows faces across frames and smooths their keypoints; see the module docstring.

    Gates and holds are in time and face sizes, so the tracker behaves the same whether frames
    come at camera rate or once a second (slow models): a face can move ``max_speed`` face sizes
    per second between two updates and still be associated. When more than half a face's size of
    motion fits between two updates (``max_speed × dt > 0.5``: below 10 updates a second by
    default), regions around the old positions cannot be trusted and positions that far apart are
    not blended: the whole frame is searched, and each matched track's filter restarts from the
    detection (with the velocity between the two detections as its speed estimate). A filter
    also restarts when a detection is more than a quarter of the face's size from where the track
    expected it. A track whose detection is missed is held in place for at most ``max_missed``
    updates and ``hold_s`` seconds.

    Parameters:
        min_cutoff: 1€ cutoff (Hz) for a still face; lower is steadier.
        beta: 1€ speed coefficient (1/px); higher follows motion with less lag.
        d_cutoff: cutoff (Hz) of the speed estimate.
        iou_threshold: least IoU between a track's predicted box and a detection to match them.
        kps_gate: a pair below ``iou_threshold`` still matches when the mean keypoint distance is
            below this fraction of the face size plus ``max_speed`` × the time since the track's
            last detection (fast motion, slow updates).
        max_missed: updates a track is held in place after its last detection before it is dropped.
        min_hits: detections a track needs before it is reported (and then held through misses).
            A younger, tentative track is dropped at its first miss, so a one-frame false
            detection is never swapped, and a face that is detected once and then missed does not
            blink on and off: it is reported one frame later instead.
        detect_every: a full-frame detection every this many frames; crops around tracks in between.
        region_scale: side of a search region relative to the face size.
        max_speed: the fastest a face is expected to move, in face sizes per second.
        hold_s: the longest a missed face is held in place, seconds (default ``max_missed`` camera
            frames at 30 fps): a face held longer would be swapped where the visitor no longer is.
    """

    def __init__(
        self,
        min_cutoff: float = 0.5,
        beta: float = 0.07,
        d_cutoff: float = 1.0,
        iou_threshold: float = 0.3,
        kps_gate: float = 0.5,
        max_missed: int = 5,
        min_hits: int = 2,
        detect_every: int = 5,
        region_scale: float = 2.0,
        max_speed: float = 5.0,
        hold_s: float | None = None,
        lead: bool = True,
    ) -> None:
        if detect_every < 1:
            raise ValueError("detect_every must be >= 1")
        if max_missed < 0 or min_hits < 1:
            raise ValueError("max_missed must be >= 0 and min_hits >= 1")
        if max_speed <= 0 or (hold_s is not None and hold_s < 0):
            raise ValueError("max_speed must be > 0 and hold_s >= 0")
        self.min_cutoff = float(min_cutoff)
        self.beta = float(beta)
        self.d_cutoff = float(d_cutoff)
        self.iou_threshold = float(iou_threshold)
        self.kps_gate = float(kps_gate)
        self.max_missed = int(max_missed)
        self.min_hits = int(min_hits)
        self.detect_every = int(detect_every)
        self.region_scale = float(region_scale)
        self.max_speed = float(max_speed)
        self.lead = bool(lead)
        self.hold_s = float(hold_s) if hold_s is not None else (self.max_missed + 0.5) / 30.0
        self._states: list[_TrackState] = []
        self._next_id = 1
        self._lost_pending = False
        self._frame_dt = 1.0 / 30.0
        self._last_t: float | None = None
        #: Filter restarts (slow updates or jumps) since the tracker was made: a measure, for tests.
        self.restarts = 0

    # -- state ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop every track (e.g. after the source changed)."""
        self._states.clear()
        self._lost_pending = False
        self._last_t = None

    @property
    def tracks(self) -> list[Track]:
        """The reported tracks (as the last :meth:`update` returned them), oldest first."""
        return [s.record() for s in self._states if s.hits >= self.min_hits]

    @property
    def tentative(self) -> list[Track]:
        """Tracks not yet reported (fewer than ``min_hits`` detections)."""
        return [s.record() for s in self._states if s.hits < self.min_hits]

    def _new_filter(self) -> OneEuroFilter:
        return OneEuroFilter(self.min_cutoff, self.beta, self.d_cutoff, speed_axis=-1)

    def is_slow(self, dt: float) -> bool:
        """Whether a face may have moved more than half its size in ``dt`` seconds."""
        return self.max_speed * dt > 0.5

    def regions_trusted(self, t: float | None) -> bool:
        """Whether every track was updated recently enough at ``t`` for a region around where it
        was to still hold its face (see :meth:`is_slow`); ``None``: no time given, trusted."""
        return t is None or not any(self.is_slow(t - s.t) for s in self._states)

    # -- association ---------------------------------------------------------------------------
    def _match(self, faces: Sequence[Face], t: float) -> list[tuple[int, int]]:
        """One-to-one pairs (track index, face index): the most pairs, then the best affinity."""
        if not self._states or not faces:
            return []
        pred = np.stack([s.predicted_points(t) for s in self._states])  # (N,7,2)
        last = np.stack([_pack(s.raw) for s in self._states])
        pred_boxes = pred[:, 5:7].reshape(-1, 4)
        det_pts = np.stack([_pack(f) for f in faces])  # (M,7,2)
        iou = box_iou(pred_boxes, det_pts[:, 5:7].reshape(-1, 4))
        sizes = np.array([s.size for s in self._states])
        kps_dist = np.linalg.norm(pred[:, None, :5] - det_pts[None, :, :5], axis=-1).mean(axis=-1)
        last_dist = np.linalg.norm(last[:, None, :5] - det_pts[None, :, :5], axis=-1).mean(axis=-1)
        kps_norm = kps_dist / sizes[:, None]
        # The gate grows with the time since the track's last detection: a prediction from a
        # velocity a second old can be off by the whole motion, so the last place counts too.
        since = np.array([max(t - s.t, 0.0) for s in self._states])
        gate = self.kps_gate + self.max_speed * since
        ok = (iou >= self.iou_threshold) | (np.minimum(kps_dist, last_dist) / sizes[:, None] <= gate[:, None])
        # IoU decides; keypoint distance breaks near-ties and ranks gate-only pairs. Squared, so
        # that of assignments with the same total distance (a row of faces all stepping sideways
        # by more than their spacing) the one that moves every face alike wins. After a slow
        # update the predicted box is a guess (the velocity is that of the last interval), so
        # its IoU with a detection means nothing: distance alone ranks.
        slow = np.array([self.is_slow(d) for d in since])
        return _assign(np.where(slow[:, None], 0.0, iou) - 0.1 * kps_norm**2, ok)

    def _lead(self, x: NDArray[np.float64], filt: OneEuroFilter, size: float) -> NDArray[np.float64]:
        """``x`` moved ahead by the lag the filter leaves on a moving face.

        A 1€ step with cutoff ``fc`` trails a steady motion by ``tau = 1 / (2 pi fc)`` seconds
        (the exponential average's lag, whatever the frame interval), so a face moving at ``v`` is
        ``v * tau`` behind. Adding back ``v * tau`` (``v``: the filter's own low-passed speed) for a
        face moving faster than ``LEAD_FROM`` face sizes per second removes most of that lag; a
        still face (whose speed is noise) is left as smoothed, with a linear ramp in between."""
        vel = filt.velocity
        if vel is None or not self.lead:
            return x
        speed = np.sqrt(np.sum(vel**2, axis=-1, keepdims=True))
        tau = 1.0 / (_TWO_PI * (self.min_cutoff + self.beta * speed))
        w = np.clip((speed / size - LEAD_FROM) / LEAD_FROM, 0.0, 1.0)
        return x + w * tau * vel

    # -- per frame -----------------------------------------------------------------------------
    def update(self, faces: Sequence[Face], t: float) -> list[Track]:
        """Take this frame's detections (frame pixels) observed at ``t`` seconds; return the tracks.

        Returned are the reported tracks (at least ``min_hits`` detections), oldest first.
        Matched tracks are smoothed (or restarted from the detection, see the class docstring);
        unmatched tracks are held in place (``missed`` > 0) up to ``max_missed`` updates and
        ``hold_s`` seconds; unmatched detections start new tracks with fresh filters.
        """
        if self._last_t is not None and t > self._last_t:
            dt = t - self._last_t
            self._frame_dt += 0.2 * (min(dt, 0.5) - self._frame_dt)
        self._last_t = t
        pairs = self._match(faces, t)
        matched_t = {i for i, _ in pairs}
        matched_d = {j for _, j in pairs}
        for i, j in pairs:
            s = self._states[i]
            face = faces[j]
            pts = _pack(face)
            dt = t - s.t
            jump = float(np.linalg.norm(pts[:5] - s.predicted_points(t)[:5], axis=-1).mean()) > 0.25 * s.size
            if dt > 0 and (self.is_slow(dt) or jump):
                # Too long ago or too far from where it was expected: restart from the detection,
                # moving as it moved between the two detections (for the next association).
                vel = (pts - _pack(s.raw)) / dt if dt <= 1.0 else None
                s.face = _unpack(s.filter.restart(pts, t, vel), face.score)
                self.restarts += 1
            else:
                s.face = _unpack(self._lead(s.filter(pts, t), s.filter, s.size), face.score)
            s.raw = face
            s.hits += 1
            s.missed = 0
            s.age += 1
            s.t = t
        kept: list[_TrackState] = []
        for i, s in enumerate(self._states):
            if i not in matched_t:
                s.missed += 1
                s.age += 1
                if s.missed > self.max_missed or s.hits < self.min_hits or t - s.t > self.hold_s:
                    self._lost_pending = True
                    continue
            kept.append(s)
        self._states = kept
        matched_boxes = [faces[j].box_xyxy for j in matched_d]
        for j, face in enumerate(faces):
            if j in matched_d:
                continue
            # A second detection of an already-matched face (duplicate after NMS) is not a new face.
            if matched_boxes and float(box_iou(face.box_xyxy, np.stack(matched_boxes)).max()) > 0.5:
                continue
            self._states.append(_TrackState(self._next_id, face, t, self._new_filter()))
            self._next_id += 1
            matched_boxes.append(face.box_xyxy)
        return self.tracks

    def needs_full_detection(self, frame_idx: int, t: float | None = None) -> bool:
        """Whether to detect on the whole frame for ``frame_idx`` (else on :meth:`search_regions`).

        True every ``detect_every`` frames, when there are no tracks, when a track is being held
        after a miss, when a track was dropped since the last time this returned True, or (given
        the frame's time ``t``) when a track's last detection is so long ago that its face may
        have left the region around it (:meth:`regions_trusted`). Call it once per frame, before
        detecting.
        """
        full = (
            frame_idx % self.detect_every == 0
            or not self._states
            or self._lost_pending
            or any(s.missed > 0 for s in self._states)
            or not self.regions_trusted(t)
        )
        if full:
            self._lost_pending = False
        return full

    def search_regions(
        self, frame_shape: Sequence[int], size_px: int | None = None, align_px: int = 1
    ) -> list[Region]:
        """Regions (x0, y0, x1, y1), clipped to the frame, around where each track will be next.

        Each region is centred on the track's box moved one frame ahead at its current velocity.
        By default it is a square of ``region_scale`` × the face size. With ``size_px`` (see
        :func:`roi_geometry`) it is a ``size_px`` square whose corner is a multiple of ``align_px``:
        a detector run on it (padded to ``size_px`` by :func:`detect_in_regions`) then sees the
        face at the same scale and on the same anchor grid as on the full frame. Such a region
        stays where it is while the face stays well inside it, so a still face is always detected
        in the same crop (a CNN's keypoints shift by a fraction of a pixel with the crop's
        context; a moving crop would add that as jitter). A face too big for ``size_px`` gets a
        scaled region instead.
        """
        h, w = int(frame_shape[0]), int(frame_shape[1])
        regions: list[Region] = []
        for s in self._states:
            pts = _pack(s.face)
            vel = s.filter.velocity
            if vel is not None:
                pts = pts + vel * self._frame_dt
            box = pts[5:7].reshape(4)
            face = face_size(box)
            if (
                size_px is not None
                and s.region is not None
                and face * 1.25 <= size_px
                and _inside(box, s.region, 0.2 * face, w, h)
            ):
                regions.append(s.region)  # still well inside: same crop, same detector bias
                continue
            region = self.region_for(box, frame_shape, size_px, align_px)
            s.region = region
            if region[2] - region[0] >= 8 and region[3] - region[1] >= 8:
                regions.append(region)
        return regions

    def region_for(
        self,
        box: NDArray[np.floating],
        frame_shape: Sequence[int],
        size_px: int | None = None,
        align_px: int = 1,
    ) -> Region:
        """The search region for a face ``box`` (see :meth:`search_regions`), clipped to the frame."""
        h, w = int(frame_shape[0]), int(frame_shape[1])
        cx, cy = float(box[0] + box[2]) / 2.0, float(box[1] + box[3]) / 2.0
        face = face_size(np.asarray(box, np.float64))
        if size_px is not None and face * 1.25 <= size_px:
            a = max(int(align_px), 1)
            x0 = int(round((cx - size_px / 2.0) / a)) * a
            y0 = int(round((cy - size_px / 2.0) / a)) * a
            x0 = min(max(x0, 0), max((w - 1) // a * a, 0))
            y0 = min(max(y0, 0), max((h - 1) // a * a, 0))
            return (x0, y0, min(w, x0 + size_px), min(h, y0 + size_px))
        half = face * self.region_scale / 2.0
        return (
            int(max(0, math.floor(cx - half))),
            int(max(0, math.floor(cy - half))),
            int(min(w, math.ceil(cx + half))),
            int(min(h, math.ceil(cy + half))),
        )


def _inside(box: NDArray[np.float64], region: Region, margin: float, w: int, h: int) -> bool:
    """Whether ``box`` lies inside ``region`` with ``margin`` to spare (frame edges need none)."""
    x0, y0, x1, y1 = region
    return bool(
        (box[0] >= x0 + margin or x0 <= 0)
        and (box[1] >= y0 + margin or y0 <= 0)
        and (box[2] <= x1 - margin or x1 >= w)
        and (box[3] <= y1 - margin or y1 >= h)
    )


def _assign(affinity: NDArray[np.float64], ok: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """Pairs (row, column) allowed by ``ok``, one-to-one: as many pairs as possible, then the
    largest total ``affinity``. Exact for up to 8 columns (a few faces: a dynamic programme over
    the used columns); greedy best-first beyond. A greedy choice can be wrong when faces moved
    more than their spacing between two updates (a row of faces all stepping sideways: the
    nearest detection to each track is its neighbour's)."""
    n, m = ok.shape
    if m > 8:
        return _assign_greedy(affinity, ok)
    # Each pair is worth more than any sum of affinities (which are in [-n, 1] per pair).
    bonus = 10.0 + float(np.abs(affinity).max(initial=0.0)) * n
    best: dict[int, tuple[float, tuple[tuple[int, int], ...]]] = {0: (0.0, ())}
    for i in range(n):
        nxt = dict(best)  # row i unmatched
        cols = np.flatnonzero(ok[i])
        for mask, (score, pairs) in best.items():
            for j in cols:
                bit = 1 << int(j)
                if mask & bit:
                    continue
                cand = score + bonus + float(affinity[i, j])
                key = mask | bit
                if key not in nxt or cand > nxt[key][0]:
                    nxt[key] = (cand, (*pairs, (i, int(j))))
        best = nxt
    return list(max(best.values(), key=lambda v: v[0])[1])


def _assign_greedy(affinity: NDArray[np.float64], ok: NDArray[np.bool_]) -> list[tuple[int, int]]:
    m = ok.shape[1]
    pairs: list[tuple[int, int]] = []
    used_t: set[int] = set()
    used_d: set[int] = set()
    for flat in np.argsort(-affinity, axis=None, kind="stable"):
        i, j = divmod(int(flat), m)
        if not ok[i, j] or i in used_t or j in used_d:
            continue
        pairs.append((i, j))
        used_t.add(i)
        used_d.add(j)
    return pairs
