"""What the booth UI shows (:class:`BoothView`) and its layout as pure functions (no GL in here).

The booth layer (:mod:`kiosk.render.booth_layer`) draws, over the camera picture:

- a carousel of face thumbnails along the bottom, the selected one larger, outlined and named,
  the others dimmed; when there are more faces than fit, the row becomes a ring that scrolls to
  keep the selected face centred. On a switch the row animates for :data:`TRANSITION_S` (ease-out)
  from wherever it was towards the new selection;
- a slim disclosure banner at the top;
- the attract screen (darkened picture, big title and instructions, the cycling face large);
- a small "swap off" badge.

Everything is laid out in logical pixels (the upright screen the visitor sees) and sized from
the smaller side, like the text overlay, so landscape and portrait screens look alike.

The carousel is a function of one continuous number, the *position*: the (fractional) index at
the centre of attention. A settled carousel has ``position == selected``; a transition moves the
position, and tile places, sizes and emphasis all follow from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: Length of the carousel / attract animation after a switch, in seconds.
TRANSITION_S = 0.25
#: The selected tile is this many times the size of the others.
SELECTED_SCALE = 1.32
#: Tile side = smaller logical side × this × text_scale (clamped to the screen width).
TILE_FRACTION = 0.105
#: Gap between tiles, as a fraction of the tile side.
GAP_FRACTION = 0.26


@dataclass(frozen=True)
class FaceThumb:
    """One face of the library as the booth shows it."""

    #: Identifies the thumbnail (e.g. file path + content hash): its texture is re-uploaded only
    #: when the set of keys changes.
    key: str
    #: Display name, e.g. "Ada".
    name: str
    #: (S, S, 3) uint8 BGR, e.g. 128x128 (non-square images are centre-cropped); or None, and
    #: ``load`` gives it when the atlas packs it (a library entry holds its thumbnail as a JPEG).
    thumb_bgr: NDArray[np.uint8] | None = None
    load: Callable[[], NDArray[np.uint8]] | None = field(default=None, compare=False)

    def pixels(self) -> NDArray[np.uint8]:
        """The thumbnail's pixels."""
        if self.thumb_bgr is not None:
            return self.thumb_bgr
        if self.load is None:
            raise ValueError(f"face {self.key!r} has no thumbnail")
        return self.load()


@dataclass(frozen=True)
class BoothView:
    """The booth UI state for one frame, frozen (the booth session, :mod:`kiosk.booth.session`,
    builds one per frame from its controls, library snapshot and config)."""

    faces: Sequence[FaceThumb]
    selected: int
    #: time.monotonic() of the last face switch; drives the carousel transition.
    t_switched: float
    show_carousel: bool = True
    #: Disclosure banner text at the top, e.g. "Live AI face swap. Nothing is recorded."; "" hides it.
    banner: str = ""
    #: Attract screen: the picture darkened, big instructions, the faces cycling.
    attract: bool = False
    attract_title: str = "Step in front of the camera"
    attract_lines: Sequence[str] = ()
    #: Which face the attract screen shows now (the caller cycles it; taken modulo len(faces)).
    attract_index: int = 0
    #: When False a small "swap off" badge is shown.
    swap_enabled: bool = True
    #: Staff view: face library problems, config errors; drawn in the debug block when it is on.
    warnings: Sequence[str] = ()
    #: How many visitors wear each face now, by face index (``processing.assign: per_visitor``):
    #: those tiles are not dimmed and carry one dot per visitor. Empty: only the selection shows.
    on_screen: Mapping[int, int] = field(default_factory=dict)


# -- time ------------------------------------------------------------------------------------------


def ease_out(t: float) -> float:
    """Cubic ease-out on [0, 1]: fast start, gentle stop (clamped outside)."""
    t = min(max(t, 0.0), 1.0)
    return 1.0 - (1.0 - t) ** 3


def transition_progress(now: float, t_start: float, duration: float = TRANSITION_S) -> float:
    """Eased progress in [0, 1] of a transition that started at ``t_start`` (0 before it, 1 after)."""
    if duration <= 0:
        return 1.0
    return ease_out((now - t_start) / duration)


def interpolate(
    start: float, end: float, now: float, t_start: float, duration: float = TRANSITION_S
) -> float:
    """The animated value between ``start`` and ``end`` at ``now`` (ease-out over ``duration``)."""
    return start + (end - start) * transition_progress(now, t_start, duration)


# -- carousel --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CarouselMetrics:
    """Carousel sizes in logical pixels for one screen."""

    tile: float  # side of an unselected tile
    gap: float  # between neighbouring unselected tiles
    scale: float  # selected tile side / tile
    margin: float  # kept free at the left and right screen edges

    @property
    def slot(self) -> float:
        return self.tile + self.gap

    @property
    def push(self) -> float:
        """How far the selected tile's growth pushes its neighbours aside."""
        return (self.scale - 1.0) * self.tile / 2.0

    def capacity(self, width: float) -> int:
        """How many tiles fit side by side (with the selected one grown) in ``width``."""
        room = width - 2 * self.margin - 2 * self.push + self.gap
        return max(1, int(room // self.slot))


def carousel_metrics(logical_size: tuple[int, int], text_scale: float = 1.0) -> CarouselMetrics:
    width, height = logical_size
    unit = min(width, height)
    tile = max(24.0, round(unit * TILE_FRACTION * min(max(text_scale, 0.5), 2.0)))
    tile = min(tile, width / 4.0)
    return CarouselMetrics(
        tile=tile, gap=round(tile * GAP_FRACTION), scale=SELECTED_SCALE, margin=round(unit / 40.0)
    )


@dataclass(frozen=True)
class Tile:
    """One thumbnail on screen."""

    index: int  # which face
    cx: float  # centre, logical pixels
    size: float  # side, logical pixels
    emphasis: float  # 1 for the selected tile, falling to 0 one slot away
    alpha: float  # 1, fading to 0 at the ends of a scrolling ring


def carousel_scrolls(n: int, width: float, m: CarouselMetrics) -> bool:
    """True when ``n`` faces do not fit side by side and the row scrolls (a ring)."""
    return n > m.capacity(width)


def carousel_tiles(n: int, position: float, width: float, m: CarouselMetrics) -> list[Tile]:
    """Tiles for ``n`` faces with the centre of attention at ``position``, left to right.

    When all fit, the row is centred and still and only the emphasis moves; otherwise the row
    is a ring scrolled so that ``position`` is at the screen centre (tiles fade out at its ends).
    """
    if n <= 0:
        return []
    centre = width / 2.0
    tiles: list[Tile] = []

    def tile_at(index: int, offset_slots: float, d: float, alpha: float) -> Tile:
        emphasis = max(0.0, 1.0 - abs(d))
        cx = centre + offset_slots * m.slot + m.push * max(-1.0, min(1.0, d))
        return Tile(index, cx, m.tile * (1.0 + (m.scale - 1.0) * emphasis), emphasis, alpha)

    if not carousel_scrolls(n, width, m):
        for i in range(n):
            tiles.append(tile_at(i, i - (n - 1) / 2.0, i - position, 1.0))
        return tiles
    half = (m.capacity(width) - 1) // 2  # whole tiles each side of the centre
    for j in range(math.floor(position) - half - 1, math.ceil(position) + half + 2):
        d = j - position
        alpha = max(0.0, min(1.0, (half + 1.0 - abs(d)) / 1.5))  # the outermost tiles fade
        if alpha > 0.0:
            tiles.append(tile_at(j % n, d, d, alpha))
    return tiles


def shortest_start(start: float, target: int, n: int, ring: bool) -> float:
    """``start`` moved by whole turns of an ``n`` ring so the way to ``target`` is shortest."""
    if not ring or n <= 0:
        return start
    return target + ((start - target + n / 2.0) % n) - n / 2.0


class CarouselMotion:
    """Remembers where the carousel was so a switch animates from there (also mid-transition)."""

    def __init__(self) -> None:
        self._start = 0.0
        self._target: int | None = None
        self._t_start = 0.0
        self._n = 0

    def position(self, selected: int, t_switched: float, n: int, ring: bool, now: float) -> float:
        """The carousel position at ``now`` for the current selection."""
        if n <= 0:
            self._target = None
            return 0.0
        selected %= n
        if self._target is None or n != self._n:
            self._start, self._target, self._t_start, self._n = float(selected), selected, t_switched, n
        elif selected != self._target or t_switched != self._t_start:
            current = self._current(now)
            if ring:
                current %= n
            self._start = shortest_start(current, selected, n, ring)
            self._target, self._t_start = selected, t_switched
        return self._current(now)

    def _current(self, now: float) -> float:
        assert self._target is not None
        return interpolate(self._start, float(self._target), now, self._t_start)
