"""What the kiosk draws each frame: the camera frame (fit/fill, rotated) with the swapped faces
composited over it, the booth UI and the text overlay.

The frame is uploaded as-is: a (H, W, 3) uint8 BGR array goes into a texture whose swizzle
reads it as RGB, so there is no colour conversion or copy on the CPU. The texture is reused
while the frame size stays the same. Scaling and rotation happen in ``shaders/frame.vert``
from the frame and framebuffer sizes; the letterbox bars are the black clear colour.
Face crops given to :meth:`Renderer.set_frame` are pasted back in ``shaders/frame.frag``
(:mod:`kiosk.render.composite`); the booth layer (:mod:`kiosk.render.booth_layer`) and the text
overlay are drawn on top in logical (upright screen) pixels.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Sequence

import cv2
import moderngl
import numpy as np

from kiosk.render.booth_layer import BoothLayer
from kiosk.render.booth_ui import BoothView, FaceThumb
from kiosk.render.composite import FaceCrops
from kiosk.render.keepsake_layer import KeepsakeLayer
from kiosk.render.keepsake_ui import KeepsakeView
from kiosk.render.options import DisplayOptions
from kiosk.render.overlay import OverlayState, TextOverlay
from kiosk.render.shaders import load_program, uniform
from kiosk.types import FrameBGR, SwappedFace

__all__ = ["BoothView", "FaceThumb", "KeepsakeView", "OverlayState", "Renderer"]

log = logging.getLogger(__name__)

#: The unit quad as a triangle strip, (0,0) top-left to (1,1) bottom-right.
_CORNERS = np.array([0, 0, 1, 0, 0, 1, 1, 1], dtype=np.float32)


def logical_size(fb_size: tuple[int, int], rotate_deg: int) -> tuple[int, int]:
    """The upright screen size the viewer sees: ``fb_size`` with sides swapped for 90/270."""
    w, h = fb_size
    return (h, w) if (rotate_deg // 90) % 2 else (w, h)


#: A frame shown at less than 1 / this of its size is shrunk to the size it is shown at before its
#: upload (``cv2.INTER_AREA``): a 4K camera on a 1280x720 screen uploads 2.8 MB, not 25 MB (on
#: Mesa llvmpipe 9.5 ms of the render loop a frame, holding the GIL), and the screen samples a
#: properly averaged picture instead of every third texel.
SHRINK_FROM = 1.5


class Renderer:
    """Draws frames and overlays into whatever framebuffer is bound. Main (GL) thread only."""

    def __init__(self, ctx: moderngl.Context, display: DisplayOptions) -> None:
        self._ctx = ctx
        self._quarter_turns = (display.rotate // 90) % 4
        self._rotate_deg = display.rotate
        self._corners = ctx.buffer(_CORNERS.tobytes())
        self._frame_program = load_program(ctx, "frame")
        uniform(self._frame_program, "u_frame").value = 0
        uniform(self._frame_program, "u_quarter_turns").value = self._quarter_turns
        uniform(self._frame_program, "u_fill").value = display.fit == "fill"
        self._u_frame_size = uniform(self._frame_program, "u_frame_size")
        self._u_target_size = uniform(self._frame_program, "u_target_size")
        self._frame_vao = ctx.vertex_array(self._frame_program, [(self._corners, "2f", "in_corner")])
        self._frame_texture: moderngl.Texture | None = None
        self._crops = FaceCrops(ctx, self._frame_program)
        self._overlay = TextOverlay(ctx, self._corners, display.text_scale)
        self._booth = BoothLayer(ctx, self._corners, self._overlay.atlas, display.text_scale)
        self._text_scale = display.text_scale
        self._keepsake: KeepsakeLayer | None = None  # built with the first keepsake drawn
        self._empty_overlay = OverlayState()
        #: How many frame textures were created (a new one only when the frame size changes).
        self.frame_textures_created = 0
        self._fill = display.fit == "fill"
        self._frame_px: tuple[int, int] | None = None  # the frame's own size (the texture's may be less)
        self._screen_px: tuple[int, int] | None = None  # the upright screen of the last draw
        self._shrunk: FrameBGR | None = None  # the reused buffer of a frame shrunk to the screen

    @property
    def frame_size(self) -> tuple[int, int] | None:
        """(width, height) of the frame on show, None before the first :meth:`set_frame`."""
        return None if self._frame_texture is None else self._frame_px

    def texture_size(self, w: int, h: int) -> tuple[int, int]:
        """The size a ``w`` x ``h`` frame is uploaded at: its own, or, when the last screen drawn
        shows it at less than 1 / :data:`SHRINK_FROM` of its size, the size it is shown at."""
        screen = self._screen_px
        if screen is None:
            return w, h
        ratios = (screen[0] / w, screen[1] / h)
        shown = max(ratios) if self._fill else min(ratios)
        if shown * SHRINK_FROM > 1.0:
            return w, h
        return max(1, math.ceil(w * shown)), max(1, math.ceil(h * shown))

    @property
    def booth(self) -> BoothLayer:
        """The booth UI layer (counters for tests and stats)."""
        return self._booth

    @property
    def keepsake(self) -> KeepsakeLayer | None:
        """The keepsake layer (None until a keepsake was first drawn)."""
        return self._keepsake

    @property
    def face_crops(self) -> FaceCrops:
        """The composited face crops (counters and layout, for tests and stats)."""
        return self._crops

    def set_frame(self, frame_bgr: FrameBGR, faces: Sequence[SwappedFace] | None = None) -> None:
        """Upload a new frame; it stays on screen until the next call.

        ``faces``: swapped crops with their frame→crop affines and crop-space alphas, pasted back
        over the frame by the frame shader (the same mask as :mod:`kiosk.inference.paste` draws);
        None or empty shows the frame as it is.
        """
        if frame_bgr.ndim != 3 or frame_bgr.shape[2] != 3 or frame_bgr.dtype != np.uint8:
            raise ValueError(f"expected a (H, W, 3) uint8 BGR frame, got {frame_bgr.shape} {frame_bgr.dtype}")
        h, w = frame_bgr.shape[:2]
        self._frame_px = (w, h)
        size = self.texture_size(w, h)
        if size != (w, h):  # a 4K camera on a 1080p screen: shrunk first (the GIL is free in cv2)
            if self._shrunk is None or self._shrunk.shape[:2] != (size[1], size[0]):
                self._shrunk = np.empty((size[1], size[0], 3), np.uint8)
            cv2.resize(frame_bgr, size, dst=self._shrunk, interpolation=cv2.INTER_AREA)
            frame_bgr = self._shrunk
        tex = self._frame_texture
        if tex is None or tex.size != size:
            if tex is not None:
                tex.release()
            tex = self._ctx.texture(size, 3, dtype="f1", alignment=1)
            tex.swizzle = "BGR1"  # bytes are B, G, R: sample them as R, G, B
            tex.filter = (moderngl.LINEAR, moderngl.LINEAR)
            tex.repeat_x = tex.repeat_y = False
            self._frame_texture = tex
            self.frame_textures_created += 1
        if not frame_bgr.flags.c_contiguous:  # a view (crop, flip): the one case that needs a copy
            frame_bgr = np.ascontiguousarray(frame_bgr)
        tex.write(frame_bgr, alignment=1)
        self._crops.set(faces or ())

    def clear_frame(self) -> None:
        """Forget the frame: :meth:`draw` shows black (plus the overlay) until the next one."""
        if self._frame_texture is not None:
            self._frame_texture.release()
            self._frame_texture = None
        self._crops.clear()

    def draw(
        self,
        fb_size: tuple[int, int],
        overlay: OverlayState | None = None,
        booth: BoothView | None = None,
        now: float | None = None,
        keepsake: KeepsakeView | None = None,
    ) -> None:
        """Clear, draw the frame (or black), the booth UI, the keepsake flow and the overlay into
        the bound framebuffer.

        ``booth``: carousel, banner, attract screen and badge (None: none of them); its warnings
        join the overlay's: listed in the debug block when it is open, else the staff marker. ``now``: time.monotonic() for the
        booth's animations (default: the clock now). ``keepsake``: the countdown, consent prompt
        or QR code of :mod:`kiosk.keepsake.flow` (None or idle: nothing).
        """
        w, h = int(fb_size[0]), int(fb_size[1])
        if w <= 0 or h <= 0:  # minimised window
            return
        ctx = self._ctx
        ctx.viewport = (0, 0, w, h)
        ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE | moderngl.BLEND)
        ctx.clear(0.0, 0.0, 0.0, 1.0)
        tex = self._frame_texture
        if tex is not None:
            tex.use(0)
            self._crops.bind()
            self._u_frame_size.value = self._frame_px or tex.size  # the crops' affines are in its pixels
            self._u_target_size.value = (w, h)
            self._frame_vao.render(moderngl.TRIANGLE_STRIP, vertices=4)
        logical = logical_size((w, h), self._rotate_deg)
        self._screen_px = logical
        overlay = overlay or self._empty_overlay
        insets = (0.0, 0.0)
        if booth is not None:
            insets = self._booth.draw(
                booth,
                logical,
                self._quarter_turns,
                time.monotonic() if now is None else now,
                status_shown=bool(overlay.status),
            )
            extra = [w for w in booth.warnings if w not in overlay.warnings]
            if extra:  # the debug block lists them; closed, the staff marker says they wait
                overlay = dataclasses.replace(overlay, warnings=[*overlay.warnings, *extra])
        if keepsake is not None and keepsake.active:
            if self._keepsake is None:
                self._keepsake = KeepsakeLayer(ctx, self._corners, self._overlay.atlas, self._text_scale)
            self._keepsake.draw(keepsake, logical, self._quarter_turns)
        self._overlay.draw(overlay, logical, self._quarter_turns, top_inset=insets[0], bottom_inset=insets[1])

    def release(self) -> None:
        """Free the GL objects (call with the context still current)."""
        self.clear_frame()
        self._crops.release()
        self._booth.release()
        if self._keepsake is not None:
            self._keepsake.release()
            self._keepsake = None
        self._overlay.release()
        self._frame_vao.release()
        self._frame_program.release()
        self._corners.release()
