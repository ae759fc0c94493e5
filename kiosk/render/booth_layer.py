"""Draws a :class:`~kiosk.render.booth_ui.BoothView`: carousel, banner, attract screen, swap badge.

Shapes are instanced quads of ``shaders/ui.*`` (rounded rectangles: solid, gradient, or a
thumbnail sampled from one atlas texture, with border and soft shadow edges; the rows are
:mod:`kiosk.render.ui_quads`); text uses the overlay's font atlases and ``shaders/text.*``.
Everything is laid out in logical pixels and rotated onto the framebuffer in the vertex shaders.

The layer composes its parts: the thumbnail atlas (:class:`~kiosk.render.thumb_atlas.ThumbAtlas`,
rebuilt and uploaded, with mipmaps, only when the set of face keys changes), the pure layout
(:func:`~kiosk.render.booth_layout.lay_out_booth`), the carousel's motion and the attract face's
fade. Instances are rebuilt only when something visible changes: every frame during a
transition, not at all while the booth is settled.
"""

from __future__ import annotations

from collections.abc import Callable

import moderngl
import numpy as np

from kiosk.render.booth_attract import AttractFade
from kiosk.render.booth_layout import lay_out_booth
from kiosk.render.booth_ui import (
    BoothView,
    CarouselMotion,
    carousel_metrics,
    carousel_scrolls,
    carousel_tiles,
)
from kiosk.render.font_atlas import INSTANCE_FLOATS, FontAtlas
from kiosk.render.overlay import TextBatch
from kiosk.render.shaders import blend_over
from kiosk.render.thumb_atlas import ThumbAtlas
from kiosk.render.ui_layer import UiLayer
from kiosk.render.ui_quads import UI_FLOATS, UiFrame


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
        self._thumbs = ThumbAtlas(ctx)
        self._motion = CarouselMotion()
        self._attract = AttractFade()
        self._key: tuple[object, ...] | None = None
        self._insets = (0.0, 0.0)
        #: How many times the instances were laid out (changes only while something moves).
        self.layouts = 0

    @property
    def thumb_atlas_builds(self) -> int:
        """How many times the thumbnail atlas was built and uploaded."""
        return self._thumbs.builds

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
        n = len(view.faces)
        width = logical_size[0]
        metrics = carousel_metrics(logical_size, self._text_scale)
        ring = carousel_scrolls(n, width, metrics)
        position = self._motion.position(view.selected, view.t_switched, n, ring, now)
        # Only the faces on screen (and a window around them) are in the atlas: a large library
        # never has all its thumbnails decoded and uploaded at once.
        wanted = [t.index for t in carousel_tiles(n, position, width, metrics)]
        self._thumbs.sync(view.faces, round(position), [*wanted, view.attract_index])
        fade = self._attract.fade(view, now)
        key = (
            logical_size,
            round(position, 5),
            round(fade, 4),
            self._thumbs.keys,
            self._thumbs.builds,
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
            frame = lay_out_booth(
                view,
                logical_size,
                position,
                fade,
                status_shown,
                fonts=self._font,
                text_scale=self._text_scale,
                uv=self._thumbs.uv,
            )
            self._upload(frame)
            self._insets = (frame.top_inset, frame.bottom_inset)
            self._key = key
            self.layouts += 1
        self._render(logical_size, quarter_turns)
        return self._insets

    def _upload(self, frame: UiFrame) -> None:
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
            (self._thumbs.texture or self._blank).use(0)
            self._u_ui_size.value = logical_size
            self._u_ui_turns.value = quarter_turns
            self._shapes.draw()
        self._u_text_size.value = logical_size
        self._u_text_turns.value = quarter_turns
        for batch in self._texts.values():
            batch.draw()
        ctx.disable(moderngl.BLEND)

    def release(self) -> None:
        self._thumbs.release()
        self._blank.release()
        self._key = None
        super().release()


__all__ = ["BoothLayer"]
