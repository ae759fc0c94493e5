"""``display.mode: auto`` and the share of the screen that shows the swap.

:class:`AutoMode` picks the picture for ``auto``: ``synced`` (the frame the faces were computed on:
no carrying error) while processing keeps up with the camera, ``live`` (the newest camera frame,
the swap carried onto it) when it falls behind. The ratio of the two rates over the last second
decides, with hysteresis in level (back to synced only at :attr:`AutoMode.keep_up`, to live below
:attr:`AutoMode.fall_behind`), in time (the condition must hold :attr:`AutoMode.settle_s`) and a
least stay in each mode (:attr:`AutoMode.dwell_s`): it never flickers between the two.

:class:`ScreenShare` counts, per rendered frame and per mode on screen, the faces shown swapped
(fresh or carried) and the faces shown as the visitor's real face, by reason: what the visitor
sees, not what the stages computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODES = ("synced", "live")


@dataclass
class AutoMode:
    """The mode ``auto`` shows; :meth:`update` once per rendered frame (one thread: the render loop)."""

    #: Processing / capture rate at or above which processing keeps up (back to synced).
    keep_up: float = 0.9
    #: ... below which it has fallen behind (live).
    fall_behind: float = 0.7
    #: How long the condition must hold before the mode changes (s).
    settle_s: float = 1.5
    #: Least time in a mode after a change (s).
    dwell_s: float = 5.0
    #: Live first: until processing has shown that it keeps up, the picture is the camera's own.
    mode: str = "live"
    switches: int = 0
    _since: float = field(default=-1.0, repr=False)  # when the condition for a change began
    _changed: float = field(default=-1e9, repr=False)  # when the mode last changed

    def update(self, now: float, capture_fps: float, processing_fps: float) -> str:
        """The mode to show at ``now`` given the rates over the last second."""
        if capture_fps < 1.0:  # no camera rate yet (starting, reconnecting): keep the mode
            self._since = -1.0
            return self.mode
        ratio = processing_fps / capture_fps
        want = self.mode
        if self.mode == "live" and ratio >= self.keep_up:
            want = "synced"
        elif self.mode == "synced" and ratio < self.fall_behind:
            want = "live"
        if want == self.mode:
            self._since = -1.0
            return self.mode
        if self._since < 0:
            self._since = now
        if now - self._since >= self.settle_s and now - self._changed >= self.dwell_s:
            self.mode = want
            self.switches += 1
            self._changed = now
            self._since = -1.0
        return self.mode


@dataclass
class _ModeShare:
    frames: int = 0
    swapped: int = 0
    fresh: int = 0
    real: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        real = sum(self.real.values())
        total = self.swapped + real
        return {
            "rendered_frames": self.frames,
            "faces_swapped_frames": self.swapped,
            "faces_fresh_frames": self.fresh,
            "faces_carried_frames": self.swapped - self.fresh,
            "faces_real_frames": real,
            "faces_real_by_reason": dict(sorted(self.real.items())),
            "swapped_pct": round(100.0 * self.swapped / total, 2) if total else None,
        }


class ScreenShare:
    """Face × rendered frame shown swapped vs real, per mode on screen (one writer: the render loop)."""

    def __init__(self) -> None:
        self._modes = {m: _ModeShare() for m in MODES}
        self.active = ""  # the mode of the last frame counted

    def add(self, mode: str, swapped: int, fresh: int, real_reasons: tuple[str, ...]) -> None:
        """One rendered frame in ``mode``: ``swapped`` faces swapped (``fresh`` of them on the
        result's own frame), one real face per entry of ``real_reasons`` (why)."""
        m = self._modes[mode]
        self.active = mode
        m.frames += 1
        m.swapped += swapped
        m.fresh += fresh
        for why in real_reasons:
            m.real[why] = m.real.get(why, 0) + 1

    def swapped_pct(self, mode: str | None = None) -> float | None:
        """Share (%) of face × frame shown swapped, in ``mode`` or over both."""
        modes = [self._modes[mode]] if mode else list(self._modes.values())
        swapped = sum(m.swapped for m in modes)
        total = swapped + sum(sum(m.real.values()) for m in modes)
        return 100.0 * swapped / total if total else None

    def as_dict(self) -> dict[str, Any]:
        pct = self.swapped_pct()
        return {
            **{m: s.as_dict() for m, s in self._modes.items()},
            "swapped_pct": round(pct, 2) if pct is not None else None,
        }
