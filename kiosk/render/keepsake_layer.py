"""Draws a :class:`~kiosk.render.keepsake_ui.KeepsakeView` over the picture.

- the countdown: a big digit in a ring, centred, the live picture under it;
- the consent prompt ("Press again to keep this photo") over the frozen still, with a bar of the
  time left;
- the QR panel beside the frozen still: a white card with a title, the QR code (a texture of its
  modules sampled nearest-neighbour, each module a whole number of pixels, so it stays sharp for
  a phone and for ``cv2.QRCodeDetector`` reading a screenshot), the short address and how long the
  photo is kept;
- a failure line.

Shapes are the instanced UI quads of :mod:`kiosk.render.ui_quads` (``shaders/ui.*``; the QR code
is a mode-1 quad sampling its own texture), text the overlay's font atlases (``shaders/text.*``).
Instances are laid out again only when what is drawn changes (every frame only while the digit
animates).
"""

from __future__ import annotations

from collections.abc import Callable

import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render.font_atlas import INSTANCE_FLOATS, FontAtlas
from kiosk.render.keepsake_ui import KeepsakeView
from kiosk.render.overlay import TextBatch, TextMetrics, text_sizes
from kiosk.render.shaders import blend_over
from kiosk.render.ui_layer import UiLayer
from kiosk.render.ui_quads import ACCENT, MODE_THUMB, PANEL, UI_FLOATS, WHITE, UiFrame, ui_quad, with_alpha

#: The countdown digit's height, fraction of the smaller logical side.
DIGIT_FRACTION = 0.42
#: Largest font atlas built for the digit (larger digits are that atlas scaled up).
DIGIT_ATLAS_MAX_PX = 200
#: The QR code's side: at most this fraction of the logical height, and of the width.
QR_HEIGHT_FRACTION = 0.56
QR_WIDTH_FRACTION = 0.4
INK: tuple[float, float, float, float] = (0.08, 0.08, 0.1, 1.0)
GREY: tuple[float, float, float, float] = (0.35, 0.35, 0.4, 1.0)
CARD: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)


def qr_layout(modules: int, logical_size: tuple[int, int]) -> tuple[int, int]:
    """(pixels per module, QR side in pixels) for a code of ``modules`` (quiet zone included)."""
    width, height = logical_size
    target = min(height * QR_HEIGHT_FRACTION, width * QR_WIDTH_FRACTION)
    per_module = max(1, int(target // max(1, modules)))
    return per_module, per_module * modules


class KeepsakeLayer(UiLayer):
    """Draws keepsake views into the bound framebuffer. Main (GL) thread only."""

    def __init__(
        self,
        ctx: moderngl.Context,
        corners: moderngl.Buffer,
        atlas: Callable[[int], FontAtlas],
        text_scale: float = 1.0,
    ) -> None:
        super().__init__(ctx, corners, atlas, text_scale)
        self._blank = ctx.texture((1, 1), 1, b"\xff")
        self._qr_texture: moderngl.Texture | None = None
        self._qr_modules: NDArray[np.uint8] | None = None
        self._digit_atlas: FontAtlas | None = None
        self._key: tuple[object, ...] | None = None
        #: Where the QR code was drawn last (logical pixels x0, y0, x1, y1), for tests and stats.
        self.qr_rect: tuple[int, int, int, int] | None = None
        self.layouts = 0

    # -- drawing ---------------------------------------------------------------------------------
    def draw(self, view: KeepsakeView, logical_size: tuple[int, int], quarter_turns: int) -> None:
        if not view.active:
            return
        if view.qr is not None and view.qr is not self._qr_modules:
            self._upload_qr(view.qr)
        key = (
            logical_size,
            view.phase,
            view.count,
            round(view.count_progress, 3) if view.count else 0,
            view.prompt,
            view.hint,
            round(view.remaining_s / max(view.total_s, 1e-6), 3) if view.total_s else 0,
            id(view.qr),
            view.title,
            view.address,
            view.expiry,
            view.message,
        )
        if key != self._key:
            self._upload(self._layout(view, logical_size))
            self._key = key
            self.layouts += 1
        self._render(logical_size, quarter_turns)

    def _upload_qr(self, modules: NDArray[np.uint8]) -> None:
        if self._qr_texture is not None:
            self._qr_texture.release()
        n = modules.shape[0]
        light = np.where(modules > 0, 0, 255).astype(np.uint8)  # dark modules black, the rest white
        tex = self._ctx.texture((n, n), 1, np.ascontiguousarray(light), alignment=1)
        tex.swizzle = "RRR1"
        tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        tex.repeat_x = tex.repeat_y = False
        self._qr_texture = tex
        self._qr_modules = modules

    def _upload(self, frame: UiFrame) -> None:
        self._shapes.upload(
            np.concatenate(frame.shapes) if frame.shapes else np.zeros((0, UI_FLOATS), np.float32)
        )
        for size in set(self._texts) | set(frame.text):
            rows = frame.text.get(size)
            batch = self._texts.get(size)
            if rows is None:
                if batch is not None:
                    batch.upload(np.zeros((0, INSTANCE_FLOATS), np.float32))
                continue
            if batch is None:
                batch = self._texts[size] = TextBatch(self._ctx, self._text_program, self._corners)
            atlas = self._digit_atlas if self._digit_atlas is not None and size == -1 else self._font(size)
            batch.use_atlas(atlas)
            batch.upload(np.concatenate(rows))

    def _render(self, logical_size: tuple[int, int], quarter_turns: int) -> None:
        ctx = self._ctx
        blend_over(ctx)
        if self._shapes.count:
            (self._qr_texture or self._blank).use(0)
            self._u_ui_size.value = logical_size
            self._u_ui_turns.value = quarter_turns
            self._shapes.draw()
        self._u_text_size.value = logical_size
        self._u_text_turns.value = quarter_turns
        for batch in self._texts.values():
            batch.draw()
        ctx.disable(moderngl.BLEND)

    # -- layout ----------------------------------------------------------------------------------
    def _layout(self, view: KeepsakeView, logical_size: tuple[int, int]) -> UiFrame:
        frame = UiFrame(shapes=[], text={})
        self.qr_rect = None
        if view.count:
            self._countdown(frame, view, logical_size)
        if view.prompt:
            self._prompt(frame, view, logical_size)
        if view.qr is not None:
            self._qr_card(frame, view, logical_size)
        if view.message:
            self._message(frame, view.message, logical_size)
        return frame

    def _countdown(self, frame: UiFrame, view: KeepsakeView, logical_size: tuple[int, int]) -> None:
        width, height = logical_size
        unit = min(width, height)
        digit_px = max(24, round(unit * DIGIT_FRACTION * min(max(self._text_scale, 0.5), 1.5)))
        atlas_px = min(digit_px, DIGIT_ATLAS_MAX_PX)
        if self._digit_atlas is None or self._digit_atlas.size_px != atlas_px:
            self._digit_atlas = FontAtlas(atlas_px)
        atlas = self._digit_atlas
        t = view.count_progress
        pop = 1.0 + 0.25 * (1.0 - t) ** 3  # each digit arrives a little larger and settles
        fade = min(1.0, t * 6.0 + 0.2)
        cx, cy = width / 2, height / 2
        r = digit_px * 0.62
        # one quad: a translucent disc (the digit reads on any picture) in an accent ring (software
        # GL pays per pixel covered: no second quad over the same disc)
        frame.shapes.append(
            ui_quad(
                (cx - r, cy - r, cx + r, cy + r),
                (0.0, 0.0, 0.0, 0.35),
                color2=with_alpha(ACCENT, 0.95),
                radius=r,
                border=max(3.0, r * 0.06),
            )
        )
        text = str(view.count)
        m = TextMetrics.of(atlas)
        rows = atlas.layout(text, 0.0, 0.0, with_alpha(WHITE, fade))
        # centre the digit's ink (capital height) on the ring, scaled from the atlas size
        scale = digit_px / atlas.size_px * pop
        ink_cy = (m.ink_top + atlas.ascent) / 2
        text_cx = atlas.measure(text) / 2
        rows[:, [0, 2]] = (rows[:, [0, 2]] - text_cx) * scale + cx
        rows[:, [1, 3]] = (rows[:, [1, 3]] - ink_cy) * scale + cy
        frame.text.setdefault(-1, []).append(rows)
        small = self._font(text_sizes(logical_size, self._text_scale)[0])
        hint = "Press again to cancel"
        sm = TextMetrics.of(small)
        y = cy + r + sm.pad_y * 2
        w = small.measure(hint)
        frame.shapes.append(
            ui_quad(
                (
                    cx - w / 2 - sm.pad_x,
                    y,
                    cx + w / 2 + sm.pad_x,
                    y + sm.ink_bottom - sm.ink_top + 2 * sm.pad_y,
                ),
                PANEL,
                radius=(sm.ink_bottom - sm.ink_top) / 2 + sm.pad_y,
            )
        )
        frame.add_text(small, hint, cx - w / 2, y + sm.pad_y - sm.ink_top, WHITE)

    def _prompt(self, frame: UiFrame, view: KeepsakeView, logical_size: tuple[int, int]) -> None:
        width, height = logical_size
        base_px, message_px = text_sizes(logical_size, self._text_scale)
        big, small = self._font(message_px), self._font(base_px)
        bm, sm = TextMetrics.of(big), TextMetrics.of(small)
        lines = big.wrap(view.prompt, width * 0.8, max_lines=99)
        if len(lines) > 2:  # an organiser's consent text: the smaller size, up to 6 lines
            big, bm = small, sm
            lines = big.wrap(view.prompt, width * 0.8, max_lines=6)
        text_w = max([big.measure(t) for t in lines] + [small.measure(view.hint)])
        box_w = text_w + 2 * bm.pad_x
        box_h = len(lines) * bm.line + bm.pad_y * 2 + (sm.line + sm.pad_y if view.hint else 0) + sm.pad_y * 2
        x0, y0 = (width - box_w) / 2, height * 0.62 - box_h / 2
        frame.shapes.append(
            ui_quad((x0, y0, x0 + box_w, y0 + box_h), (0.0, 0.0, 0.0, 0.72), radius=bm.pad_y * 2)
        )
        y = y0 + bm.pad_y
        for text in lines:
            frame.add_text(big, text, (width - big.measure(text)) / 2, y, ACCENT)
            y += bm.line
        if view.hint:
            y += sm.pad_y
            frame.add_text(small, view.hint, (width - small.measure(view.hint)) / 2, y, WHITE)
            y += sm.line
        if view.total_s > 0:  # the time left to answer, as a shrinking bar along the box's bottom
            bar_h = max(3.0, sm.pad_y)
            left = max(0.0, min(1.0, view.remaining_s / view.total_s))
            inner = box_w - 4 * bm.pad_y
            bx0 = x0 + 2 * bm.pad_y
            by0 = y0 + box_h - bar_h - sm.pad_y
            frame.shapes.append(
                ui_quad((bx0, by0, bx0 + inner, by0 + bar_h), (1.0, 1.0, 1.0, 0.2), radius=bar_h / 2)
            )
            frame.shapes.append(
                ui_quad((bx0, by0, bx0 + inner * left, by0 + bar_h), ACCENT, radius=bar_h / 2)
            )

    def _qr_card(self, frame: UiFrame, view: KeepsakeView, logical_size: tuple[int, int]) -> None:
        assert view.qr is not None
        width, height = logical_size
        base_px, _ = text_sizes(logical_size, self._text_scale)
        font = self._font(base_px)
        m = TextMetrics.of(font)
        n = int(view.qr.shape[0])
        _, side = qr_layout(n, logical_size)
        # the quiet zone is in the code's own white modules; the card adds room for the text
        pad = round(base_px * 0.5)
        text_w = side + 2 * pad
        title = font.elide(view.title, max(text_w, width * 0.3) - 2 * pad)
        address = font.elide(view.address, max(text_w, width * 0.3) - 2 * pad)
        expiry = font.elide(view.expiry, max(text_w, width * 0.3) - 2 * pad)
        card_w = max(side, *(font.measure(t) for t in (title, address, expiry))) + 2 * pad
        card_h = pad + m.line + side + m.line * 2 + pad * 2
        margin = round(base_px * 0.8)
        x0 = round(width - margin - card_w)
        y0 = round(max(margin, (height - card_h) / 2))
        # the card, outlined (no soft shadow: a second quad the size of the card costs software GL)
        frame.shapes.append(
            ui_quad(
                (x0, y0, x0 + card_w, y0 + card_h), CARD, color2=(0.0, 0.0, 0.0, 0.35), radius=pad, border=2.0
            )
        )
        y = y0 + pad
        frame.add_text(font, title, x0 + (card_w - font.measure(title)) / 2, y, INK)
        y += m.line
        qx0 = int(x0 + round((card_w - side) / 2))
        qy0 = int(round(y))
        frame.shapes.append(
            ui_quad(
                (qx0, qy0, qx0 + side, qy0 + side),
                (1.0, 1.0, 1.0, 1.0),
                mode=MODE_THUMB,
                uv=(0.0, 0.0, 1.0, 1.0),
            )
        )
        self.qr_rect = (qx0, qy0, qx0 + side, qy0 + side)
        y = qy0 + side
        frame.add_text(font, address, x0 + (card_w - font.measure(address)) / 2, y, INK)
        y += m.line
        frame.add_text(font, expiry, x0 + (card_w - font.measure(expiry)) / 2, y, GREY)
        if view.total_s > 0:  # the time the code stays on screen, along the card's bottom
            left = max(0.0, min(1.0, view.remaining_s / view.total_s))
            bar_h = max(3.0, pad * 0.4)
            by0 = y0 + card_h - pad * 0.5 - bar_h
            inner = card_w - 2 * pad
            frame.shapes.append(
                ui_quad((x0 + pad, by0, x0 + pad + inner, by0 + bar_h), (0, 0, 0, 0.12), radius=bar_h / 2)
            )
            frame.shapes.append(
                ui_quad((x0 + pad, by0, x0 + pad + inner * left, by0 + bar_h), ACCENT, radius=bar_h / 2)
            )

    def _message(self, frame: UiFrame, text: str, logical_size: tuple[int, int]) -> None:
        width, height = logical_size
        _, message_px = text_sizes(logical_size, self._text_scale)
        big = self._font(message_px)
        m = TextMetrics.of(big)
        shown = big.elide(text, width * 0.9)
        w = big.measure(shown)
        x0, y0 = (width - w) / 2 - m.pad_x, height / 2 - m.line / 2 - m.pad_y
        frame.shapes.append(
            ui_quad(
                (x0, y0, x0 + w + 2 * m.pad_x, y0 + m.line + 2 * m.pad_y),
                (0.0, 0.0, 0.0, 0.75),
                radius=m.pad_y * 2,
            )
        )
        frame.add_text(big, shown, x0 + m.pad_x, y0 + m.pad_y, WHITE)

    def release(self) -> None:
        if self._qr_texture is not None:
            self._qr_texture.release()
            self._qr_texture = None
        self._qr_modules = None
        self._blank.release()
        self._key = None
        super().release()
