"""Live display: the newest camera frame, with the newest swapped faces carried onto it.

In ``display.mode: live`` the screen shows every camera frame as it arrives, whatever the models
cost. The inference thread publishes each result's swapped crops as an immutable
:class:`LiveAnchor` (the frame it was computed on: ``seq`` N, older); the capture thread runs a
light keypoint tracker (:class:`LiveTracker`) on every frame it reads and carries each face's
frame→crop affine from frame N to the newest frame M:

- every frame is reduced to a small grey image (``live_track_px`` wide) kept in a ring sized by
  time (the measured result arrival age plus margin) within ``live_ring_mb``;
- a new anchor's faces get points to track: the five keypoints plus corners found inside the
  face's box; they are brought forward from frame N through the ring (pyramidal Lucas–Kanade,
  ``cv2.calcOpticalFlowPyrLK``, two frames a step) to M, then follow each new frame;
- each point is checked forward and backward (the backward track must come back to within
  :data:`~kiosk.capture.live_points.FB_MAX_PX`); a similarity fitted to the surviving points (RANSAC) maps frame N to
  frame M; the crop's affine becomes ``A ∘ T⁻¹`` (the composite shader takes one affine per face,
  so only the affine changes).

The swap stays on: a tracked face keeps its newest swapped crop, carried, until a newer result
replaces it, also across a result that missed the face (for :data:`KEEP_MISSED_RESULTS` results),
and tracks top their points up with fresh corners as points die (:data:`~kiosk.capture.live_points.RESEED_SHARE`), so a slow
stage (one result a second) does not wear a track out between two results. A face whose carried
position cannot be trusted shows the visitor's real face until the next result: too few points
survive or the fit disagrees with them (``track``), the face moved more than
:data:`~kiosk.capture.live_points.MAX_STEP_FRAC` of its size in one frame (``fast``), no newer result came for
:data:`~kiosk.capture.live_stats.AGE_PERIODS` result periods (``old``: the age limit follows the measured result interval
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

This module holds the records that cross threads (:class:`LiveAnchor`, :class:`LiveFrame`) and the
tracker's own logic: which track carries which face of a result, which faces are kept, what each
one shows. The ring, the points and their fit are :mod:`kiosk.capture.live_points`; the age limit
and the counters are :mod:`kiosk.capture.live_stats`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from kiosk.capture.geometry import apply_affine, compose, invert
from kiosk.capture.live_points import RING_MB, FrameRing, Track, prune_history, step
from kiosk.capture.live_stats import AgeLimit, LiveCounts
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5, SwappedFace, SwapResult

#: A face a newer result did not list (a missed detection) keeps its crop on its track for this
#: many results, as long as the track is trusted.
KEEP_MISSED_RESULTS = 2
#: A new result is brought forward this many frames per Lucas–Kanade step, or more when it
#: arrives so old that this would take more than :data:`CATCH_UP_STEPS` steps (a result 4 s old
#: at 30 fps took 60 steps, ~190 ms of the capture thread on a loaded CPU: a visible stall).
CATCH_UP_STRIDE = 2
CATCH_UP_STEPS = 30


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
    #: Why, one reason per such face (:data:`~kiosk.capture.live_stats.REAL_REASONS`).
    real_reasons: tuple[str, ...] = ()


def new_live_frame() -> LiveFrame:
    return LiveFrame(frame_bgr=np.zeros((1, 1, 3), np.uint8))


@dataclass(frozen=True)
class LiveOptions:
    track_px: int = 320
    #: A fixed age limit (s); 0: automatic, :data:`~kiosk.capture.live_stats.AGE_PERIODS` measured
    #: result periods.
    max_age_s: float = 0.0
    #: Most megabytes of grey images the frame ring holds (``display.live_ring_mb``).
    ring_mb: float = RING_MB


@dataclass(eq=False)
class _Carried:
    """One face of the current result and the track that carries it."""

    track: Track | None
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
    The ring, the points and the optical flow live in :mod:`kiosk.capture.live_points`; the age
    limit and the counters (:attr:`counts`) in :mod:`kiosk.capture.live_stats`.
    """

    def __init__(self, opts: LiveOptions | None = None) -> None:
        self.opts = opts or LiveOptions()
        self._ring = FrameRing(self.opts.track_px, self.opts.ring_mb)
        self._age = AgeLimit(self.opts.max_age_s)
        self._pending: LiveAnchor | None = None
        self._tracks: list[Track] = []
        self._carried: list[_Carried] = []
        #: Faces of earlier results still carried because the newest result did not list them.
        self._kept: list[_Carried] = []
        self._t_now = 0.0
        self.anchor: LiveAnchor | None = None
        self.transforms: list[NDArray[np.float64] | None] = []
        self._kept_transforms: list[NDArray[np.float64] | None] = []
        self.seq = -1
        #: Per face of the current frame: shown swapped ("") or the reason it is shown real.
        self.face_states: list[str] = []
        #: What it counted and timed (read by other threads only through LiveFeed.figures).
        self.counts = LiveCounts()

    def age_limit_s(self) -> float:
        """How old a carried swap may get before it shows the real face (:class:`AgeLimit`)."""
        return self._age.seconds()

    # -- per frame ---------------------------------------------------------------------------
    def submit(self, anchor: LiveAnchor) -> None:
        """A new result; it replaces the current one at the next :meth:`update`."""
        self._pending = anchor

    def update(self, frame_bgr: FrameBGR, seq: int, t_capture: float) -> None:
        t0 = time.perf_counter()
        grey, prev, gap = self._ring.add(frame_bgr, seq, t_capture)
        if gap:  # frames are not consecutive (reconnect, restart): nothing carries over
            for tr in self._tracks:
                tr.lost = tr.lost or "gap"
            self._tracks = []
        self.seq = seq
        if prev is not None and self._tracks:
            step(self._tracks, prev, grey, seq, self._ring.full)
            for tr in self._tracks:
                if tr.needs_points():
                    tr.reseed(grey, force=True)
        for tr in self._tracks:
            prune_history(tr.history, self._ring.oldest)
        self._t_now = t_capture
        pending, self._pending = self._pending, None
        if pending is not None:
            self._start(pending, grey)
        self._finish(t_capture)
        self.counts.track_ms.add((time.perf_counter() - t0) * 1e3)

    def _start(self, anchor: LiveAnchor, grey: NDArray[np.uint8]) -> None:
        self._measure_carry_error(anchor)
        if anchor.swapping and anchor.faces:
            self._age.arrived(anchor.t_capture, self._t_now)
            self._ring.keep_for(self._age.oldest_arrival_s())
        previous = [*self._carried, *self._kept]
        self.anchor = anchor
        self.counts.anchors_seen += 1
        s = self._ring.to_small()
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
                best.reseed(grey)
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
    def _near_a_new_face(track: Track, held: _Carried, anchor: LiveAnchor) -> bool:
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
        frames = self._ring.since(seq)
        if frames is None:  # the result's frame is older than the ring (or before a gap): they
            return  # stay without a track and are counted as "gap" when the frame is finished
        t0 = time.perf_counter()
        tracks = []
        for k, box, kps in newborn:
            tr = Track.start(frames[0][1], box, kps, frames[0][0])
            self.counts.tracks_born += 1
            carried[k] = _Carried(tr, tr.history[seq])
            tracks.append(tr)
        n = len(frames)
        # A few frames per step, but every one of the last two (where the next result will look).
        stride = max(CATCH_UP_STRIDE, -(-(n - 2) // CATCH_UP_STEPS))
        steps = sorted(set(range(0, n - 2, stride)) | {max(n - 2, 0), n - 1})
        for a, b in zip(steps, steps[1:], strict=False):
            step(tracks, frames[a][1], frames[b][1], frames[b][0], self._ring.full, frames=b - a)
            for tr in tracks:  # seconds of frames: points die on the way as they do live
                if tr.needs_points():
                    tr.reseed(frames[b][1], force=True)
        self.counts.catch_up_ms.add((time.perf_counter() - t0) * 1e3)

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
                    self.counts.dropped[reason] += 1
            if c.dropped or tr is None or c.c_at_anchor is None:
                states.append(c.dropped or "gap")
                out.append(None)
            else:
                states.append("")
                out.append(compose(self._ring.full(tr.c_small), invert(c.c_at_anchor)))
        n = len(self._carried)
        self.transforms = out[:n]
        self._kept_transforms = out[n:]
        self.face_states = states
        self.counts.frame(self.transforms, self._kept_transforms, states, fresh=anchor.seq == self.seq)

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
        stale = [f.kps for f in old.faces]
        self.counts.carry_error(carried, stale, [(f.kps, f.box_xyxy) for f in new.faces])

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

    def stats(self) -> dict[str, object]:
        """The counters and timings (:meth:`LiveCounts.stats`) with the current age limit and the
        frame ring's size (frames, seconds, megabytes of its budget)."""
        ring = self._ring
        return {
            **self.counts.stats(self.age_limit_s()),
            "ring_frames": ring.frames,
            "ring_s": round(ring.seconds(), 2),
            "ring_mb": round(ring.nbytes / 2**20, 2),
            "ring_budget_mb": round(ring.budget_bytes / 2**20, 2),
        }
