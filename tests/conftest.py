"""Shared fixtures: a headless GL context, and a private Xvfb server for real-window tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import moderngl


@pytest.fixture(scope="module")
def ctx() -> Iterator[moderngl.Context]:
    """A headless (EGL, Mesa) OpenGL 3.3 context for one test module; skips where there is none."""
    import moderngl

    from kiosk.render.window import release_standalone_context

    try:
        context = moderngl.create_standalone_context(require=330, backend="egl")
    except Exception as exc:  # no libEGL / no Mesa
        pytest.skip(f"EGL OpenGL 3.3 context unavailable: {exc}")
    yield context
    release_standalone_context(context)


@pytest.fixture(scope="session")
def xvfb_display() -> Iterator[str]:
    """Start a private ``Xvfb`` on a display number it picks itself (``-displayfd``, so parallel
    runs never collide); yields ``":N"``. ``-noreset``: by default the server resets when its last
    client disconnects, and a window opened during that reset fails to connect. Skips when Xvfb
    is not installed."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb not installed (apt-get install xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp", "-noreset"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        pytest.skip("Xvfb did not start")
    try:
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(5)
