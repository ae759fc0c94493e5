"""One check, for test modules that run the whole kiosk headless: skip them without EGL."""

from __future__ import annotations

import pytest


def egl_available() -> bool:
    try:
        import moderngl

        from kiosk.render.window import release_standalone_context

        # Released as the kiosk does (eglReleaseThread too): a context left current on this thread
        # makes a glfw window opened later here fail with X error BadAccess.
        release_standalone_context(moderngl.create_standalone_context(backend="egl"))
        return True
    except Exception:
        return False


def skip_module_without_egl() -> None:
    """Call at module level: skips the whole module where no EGL/OpenGL context can be made."""
    if not egl_available():
        pytest.skip("no EGL/OpenGL context available (install libegl1 and Mesa)", allow_module_level=True)
