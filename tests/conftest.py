"""Shared fixtures: a private Xvfb server for real-window tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def xvfb_display() -> Iterator[str]:
    """Start a private ``Xvfb`` on a display number it picks itself (``-displayfd``, so parallel
    runs never collide); yields ``":N"``. Skips when Xvfb is not installed."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb not installed (apt-get install xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp"],
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
