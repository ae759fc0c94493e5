"""Surfaces the renderer draws into: a glfw window (booth/desk) or an offscreen framebuffer (headless).

Both give the same small API (``ctx``, ``begin_frame``, ``end_frame``, ``poll_events``,
``should_close``, ``read_rgb``, ``close``) so the render loop does not care which it has.
The offscreen surface is ``display.width`` x ``display.height``, like the window, and the same
:class:`~kiosk.render.renderer.Renderer` draws into it, so it shows exactly what the window would.
glfw must be used from the main thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render import xio
from kiosk.render.options import DisplayOptions
from kiosk.util import limits
from kiosk.util.errors import one_line

log = logging.getLogger(__name__)

#: (H, W, 3) uint8, RGB, top row first.
ImageRGB = NDArray[np.uint8]

_GL_VERSION = 330


class DisplayError(RuntimeError):
    """No window (or GL context) could be opened. The message is one line and says what to do."""


class Surface(Protocol):
    """What the render loop needs from a window or an offscreen target."""

    ctx: moderngl.Context

    def begin_frame(self) -> tuple[int, int]: ...
    def end_frame(self) -> None: ...
    def poll_events(self) -> list[str]: ...
    def should_close(self) -> bool: ...
    def read_rgb(self) -> ImageRGB: ...
    def close(self) -> None: ...


def _read_rgb(fbo: moderngl.Framebuffer, size: tuple[int, int]) -> ImageRGB:
    w, h = size
    data = fbo.read(viewport=(0, 0, w, h), components=3, alignment=1)
    # GL rows start at the bottom.
    return np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3)[::-1].copy()


#: zlib level of the PNGs written (screenshots, demo pictures). Level 1 is 3-5x faster than
#: Pillow's default 6 on a camera picture (1280x720: ~0.15 s vs ~0.75 s on a loaded 2-core machine)
#: for files about 1.3x larger.
PNG_LEVEL = 1


def save_png(path: str | Path, rgb: ImageRGB) -> Path:
    """Write an (H, W, 3) RGB image as PNG (zlib level :data:`PNG_LEVEL`); returns the path."""
    import cv2

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2BGR)
    ok, data = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, PNG_LEVEL])  # releases the GIL
    if not ok:
        raise OSError(f"{p}: PNG encoding failed")
    p.write_bytes(data.tobytes())
    return p


def gil_free_finish(backend: str) -> Callable[[], None] | None:
    """``glFinish`` of the current EGL context called through ctypes, which lets go of the GIL while
    it waits; None where it cannot be had (not EGL, no libEGL, no such function).

    Every moderngl call holds the GIL. With no buffer swap to flush it (the offscreen surface), a
    software renderer (Mesa llvmpipe) rasterises a frame only when the next frame's texture upload
    needs it, inside ``Texture.write``: measured with py-spy in a headless kiosk swapping three
    faces on two cores, the render loop held the GIL 69 % of the time there, and the swap thread
    waited for it (docs/benchmarks.md, "the GIL")."""
    if backend != "egl" or not sys.platform.startswith("linux"):
        return None
    try:
        egl = ctypes.CDLL("libEGL.so.1")
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        address = egl.eglGetProcAddress(b"glFinish")
    except (OSError, AttributeError):
        return None
    if not address:
        return None
    return ctypes.CFUNCTYPE(None)(address)  # type: ignore[no-any-return]


class OffscreenSurface:
    """A standalone (EGL, no display needed) GL context rendering into a ``width`` x ``height`` FBO.
    Each frame ends in a ``glFinish`` that lets go of the GIL (:func:`gil_free_finish`)."""

    def __init__(self, width: int, height: int) -> None:
        self.ctx, backend = _standalone_context()
        self._finish = gil_free_finish(backend) or self.ctx.finish
        self._size = (int(width), int(height))
        self._color = self.ctx.renderbuffer(self._size, components=4)
        self._fbo = self.ctx.framebuffer(color_attachments=[self._color])

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    def begin_frame(self) -> tuple[int, int]:
        self._fbo.use()
        return self._size

    def end_frame(self) -> None:
        self._finish()  # the frame drawn now, with the GIL free for the other threads

    def poll_events(self) -> list[str]:
        return []

    def should_close(self) -> bool:
        return False

    def read_rgb(self) -> ImageRGB:
        return _read_rgb(self._fbo, self._size)

    def close(self) -> None:
        self._fbo.release()
        self._color.release()
        release_standalone_context(self.ctx)


def _limit_error(exc: BaseException | None, what: str) -> DisplayError | None:
    """A DisplayError naming the resource limit that explains a failed context, if one does:
    glcontext reports EMFILE as "cannot find libGL" and Mesa low memory as a failed EGL init."""
    problem = limits.limit_problem(exc, what=what, fds=limits.GL_FDS, memory=limits.GL_ADDRESS_SPACE)
    return DisplayError(problem) if problem else None


def _check_gl_headroom(what: str) -> None:
    """Refuse a GL context the limits leave no room for (llvmpipe segfaults while compiling
    shaders under a tight ``ulimit -v`` instead of failing)."""
    problem = limits.check_headroom(what, memory=limits.GL_ADDRESS_SPACE)
    if problem:
        raise DisplayError(problem)


def _standalone_context() -> tuple[moderngl.Context, str]:
    """A standalone context, and the backend that made it ("egl", or "default")."""
    what = "cannot create an offscreen OpenGL 3.3 context"
    _check_gl_headroom(what)
    errors = []
    for backend in ("egl", None):
        options: dict[str, Any] = {} if backend is None else {"backend": backend}
        try:
            return moderngl.create_standalone_context(require=_GL_VERSION, **options), backend or "default"
        except Exception as exc:  # moderngl/glcontext raise plain Exception subclasses
            limit = _limit_error(exc, what)
            if limit is not None:
                raise limit from None
            errors.append(f"{backend or 'default'}: {one_line(exc)}")
    raise DisplayError(
        "cannot create an offscreen OpenGL 3.3 context ("
        + "; ".join(errors)
        + "). Install Mesa's EGL (libegl1, libgl1-mesa-dri)"
    )


def release_standalone_context(ctx: moderngl.Context) -> None:
    """Release a standalone context and let go of EGL's per-thread state.

    glcontext's EGL backend leaves the context current after release; a glfw (GLX) window made
    current later on the same thread then dies with X error BadAccess. eglReleaseThread() ends that.
    """
    ctx.release()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libEGL.so.1").eglReleaseThread()


#: Modifier bits of glfw's key callback and the prefix each adds, in the reported order.
_MODIFIERS: tuple[tuple[int, str], ...] = ((0x2, "CTRL"), (0x1, "SHIFT"), (0x4, "ALT"), (0x8, "SUPER"))
#: Keys that are modifiers themselves: never reported on their own.
_MODIFIER_KEYS = frozenset(
    f"{side}_{mod}" for side in ("LEFT", "RIGHT") for mod in ("SHIFT", "CONTROL", "ALT", "SUPER")
)


def key_name(name: str, mods: int) -> str | None:
    """The reported name of key ``name`` pressed with glfw modifier bits ``mods``.

    ``"Q"`` with Ctrl+Shift is ``"CTRL+SHIFT+Q"`` (always in the order CTRL, SHIFT, ALT, SUPER);
    a modifier key alone is None; Caps/Num Lock bits are ignored.
    """
    if name in _MODIFIER_KEYS:
        return None
    prefix = "".join(f"{label}+" for bit, label in _MODIFIERS if mods & bit)
    return prefix + name


def _key_names() -> dict[int, str]:
    import glfw

    names: dict[int, str] = {}
    for attr in dir(glfw):
        if attr.startswith("KEY_") and attr not in {"KEY_UNKNOWN", "KEY_LAST"}:
            names.setdefault(int(getattr(glfw, attr)), attr[4:])
    return names


class Window:
    """A glfw window with a GL 3.3 core context: fullscreen on ``display.monitor`` or windowed."""

    def __init__(self, display: DisplayOptions) -> None:
        if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        ):
            raise DisplayError(
                "cannot open a window: no display (DISPLAY unset). Run with --headless or start X"
            )
        _check_gl_headroom("cannot open a window")
        try:
            import glfw  # finds libglfw by running a child process (pipes: descriptors)
        except OSError as exc:
            limit = _limit_error(exc, "cannot open a window")
            if limit is not None:
                raise limit from None
            raise DisplayError(f"cannot open a window: glfw could not load ({exc})") from None

        self._glfw = glfw
        self._errors: list[str] = []
        glfw.set_error_callback(self._on_glfw_error)
        if not glfw.init():
            limit = _limit_error(None, "cannot open a window")
            if limit is not None:
                raise limit
            raise DisplayError(
                f"cannot open a window: glfw could not start ({self._last_error()}). Run with --headless"
            )
        if os.environ.get("DISPLAY"):
            xio.install()  # the X server going away ends the kiosk cleanly, reported (status 4)
        self._keys: list[str] = []
        self._readback: moderngl.Framebuffer | None = None
        self._key_names = _key_names()
        try:
            self._window = self._create(display)
        except DisplayError:
            glfw.terminate()
            raise
        glfw.make_context_current(self._window)
        glfw.swap_interval(1 if display.vsync else 0)
        glfw.set_key_callback(self._window, self._on_key)
        if display.fullscreen:
            glfw.set_input_mode(self._window, glfw.CURSOR, glfw.CURSOR_HIDDEN)
        try:
            self.ctx = moderngl.create_context(require=_GL_VERSION)
        except Exception as exc:
            glfw.destroy_window(self._window)
            glfw.terminate()
            limit = _limit_error(exc, "cannot open a window")
            if limit is not None:
                raise limit from None
            raise DisplayError(f"cannot open a window: no OpenGL 3.3 context ({exc})") from None
        self.fullscreen = display.fullscreen
        log.info(
            "window %dx%d %s, %s, vsync %s",
            *self.framebuffer_size(),
            "fullscreen" if display.fullscreen else "windowed",
            self.ctx.info.get("GL_RENDERER", "?"),
            "on" if display.vsync else "off",
        )

    def _on_glfw_error(self, code: int, description: bytes | str) -> None:
        text = description.decode(errors="replace") if isinstance(description, bytes) else str(description)
        self._errors.append(text)
        log.debug("glfw error %#x: %s", code, text)

    def _last_error(self) -> str:
        return self._errors[-1] if self._errors else "unknown error"

    def _create(self, display: DisplayOptions) -> Any:
        glfw = self._glfw
        glfw.default_window_hints()
        glfw.window_hint(glfw.CLIENT_API, glfw.OPENGL_API)
        glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, 3)
        glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, 3)
        glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
        glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
        glfw.window_hint(glfw.DOUBLEBUFFER, True)
        monitor = None
        width, height = display.width, display.height
        if display.fullscreen:
            monitors = glfw.get_monitors() or []
            if display.monitor < len(monitors):
                monitor = monitors[display.monitor]
            else:
                monitor = glfw.get_primary_monitor()
                log.warning(
                    "display.monitor %d not found (%d monitor(s) connected); using the primary monitor",
                    display.monitor,
                    len(monitors),
                )
            if monitor is None:
                raise DisplayError(
                    "cannot open a fullscreen window: no monitor found. Set display.fullscreen: false"
                )
            mode = glfw.get_video_mode(monitor)
            width, height = mode.size.width, mode.size.height
            # Match the current mode so the switch is instant (no mode change on the monitor).
            glfw.window_hint(glfw.RED_BITS, mode.bits.red)
            glfw.window_hint(glfw.GREEN_BITS, mode.bits.green)
            glfw.window_hint(glfw.BLUE_BITS, mode.bits.blue)
            glfw.window_hint(glfw.REFRESH_RATE, mode.refresh_rate)
        window = glfw.create_window(width, height, display.title, monitor, None)
        if not window:
            limit = _limit_error(None, "cannot open a window")
            if limit is not None:
                raise limit
            raise DisplayError(f"cannot open a window: {self._last_error()} (an OpenGL 3.3 driver is needed)")
        return window

    def _on_key(self, window: Any, key: int, scancode: int, action: int, mods: int) -> None:
        if action == self._glfw.PRESS:
            name = self._key_names.get(key)
            reported = None if name is None else key_name(name, mods)
            if reported is not None:
                self._keys.append(reported)

    def framebuffer_size(self) -> tuple[int, int]:
        w, h = self._glfw.get_framebuffer_size(self._window)
        return int(w), int(h)

    def begin_frame(self) -> tuple[int, int]:
        size = self.framebuffer_size()
        screen = self.ctx.screen
        screen.viewport = (0, 0, *size)
        screen.use()
        return size

    def end_frame(self) -> None:
        self._glfw.swap_buffers(self._window)

    def poll_events(self) -> list[str]:
        """Keys pressed since the last call, e.g. ``["RIGHT", "CTRL+SHIFT+Q"]`` (see :func:`key_name`)."""
        self._glfw.poll_events()
        keys, self._keys = self._keys, []
        return keys

    def should_close(self) -> bool:
        return bool(self._glfw.window_should_close(self._window))

    def read_rgb(self) -> ImageRGB:
        # moderngl's read of the default framebuffer selects GL_COLOR_ATTACHMENT0, which is a GL
        # error there; blit the back buffer into our own framebuffer and read that instead.
        size = self.framebuffer_size()
        if self._readback is None or self._readback.size != size:
            self._release_readback()
            self._readback = self.ctx.framebuffer(
                color_attachments=[self.ctx.renderbuffer(size, components=4)]
            )
        self.ctx.copy_framebuffer(self._readback, self.ctx.screen)
        rgb = _read_rgb(self._readback, size)
        self.ctx.screen.use()
        return rgb

    def _release_readback(self) -> None:
        if self._readback is not None:
            for attachment in self._readback.color_attachments:
                attachment.release()
            self._readback.release()
            self._readback = None

    def close(self) -> None:
        if self._window is None:
            return
        self._release_readback()
        self.ctx.release()
        self._glfw.destroy_window(self._window)
        self._window = None
        self._glfw.terminate()
        self._glfw.set_error_callback(None)  # type: ignore[arg-type]


def open_surface(display: DisplayOptions, headless: bool) -> Window | OffscreenSurface:
    """A :class:`Window` for ``display``, or an :class:`OffscreenSurface` of its width x height."""
    if headless:
        return OffscreenSurface(display.width, display.height)
    return Window(display)
