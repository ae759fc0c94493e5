"""The GL side the booth and keepsake layers share: a growable instance buffer of UI quads
(:class:`UiBatch`) and the :class:`UiLayer` base that owns the ``ui`` and ``text`` programs, their
uniforms, one shape batch and a text batch per font size. Main (GL) thread only.

What the rows mean is :mod:`kiosk.render.ui_quads`; each layer lays its own view out and uploads it.
"""

from __future__ import annotations

from collections.abc import Callable

import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render.font_atlas import FontAtlas
from kiosk.render.overlay import TextBatch
from kiosk.render.shaders import load_program, uniform
from kiosk.render.ui_quads import UI_FLOATS


class UiBatch:
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
        self._shapes = UiBatch(ctx, self._ui_program, corners)
        self._texts: dict[int, TextBatch] = {}

    def release(self) -> None:
        """Free the shared GL objects; a subclass frees its own first, then calls this."""
        self._shapes.release()
        for batch in self._texts.values():
            batch.release()
        self._texts.clear()
        self._ui_program.release()
        self._text_program.release()
