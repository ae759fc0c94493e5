"""The carousel's instance rows: the dark band along the bottom, each face's tile (shadow, glow
of the selected one, the visitors' dots, the thumbnail with its border) and the name labels.

Pure layout (no GL): where the tiles go comes from :func:`kiosk.render.booth_ui.carousel_tiles`;
which part of the atlas a tile samples is asked of ``uv``.
"""

from __future__ import annotations

from collections.abc import Callable

from kiosk.render.booth_ui import BoothView, Tile, carousel_metrics, carousel_tiles
from kiosk.render.font_atlas import FontAtlas
from kiosk.render.overlay import TextMetrics
from kiosk.render.ui_quads import (
    ACCENT,
    MODE_GRADIENT,
    MODE_THUMB,
    PANEL,
    UV,
    WHITE,
    UiFrame,
    mix,
    ui_quad,
    with_alpha,
)


def lay_out_carousel(
    frame: UiFrame,
    view: BoothView,
    logical_size: tuple[int, int],
    position: float,
    font: FontAtlas,
    bottom: float,
    *,
    text_scale: float,
    uv: Callable[[int], UV],
) -> float:
    """Lay out the carousel above ``bottom``; returns its top edge."""
    width, _ = logical_size
    m = TextMetrics.of(font)
    cm = carousel_metrics(logical_size, text_scale)
    ink_h = m.ink_bottom - m.ink_top
    label_h = ink_h + 2 * m.pad_y
    label_top = bottom - label_h
    row_h = cm.tile * cm.scale
    row_cy = label_top - cm.gap * 0.45 - row_h / 2
    top = row_cy - row_h / 2 - cm.gap * 0.5
    band_top = top - cm.tile * 0.5
    frame.shapes.append(
        ui_quad(
            (0, band_top, width, logical_size[1]),
            (0.0, 0.0, 0.0, 0.0),
            color2=(0.0, 0.0, 0.0, 0.6),
            mode=MODE_GRADIENT,
        )
    )
    tiles = carousel_tiles(len(view.faces), position, width, cm)
    for tile in sorted(tiles, key=lambda t: t.emphasis):
        lay_out_tile(frame, tile, row_cy, uv(tile.index), view.on_screen.get(tile.index, 0))
    for tile in tiles:
        label_alpha = tile.alpha * min(1.0, max(0.0, (tile.emphasis - 0.35) / 0.65))
        if label_alpha <= 0.01:
            continue
        name = font.elide(view.faces[tile.index].name, min(width - 2 * cm.margin, cm.slot * 3.2))
        text_w = font.measure(name)
        half_w = text_w / 2 + m.pad_x * 1.2
        cx = min(max(tile.cx, cm.margin + half_w), width - cm.margin - half_w)
        frame.shapes.append(
            ui_quad(
                (cx - half_w, label_top, cx + half_w, label_top + label_h),
                with_alpha(PANEL, label_alpha),
                radius=label_h / 2,
            )
        )
        frame.add_text(
            font, name, cx - text_w / 2, label_top + m.pad_y - m.ink_top, with_alpha(WHITE, label_alpha)
        )
    return top


def lay_out_tile(frame: UiFrame, tile: Tile, cy: float, uv: UV, wearers: int = 0) -> None:
    """One thumbnail (sampling ``uv`` of the atlas); ``wearers``: visitors on screen with this
    face (a dot each, at most 4)."""
    s, e, a = tile.size, tile.emphasis, tile.alpha
    half = s / 2
    rect = (tile.cx - half, cy - half, tile.cx + half, cy + half)
    radius = s * 0.16
    soft = max(2.0, s * 0.07)
    shadow_rect = (rect[0], rect[1] + s * 0.03, rect[2], rect[3] + s * 0.03)
    frame.shapes.append(ui_quad(shadow_rect, (0.0, 0.0, 0.0, 0.55 * a), radius=radius, soft=soft))
    if e > 0:  # a glow around the selected tile
        glow = s * 0.09
        frame.shapes.append(
            ui_quad(rect, with_alpha(ACCENT, 0.45 * e * a), radius=radius + glow / 2, soft=glow)
        )
    dim = 1.0 if wearers else 0.5 + 0.5 * e
    if wearers:  # per_visitor: one dot per visitor wearing this face, above the tile
        r = max(3.0, s * 0.05)
        pitch = r * 2.8
        shown = min(wearers, 4)
        x0 = tile.cx - (shown - 1) * pitch / 2
        y = cy - half - r * 2.2
        for k in range(shown):
            x = x0 + k * pitch
            frame.shapes.append(ui_quad((x - r, y - r, x + r, y + r), with_alpha(ACCENT, a), radius=r))
    border = max(1.5, s * 0.022) + (max(3.0, s * 0.045) - max(1.5, s * 0.022)) * e
    frame.shapes.append(
        ui_quad(
            rect,
            (dim, dim, dim, a),
            color2=with_alpha(mix((1.0, 1.0, 1.0, 0.5), ACCENT, e), a),
            radius=radius,
            border=border,
            mode=MODE_THUMB,
            uv=uv,
        )
    )
