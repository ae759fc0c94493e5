"""The demo's "visitor" (``source.kind: demo``): a public-domain portrait that walks into a drawn
room, looks about a little and leaves, over and over, so ``kiosk run --demo`` shows a face being
swapped (and, while the room is empty, the attract screen) with no camera and nothing downloaded.

The portrait is the NASA photo of astronaut Eileen Collins shipped in ``kiosk/data/demo/`` (see
its PROVENANCE.md). Each frame: the room (drawn once), the portrait cut out with a soft oval and
warped by one perspective transform that walks it across the frame, bobs it with the steps, turns
it a little about its vertical axis (a yaw of up to ±18°, the far side foreshortened) and tilts it
(a roll of a few degrees). One cycle of :data:`CYCLE_S` seconds:

======== =================================================
0–1.6 s  walks in from the right
1.6–8 s  stands, turns left and right, tilts the head
8–9.6 s  walks out to the left
9.6–14 s the room is empty
======== =================================================

Times come from the frame count (``n / fps``), so the motion is the same at any processing speed
and a test can ask for the frame at a given time (:meth:`DemoVisitorSource.frame_at`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.capture.errors import SourceError
from kiosk.paths import package_file
from kiosk.types import FrameBGR

__all__ = ["CYCLE_S", "DemoVisitorSource", "visitor_photo_path", "source_face_path"]

CYCLE_S = 14.0
#: Where in the cycle the first frame is: the visitor is already stepping in.
START_S = 0.7
_ENTER_S, _LEAVE_S, _GONE_S = 1.6, 8.0, 9.6


def visitor_photo_path() -> Path:
    """The bundled visitor portrait (public domain, NASA)."""
    return package_file("data", "demo", "visitor_eileen_collins_nasa.jpg")


def source_face_path() -> Path:
    """The bundled face swapped onto the visitor (public domain, U.S. Congress 1961)."""
    return package_file("data", "demo", "source_face_fred_marshall_1961.jpg")


def _smooth(t: float) -> float:
    t = min(max(t, 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


def _room(width: int, height: int) -> FrameBGR:
    """A warm, softly lit room: a wall gradient, a floor and a few blurred lights."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = xx / width, yy / height
    bgr = np.stack([96 + 40 * (1 - u) + 20 * v, 84 + 30 * v, 70 + 70 * u + 30 * v], axis=2)
    floor = v > 0.78
    bgr[floor] = bgr[floor] * 0.55 + np.array([40, 50, 62], np.float32) * 0.45
    # The lights are drawn and blurred at 1/8 size (they are soft anyway), then scaled up.
    sw, sh = max(width // 8, 8), max(height // 8, 8)
    lights = np.zeros((sh, sw, 3), np.float32)
    rng = np.random.default_rng(7)
    for _ in range(9):
        cx, cy = rng.uniform(0, sw), rng.uniform(0, sh * 0.5)
        r = rng.uniform(0.03, 0.07) * sw
        colour = rng.uniform(90, 190, 3)
        cv2.circle(lights, (int(cx), int(cy)), max(int(r), 1), colour.tolist(), -1, cv2.LINE_AA)
    soft = cv2.resize(
        cv2.GaussianBlur(lights, (0, 0), sw / 50), (width, height), interpolation=cv2.INTER_LINEAR
    )
    return np.clip(bgr + np.asarray(soft, np.float32) * 0.5, 0, 255).astype(np.uint8)


class DemoVisitorSource:
    """A :class:`~kiosk.capture.sources.Source` of the moving demo visitor, paced at ``fps``."""

    def __init__(
        self, width: int, height: int, fps: float, photo: Path | None = None, start_s: float = START_S
    ) -> None:
        self.size = (int(width), int(height))
        self.fps = float(fps)
        self.photo = photo or visitor_photo_path()
        self.description = f"demo visitor {width}x{height}@{fps:g}"
        self._period = 1.0 / self.fps if self.fps > 0 else 0.0
        self._next = 0.0
        self._n = 0
        self.start_s = float(start_s)
        self._room: FrameBGR | None = None
        self._bgra: NDArray[np.uint8] | None = None  # the portrait and its soft oval as alpha

    def open(self) -> None:

        image = cv2.imread(str(self.photo), cv2.IMREAD_COLOR)
        if image is None:
            raise SourceError(f"{self.photo}: demo visitor photo missing or unreadable (reinstall the kiosk)")
        h, w = image.shape[:2]
        # A soft oval around head and shoulders (the photo's subject fills its left two thirds).
        alpha = np.zeros((h, w), np.uint8)
        cv2.ellipse(alpha, (int(w * 0.42), int(h * 0.52)), (int(w * 0.34), int(h * 0.50)), 0, 0, 360, 255, -1)
        alpha = cv2.GaussianBlur(alpha, (0, 0), w * 0.03)
        self._bgra = np.ascontiguousarray(np.dstack([image, alpha]))
        self._room = _room(*self.size)
        self._n = 0
        self._next = 0.0

    def pose(self, t: float) -> tuple[float, float, float, float, float] | None:
        """(centre x, centre y, height in px, yaw°, roll°) of the portrait at ``t`` s, or None
        while the room is empty."""
        w, h = self.size
        t %= CYCLE_S
        if t >= _GONE_S:
            return None
        stand_x = w * 0.6  # right of centre: the debug overlay sits top left
        if t < _ENTER_S:
            x = w * 1.25 + (stand_x - w * 1.25) * _smooth(t / _ENTER_S)
        elif t < _LEAVE_S:
            x = stand_x + w * 0.04 * math.sin((t - _ENTER_S) * 0.9)
        else:
            x = stand_x + (-w * 0.25 - stand_x) * _smooth((t - _LEAVE_S) / (_GONE_S - _LEAVE_S))
        walking = t < _ENTER_S or t >= _LEAVE_S
        bob = abs(math.sin(t * math.pi * 2.2)) * h * 0.02 if walking else 0.0
        y = h * 0.54 - bob
        height = h * 0.72
        standing = min(max((t - _ENTER_S) / (_LEAVE_S - _ENTER_S), 0.0), 1.0)
        yaw = 18.0 * math.sin(standing * 2.0 * math.pi) if not walking else (-8.0 if t < _ENTER_S else 8.0)
        roll = 5.0 * math.sin(standing * 3.0 * math.pi) if not walking else 2.0 * math.sin(t * 4.4)
        return x, y, height, yaw, roll

    def _homography(self, pose: tuple[float, float, float, float, float]) -> NDArray[np.float64]:
        """Portrait pixels → frame pixels for ``pose``: a card turned by the yaw about its vertical
        axis (seen in perspective), tilted by the roll, scaled to the height, placed at the centre."""
        assert self._bgra is not None
        ph, pw = self._bgra.shape[:2]
        cx, cy, height, yaw, roll = pose
        s = height / ph
        yaw_r, roll_r = math.radians(yaw), math.radians(roll)
        f = 2.5 * pw  # a long lens: a gentle perspective
        pts = []
        for x0, y0 in ((0, 0), (pw, 0), (pw, ph), (0, ph)):
            X, Y = x0 - pw / 2, y0 - ph / 2
            xr, zr = X * math.cos(yaw_r), X * math.sin(yaw_r)
            k = f / (f + zr)
            xp, yp = xr * k, Y * k
            xq = xp * math.cos(roll_r) - yp * math.sin(roll_r)
            yq = xp * math.sin(roll_r) + yp * math.cos(roll_r)
            pts.append((cx + s * xq, cy + s * yq))
        src = np.array([[0, 0], [pw, 0], [pw, ph], [0, ph]], np.float32)
        return np.asarray(cv2.getPerspectiveTransform(src, np.array(pts, np.float32)), np.float64)

    def frame_at(self, t: float, out: FrameBGR | None = None) -> FrameBGR:
        """The frame at ``t`` seconds into the cycle (into ``out`` when its shape fits)."""
        if self._room is None or self._bgra is None:
            raise SourceError("demo visitor source not open")
        w, h = self.size
        frame = out if out is not None and out.shape == self._room.shape else np.empty_like(self._room)
        np.copyto(frame, self._room)
        pose = self.pose(t)
        if pose is None:
            return frame
        m = self._homography(pose)
        # Only the portrait's bounding box in the frame is warped and blended.
        ph, pw = self._bgra.shape[:2]
        corners = cv2.perspectiveTransform(np.array([[[0, 0], [pw, 0], [pw, ph], [0, ph]]], np.float32), m)[0]
        x0, y0 = np.floor(corners.min(axis=0)).astype(int)
        x1, y1 = np.ceil(corners.max(axis=0)).astype(int)
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
        if x1 <= x0 or y1 <= y0:
            return frame
        shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], np.float64)
        warped = cv2.warpPerspective(
            self._bgra, shift @ m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderValue=(0, 0, 0, 0)
        )
        roi = frame[y0:y1, x0:x1]
        a = warped[:, :, 3].astype(np.float32) * np.float32(1.0 / 255.0)
        roi[:] = cv2.blendLinear(np.ascontiguousarray(warped[:, :, :3]), roi, a, 1.0 - a)
        return frame

    def read(self, out: FrameBGR | None) -> FrameBGR:
        if self._period:
            now = time.perf_counter()
            if self._next == 0.0 or now - self._next > 0.25:
                self._next = now
            if self._next > now:
                time.sleep(self._next - now)
            self._next += self._period
        frame = self.frame_at(self.start_s + (self._n / self.fps if self.fps > 0 else 0.0), out)
        self._n += 1
        return frame

    def close(self) -> None:
        self._room = None
        self._bgra = None
