"""The points the live tracker (:class:`~kiosk.capture.live.LiveTracker`) follows, in the capture thread.

This module owns the optical flow, nothing about results:

- :class:`FrameRing`: the recent camera frames as small grey images (``live_track_px`` wide), as
  many seconds as results arrive old (plus margin) within ``live_ring_mb``, and
  the conversion between their pixels and full-frame pixels;
- :class:`Track`: one face's points (the five keypoints plus corners found inside its box), where
  they started and where they are now, and the similarity fitted from one to the other;
- :func:`step`: one pyramidal Lucas–Kanade step (``cv2.calcOpticalFlowPyrLK``) of every live track
  at once, checked forward and backward (the backward track must come back to within
  :data:`FB_MAX_PX`), then a fit per track that rejects points which left the face's motion.

A track is lost (``lost`` names why) when too few points survive or the fit disagrees with them
(``track``), or the face moved more than :data:`MAX_STEP_FRAC` of its size in one frame (``fast``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.capture.geometry import apply_affine, compose, invert, similarity
from kiosk.types import FrameBGR

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
#: The ring of grey images kept to bring a new result forward is sized by time: at least
#: :data:`RING_MIN_S`, or :data:`RING_MARGIN` × the oldest of the last results' arrival ages plus
#: :data:`RING_PAD_S` (a stage at 0.25 results a second hands results in four seconds old, eight
#: with ``processing.pipelined``), in frames at the measured camera rate; capped by the memory
#: budget ``display.live_ring_mb`` (:data:`RING_MB`). Before the first result (its age is
#: unknown) the ring fills up to the budget.
RING_MIN_S = 5.0
RING_MARGIN = 1.5
RING_PAD_S = 1.0
RING_MB = 64.0
#: A track whose live points fall below this share of the points it had tops them up with
#: corners found where the face is now (points die over the frames between two slow results).
RESEED_SHARE = 0.6

#: Small-image pixels of a fitted similarity → full-frame pixels.
ToFull = Callable[[NDArray[np.float64]], NDArray[np.float64]]


class FrameRing:
    """The recent frames as small grey images, with their sequence numbers: as many as
    :attr:`keep_s` seconds at the measured camera rate, never more than ``budget_mb`` of images.

    The scale between the small images and the camera frames is the newest frame's (a resolution
    change is a gap: the ring starts afresh)."""

    def __init__(self, track_px: int, budget_mb: float = RING_MB) -> None:
        self.track_px = track_px
        self.budget_bytes = int(budget_mb * 2**20)
        #: Seconds of frames to keep (:meth:`keep_for`); infinite until a result's age is known.
        self.keep_s = float("inf")
        self._frames: deque[tuple[int, NDArray[np.uint8]]] = deque()
        self._intervals: deque[float] = deque(maxlen=32)
        self._t_last = 0.0
        self._scale = (1.0, 1.0)

    def keep_for(self, arrival_s: float) -> None:
        """Size the ring for results that arrive as much as ``arrival_s`` old."""
        self.keep_s = max(RING_MIN_S, RING_MARGIN * arrival_s + RING_PAD_S)

    @property
    def frames(self) -> int:
        return len(self._frames)

    @property
    def nbytes(self) -> int:
        """Bytes of grey images held (the ring's memory; its bookkeeping is a few bytes a frame)."""
        return sum(g.nbytes for _, g in self._frames)

    @property
    def oldest(self) -> int:
        """Sequence number of the oldest frame held (-1 when empty)."""
        return self._frames[0][0] if self._frames else -1

    def seconds(self) -> float:
        """The time the ring spans at the measured camera rate (0 before two frames)."""
        return len(self._frames) * float(np.median(self._intervals)) if self._intervals else 0.0

    def _limit(self, frame_bytes: int) -> int:
        """Frames to hold: :attr:`keep_s` at the measured rate, within the budget (at least two)."""
        cap = max(2, self.budget_bytes // max(frame_bytes, 1))
        if self.keep_s == float("inf") or not self._intervals:
            return cap
        dt = max(float(np.median(self._intervals)), 1e-3)
        return max(2, min(cap, int(np.ceil(self.keep_s / dt)) + 2))

    def to_small(self) -> NDArray[np.float64]:
        """The affine from full-frame pixels to small-image pixels."""
        fx, fy = self._scale  # cv2.resize: small = (full + 0.5) * f - 0.5
        return np.array([[fx, 0.0, 0.5 * fx - 0.5], [0.0, fy, 0.5 * fy - 0.5]])

    def full(self, small: NDArray[np.float64]) -> NDArray[np.float64]:
        """An affine between small images, as the same affine between full frames."""
        s = self.to_small()
        return compose(invert(s), compose(small, s))

    def _grey(self, frame_bgr: FrameBGR) -> NDArray[np.uint8]:
        h, w = frame_bgr.shape[:2]
        sw = min(self.track_px, w)
        sh = max(8, int(round(h * sw / w)))
        self._scale = (sw / w, sh / h)
        if sw == w:
            return np.asarray(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2GRAY), np.uint8)
        small = cv2.resize(frame_bgr, (sw, sh), interpolation=cv2.INTER_AREA)
        return np.asarray(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY), np.uint8)

    def add(
        self, frame_bgr: FrameBGR, seq: int, t_capture: float = 0.0
    ) -> tuple[NDArray[np.uint8], NDArray[np.uint8] | None, bool]:
        """Reduce and keep frame ``seq`` (captured at ``t_capture``). Returns its grey image, the
        previous one (None at the start and after a gap) and whether the frames stopped being
        consecutive (reconnect, restart, new resolution): then the ring held before is dropped,
        nothing carries over."""
        grey = self._grey(frame_bgr)
        ring = self._frames
        gap = bool(ring) and (seq != ring[-1][0] + 1 or ring[-1][1].shape != grey.shape)
        if gap:
            ring.clear()
        elif ring and t_capture > self._t_last:
            self._intervals.append(t_capture - self._t_last)
        self._t_last = t_capture
        prev = ring[-1][1] if ring else None
        ring.append((seq, grey))
        limit = self._limit(grey.nbytes)
        while len(ring) > limit:
            ring.popleft()
        return grey, prev, gap

    def since(self, seq: int) -> list[tuple[int, NDArray[np.uint8]]] | None:
        """Frames ``seq`` to the newest; None if ``seq`` is older than the ring (or before a gap)."""
        index = seq - self.oldest  # the frames held are consecutive
        if not self._frames or not 0 <= index < len(self._frames):
            return None
        return list(self._frames)[index:]


def prune_history(history: dict[int, NDArray[np.float64]], oldest: int) -> None:
    """Forget a track's fits for frames older than ``oldest`` (the ring's oldest frame); they are
    kept in frame order."""
    while history and next(iter(history)) < oldest:
        del history[next(iter(history))]


def corners(grey: NDArray[np.uint8], box: NDArray[np.float64], size: float) -> NDArray[np.float32]:
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
    found = cv2.goodFeaturesToTrack(grey, MAX_CORNERS, 0.01, max(2.0, size / 12.0), mask=mask, blockSize=5)
    return np.zeros((0, 2), np.float32) if found is None else found.reshape(-1, 2).astype(np.float32)


@dataclass(eq=False)
class Track:
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

    @classmethod
    def start(
        cls, grey: NDArray[np.uint8], box: NDArray[np.float64], kps: NDArray[np.float32], seq: int
    ) -> Track:
        """A track born on frame ``seq`` on the face with ``box`` and ``kps`` (small-image pixels)."""
        size = float(max(box[2] - box[0], box[3] - box[1], 4.0))
        p0 = np.concatenate([kps.astype(np.float32), corners(grey, box, size)]).astype(np.float32)
        tr = cls(p0, p0.copy(), np.ones(len(p0), bool), box, kps.mean(axis=0).astype(np.float64), size, seq)
        tr.history[seq] = np.eye(2, 3)
        tr.seeded = len(p0)
        return tr

    def needs_points(self) -> bool:
        """Whether the track lost :data:`RESEED_SHARE` of the points of its last (re)seed."""
        return not self.lost and int(self.alive.sum()) < RESEED_SHARE * self.seeded

    def reseed(self, grey: NDArray[np.uint8], force: bool = False) -> None:
        """Replace points the track lost by corners of the face where it is now (``force``: also
        when it has many left, as long as it lost :data:`RESEED_SHARE` of them)."""
        if not force and int(self.alive.sum()) >= 0.7 * (MAX_CORNERS + 5):
            return
        now = apply_affine(self.c_small, self.box0.reshape(2, 2))
        box = np.array([*now.min(axis=0), *now.max(axis=0)])
        fresh = corners(grey, box, self.size_px)
        if len(fresh) == 0:
            return
        keep = self.alive
        back = apply_affine(invert(self.c_small), fresh).astype(np.float32)
        self.pts0 = np.concatenate([self.pts0[keep], back])
        self.pts = np.concatenate([self.pts[keep], fresh])
        self.alive = np.ones(len(self.pts), bool)
        self.seeded = len(self.pts)

    def fit(self, step_px: float) -> None:
        """Fit ``c_small`` to the live points after a step of ``step_px`` a frame (median), or lose
        the track; points that left the face's motion stop counting."""
        if step_px > MAX_STEP_FRAC * self.size_px:
            self.lost = "fast"
            return
        alive = np.flatnonzero(self.alive)
        need = max(MIN_POINTS, MIN_POINT_SHARE * min(len(self.pts0), MAX_CORNERS + 5))
        if len(alive) < need:
            self.lost = "track"
            return
        src, dst = self.pts0[alive].astype(np.float64), self.pts[alive].astype(np.float64)
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
            self.lost = "track"
            return
        self.alive[alive[~inl]] = False  # points that left the face's motion stop counting
        self.c_small = np.asarray(m, np.float64)


def step(
    tracks: list[Track],
    prev: NDArray[np.uint8],
    cur: NDArray[np.uint8],
    seq: int,
    to_full: ToFull,
    frames: int = 1,
) -> None:
    """Move the live ``tracks`` from ``prev`` to ``cur`` (frame ``seq``, ``frames`` after ``prev``)
    in one Lucas–Kanade call for all of them, and record each one's fit for frame ``seq``."""
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
        dist = np.linalg.norm(moved[g] - p2[at : at + n][g], axis=1)
        at += n
        tr.alive[i[~g]] = False
        tr.pts[i[g]] = moved[g]
        tr.fit(float(np.median(dist)) / frames if dist.size else 0.0)
        if not tr.lost:
            tr.history[seq] = to_full(tr.c_small)
