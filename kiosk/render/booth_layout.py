"""A :class:`~kiosk.render.booth_ui.BoothView` laid out into instance rows (a
:class:`~kiosk.render.ui_quads.UiFrame`): the banner across the top, the "swap off" badge, then
the attract screen (:mod:`kiosk.render.booth_attract`) or the carousel
(:mod:`kiosk.render.booth_carousel`), and the insets the text overlay keeps clear of.

Pure layout, no GL: the fonts are CPU atlases and which part of the thumbnail atlas a face samples
is asked of ``uv``, so a layout can be checked without a GL context.
"""

from __future__ import annotations

from collections.abc import Callable

from kiosk.render.booth_attract import lay_out_attract
from kiosk.render.booth_carousel import lay_out_carousel
from kiosk.render.booth_ui import BoothView
from kiosk.render.font_atlas import FontAtlas
from kiosk.render.overlay import TextMetrics, text_sizes
from kiosk.render.ui_quads import ACCENT, BADGE, PANEL, UV, WHITE, UiFrame, ui_quad, with_alpha

SWAP_OFF_TEXT = "\u2022 Face swap off"


def lay_out_booth(
    view: BoothView,
    logical_size: tuple[int, int],
    position: float,
    fade: float,
    status_shown: bool,
    *,
    fonts: Callable[[int], FontAtlas],
    text_scale: float,
    uv: Callable[[int], UV],
) -> UiFrame:
    """The rows of ``view`` on a screen of ``logical_size``: ``position`` is the carousel's
    (fractional) centre index, ``fade`` the attract face's fade-in, ``status_shown`` whether the
    overlay's status line takes the bottom edge."""
    width, height = logical_size
    base_px, _ = text_sizes(logical_size, text_scale)
    small = fonts(base_px)
    m = TextMetrics.of(small)
    margin = round(base_px * 0.6)
    ink_h = m.ink_bottom - m.ink_top
    frame = UiFrame(shapes=[], text={})

    # The swap-off badge sits at the right end of the banner, or top-right without one; either
    # way above the top inset, so the overlay's notice and debug block never run under it.
    badge_w = 0.0 if view.swap_enabled else small.measure(SWAP_OFF_TEXT) + 2 * m.pad_x
    top = 0.0
    if view.banner:
        top = lay_out_banner(frame, view.banner, small, width, reserve=badge_w + margin if badge_w else 0.0)
        if badge_w:
            pad_y = m.pad_y * 0.6
            line = max(2.0, round(small.size_px / 12))
            lay_out_badge(frame, small, width - margin, (top - line - ink_h - 2 * pad_y) / 2, pad_y)
    elif badge_w:
        top = lay_out_badge(frame, small, width - margin, margin / 2, m.pad_y)
    frame.top_inset = top
    status_h = ink_h + 2 * m.pad_y
    bottom = height - (margin + status_h + margin / 2 if status_shown else margin)

    if view.attract:
        lay_out_attract(frame, view, logical_size, small, top + margin, bottom, fade, fonts=fonts, uv=uv)
    elif view.show_carousel and view.faces:
        frame.bottom_inset = height - lay_out_carousel(
            frame, view, logical_size, position, small, bottom, text_scale=text_scale, uv=uv
        )
    return frame


def lay_out_banner(frame: UiFrame, text: str, font: FontAtlas, width: int, reserve: float) -> float:
    """The bar across the top with ``text`` centred, keeping ``reserve`` free at both ends;
    returns its height."""
    m = TextMetrics.of(font)
    ink_h = m.ink_bottom - m.ink_top
    bar_h = round(ink_h + 2.4 * m.pad_y)
    line = max(2.0, round(font.size_px / 12))
    frame.shapes.append(ui_quad((0, 0, width, bar_h), PANEL))
    frame.shapes.append(ui_quad((0, bar_h - line, width, bar_h), with_alpha(ACCENT, 0.9)))
    shown = font.elide(text, width - 4 * m.pad_x - 2 * reserve)
    x = (width - font.measure(shown)) / 2
    y = (bar_h - line - ink_h) / 2 - m.ink_top
    frame.add_text(font, shown, x, y, WHITE)
    return float(bar_h)


def lay_out_badge(frame: UiFrame, font: FontAtlas, right: float, top: float, pad_y: float) -> float:
    """The "swap off" pill ending at ``right`` with its top at ``top``; returns its bottom."""
    m = TextMetrics.of(font)
    text_w = font.measure(SWAP_OFF_TEXT)
    ink_h = m.ink_bottom - m.ink_top
    h = ink_h + 2 * pad_y
    x0 = right - text_w - 2 * m.pad_x
    frame.shapes.append(ui_quad((x0, top, right, top + h), BADGE, radius=h / 2))
    frame.add_text(font, SWAP_OFF_TEXT, x0 + m.pad_x, top + pad_y - m.ink_top, WHITE)
    return top + h
