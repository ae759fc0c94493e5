"""Live display: the newest camera frame, with the newest swapped faces carried onto it.

In ``display.mode: live`` the screen shows every camera frame as it arrives, whatever the models
cost. The inference thread publishes each result's swapped crops as an immutable
:class:`LiveAnchor` (the frame it was computed on: ``seq`` N, older); the capture thread runs a
light keypoint tracker (:class:`LiveTracker`) on every frame it reads and carries each face's
frame→crop affine from frame N to the newest frame M:

- every frame is reduced to a small grey image (``live_track_px`` wide) kept in a short ring;
- a new anchor's faces get points to track: the five keypoints plus corners found inside the
  face's box; they are brought forward from frame N through the ring (pyramidal Lucas–Kanade,
  ``cv2.calcOpticalFlowPyrLK``, two frames a step) to M, then follow each new frame;
- each point is checked forward and backward (the backward track must come back to within
  :data:`FB_MAX_PX`); a similarity fitted to the surviving points (RANSAC) maps frame N to
  frame M; the crop's affine becomes ``A ∘ T⁻¹`` (the composite shader takes one affine per face,
  so only the affine changes).

The swap stays on: a tracked face keeps its newest swapped crop, carried, until a newer result
replaces it, also across a result that missed the face (for :data:`KEEP_MISSED_RESULTS` results),
and tracks top their points up with fresh corners as points die (:data:`RESEED_SHARE`), so a slow
stage (one result a second) does not wear a track out between two results. A face whose carried
position cannot be trusted shows the visitor's real face until the next result: too few points
survive or the fit disagrees with them (``track``), the face moved more than
:data:`MAX_STEP_FRAC` of its size in one frame (``fast``), no newer result came for
:data:`AGE_PERIODS` result periods (``old``: the age limit follows the measured result interval
and the age results arrive with; ``live_max_age_s`` > 0 fixes it instead), or its frame left the
ring / the frames stopped being consecutive (``gap``). Each such event is counted by reason, and
each face × frame by what it showed (:meth:`LiveTracker.stats`: swapped fresh or carried, real by
reason).

Where the error can be measured while running, it is: when a new result arrives for frame N',
the previous result's faces carried to N' are compared with the new detection's keypoints
(``carry_error_px``), next to what reusing the stale keypoints would give (``stale_error_px``,
Deep-Live-Cam's strategy).

Why the capture thread: the tracker must see every frame once, in order, and it costs about a
millisecond a frame (a few ms when a result is brought forward), well inside a camera period;
running it there keeps exactly three long-lived threads and gives the ring one owner. The render
thread only uploads the frame and the carried affines.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.capture.geometry import apply_affine, compose, invert, similarity
from kiosk.stats import LatencyRecorder
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5, SwappedFace, SwapResult

#: Lucas–Kanade window (pixels of the small grey image) and pyramid levels.
LK_WIN = 15
LK_LEVELS = 3
#: A point is kept only when tracking it back lands within this many small-image pixels.
FB_MAX_PX = 0.7
#: A point farther than this from the fitted similarity (small-image pixels) is an outlier.
#: The fit is done in numpy, not cv2.estimateAffinePartial2D: each C call releases and retakes
#: the GIL, and retaking it can wait for the render thread's switch interval.
FIT_TOL_PX = 1.0
#: Fewest points (and least share of the starting points) a face keeps to stay trusted.
MIN_POINTS = 6
MIN_POINT_SHARE = 0.35
#: Most corners tracked per face besides the five keypoints.
MAX_CORNERS = 24
#: Per-frame motion above this share of the face's size is too fast to trust (motion blur).
MAX_STEP_FRAC = 0.25
#: Frames of grey images kept to bring a new result forward (5 s at 30 fps: a result of a stage
#: at one result a second arrives about a second old, two with ``processing.pipelined``).
RING_FRAMES = 150
#: A track whose live points fall below this share of the points it had tops them up with
#: corners found where the face is now (points die over the frames between two slow results).
RESEED_SHARE = 0.6
#: A face a newer result did not list (a missed detection) keeps its crop on its track for this
#: many results, as long as the track is trusted.
KEEP_MISSED_RESULTS = 2
#: The automatic age limit: the age results arrive with plus this many result periods (both the
#: median of the last :data:`AGE_WINDOW` results); before the second result, the arrival age
#: stands in for the period.
AGE_PERIODS = 4.0
AGE_WINDOW = 8
#: ... and never below this (a fast stage's limit would otherwise fall to a fraction of a second).
AGE_MIN_S = 2.0
#: A new result is brought forward this many frames per Lucas–Kanade step.
CATCH_UP_STRIDE = 2
DROP_REASONS = ("track", "fast", "old", "gap")
#: Why a face × frame shows the visitor's real face (counted per face × frame).
REAL_REASONS = DROP_REASONS


@dataclass(frozen=True)
class LiveFace:
    """One swapped face of a result, as computed on the result's frame."""

    crop_bgr: FrameBGR
    affine: Affine2x3  # frame N pixels → crop pixels
    kps: Landmarks5  # frame N pixels
    box_xyxy: NDArray[np.float32]
    #: The crop's alpha mask (crop space, so it moves with the affine); None: the default box.
    alpha: NDArray[np.uint8] | None = None


@dataclass(frozen=True)
class LiveAnchor:
    """An immutable snapshot of a result for the live display: what was swapped on frame ``seq``."""

    seq: int
    t_capture: float
    faces: tuple[LiveFace, ...]
    #: False when the result came from no swapping stage (pass-through: swapping off, loading):
    #: every face carried from earlier results then goes, none is kept over it.
    swapping: bool = True

    @classmethod
    def from_result(cls, result: SwapResult, swapping: bool = True) -> LiveAnchor:
        """Copy the crops and affines out of a triple-buffer slot (the slot is reused later)."""
        faces = tuple(
            LiveFace(
                crop_bgr=sf.crop_bgr.copy(),
                affine=np.array(sf.affine, np.float64),
                kps=np.array(sf.face.kps, np.float32),
                box_xyxy=np.array(sf.face.box_xyxy, np.float32),
                # the shared read-only box mask is kept by reference; a per-face buffer is reused later
                alpha=sf.alpha if sf.alpha is None or not sf.alpha.flags.writeable else sf.alpha.copy(),
            )
            for sf in result.faces
        )
        return cls(result.seq, result.t_capture, faces, swapping)


@dataclass
class AnchorSlot:
    """A slot of the inference → capture triple buffer (holds a reference, never pixels to reuse)."""

    anchor: LiveAnchor | None = None


@dataclass
class LiveFrame:
    """A slot of the capture → display triple buffer in live mode."""

    frame_bgr: FrameBGR
    seq: int = 0
    t_capture: float = 0.0
    #: The carried faces (crop of the anchor, affine moved onto this frame); trusted faces only.
    faces: list[SwappedFace] = field(default_factory=list)
    anchor_seq: int = -1
    anchor_t_capture: float = 0.0
    #: Faces of the anchor shown as the visitor's real face on this frame (not trusted).
    faces_untrusted: int = 0
    #: Why, one reason per such face (:data:`REAL_REASONS`).
    real_reasons: tuple[str, ...] = ()


def new_live_frame() -> LiveFrame:
    return LiveFrame(frame_bgr=np.zeros((1, 1, 3), np.uint8))


@dataclass(frozen=True)
class LiveOptions:
    track_px: int = 320
    #: A fixed age limit (s); 0: automatic, :data:`AGE_PERIODS` measured result periods.
    max_age_s: float = 0.0


@dataclass(eq=False)
class _Track:
    """A face followed from frame to frame, whichever result it belongs to (small-image pixels).

    ``pts0`` are the points in the coordinates of the frame the track was born on, ``pts`` where
    they are now; ``c_small`` is the similarity fitted from one to the other; ``history`` keeps it
    (in full-frame pixels) per recent frame, so the motion between any two frames of the track's
    life is ``C(b) ∘ C(a)⁻¹``.
    """

    pts0: NDArray[np.float32]
    pts: NDArray[np.float32]
    alive: NDArray[np.bool_]
    box0: NDArray[np.float64]  # x0, y0, x1, y1 at birth
    centre0: NDArray[np.float64]  # centroid of the five keypoints at birth
    size_px: float
    born: int
    lost: str = ""
    #: Points the track had after its last (re)seed (the reference of :data:`RESEED_SHARE`).
    seeded: int = 0
    c_small: NDArray[np.float64] = field(default_factory=lambda: np.eye(2, 3))
    history: dict[int, NDArray[np.float64]] = field(default_factory=dict)


@dataclass(eq=False)
class _Carried:
    """One face of the current result and the track that carries it."""

    track: _Track | None
    c_at_anchor: NDArray[np.float64] | None  # the track's C at the result's frame (full pixels)
    dropped: str = ""
    #: Set for a face kept from an earlier result (the newest result did not list it).
    face: LiveFace | None = None
    t_capture: float = 0.0  # capture time of the frame the kept face was swapped on
    missed: int = 0  # newer results that did not list it


class LiveTracker:
    """Carries the newest result's faces onto every new frame. Owned by one thread (capture).

    Call :meth:`submit` with a new :class:`LiveAnchor` and :meth:`update` with every frame, in
    order; then :attr:`anchor` and :attr:`transforms` (per anchor face: frame N → current frame
    in full-frame pixels, or None where the face is not trusted) describe the current frame.

    Faces are followed by tracks that outlive results: a new result's face that lies on a live
    track at its frame is carried by that track's motion since then (no work); only a face
    without one (someone new, or after a loss) is brought forward through the ring of frames.
    """

    def __init__(self, opts: LiveOptions | None = None) -> None:
        self.opts = opts or LiveOptions()
        self._ring: deque[tuple[int, NDArray[np.uint8]]] = deque(maxlen=RING_FRAMES)
        self._pending: LiveAnchor | None = None
        self._tracks: list[_Track] = []
        self._carried: list[_Carried] = []
        #: Faces of earlier results still carried because the newest result did not list them.
        self._kept: list[_Carried] = []
        self._scale = (1.0, 1.0)
        #: The age results arrive with and the interval between them (s), for the age limit.
        self._arrival_s: deque[float] = deque(maxlen=AGE_WINDOW)
        self._interval_s: deque[float] = deque(maxlen=AGE_WINDOW)
        self._t_last_anchor = 0.0
        self._t_now = 0.0
        self.anchor: LiveAnchor | None = None
        self.transforms: list[NDArray[np.float64] | None] = []
        self._kept_transforms: list[NDArray[np.float64] | None] = []
        self.seq = -1
        # counters (read by other threads as plain ints/floats)
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.anchors_seen = 0
        self.tracks_born = 0
        self.faces_carried = 0  # face × frame shown swapped (carried onto a newer frame, or fresh)
        self.faces_fresh = 0  # of which on the result's own frame
        self.faces_untrusted = 0  # face × frame shown as the real face
        self.real_frames = dict.fromkeys(REAL_REASONS, 0)  # ... by reason
        self.faces_kept = 0  # face × frame shown from an earlier result the newest one missed
        #: Per face of the current frame: shown swapped ("") or the reason it is shown real.
        self.face_states: list[str] = []
        self.track_ms = LatencyRecorder(1024)
        self.catch_up_ms = LatencyRecorder(256)
        self.carry_error_px = LatencyRecorder(1024)
        self.stale_error_px = LatencyRecorder(1024)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    # -- coordinates -------------------------------------------------------------------------
    def _to_small(self) -> NDArray[np.float64]:
        fx, fy = self._scale  # cv2.resize: small = (full + 0.5) * f - 0.5
        return np.array([[fx, 0.0, 0.5 * fx - 0.5], [0.0, fy, 0.5 * fy - 0.5]])

    def _full(self, small: NDArray[np.float64]) -> NDArray[np.float64]:
        s = self._to_small()
        return compose(invert(s), compose(small, s))

    def _grey(self, frame_bgr: FrameBGR) -> NDArray[np.uint8]:
        h, w = frame_bgr.shape[:2]
        sw = min(self.opts.track_px, w)
        sh = max(8, int(round(h * sw / w)))
        self._scale = (sw / w, sh / h)
        if sw == w:
            return np.asarray(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2GRAY), np.uint8)
        small = cv2.resize(frame_bgr, (sw, sh), interpolation=cv2.INTER_AREA)
        return np.asarray(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY), np.uint8)

    # -- per frame ---------------------------------------------------------------------------
    def submit(self, anchor: LiveAnchor) -> None:
        """A new result; it replaces the current one at the next :meth:`update`."""
        self._pending = anchor

    def update(self, frame_bgr: FrameBGR, seq: int, t_capture: float) -> None:
        t0 = time.perf_counter()
        grey = self._grey(frame_bgr)
        if self._ring and (seq != self._ring[-1][0] + 1 or self._ring[-1][1].shape != grey.shape):
            self._ring.clear()  # frames are not consecutive (reconnect, restart): nothing carries over
            for tr in self._tracks:
                tr.lost = tr.lost or "gap"
            self._tracks = []
        prev = self._ring[-1][1] if self._ring else None
        self._ring.append((seq, grey))
        self.seq = seq
        if prev is not None and self._tracks:
            self._step(self._tracks, prev, grey, seq)
            for tr in self._tracks:
                if not tr.lost and int(tr.alive.sum()) < RESEED_SHARE * tr.seeded:
                    self._reseed(tr, grey, force=True)
        self._t_now = t_capture
        pending, self._pending = self._pending, None
        if pending is not None:
            self._start(pending, grey)
        self._finish(t_capture)
        self.track_ms.add((time.perf_counter() - t0) * 1e3)

    def age_limit_s(self) -> float:
        """How old a carried swap may get before it shows the real face: ``max_age_s`` when set,
        else the age results arrive with plus :data:`AGE_PERIODS` result periods (medians), at
        least :data:`AGE_MIN_S`."""
        if self.opts.max_age_s > 0:
            return self.opts.max_age_s
        if not self._arrival_s:
            return float("inf")
        arrival = float(np.median(self._arrival_s))
        period = float(np.median(self._interval_s)) if self._interval_s else arrival
        return max(AGE_MIN_S, arrival + AGE_PERIODS * period)

    def _start(self, anchor: LiveAnchor, grey: NDArray[np.uint8]) -> None:
        self._measure_carry_error(anchor)
        now = self._t_now
        if anchor.swapping and anchor.faces:
            self._arrival_s.append(max(now - anchor.t_capture, 0.0))
            if self._t_last_anchor:
                self._interval_s.append(max(now - self._t_last_anchor, 0.0))
            self._t_last_anchor = now
        previous = [*self._carried, *self._kept]
        self.anchor = anchor
        self.anchors_seen += 1
        s = self._to_small()
        free = [tr for tr in self._tracks if not tr.lost and anchor.seq in tr.history]
        carried: list[_Carried] = []
        newborn: list[tuple[int, NDArray[np.float64], NDArray[np.float32]]] = []
        for k, face in enumerate(anchor.faces):
            kps = apply_affine(s, face.kps)
            x0, y0, x1, y1 = apply_affine(s, face.box_xyxy.reshape(2, 2)).reshape(-1)
            size = max(x1 - x0, y1 - y0, 4.0)
            best, best_d = None, 0.5 * size
            for tr in free:  # the live track that was on this face at the result's frame
                at_n = compose(s, compose(tr.history[anchor.seq], invert(s)))
                d = float(np.linalg.norm(apply_affine(at_n, tr.centre0[None])[0] - kps.mean(axis=0)))
                if d < best_d:
                    best, best_d = tr, d
            if best is not None:
                free = [tr for tr in free if tr is not best]
                self._reseed(best, grey)
                carried.append(_Carried(best, best.history[anchor.seq]))
            else:
                carried.append(_Carried(None, None))
                newborn.append((k, np.array([x0, y0, x1, y1]), kps.astype(np.float32)))
        if newborn:
            self._bring_forward(anchor.seq, carried, newborn)
        for c, face in zip(carried, anchor.faces, strict=True):
            c.face, c.t_capture = face, anchor.t_capture
        # A face this result did not list keeps its crop on its track (a missed detection), for
        # a few results and while the track is trusted; not over a result of no swapping stage.
        taken = {id(c.track) for c in carried if c.track is not None}
        kept: list[_Carried] = []
        if anchor.swapping:
            for c in previous:
                held = c.track
                if held is None or held.lost or c.dropped or id(held) in taken or c.c_at_anchor is None:
                    continue
                if c.face is None or c.missed + 1 > KEEP_MISSED_RESULTS:
                    continue
                if self._near_a_new_face(held, c, anchor):
                    continue  # the result has a face there (its own track): never two on one head
                kept.append(_Carried(held, c.c_at_anchor, "", c.face, c.t_capture, c.missed + 1))
                taken.add(id(held))
        # Tracks no face is on are not needed any more.
        self._tracks = [c.track for c in [*carried, *kept] if c.track is not None and not c.track.lost]
        self._carried = carried
        self._kept = kept

    @staticmethod
    def _near_a_new_face(track: _Track, held: _Carried, anchor: LiveAnchor) -> bool:
        """Whether a face of ``anchor`` lies within a face size of where ``held`` was on the
        anchor's frame (or that place is unknown): then it is not kept beside it."""
        at_n = track.history.get(anchor.seq)
        if at_n is None or held.face is None or held.c_at_anchor is None:
            return True
        kps = apply_affine(compose(at_n, invert(held.c_at_anchor)), held.face.kps)
        centre = kps.mean(axis=0)
        size = float(
            max(held.face.box_xyxy[2] - held.face.box_xyxy[0], held.face.box_xyxy[3] - held.face.box_xyxy[1])
        )
        return any(float(np.linalg.norm(f.kps.mean(axis=0) - centre)) < size for f in anchor.faces)

    def _bring_forward(
        self,
        seq: int,
        carried: list[_Carried],
        newborn: list[tuple[int, NDArray[np.float64], NDArray[np.float32]]],
    ) -> None:
        """Start tracks for faces nobody followed, on the result's frame, and step them to now."""
        index = next((i for i, (q, _) in enumerate(self._ring) if q == seq), None)
        if index is None:  # the result's frame is older than the ring (or before a gap): they
            return  # stay without a track and are counted as "gap" when the frame is finished
        t0 = time.perf_counter()
        frames = list(self._ring)[index:]
        tracks = []
        for k, box, kps in newborn:
            tr = self._new_track(frames[0][1], box, kps, frames[0][0])
            carried[k] = _Carried(tr, tr.history[seq])
            tracks.append(tr)
        n = len(frames)
        # A few frames per step, but every one of the last two (where the next result will look).
        steps = sorted(set(range(0, n - 2, CATCH_UP_STRIDE)) | {max(n - 2, 0), n - 1})
        for a, b in zip(steps, steps[1:], strict=False):
            self._step(tracks, frames[a][1], frames[b][1], frames[b][0], frames=b - a)
        self.catch_up_ms.add((time.perf_counter() - t0) * 1e3)

    def _corners(self, grey: NDArray[np.uint8], box: NDArray[np.float64], size: float) -> NDArray[np.float32]:
        """Corners inside the inner part of ``box`` (the outer part may be background)."""
        x0, y0, x1, y1 = box
        cx, cy, hw, hh = (x0 + x1) / 2, (y0 + y1) / 2, 0.35 * (x1 - x0), 0.38 * (y1 - y0)
        h, w = grey.shape
        ix0, iy0 = int(max(cx - hw, 0)), int(max(cy - hh, 0))
        ix1, iy1 = int(min(cx + hw, w - 1)), int(min(cy + hh, h - 1))
        if ix1 <= ix0 + 2 or iy1 <= iy0 + 2:
            return np.zeros((0, 2), np.float32)
        mask = np.zeros_like(grey)
        mask[iy0 : iy1 + 1, ix0 : ix1 + 1] = 255
        corners = cv2.goodFeaturesToTrack(
            grey, MAX_CORNERS, 0.01, max(2.0, size / 12.0), mask=mask, blockSize=5
        )
        return np.zeros((0, 2), np.float32) if corners is None else corners.reshape(-1, 2).astype(np.float32)

    def _new_track(
        self, grey: NDArray[np.uint8], box: NDArray[np.float64], kps: NDArray[np.float32], seq: int
    ) -> _Track:
        size = float(max(box[2] - box[0], box[3] - box[1], 4.0))
        p0 = np.concatenate([kps.astype(np.float32), self._corners(grey, box, size)]).astype(np.float32)
        tr = _Track(
            p0, p0.copy(), np.ones(len(p0), bool), box, kps.mean(axis=0).astype(np.float64), size, seq
        )
        tr.history[seq] = np.eye(2, 3)
        tr.seeded = len(p0)
        self.tracks_born += 1
        return tr

    def _reseed(self, tr: _Track, grey: NDArray[np.uint8], force: bool = False) -> None:
        """Replace points the track lost by corners of the face where it is now (``force``: also
        when it has many left, as long as it lost :data:`RESEED_SHARE` of them)."""
        if not force and int(tr.alive.sum()) >= 0.7 * (MAX_CORNERS + 5):
            return
        corners = tr.box0.reshape(2, 2)
        now = apply_affine(tr.c_small, corners)
        box = np.array([*now.min(axis=0), *now.max(axis=0)])
        fresh = self._corners(grey, box, tr.size_px)
        if len(fresh) == 0:
            return
        keep = tr.alive
        back = apply_affine(invert(tr.c_small), fresh).astype(np.float32)
        tr.pts0 = np.concatenate([tr.pts0[keep], back])
        tr.pts = np.concatenate([tr.pts[keep], fresh])
        tr.alive = np.ones(len(tr.pts), bool)
        tr.seeded = len(tr.pts)

    def _step(
        self, tracks: list[_Track], prev: NDArray[np.uint8], cur: NDArray[np.uint8], seq: int, frames: int = 1
    ) -> None:
        live = [tr for tr in tracks if not tr.lost]
        if not live:
            return
        idx = [np.flatnonzero(tr.alive) for tr in live]
        p = np.concatenate([tr.pts[i] for tr, i in zip(live, idx, strict=True)]).reshape(-1, 1, 2)
        if len(p) == 0:
            for tr in live:
                tr.lost = "track"
            return
        crit = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 20, 0.03)
        win = (LK_WIN, LK_WIN)
        q, st, _ = cv2.calcOpticalFlowPyrLK(
            prev, cur, p, np.empty_like(p), winSize=win, maxLevel=LK_LEVELS, criteria=crit
        )
        back, st_b, _ = cv2.calcOpticalFlowPyrLK(
            cur, prev, q, np.empty_like(p), winSize=win, maxLevel=LK_LEVELS, criteria=crit
        )
        fb = np.linalg.norm((back - p).reshape(-1, 2), axis=1)
        good = (st.reshape(-1) == 1) & (st_b.reshape(-1) == 1) & (fb < FB_MAX_PX)
        q2 = q.reshape(-1, 2)
        p2 = p.reshape(-1, 2)
        at = 0
        for tr, i in zip(live, idx, strict=True):
            n = len(i)
            g = good[at : at + n]
            moved = q2[at : at + n]
            step = np.linalg.norm(moved[g] - p2[at : at + n][g], axis=1)
            at += n
            tr.alive[i[~g]] = False
            tr.pts[i[g]] = moved[g]
            self._fit(tr, float(np.median(step)) / frames if step.size else 0.0)
            if not tr.lost:
                tr.history[seq] = self._full(tr.c_small)
                tr.history.pop(seq - RING_FRAMES, None)

    def _fit(self, tr: _Track, step_px: float) -> None:
        if step_px > MAX_STEP_FRAC * tr.size_px:
            tr.lost = "fast"
            return
        alive = np.flatnonzero(tr.alive)
        need = max(MIN_POINTS, MIN_POINT_SHARE * min(len(tr.pts0), MAX_CORNERS + 5))
        if len(alive) < need:
            tr.lost = "track"
            return
        src, dst = tr.pts0[alive].astype(np.float64), tr.pts[alive].astype(np.float64)
        m = similarity(src, dst)
        r = np.linalg.norm(apply_affine(m, src) - dst, axis=1)
        inl = r < max(FIT_TOL_PX, 2.5 * float(np.median(r)))  # first drop gross outliers, refit
        for _ in range(2):
            if int(inl.sum()) < need:
                break
            m = similarity(src[inl], dst[inl])
            r = np.linalg.norm(apply_affine(m, src) - dst, axis=1)
            inl = r < FIT_TOL_PX
        if int(inl.sum()) < need:
            tr.lost = "track"
            return
        tr.alive[alive[~inl]] = False  # points that left the face's motion stop counting
        tr.c_small = np.asarray(m, np.float64)

    def _finish(self, t_capture: float) -> None:
        anchor = self.anchor
        if anchor is None:
            self.transforms = []
            self.face_states = []
            return
        limit = self.age_limit_s()
        out: list[NDArray[np.float64] | None] = []
        states: list[str] = []
        for c in [*self._carried, *self._kept]:
            tr = c.track
            if not c.dropped:
                old = t_capture - c.t_capture > limit
                reason = "gap" if tr is None else (tr.lost or ("old" if old else ""))
                if reason:
                    c.dropped = reason
                    self.dropped[reason] += 1
            if c.dropped or tr is None or c.c_at_anchor is None:
                states.append(c.dropped or "gap")
                out.append(None)
            else:
                states.append("")
                out.append(compose(self._full(tr.c_small), invert(c.c_at_anchor)))
        n = len(self._carried)
        self.transforms = out[:n]
        self._kept_transforms = out[n:]
        self.face_states = states
        shown = sum(t is not None for t in out)
        self.faces_carried += shown
        self.faces_kept += sum(t is not None for t in out[n:])
        if anchor.seq == self.seq:
            self.faces_fresh += sum(t is not None for t in out[:n])
        self.faces_untrusted += len(out) - shown
        for why in states:
            if why:
                self.real_frames[why] += 1

    def _measure_carry_error(self, new: LiveAnchor) -> None:
        """The previous result's faces carried (by their tracks) to the new result's frame, against
        the new result's detections there; and the same for the stale keypoints."""
        old = self.anchor
        if old is None or not new.faces:
            return
        carried: list[NDArray[np.float64] | None] = []
        for face, held in zip(old.faces, self._carried, strict=True):
            tr, at_old = held.track, held.c_at_anchor
            at_new = None if tr is None or at_old is None else tr.history.get(new.seq)
            if at_new is None or at_old is None:
                carried.append(None)
            else:
                carried.append(apply_affine(compose(at_new, invert(at_old)), face.kps))
        for nf in new.faces:
            width = float(nf.box_xyxy[2] - nf.box_xyxy[0])
            centre = nf.kps.mean(axis=0)
            dists = [np.inf if c is None else float(np.linalg.norm(c.mean(axis=0) - centre)) for c in carried]
            if not dists:
                continue
            j = int(np.argmin(dists))
            pos = carried[j]
            if pos is None or dists[j] > 0.5 * width:  # no track then, or another person
                continue
            self.carry_error_px.add(float(np.linalg.norm(pos - nf.kps, axis=1).mean()))
            self.stale_error_px.add(float(np.linalg.norm(old.faces[j].kps - nf.kps, axis=1).mean()))

    # -- results -----------------------------------------------------------------------------
    def carried_kps(self) -> list[NDArray[np.float64] | None]:
        """The anchor's keypoints carried onto the current frame (None: not trusted)."""
        if self.anchor is None:
            return []
        return [
            None if t is None else apply_affine(t, f.kps)
            for f, t in zip(self.anchor.faces, self.transforms, strict=True)
        ]

    def carried_faces(self, out: list[SwappedFace]) -> None:
        """Fill ``out`` with the trusted faces: each one's crop, its affine moved onto this frame
        (the current result's faces, then faces kept from earlier results it did not list)."""
        out.clear()
        if self.anchor is None:
            return
        faces = [*self.anchor.faces, *(c.face for c in self._kept)]
        for f, t in zip(faces, [*self.transforms, *self._kept_transforms], strict=True):
            if t is None or f is None:
                continue
            kps = apply_affine(t, f.kps).astype(np.float32)
            corners = apply_affine(t, f.box_xyxy.reshape(2, 2))
            box = np.array([*corners.min(axis=0), *corners.max(axis=0)], np.float32)
            out.append(SwappedFace(f.crop_bgr, compose(f.affine, invert(t)), Face(box, 1.0, kps), f.alpha))

    def swapped_share(self) -> float | None:
        """Share of face × frame shown swapped since the start (None before any face)."""
        total = self.faces_carried + self.faces_untrusted
        return self.faces_carried / total if total else None

    def stats(self) -> dict[str, object]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 2)

        share = self.swapped_share()
        return {
            "results_carried": self.anchors_seen,
            "tracks_started": self.tracks_born,
            "faces_carried_frames": self.faces_carried,
            "faces_fresh_frames": self.faces_fresh,
            "faces_kept_frames": self.faces_kept,
            "faces_real_frames": self.faces_untrusted,
            "faces_real_frames_by_reason": dict(self.real_frames),
            "swapped_pct": r(None if share is None else 100.0 * share),
            "faces_dropped_to_real": dict(self.dropped, total=self.dropped_total),
            "age_limit_s": r(self.age_limit_s()) if self.age_limit_s() != float("inf") else None,
            "carry_error_px_p50": r(self.carry_error_px.percentile(50)),
            "carry_error_px_p95": r(self.carry_error_px.percentile(95)),
            "stale_error_px_p50": r(self.stale_error_px.percentile(50)),
            "stale_error_px_p95": r(self.stale_error_px.percentile(95)),
            "carry_error_samples": self.carry_error_px.count,
            "track_ms_p50": r(self.track_ms.percentile(50)),
            "track_ms_p95": r(self.track_ms.percentile(95)),
            "catch_up_ms_p50": r(self.catch_up_ms.percentile(50)),
        }
