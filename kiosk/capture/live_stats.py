"""What the live tracker (:class:`~kiosk.capture.live.LiveTracker`) measures, in the capture thread.

- :class:`AgeLimit`: the age results arrive with and the interval between them, and from those the
  age past which a carried swap shows the visitor's real face (``old``);
- :class:`LiveCounts`: each face × frame by what it showed (swapped fresh, carried or kept; real by
  reason), each drop to the real face by reason, the tracker's timings, and the carry error measured
  while running (a previous result's faces carried to a new result's frame, against the new
  detection there, next to what the stale keypoints would give); :meth:`LiveCounts.stats` is the
  dictionary of the stats and the metrics.

Both are the capture thread's; other threads read the figures only from the snapshot
:attr:`kiosk.capture.live_feed.LiveFeed.figures`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from kiosk.stats import LatencyRecorder

#: The automatic age limit: the age results arrive with plus this many result periods (both the
#: median of the last :data:`AGE_WINDOW` results); before the second result, the arrival age
#: stands in for the period.
AGE_PERIODS = 4.0
AGE_WINDOW = 8
#: ... and never below this (a fast stage's limit would otherwise fall to a fraction of a second).
AGE_MIN_S = 2.0
DROP_REASONS = ("track", "fast", "old", "gap")
#: Why a face × frame shows the visitor's real face (counted per face × frame).
REAL_REASONS = DROP_REASONS


class AgeLimit:
    """How old a carried swap may get: ``max_age_s`` when > 0, else measured (:meth:`seconds`)."""

    def __init__(self, max_age_s: float = 0.0) -> None:
        self.max_age_s = max_age_s
        self._arrival_s: deque[float] = deque(maxlen=AGE_WINDOW)
        self._interval_s: deque[float] = deque(maxlen=AGE_WINDOW)
        self._t_last = 0.0

    def arrived(self, t_capture: float, now: float) -> None:
        """A result that swapped faces, computed on a frame captured at ``t_capture``, arrived at
        ``now`` (the capture time of the frame it arrived with)."""
        self._arrival_s.append(max(now - t_capture, 0.0))
        if self._t_last:
            self._interval_s.append(max(now - self._t_last, 0.0))
        self._t_last = now

    def oldest_arrival_s(self) -> float:
        """The oldest age any of the last :data:`AGE_WINDOW` results arrived with (0 before one)."""
        return max(self._arrival_s, default=0.0)

    def seconds(self) -> float:
        """``max_age_s`` when set, else the age results arrive with plus :data:`AGE_PERIODS` result
        periods (medians), at least :data:`AGE_MIN_S`; infinite before the first result."""
        if self.max_age_s > 0:
            return self.max_age_s
        if not self._arrival_s:
            return float("inf")
        arrival = float(np.median(self._arrival_s))
        period = float(np.median(self._interval_s)) if self._interval_s else arrival
        return max(AGE_MIN_S, arrival + AGE_PERIODS * period)


class LiveCounts:
    """The live tracker's counters and timings (written by the capture thread only)."""

    def __init__(self) -> None:
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.anchors_seen = 0
        self.tracks_born = 0
        self.faces_carried = 0  # face × frame shown swapped (carried onto a newer frame, or fresh)
        self.faces_fresh = 0  # of which on the result's own frame
        self.faces_untrusted = 0  # face × frame shown as the real face
        self.real_frames = dict.fromkeys(REAL_REASONS, 0)  # ... by reason
        self.faces_kept = 0  # face × frame shown from an earlier result the newest one missed
        self.track_ms = LatencyRecorder(1024)
        self.catch_up_ms = LatencyRecorder(256)
        self.carry_error_px = LatencyRecorder(1024)
        self.stale_error_px = LatencyRecorder(1024)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def frame(
        self,
        current: Sequence[NDArray[np.float64] | None],
        kept: Sequence[NDArray[np.float64] | None],
        states: Sequence[str],
        fresh: bool,
    ) -> None:
        """Count one frame's faces: per face of the newest result (``current``) and kept from
        earlier ones (``kept``), its transform onto the frame or None where it shows the real face
        (for the reason in ``states``, "" for a swapped one); ``fresh``: the result's own frame."""
        shown = sum(t is not None for t in current) + sum(t is not None for t in kept)
        self.faces_carried += shown
        self.faces_kept += sum(t is not None for t in kept)
        if fresh:
            self.faces_fresh += sum(t is not None for t in current)
        self.faces_untrusted += len(current) + len(kept) - shown
        for why in states:
            if why:
                self.real_frames[why] += 1

    def carry_error(
        self,
        carried: Sequence[NDArray[np.float64] | None],
        stale: Sequence[NDArray[np.floating]],
        detected: Sequence[tuple[NDArray[np.floating], NDArray[np.floating]]],
    ) -> None:
        """Per face of a new result (``detected``: its keypoints and box), the nearest face of the
        previous result carried to the new result's frame (``carried``: its keypoints there, None
        where no track carried it) against the detection, and that face's ``stale`` keypoints."""
        for kps, box in detected:
            width = float(box[2] - box[0])
            centre = kps.mean(axis=0)
            dists = [np.inf if c is None else float(np.linalg.norm(c.mean(axis=0) - centre)) for c in carried]
            if not dists:
                continue
            j = int(np.argmin(dists))
            pos = carried[j]
            if pos is None or dists[j] > 0.5 * width:  # no track then, or another person
                continue
            self.carry_error_px.add(float(np.linalg.norm(pos - kps, axis=1).mean()))
            self.stale_error_px.add(float(np.linalg.norm(stale[j] - kps, axis=1).mean()))

    def swapped_share(self) -> float | None:
        """Share of face × frame shown swapped since the start (None before any face)."""
        total = self.faces_carried + self.faces_untrusted
        return self.faces_carried / total if total else None

    def stats(self, age_limit_s: float) -> dict[str, object]:
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
            "age_limit_s": r(age_limit_s) if age_limit_s != float("inf") else None,
            "carry_error_px_p50": r(self.carry_error_px.percentile(50)),
            "carry_error_px_p95": r(self.carry_error_px.percentile(95)),
            "stale_error_px_p50": r(self.stale_error_px.percentile(50)),
            "stale_error_px_p95": r(self.stale_error_px.percentile(95)),
            "carry_error_samples": self.carry_error_px.count,
            "track_ms_p50": r(self.track_ms.percentile(50)),
            "track_ms_p95": r(self.track_ms.percentile(95)),
            "catch_up_ms_p50": r(self.catch_up_ms.percentile(50)),
        }
