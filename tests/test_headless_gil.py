"""The headless surface's frame ends in a ``glFinish`` that lets go of the GIL (kiosk/render/window.py):
moderngl holds the GIL in every call, and with no buffer swap a software renderer (Mesa llvmpipe) drew
each frame inside the next ``Texture.write``, so the swap thread waited for the GIL most of the time
(py-spy on a headless kiosk with three faces: 69 % of the samples there; ``benchmarks/render_gil.py``)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import Renderer
from kiosk.render.window import OffscreenSurface, gil_free_finish

pytestmark = pytest.mark.gl


def test_the_frame_ends_with_the_gil_free_while_the_driver_draws() -> None:
    surface = OffscreenSurface(1280, 720)
    try:
        renderer = Renderer(surface.ctx, DisplayOptions())
        frame = np.random.default_rng(1).integers(0, 255, (720, 1280, 3), np.uint8)
        ending, seen, stop = [False], [0], threading.Event()

        def other() -> None:  # pure Python: it runs only while the render thread lets go of the GIL
            while not stop.is_set():
                if ending[0]:
                    seen[0] += 1

        renderer.set_frame(frame)
        renderer.draw(surface.begin_frame())
        surface.ctx.finish()  # shaders and textures made before the other thread starts
        old = sys.getswitchinterval()
        sys.setswitchinterval(0.05)  # the render thread keeps the GIL but where it blocks
        worker = threading.Thread(target=other, daemon=True)
        try:
            worker.start()
            for _ in range(5):  # tries: a loaded machine may not run the other thread in time
                for _ in range(6):  # frames the driver has not drawn yet
                    renderer.set_frame(frame)
                    renderer.draw(surface.begin_frame())
                ending[0] = True
                surface.end_frame()
                ending[0] = False
                if seen[0]:
                    break
        finally:
            stop.set()
            sys.setswitchinterval(old)
            worker.join()
        assert seen[0] > 0, "the other thread never ran during end_frame (before: end_frame did nothing)"
        assert surface.read_rgb().any()  # and the frame was drawn
    finally:
        surface.close()


def test_only_an_egl_context_gets_the_ctypes_finish() -> None:
    assert gil_free_finish("default") is None
    finish = gil_free_finish("egl")
    assert finish is None or callable(finish)
