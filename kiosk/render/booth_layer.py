"""Draws a :class:`~kiosk.render.booth_ui.BoothView`: carousel, banner, attract screen, swap badge.

Shapes are instanced quads of ``shaders/ui.*`` (rounded rectangles: solid, gradient, or a
thumbnail sampled from one atlas texture, with border and soft shadow edges); text uses the
overlay's font atlases and ``shaders/text.*``. Everything is laid out in logical pixels and
rotated onto the framebuffer in the vertex shaders.

The thumbnail atlas is rebuilt (and uploaded, with mipmaps) only when the set of face keys
changes. Instances are rebuilt only when something visible changes: every frame during a
transition, not at all while the booth is settled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render.booth_ui import (
    TRANSITION_S,
    BoothView,
    CarouselMotion,
    Tile,
    carousel_metrics,
    carousel_scrolls,
    carousel_tiles,
    transition_progress,
)
from kiosk.render.font_atlas import INSTANCE_FLOATS, RGBA, FontAtlas
from kiosk.render.overlay import TextBatch, TextMetrics, text_sizes
from kiosk.render.shaders import blend_over, load_program, uniform

#: Floats per UI instance: rect, uv, colour, colour 2, params (radius, border, mode, soft edge).
UI_FLOATS = 20
MODE_SOLID, MODE_THUMB, MODE_GRADIENT = 0.0, 1.0, 2.0

ACCENT: RGBA = (1.0, 0.78, 0.24, 1.0)
WHITE: RGBA = (1.0, 1.0, 1.0, 1.0)
PANEL: RGBA = (0.04, 0.04, 0.06, 0.74)
BADGE: RGBA = (0.78, 0.12, 0.12, 0.92)
CLEAR: RGBA = (0.0, 0.0, 0.0, 0.0)

#: Attract screen: title size and the size of its other text, in multiples of the base text size.
TITLE_SCALE = 2.3
MID_SCALE = 1.3
#: The attract face fades in over this long when it changes.
ATTRACT_FADE_S = 0.4
SWAP_OFF_TEXT = "\u2022 Face swap off"

#: Largest side of the thumbnail atlas texture.
MAX_ATLAS_PX = 4096


def ui_quad(
    rect: tuple[float, float, float, float],
    color: RGBA,
    *,
    color2: RGBA = CLEAR,
    radius: float = 0.0,
    border: float = 0.0,
    mode: float = MODE_SOLID,
    soft: float = 0.0,
    uv: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
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


def _mix(a: RGBA, b: RGBA, t: float) -> RGBA:
    return (
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
        a[3] + (b[3] - a[3]) * t,
    )


def _alpha(c: RGBA, a: float) -> RGBA:
    return (c[0], c[1], c[2], c[3] * a)


# -- thumbnail atlas ---------------------------------------------------------------------------------


def square_thumb(img: NDArray[np.uint8], side: int) -> NDArray[np.uint8]:
    """``img`` (H, W, 3) centre-cropped to a square and resized to ``side``."""
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(f"expected a (S, S, 3) uint8 BGR thumbnail, got {img.shape} {img.dtype}")
    h, w = img.shape[:2]
    s = min(h, w)
    y0, x0 = (h - s) // 2, (w - s) // 2
    sq = img[y0 : y0 + s, x0 : x0 + s]
    if s == side:
        return np.ascontiguousarray(sq)
    interp = cv2.INTER_AREA if s > side else cv2.INTER_CUBIC
    return np.asarray(cv2.resize(sq, (side, side), interpolation=interp), dtype=np.uint8)


def build_thumb_atlas(
    thumbs: Sequence[NDArray[np.uint8]],
) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
    """Pack thumbnails into one BGR image: a grid of square cells with replicated gutters (so
    mipmaps do not bleed). Returns the atlas (H, W, 3) and each thumbnail's uv rect (n, 4)."""
    n = len(thumbs)
    if n == 0:
        return np.zeros((1, 1, 3), np.uint8), np.zeros((0, 4), np.float32)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    cell = int(min(256, max(32, max(min(t.shape[:2]) for t in thumbs))))
    gutter = max(2, cell // 16)
    while cols * (cell + 2 * gutter) > MAX_ATLAS_PX and cell > 16:
        cell //= 2
        gutter = max(2, cell // 16)
    pitch = cell + 2 * gutter
    atlas = np.zeros((rows * pitch, cols * pitch, 3), np.uint8)
    uvs = np.zeros((n, 4), np.float32)
    height, width = atlas.shape[:2]
    for i, thumb in enumerate(thumbs):
        r, c = divmod(i, cols)
        sq = square_thumb(thumb, cell)
        padded = cv2.copyMakeBorder(sq, gutter, gutter, gutter, gutter, cv2.BORDER_REPLICATE)
        atlas[r * pitch : (r + 1) * pitch, c * pitch : (c + 1) * pitch] = padded
        x0, y0 = c * pitch + gutter, r * pitch + gutter
        uvs[i] = (x0 / width, y0 / height, (x0 + cell) / width, (y0 + cell) / height)
    return atlas, uvs


# -- GL batches --------------------------------------------------------------------------------------


class _UiBatch:
    """A growable instance buffer of UI quads and its vertex array."""

    def __init__(self, ctx: moderngl.Context, program: moderngl.Program, corners: moderngl.Buffer) -> None:
        self._ctx = ctx
        self._program = program
        self._corners = corners
        self._buffer: moderngl.Buffer | None = None
        self._vao: moderngl.VertexArray | None = None
        self._capacity = 0
        self.count = 0

    def upload(self, rows: NDArray[np.float32]) -> None:
        n = len(rows)
        if n > self._capacity:
            capacity = max(64, n, self._capacity * 2)
            self.release()
            self._capacity = capacity
            self._buffer = self._ctx.buffer(reserve=self._capacity * UI_FLOATS * 4, dynamic=True)
            self._vao = self._ctx.vertex_array(
                self._program,
                [
                    (self._corners, "2f", "in_corner"),
                    (
                        self._buffer,
                        "4f 4f 4f 4f 4f/i",
                        "in_rect",
                        "in_uv",
                        "in_color",
                        "in_color2",
                        "in_params",
                    ),
                ],
            )
        if n and self._buffer is not None:
            self._buffer.write(np.ascontiguousarray(rows, dtype=np.float32))
        self.count = n

    def draw(self) -> None:
        if self.count and self._vao is not None:
            self._vao.render(moderngl.TRIANGLE_STRIP, vertices=4, instances=self.count)

    def release(self) -> None:
        for obj in (self._vao, self._buffer):
            if obj is not None:
                obj.release()
        self._vao = self._buffer = None
        self._capacity = self.count = 0


@dataclass
class _Frame:
    """Instance rows of one layout: shapes, then text per pixel size (drawn over the shapes)."""

    shapes: list[NDArray[np.float32]]
    text: dict[int, list[NDArray[np.float32]]]
    top_inset: float = 0.0
    bottom_inset: float = 0.0

    def add_text(self, atlas: FontAtlas, text: str, x: float, y: float, rgba: RGBA) -> None:
        self.text.setdefault(atlas.size_px, []).append(atlas.layout(text, x, y, rgba))


class UiLayer:
    """What the booth and keepsake layers share: the ``ui`` and ``text`` programs with their
    uniforms, one batch of UI shapes and a text batch per font size. Main (GL) thread only."""

    def __init__(
        self,
        ctx: moderngl.Context,
        corners: moderngl.Buffer,
        atlas: Callable[[int], FontAtlas],
        text_scale: float = 1.0,
    ) -> None:
        self._ctx = ctx
        self._corners = corners
        self._font = atlas
        self._text_scale = text_scale
        self._ui_program = load_program(ctx, "ui")
        uniform(self._ui_program, "u_thumbs").value = 0
        self._u_ui_size = uniform(self._ui_program, "u_logical_size")
        self._u_ui_turns = uniform(self._ui_program, "u_quarter_turns")
        self._text_program = load_program(ctx, "text")
        uniform(self._text_program, "u_atlas").value = 0
        self._u_text_size = uniform(self._text_program, "u_logical_size")
        self._u_text_turns = uniform(self._text_program, "u_quarter_turns")
        self._shapes = _UiBatch(ctx, self._ui_program, corners)
        self._texts: dict[int, TextBatch] = {}

    def release(self) -> None:
        """Free the shared GL objects; a subclass frees its own first, then calls this."""
        self._shapes.release()
        for batch in self._texts.values():
            batch.release()
        self._texts.clear()
        self._ui_program.release()
        self._text_program.release()


class BoothLayer(UiLayer):
    """Draws :class:`BoothView` s into the bound framebuffer. Main (GL) thread only."""

    def __init__(
        self,
        ctx: moderngl.Context,
        corners: moderngl.Buffer,
        atlas: Callable[[int], FontAtlas],
        text_scale: float = 1.0,
    ) -> None:
        super().__init__(ctx, corners, atlas, text_scale)
        self._blank = ctx.texture((1, 1), 3, b"\xff\xff\xff")
        self._thumbs: moderngl.Texture | None = None
        self._thumb_keys: tuple[str, ...] | None = None
        self._thumb_uv = np.zeros((0, 4), np.float32)
        self._motion = CarouselMotion()
        self._attract_index: int | None = None
        self._attract_t = -1e9
        self._key: tuple[object, ...] | None = None
        self._insets = (0.0, 0.0)
        #: How many times the thumbnail atlas was built and uploaded.
        self.thumb_atlas_builds = 0
        #: How many times the instances were laid out (changes only while something moves).
        self.layouts = 0

    # -- thumbnails ----------------------------------------------------------------------------

    def _sync_thumbs(self, view: BoothView) -> None:
        keys = tuple(f.key for f in view.faces)
        if keys == self._thumb_keys:
            return
        if self._thumbs is not None:
            self._thumbs.release()
            self._thumbs = None
        self._thumb_keys = keys
        if not keys:
            self._thumb_uv = np.zeros((0, 4), np.float32)
            return
        pixels, self._thumb_uv = build_thumb_atlas([f.thumb_bgr for f in view.faces])
        h, w = pixels.shape[:2]
        tex = self._ctx.texture((w, h), 3, np.ascontiguousarray(pixels), alignment=1)
        tex.swizzle = "BGR1"
        tex.build_mipmaps()
        tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
        tex.repeat_x = tex.repeat_y = False
        self._thumbs = tex
        self.thumb_atlas_builds += 1

    def _uv(self, index: int) -> tuple[float, float, float, float]:
        u = self._thumb_uv[index]
        return float(u[0]), float(u[1]), float(u[2]), float(u[3])

    # -- drawing -------------------------------------------------------------------------------

    def draw(
        self,
        view: BoothView,
        logical_size: tuple[int, int],
        quarter_turns: int,
        now: float,
        status_shown: bool = False,
    ) -> tuple[float, float]:
        """Draw ``view``; returns (top inset, bottom inset): logical pixels the banner takes at the
        top and the carousel at the bottom, for the text overlay to keep clear of."""
        self._sync_thumbs(view)
        n = len(view.faces)
        width = logical_size[0]
        metrics = carousel_metrics(logical_size, self._text_scale)
        ring = carousel_scrolls(n, width, metrics)
        position = self._motion.position(view.selected, view.t_switched, n, ring, now)
        fade = 1.0
        if view.attract and n:
            index = view.attract_index % n
            if index != self._attract_index:
                first = self._attract_index is None
                self._attract_index, self._attract_t = index, (-1e9 if first else now)
            fade = transition_progress(now, self._attract_t, ATTRACT_FADE_S)
        key = (
            logical_size,
            round(position, 5),
            round(fade, 4),
            self._thumb_keys,
            tuple(f.name for f in view.faces),
            view.show_carousel,
            view.banner,
            view.attract,
            view.attract_title,
            tuple(view.attract_lines),
            view.attract_index % n if n else 0,
            view.swap_enabled,
            status_shown,
            tuple(sorted(view.on_screen.items())),
        )
        if key != self._key:
            frame = self._layout(view, logical_size, position, fade, status_shown)
            self._upload(frame)
            self._insets = (frame.top_inset, frame.bottom_inset)
            self._key = key
            self.layouts += 1
        self._render(logical_size, quarter_turns)
        return self._insets

    def _upload(self, frame: _Frame) -> None:
        self._shapes.upload(
            np.concatenate(frame.shapes) if frame.shapes else np.zeros((0, UI_FLOATS), np.float32)
        )
        for size in set(self._texts) | set(frame.text):
            rows = frame.text.get(size)
            if rows is None:
                self._texts[size].upload(np.zeros((0, INSTANCE_FLOATS), np.float32))
                continue
            batch = self._texts.get(size)
            if batch is None:
                batch = self._texts[size] = TextBatch(self._ctx, self._text_program, self._corners)
            batch.use_atlas(self._font(size))
            batch.upload(np.concatenate(rows))
        for size in [s for s, b in self._texts.items() if b.count == 0 and s not in frame.text]:
            if len(self._texts) > 4:  # screen size changed: forget sizes no longer used
                self._texts.pop(size).release()

    def _render(self, logical_size: tuple[int, int], quarter_turns: int) -> None:
        if not self._shapes.count and not any(b.count for b in self._texts.values()):
            return
        ctx = self._ctx
        blend_over(ctx)
        if self._shapes.count:
            (self._thumbs or self._blank).use(0)
            self._u_ui_size.value = logical_size
            self._u_ui_turns.value = quarter_turns
            self._shapes.draw()
        self._u_text_size.value = logical_size
        self._u_text_turns.value = quarter_turns
        for batch in self._texts.values():
            batch.draw()
        ctx.disable(moderngl.BLEND)

    # -- layout --------------------------------------------------------------------------------

    def _layout(
        self,
        view: BoothView,
        logical_size: tuple[int, int],
        position: float,
        fade: float,
        status_shown: bool,
    ) -> _Frame:
        width, height = logical_size
        base_px, _ = text_sizes(logical_size, self._text_scale)
        small = self._font(base_px)
        m = TextMetrics.of(small)
        margin = round(base_px * 0.6)
        ink_h = m.ink_bottom - m.ink_top
        frame = _Frame(shapes=[], text={})

        # The swap-off badge sits at the right end of the banner, or top-right without one; either
        # way above the top inset, so the overlay's notice and debug block never run under it.
        badge_w = 0.0 if view.swap_enabled else small.measure(SWAP_OFF_TEXT) + 2 * m.pad_x
        top = 0.0
        if view.banner:
            top = self._banner(
                frame, view.banner, small, m, width, reserve=badge_w + margin if badge_w else 0.0
            )
            if badge_w:
                pad_y = m.pad_y * 0.6
                line = max(2.0, round(small.size_px / 12))
                self._badge(frame, small, m, width - margin, (top - line - ink_h - 2 * pad_y) / 2, pad_y)
        elif badge_w:
            top = self._badge(frame, small, m, width - margin, margin / 2, m.pad_y)
        frame.top_inset = top
        status_h = ink_h + 2 * m.pad_y
        bottom = height - (margin + status_h + margin / 2 if status_shown else margin)

        if view.attract:
            self._attract(frame, view, logical_size, small, top + margin, bottom, fade)
        elif view.show_carousel and view.faces:
            frame.bottom_inset = height - self._carousel(
                frame, view, logical_size, position, small, m, bottom
            )
        return frame

    def _banner(
        self, frame: _Frame, text: str, font: FontAtlas, m: TextMetrics, width: int, reserve: float
    ) -> float:
        """The bar across the top with ``text`` centred, keeping ``reserve`` free at both ends;
        returns its height."""
        ink_h = m.ink_bottom - m.ink_top
        bar_h = round(ink_h + 2.4 * m.pad_y)
        line = max(2.0, round(font.size_px / 12))
        frame.shapes.append(ui_quad((0, 0, width, bar_h), PANEL))
        frame.shapes.append(ui_quad((0, bar_h - line, width, bar_h), _alpha(ACCENT, 0.9)))
        shown = font.elide(text, width - 4 * m.pad_x - 2 * reserve)
        x = (width - font.measure(shown)) / 2
        y = (bar_h - line - ink_h) / 2 - m.ink_top
        frame.add_text(font, shown, x, y, WHITE)
        return float(bar_h)

    def _badge(
        self, frame: _Frame, font: FontAtlas, m: TextMetrics, right: float, top: float, pad_y: float
    ) -> float:
        """The "swap off" pill ending at ``right`` with its top at ``top``; returns its bottom."""
        text_w = font.measure(SWAP_OFF_TEXT)
        ink_h = m.ink_bottom - m.ink_top
        h = ink_h + 2 * pad_y
        x0 = right - text_w - 2 * m.pad_x
        frame.shapes.append(ui_quad((x0, top, right, top + h), BADGE, radius=h / 2))
        frame.add_text(font, SWAP_OFF_TEXT, x0 + m.pad_x, top + pad_y - m.ink_top, WHITE)
        return top + h

    def _carousel(
        self,
        frame: _Frame,
        view: BoothView,
        logical_size: tuple[int, int],
        position: float,
        font: FontAtlas,
        m: TextMetrics,
        bottom: float,
    ) -> float:
        """Lay out the carousel above ``bottom``; returns its top edge."""
        width, _ = logical_size
        cm = carousel_metrics(logical_size, self._text_scale)
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
            self._tile(frame, tile, row_cy, view.on_screen.get(tile.index, 0))
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
                    _alpha(PANEL, label_alpha),
                    radius=label_h / 2,
                )
            )
            frame.add_text(
                font, name, cx - text_w / 2, label_top + m.pad_y - m.ink_top, _alpha(WHITE, label_alpha)
            )
        return top

    def _tile(self, frame: _Frame, tile: Tile, cy: float, wearers: int = 0) -> None:
        """One thumbnail; ``wearers``: visitors on screen with this face (a dot each, at most 4)."""
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
                ui_quad(rect, _alpha(ACCENT, 0.45 * e * a), radius=radius + glow / 2, soft=glow)
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
                frame.shapes.append(ui_quad((x - r, y - r, x + r, y + r), _alpha(ACCENT, a), radius=r))
        border = max(1.5, s * 0.022) + (max(3.0, s * 0.045) - max(1.5, s * 0.022)) * e
        frame.shapes.append(
            ui_quad(
                rect,
                (dim, dim, dim, a),
                color2=_alpha(_mix((1.0, 1.0, 1.0, 0.5), ACCENT, e), a),
                radius=radius,
                border=border,
                mode=MODE_THUMB,
                uv=self._uv(tile.index),
            )
        )

    def _attract(
        self,
        frame: _Frame,
        view: BoothView,
        logical_size: tuple[int, int],
        small: FontAtlas,
        top: float,
        bottom: float,
        fade: float,
    ) -> None:
        width, height = logical_size
        unit = min(width, height)
        base_px = small.size_px
        title_font = self._font(max(12, round(base_px * TITLE_SCALE)))
        mid_font = self._font(max(10, round(base_px * MID_SCALE)))
        frame.shapes.insert(
            0,
            ui_quad(
                (0, 0, width, height), (0.0, 0.0, 0.0, 0.62), color2=(0.0, 0.0, 0.0, 0.82), mode=MODE_GRADIENT
            ),
        )
        title_lines = (
            title_font.wrap(view.attract_title, width * 0.88, max_lines=3) if view.attract_title else []
        )
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
            frame.shapes.append(ui_quad(rect, _alpha(ACCENT, 0.5 * fade), radius=s / 2 + glow, soft=glow))
            frame.shapes.append(
                ui_quad(
                    rect,
                    (1.0, 1.0, 1.0, fade),
                    color2=_alpha(ACCENT, fade),
                    radius=s / 2,
                    border=max(3.0, thumb * 0.022),
                    mode=MODE_THUMB,
                    uv=self._uv(view.attract_index % n),
                )
            )
            y += thumb + gap_name
            name = mid_font.elide(face.name, width * 0.8)
            frame.add_text(mid_font, name, (width - mid_font.measure(name)) / 2, y, _alpha(ACCENT, fade))
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

    def release(self) -> None:
        if self._thumbs is not None:
            self._thumbs.release()
            self._thumbs = None
        self._thumb_keys = None
        self._blank.release()
        self._key = None
        super().release()


__all__ = ["TRANSITION_S", "BoothLayer", "build_thumb_atlas", "ui_quad"]
