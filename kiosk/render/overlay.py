"""On-screen text: status line, notice, debug block, the staff marker and the big centred message.

The notice and the staff warnings are staff text (file paths, commands, config keys): they are
drawn only inside the debug block a staff key opens. While it is closed the visitor's screen
shows, for any of them, only the staff marker: a small amber square (half the text size) in the
top-left corner, below the banner (:func:`marker_rect`).

Text is laid out in *logical* pixels, the upright screen the visitor sees (the framebuffer size
with width and height swapped for a 90/270 display rotation), and rotated onto the framebuffer
in ``shaders/text.vert``. Sizes follow the smaller logical side (1/40 of it, times
``display.text_scale``), so a 1080p screen gets the same text size in landscape and portrait.

Each size has its own :class:`FontAtlas` texture and instance buffer (:class:`TextBatch`).
Layout is cached on the overlay strings and framebuffer size; GL objects are created only when
the text size changes (framebuffer resize) or an instance buffer must grow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render.font_atlas import INSTANCE_FLOATS, RGBA, FontAtlas
from kiosk.render.shaders import blend_over, load_program, uniform

TEXT_RGBA: RGBA = (1.0, 1.0, 1.0, 1.0)
NOTICE_RGBA: RGBA = (1.0, 0.8, 0.3, 1.0)
#: The notice wraps onto at most this many lines (the last one elided).
NOTICE_LINES = 3
DEBUG_RGBA: RGBA = (0.85, 1.0, 0.85, 1.0)
WARNING_RGBA: RGBA = (1.0, 0.72, 0.35, 1.0)
#: The staff marker: a warning is waiting for staff (the debug overlay shows it). Opaque orange,
#: darker in green than the amber text (NOTICE_RGBA, WARNING_RGBA), so a screenshot tells them apart.
MARKER_RGBA: RGBA = (1.0, 0.5, 0.0, 1.0)
#: The staff marker's side is the base text size times this.
MARKER_SCALE = 0.5
BOX_RGBA: RGBA = (0.0, 0.0, 0.0, 0.62)

#: Message text is this many times the base size.
MESSAGE_SCALE = 2.0
#: Base text size in pixels = smaller logical side / this × text_scale.
SIZE_DIVISOR = 40.0


@dataclass
class OverlayState:
    """What the overlay shows this frame. Empty strings/lists draw nothing."""

    #: One line at the bottom (e.g. "synthetic 1280x720 · passthrough").
    status: str = ""
    #: Big centred message, e.g. "Camera unavailable — reconnecting…"; may contain newlines.
    message: str = ""
    #: Staff line (e.g. "Models missing: run kiosk models fetch"): drawn at the top with the debug
    #: block open, else only the staff marker.
    notice: str = ""
    #: Debug statistics, one entry per line, drawn top-left when non-empty.
    debug_lines: list[str] = field(default_factory=list)
    #: Staff warnings (face library problems, config errors), drawn in amber under the debug lines
    #: with the debug block open, else only the staff marker.
    warnings: list[str] = field(default_factory=list)

    @property
    def staff_marker(self) -> bool:
        """Whether the visitor's screen shows the staff marker: staff text waits, the debug block is closed."""
        return not self.debug_lines and bool(self.notice or self.warnings)


def marker_rect(
    logical_size: tuple[int, int], text_scale: float, top_inset: float = 0.0
) -> tuple[float, float, float, float]:
    """The staff marker's (left, top, right, bottom) in logical pixels: a small square in the
    top-left corner, below the banner (``top_inset``)."""
    base_px, _ = text_sizes(logical_size, text_scale)
    margin = round(base_px * 0.6)
    side = max(4.0, round(base_px * MARKER_SCALE))
    top = float(margin) if top_inset <= 0 else top_inset + margin / 2
    return float(margin), top, margin + side, top + side


def text_sizes(logical_size: tuple[int, int], text_scale: float) -> tuple[int, int]:
    """(base, message) text sizes in pixels for a logical screen size."""
    base = max(10, round(min(logical_size) / SIZE_DIVISOR * text_scale))
    return base, max(12, round(base * MESSAGE_SCALE))


class TextBatch:
    """One text size: its atlas texture, a growable instance buffer and the vertex array."""

    def __init__(self, ctx: moderngl.Context, program: moderngl.Program, corners: moderngl.Buffer) -> None:
        self._ctx = ctx
        self._program = program
        self._corners = corners
        self.atlas: FontAtlas | None = None
        self._texture: moderngl.Texture | None = None
        self._buffer: moderngl.Buffer | None = None
        self._vao: moderngl.VertexArray | None = None
        self._capacity = 0
        self._count = 0

    def use_atlas(self, atlas: FontAtlas) -> None:
        if atlas is self.atlas:
            return
        if self._texture is not None:
            self._texture.release()
        h, w = atlas.pixels.shape
        self._texture = self._ctx.texture((w, h), 1, atlas.pixels, dtype="f1", alignment=1)
        self._texture.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self._texture.repeat_x = self._texture.repeat_y = False
        self.atlas = atlas

    def upload(self, rows: NDArray[np.float32]) -> None:
        n = len(rows)
        if n > self._capacity:
            self._capacity = max(256, n, self._capacity * 2)
            if self._vao is not None:
                self._vao.release()
            if self._buffer is not None:
                self._buffer.release()
            self._buffer = self._ctx.buffer(reserve=self._capacity * INSTANCE_FLOATS * 4, dynamic=True)
            self._vao = self._ctx.vertex_array(
                self._program,
                [
                    (self._corners, "2f", "in_corner"),
                    (self._buffer, "4f 4f 4f/i", "in_rect", "in_uv", "in_color"),
                ],
            )
        if n and self._buffer is not None:
            self._buffer.write(np.ascontiguousarray(rows, dtype=np.float32))
        self._count = n

    @property
    def count(self) -> int:
        """Instances drawn by :meth:`draw`."""
        return self._count

    def draw(self) -> None:
        if self._count and self._vao is not None and self._texture is not None:
            self._texture.use(0)
            self._vao.render(moderngl.TRIANGLE_STRIP, vertices=4, instances=self._count)

    def release(self) -> None:
        for obj in (self._vao, self._buffer, self._texture):
            if obj is not None:
                obj.release()
        self._vao = self._buffer = self._texture = None
        self._capacity = self._count = 0


@dataclass(frozen=True)
class TextMetrics:
    """Spacing for one atlas, in pixels."""

    line: int  # distance between line tops
    ink_top: int  # top of capitals below the line top
    ink_bottom: int  # bottom of descenders below the line top
    pad_x: int
    pad_y: int

    @classmethod
    def of(cls, atlas: FontAtlas) -> TextMetrics:
        s = atlas.size_px
        return cls(atlas.line_height, atlas.ink_top, atlas.ink_bottom, round(s * 0.5), round(s * 0.3))


class TextOverlay:
    """Draws an :class:`OverlayState` onto the bound framebuffer with alpha blending."""

    def __init__(self, ctx: moderngl.Context, corners: moderngl.Buffer, text_scale: float = 1.0) -> None:
        self._ctx = ctx
        self._text_scale = text_scale
        self._program = load_program(ctx, "text")
        uniform(self._program, "u_atlas").value = 0
        self._u_logical_size = uniform(self._program, "u_logical_size")
        self._u_quarter_turns = uniform(self._program, "u_quarter_turns")
        self._small = TextBatch(ctx, self._program, corners)
        self._large = TextBatch(ctx, self._program, corners)
        self._atlases: dict[int, FontAtlas] = {}
        self._key: tuple[object, ...] | None = None

    def atlas(self, size_px: int) -> FontAtlas:
        """The atlas for ``size_px``, built on first use (a few ms); keeps the few latest sizes."""
        atlas = self._atlases.get(size_px)
        if atlas is None:
            if len(self._atlases) >= 8:
                self._atlases.pop(next(iter(self._atlases)))
            atlas = self._atlases[size_px] = FontAtlas(size_px)
        return atlas

    def draw(
        self,
        overlay: OverlayState,
        logical_size: tuple[int, int],
        quarter_turns: int,
        top_inset: float = 0.0,
        bottom_inset: float = 0.0,
    ) -> None:
        """Draw ``overlay``; the notice and debug block start below ``top_inset`` (the booth banner)
        and the debug block ends above ``bottom_inset`` from the bottom (the carousel)."""
        key = (
            overlay.status,
            overlay.message,
            overlay.notice,
            tuple(overlay.debug_lines),
            tuple(overlay.warnings),
            logical_size,
            top_inset,
            bottom_inset,
        )
        if key != self._key:
            self._rebuild(overlay, logical_size, top_inset, bottom_inset)
            self._key = key
        if not (self._small.count or self._large.count):
            return
        self._u_logical_size.value = logical_size
        self._u_quarter_turns.value = quarter_turns
        ctx = self._ctx
        blend_over(ctx)
        self._small.draw()
        self._large.draw()
        ctx.disable(moderngl.BLEND)

    def _rebuild(
        self, overlay: OverlayState, logical_size: tuple[int, int], top_inset: float, bottom_inset: float
    ) -> None:
        width, height = logical_size
        base_px, message_px = text_sizes(logical_size, self._text_scale)
        small = self.atlas(base_px)
        self._small.use_atlas(small)
        m = TextMetrics.of(small)
        margin = round(base_px * 0.6)
        boxes: list[NDArray[np.float32]] = []
        glyphs: list[NDArray[np.float32]] = []
        max_text_w = width - 2 * (margin + m.pad_x)

        def block(lines: list[str], left: float | None, top: float, rgba: RGBA | list[RGBA]) -> float:
            """Lines in a box with its top edge at ``top``; ``left`` None centres it. Returns its bottom.
            ``rgba``: one colour, or one per line."""
            widths = [small.measure(t) for t in lines]
            block_w = max(widths)
            x = (width - block_w) / 2 if left is None else left + m.pad_x
            y = top + m.pad_y - m.ink_top
            bottom = y + (len(lines) - 1) * m.line + m.ink_bottom + m.pad_y
            boxes.append(small.box(x - m.pad_x, top, x + block_w + m.pad_x, bottom, BOX_RGBA))
            colours = rgba if isinstance(rgba, list) else [rgba] * len(lines)
            for i, text in enumerate(lines):
                glyphs.append(small.layout(text, x, y + i * m.line, colours[i]))
            return bottom

        top = float(margin) if top_inset <= 0 else top_inset + margin / 2
        if overlay.staff_marker:  # staff text waits: the visitor sees a small square, no words
            boxes.append(small.box(*marker_rect(logical_size, self._text_scale, top_inset), MARKER_RGBA))
        elif overlay.notice and overlay.debug_lines:
            # Up to three lines: a notice ends with its fix ("— run: kiosk models fetch"), which a
            # one-line cut would drop on a small screen after a long model path.
            lines = small.wrap(overlay.notice, max_text_w, max_lines=NOTICE_LINES)
            top = block(lines, None, top, NOTICE_RGBA) + margin / 2
        if overlay.debug_lines:  # the staff's debug block: its lines, then the warnings
            bottom_limit = height - 2 * (margin + m.line + 2 * m.pad_y)
            if bottom_inset > 0:
                bottom_limit = min(bottom_limit, round(height - bottom_inset - margin / 2))
            fit = max(1, int((bottom_limit - top - 2 * m.pad_y) // m.line))
            entries = [(t, DEBUG_RGBA) for t in overlay.debug_lines]
            entries += [(f"! {t}", WARNING_RGBA) for t in overlay.warnings]
            if len(entries) > fit:  # keep the warnings: drop debug lines first
                keep_debug = max(0, fit - len(overlay.warnings))
                entries = (entries[:keep_debug] + entries[len(overlay.debug_lines) :])[:fit]
            lines = [small.elide(t, max_text_w) for t, _ in entries]
            block(lines, margin, top, [c for _, c in entries])
        if overlay.status:
            status_h = m.ink_bottom - m.ink_top + 2 * m.pad_y
            block([small.elide(overlay.status, max_text_w)], margin, height - margin - status_h, TEXT_RGBA)
        self._small.upload(_stack(boxes + glyphs))

        large_rows = np.zeros((0, INSTANCE_FLOATS), np.float32)
        if overlay.message:
            large = self.atlas(message_px)
            self._large.use_atlas(large)
            lm = TextMetrics.of(large)
            lines = large.wrap(overlay.message, width * 0.88 - 2 * lm.pad_x, max_lines=4)
            block_w = max(large.measure(t) for t in lines)
            block_h = (len(lines) - 1) * lm.line + lm.ink_bottom - lm.ink_top
            y0 = (height - block_h) / 2 - lm.ink_top
            rows = [
                large.box(
                    (width - block_w) / 2 - lm.pad_x,
                    y0 + lm.ink_top - lm.pad_y,
                    (width + block_w) / 2 + lm.pad_x,
                    y0 + lm.ink_top + block_h + lm.pad_y,
                    BOX_RGBA,
                )
            ]
            for i, text in enumerate(lines):
                rows.append(
                    large.layout(text, (width - large.measure(text)) / 2, y0 + i * lm.line, TEXT_RGBA)
                )
            large_rows = _stack(rows)
        self._large.upload(large_rows)

    def release(self) -> None:
        self._small.release()
        self._large.release()
        self._program.release()
        self._atlases.clear()
        self._key = None


def _stack(rows: list[NDArray[np.float32]]) -> NDArray[np.float32]:
    return np.concatenate(rows) if rows else np.zeros((0, INSTANCE_FLOATS), np.float32)
