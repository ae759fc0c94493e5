"""The attract screen: the picture darkened, a big title, the cycling face large with its name
and a dot per face, the instructions below.

:func:`lay_out_attract` is pure layout (no GL); :class:`AttractFade` remembers which face the
screen showed and since when, so a new face fades in over :data:`ATTRACT_FADE_S`.
"""

from __future__ import annotations

from collections.abc import Callable

from kiosk.render.booth_ui import BoothView, transition_progress
from kiosk.render.font_atlas import FontAtlas
from kiosk.render.overlay import TextMetrics
from kiosk.render.ui_quads import ACCENT, MODE_GRADIENT, MODE_THUMB, UV, WHITE, UiFrame, ui_quad, with_alpha

#: Attract screen: title size and the size of its other text, in multiples of the base text size.
TITLE_SCALE = 2.3
MID_SCALE = 1.3
#: The attract face fades in over this long when it changes.
ATTRACT_FADE_S = 0.4


class AttractFade:
    """How far the attract face has faded in: 1 for the first face shown, 0 → 1 over
    :data:`ATTRACT_FADE_S` after it changes."""

    def __init__(self) -> None:
        self._index: int | None = None
        self._t = -1e9

    def fade(self, view: BoothView, now: float) -> float:
        """The fade of ``view``'s attract face at ``now`` (1 when the view is not attracting)."""
        n = len(view.faces)
        if not (view.attract and n):
            return 1.0
        index = view.attract_index % n
        if index != self._index:
            first = self._index is None
            self._index, self._t = index, (-1e9 if first else now)
        return transition_progress(now, self._t, ATTRACT_FADE_S)


def lay_out_attract(
    frame: UiFrame,
    view: BoothView,
    logical_size: tuple[int, int],
    small: FontAtlas,
    top: float,
    bottom: float,
    fade: float,
    *,
    fonts: Callable[[int], FontAtlas],
    uv: Callable[[int], UV],
) -> None:
    """Lay the attract screen out between ``top`` and ``bottom`` (its darkening under everything
    else in ``frame``); ``small`` is the base text size, ``fonts`` gives the larger ones."""
    width, height = logical_size
    unit = min(width, height)
    base_px = small.size_px
    title_font = fonts(max(12, round(base_px * TITLE_SCALE)))
    mid_font = fonts(max(10, round(base_px * MID_SCALE)))
    frame.shapes.insert(
        0,
        ui_quad(
            (0, 0, width, height), (0.0, 0.0, 0.0, 0.62), color2=(0.0, 0.0, 0.0, 0.82), mode=MODE_GRADIENT
        ),
    )
    title_lines = title_font.wrap(view.attract_title, width * 0.88, max_lines=3) if view.attract_title else []
    lines: list[str] = []
    for text in view.attract_lines:
        lines += mid_font.wrap(text, width * 0.86, max_lines=3)
    tm, mm = TextMetrics.of(title_font), TextMetrics.of(mid_font)
    n = len(view.faces)
    face = view.faces[view.attract_index % n] if n else None
    dots = 1 < n <= 24
    dot = max(4.0, base_px * 0.32)

    gap_title = base_px * 1.3
    gap_name = base_px * 0.7
    gap_lines = base_px * 1.1
    title_h = len(title_lines) * tm.line
    lines_h = len(lines) * mm.line
    name_h = mm.line if face is not None else 0.0
    dots_h = dot * 2.6 if dots else 0.0
    fixed = title_h + lines_h + name_h + dots_h
    fixed += (gap_title if title_lines and face is not None else 0.0) + (gap_lines if lines else 0.0)
    fixed += gap_name if face is not None else 0.0
    avail = bottom - top
    thumb = 0.0
    if face is not None:
        thumb = max(0.0, min(width * 0.55, height * 0.42, (avail - fixed) * 0.95))
        if thumb < unit * 0.12:  # no room: drop the picture rather than crowd the text
            thumb, face = 0.0, None
            fixed -= name_h + dots_h + gap_name + (gap_title if title_lines else 0.0)
            name_h = dots_h = 0.0
    total = fixed + thumb
    y = top + max(0.0, (avail - total) / 2)

    for text in title_lines:
        frame.add_text(title_font, text, (width - title_font.measure(text)) / 2, y, WHITE)
        y += tm.line
    if face is not None:
        if title_lines:
            y += gap_title
        cx, cy = width / 2, y + thumb / 2
        s = thumb * (0.92 + 0.08 * fade)
        rect = (cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2)
        glow = thumb * 0.07
        frame.shapes.append(ui_quad(rect, with_alpha(ACCENT, 0.5 * fade), radius=s / 2 + glow, soft=glow))
        frame.shapes.append(
            ui_quad(
                rect,
                (1.0, 1.0, 1.0, fade),
                color2=with_alpha(ACCENT, fade),
                radius=s / 2,
                border=max(3.0, thumb * 0.022),
                mode=MODE_THUMB,
                uv=uv(view.attract_index % n),
            )
        )
        y += thumb + gap_name
        name = mid_font.elide(face.name, width * 0.8)
        frame.add_text(mid_font, name, (width - mid_font.measure(name)) / 2, y, with_alpha(ACCENT, fade))
        y += name_h
        if dots:
            pitch = dot * 2.2
            x0 = width / 2 - (n - 1) * pitch / 2
            cy_dot = y + dots_h / 2
            for i in range(n):
                current = i == view.attract_index % n
                colour = ACCENT if current else (1.0, 1.0, 1.0, 0.4)
                r = dot / 2 * (1.25 if current else 1.0)
                cx_dot = x0 + i * pitch
                frame.shapes.append(
                    ui_quad((cx_dot - r, cy_dot - r, cx_dot + r, cy_dot + r), colour, radius=r)
                )
            y += dots_h
    if lines:
        y += gap_lines
        for text in lines:
            frame.add_text(mid_font, text, (width - mid_font.measure(text)) / 2, y, (0.9, 0.9, 0.9, 1.0))
            y += mm.line
