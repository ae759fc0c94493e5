"""Booth UI layout and animation as pure functions (no GL): easing, carousel tiles, motion, atlas,
the booth's instance rows."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from kiosk.render.booth_attract import ATTRACT_FADE_S, AttractFade
from kiosk.render.booth_layout import lay_out_booth
from kiosk.render.booth_ui import (
    TRANSITION_S,
    BoothView,
    CarouselMotion,
    FaceThumb,
    carousel_metrics,
    carousel_scrolls,
    carousel_tiles,
    ease_out,
    interpolate,
    shortest_start,
    transition_progress,
)
from kiosk.render.font_atlas import FontAtlas
from kiosk.render.overlay import text_sizes
from kiosk.render.thumb_atlas import build_thumb_atlas, square_thumb
from kiosk.render.ui_quads import MODE_GRADIENT, MODE_THUMB, UI_FLOATS, UiFrame


def test_ease_out_is_monotonic_and_front_loaded() -> None:
    ts = np.linspace(0, 1, 101)
    values = [ease_out(float(t)) for t in ts]
    assert values[0] == 0.0 and values[-1] == 1.0
    assert all(b >= a for a, b in zip(values, values[1:], strict=False))
    assert ease_out(0.5) > 0.8, "ease-out covers most of the way early"
    assert ease_out(-1.0) == 0.0 and ease_out(2.0) == 1.0


def test_transition_progress_and_interpolate() -> None:
    t0 = 50.0
    assert transition_progress(t0 - 1, t0) == 0.0
    assert transition_progress(t0, t0) == 0.0
    assert 0.0 < transition_progress(t0 + TRANSITION_S / 2, t0) < 1.0
    assert transition_progress(t0 + TRANSITION_S, t0) == 1.0
    assert transition_progress(t0 + 10, t0) == 1.0
    assert transition_progress(t0, t0, duration=0.0) == 1.0
    assert 0.2 <= TRANSITION_S <= 0.3
    half = interpolate(2.0, 4.0, t0 + TRANSITION_S / 2, t0)
    assert half == pytest.approx(2.0 + 2.0 * ease_out(0.5))
    assert interpolate(2.0, 4.0, t0 + 1, t0) == 4.0


LANDSCAPE, PORTRAIT = (1920, 1080), (1080, 1920)


@pytest.mark.parametrize("size", [LANDSCAPE, PORTRAIT])
def test_settled_carousel_fits_is_centred_and_emphasises_the_selection(size: tuple[int, int]) -> None:
    m = carousel_metrics(size)
    assert not carousel_scrolls(6, size[0], m)
    tiles = carousel_tiles(6, 2.0, size[0], m)
    assert [t.index for t in tiles] == list(range(6))
    sizes = [t.size for t in tiles]
    assert sizes[2] == pytest.approx(m.tile * m.scale) and max(sizes) == sizes[2]
    assert all(s == pytest.approx(m.tile) for i, s in enumerate(sizes) if i != 2)
    assert tiles[2].emphasis == 1.0 and all(t.emphasis == 0.0 for t in tiles if t.index != 2)
    for a, b in zip(tiles, tiles[1:], strict=False):  # in order, never overlapping
        assert b.cx - b.size / 2 > a.cx + a.size / 2
    assert tiles[0].cx - tiles[0].size / 2 >= m.margin
    assert tiles[-1].cx + tiles[-1].size / 2 <= size[0] - m.margin
    # the row is centred (up to the push of the grown tile)
    mid = (tiles[0].cx + tiles[-1].cx) / 2
    assert abs(mid - size[0] / 2) <= m.push


def test_mid_transition_shares_the_emphasis() -> None:
    m = carousel_metrics(LANDSCAPE)
    tiles = carousel_tiles(6, 1.5, LANDSCAPE[0], m)
    assert tiles[1].size == pytest.approx(tiles[2].size)
    assert m.tile < tiles[1].size < m.tile * m.scale
    assert tiles[1].emphasis == pytest.approx(0.5)


@pytest.mark.parametrize("size", [LANDSCAPE, PORTRAIT])
def test_too_many_faces_scroll_as_a_ring_keeping_the_selection_centred(size: tuple[int, int]) -> None:
    width = size[0]
    m = carousel_metrics(size)
    n = 30
    assert carousel_scrolls(n, width, m)
    for position in (0.0, 7.0, 29.0, 12.4):
        tiles = carousel_tiles(n, position, width, m)
        visible = [t for t in tiles if t.alpha > 0]
        assert len({t.index for t in visible}) == len(visible), "no face twice"
        for t in visible:
            assert -t.size / 2 < t.cx < width + t.size / 2
        if position == int(position):
            centre = next(t for t in tiles if t.emphasis == 1.0)
            assert centre.index == int(position) % n and centre.cx == pytest.approx(width / 2)
            assert centre.alpha == 1.0
            for t in visible:  # fully visible tiles lie inside the screen
                if t.alpha == 1.0:
                    assert t.size / 2 <= t.cx <= width - t.size / 2
    # wrapping: position 29 shows face 0 to the right of face 29
    tiles = carousel_tiles(n, 29.0, width, m)
    right = min((t for t in tiles if t.cx > width / 2), key=lambda t: t.cx)
    assert right.index == 0


def test_carousel_motion_animates_from_where_it_was() -> None:
    motion = CarouselMotion()
    assert motion.position(1, 0.0, 6, False, now=10.0) == 1.0  # first frame: settled
    t0 = 20.0
    assert motion.position(2, t0, 6, False, now=t0) == pytest.approx(1.0)
    mid = motion.position(2, t0, 6, False, now=t0 + TRANSITION_S / 2)
    assert 1.0 < mid < 2.0
    # a second switch mid-transition starts from the current position, not from a tile
    t1 = t0 + TRANSITION_S / 2
    assert motion.position(3, t1, 6, False, now=t1) == pytest.approx(mid)
    assert motion.position(3, t1, 6, False, now=t1 + TRANSITION_S) == 3.0


def test_ring_wraps_the_short_way() -> None:
    assert shortest_start(29.0, 0, 30, ring=True) == pytest.approx(-1.0)
    assert shortest_start(0.0, 29, 30, ring=True) == pytest.approx(30.0)
    assert shortest_start(5.0, 0, 6, ring=False) == 5.0
    motion = CarouselMotion()
    motion.position(29, 0.0, 30, True, now=1.0)
    t0 = 5.0
    mid = motion.position(0, t0, 30, True, now=t0 + TRANSITION_S / 2)
    assert -1.0 < mid < 0.0, "29 → 0 moves one step right, not 29 steps left"


def test_thumb_atlas_packs_square_cells_with_uvs() -> None:
    thumbs = [np.full((128, 128, 3), (i * 40, 10, 200), np.uint8) for i in range(5)]
    thumbs.append(np.zeros((100, 160, 3), np.uint8))  # non-square: centre-cropped
    atlas, uvs = build_thumb_atlas(thumbs)
    assert uvs.shape == (6, 4) and atlas.dtype == np.uint8 and atlas.shape[2] == 3
    h, w = atlas.shape[:2]
    for i, (u0, v0, u1, v1) in enumerate(uvs[:5]):
        x0, y0, x1, y1 = round(u0 * w), round(v0 * h), round(u1 * w), round(v1 * h)
        assert x1 - x0 == y1 - y0 == 128
        assert np.all(atlas[y0:y1, x0:x1] == thumbs[i][0, 0])
        assert np.all(atlas[y0 - 2 : y0, x0:x1] == thumbs[i][0, 0]), "replicated gutter"
    assert square_thumb(thumbs[-1], 64).shape == (64, 64, 3)
    with pytest.raises(ValueError, match="uint8 BGR"):
        square_thumb(np.zeros((8, 8), np.uint8), 8)
    empty, no_uv = build_thumb_atlas([])
    assert no_uv.shape == (0, 4) and empty.shape == (1, 1, 3)


# -- the booth layout: instance rows without GL ---------------------------------------------------

_FONTS: dict[int, FontAtlas] = {}


def _font(size_px: int) -> FontAtlas:
    if size_px not in _FONTS:
        _FONTS[size_px] = FontAtlas(size_px)
    return _FONTS[size_px]


def _faces(n: int) -> list[FaceThumb]:
    return [FaceThumb(f"k{i}", f"face {i}", np.zeros((8, 8, 3), np.uint8)) for i in range(n)]


def _lay_out(view: BoothView, size: tuple[int, int] = (640, 360), fade: float = 1.0) -> UiFrame:
    def uv(i: int) -> tuple[float, float, float, float]:
        return (i / 10, 0.0, (i + 1) / 10, 1.0)

    return lay_out_booth(
        view, size, float(view.selected), fade, status_shown=False, fonts=_font, text_scale=1.0, uv=uv
    )


def _mode(rows: NDArray[np.float32], mode: float) -> NDArray[np.float32]:
    return rows[rows[:, 18] == mode]


def test_the_booth_layout_is_rows_of_banner_badge_and_carousel_without_gl() -> None:
    frame = _lay_out(BoothView(_faces(3), selected=1, t_switched=0.0, banner="Live AI face swap"))
    rows = np.concatenate(frame.shapes)
    assert rows.shape[1] == UI_FLOATS
    thumbs = _mode(rows, MODE_THUMB)
    assert len(thumbs) == 3  # one thumbnail per face, each sampling its own part of the atlas
    assert sorted(float(u) for u in thumbs[:, 4]) == pytest.approx([0.0, 0.1, 0.2])
    assert len(_mode(rows, MODE_GRADIENT)) == 1  # the carousel's band
    banner_h = frame.top_inset
    assert banner_h > 0 and tuple(rows[0, 0:4]) == (0, 0, 640, banner_h)  # the bar across the top
    assert 0 < frame.bottom_inset < 360 / 2
    assert all(float(r[1]) >= 360 - frame.bottom_inset - 1 for r in thumbs)
    assert sum(len(t) for t in frame.text.values()) > 0  # the banner's and the labels' glyphs

    off = _lay_out(BoothView(_faces(3), selected=1, t_switched=0.0, swap_enabled=False))
    badge = np.concatenate(off.shapes)[0]
    margin = round(text_sizes((640, 360), 1.0)[0] * 0.6)
    assert float(badge[2]) == 640 - margin and float(badge[1]) == margin / 2  # top-right, no banner
    assert off.top_inset == pytest.approx(float(badge[3]))


def test_the_attract_layout_darkens_first_and_fades_its_face() -> None:
    view = BoothView(
        _faces(4), selected=0, t_switched=0.0, attract=True, attract_lines=["hi"], attract_index=6
    )
    frame = _lay_out(view, fade=0.5)
    rows = np.concatenate(frame.shapes)
    assert rows[0, 18] == MODE_GRADIENT and tuple(rows[0, 0:4]) == (0, 0, 640, 360)  # under everything
    (thumb,) = _mode(rows, MODE_THUMB)
    assert float(thumb[4]) == pytest.approx(0.2) and float(thumb[11]) == 0.5  # face 6 % 4, half faded
    assert frame.bottom_inset == 0.0  # no carousel under the attract screen
    fade = AttractFade()
    assert fade.fade(view, 10.0) == 1.0  # the first face shown is there at once
    moved = BoothView(_faces(4), selected=0, t_switched=0.0, attract=True, attract_index=7)
    assert fade.fade(moved, 20.0) == 0.0 and fade.fade(moved, 20.0 + ATTRACT_FADE_S) == 1.0
    assert fade.fade(BoothView(_faces(4), 0, 0.0), 21.0) == 1.0  # not attracting
