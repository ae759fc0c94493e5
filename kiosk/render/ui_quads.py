"""The instance rows ``shaders/ui.*`` draws, and a laid-out frame of them (no GL in here).

A row is one rounded rectangle: solid, a vertical gradient, or a thumbnail sampled from the bound
texture, with a border and a soft shadow edge (:func:`ui_quad`). A :class:`UiFrame` is what one
layout produces: the shape rows, then the text rows per font size, drawn over the shapes. The
booth and keepsake layers lay their views out into a frame and upload it whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kiosk.render.font_atlas import RGBA, FontAtlas

#: Floats per UI instance: rect, uv, colour, colour 2, params (radius, border, mode, soft edge).
UI_FLOATS = 20
MODE_SOLID, MODE_THUMB, MODE_GRADIENT = 0.0, 1.0, 2.0

ACCENT: RGBA = (1.0, 0.78, 0.24, 1.0)
WHITE: RGBA = (1.0, 1.0, 1.0, 1.0)
PANEL: RGBA = (0.04, 0.04, 0.06, 0.74)
BADGE: RGBA = (0.78, 0.12, 0.12, 0.92)
CLEAR: RGBA = (0.0, 0.0, 0.0, 0.0)

#: A thumbnail's place in the bound texture: (u0, v0, u1, v1).
UV = tuple[float, float, float, float]


def ui_quad(
    rect: tuple[float, float, float, float],
    color: RGBA,
    *,
    color2: RGBA = CLEAR,
    radius: float = 0.0,
    border: float = 0.0,
    mode: float = MODE_SOLID,
    soft: float = 0.0,
    uv: UV = (0.0, 0.0, 0.0, 0.0),
) -> NDArray[np.float32]:
    """One UI instance row. ``rect`` is the shape; a ``soft`` edge widens the quad by ``soft``."""
    x0, y0, x1, y1 = rect
    row = np.empty((1, UI_FLOATS), np.float32)
    row[0, 0:4] = (x0 - soft, y0 - soft, x1 + soft, y1 + soft)
    row[0, 4:8] = uv
    row[0, 8:12] = color
    row[0, 12:16] = color2
    row[0, 16:20] = (radius, border, mode, soft)
    return row


def mix(a: RGBA, b: RGBA, t: float) -> RGBA:
    """``a`` blended towards ``b`` by ``t`` (0: ``a``, 1: ``b``)."""
    return (
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
        a[3] + (b[3] - a[3]) * t,
    )


def with_alpha(c: RGBA, a: float) -> RGBA:
    """``c`` with its alpha multiplied by ``a``."""
    return (c[0], c[1], c[2], c[3] * a)


@dataclass
class UiFrame:
    """Instance rows of one layout: shapes, then text per pixel size (drawn over the shapes)."""

    shapes: list[NDArray[np.float32]]
    text: dict[int, list[NDArray[np.float32]]]
    top_inset: float = 0.0
    bottom_inset: float = 0.0

    def add_text(self, atlas: FontAtlas, text: str, x: float, y: float, rgba: RGBA) -> None:
        self.text.setdefault(atlas.size_px, []).append(atlas.layout(text, x, y, rgba))
