"""The booth UI demo (screenshots with synthetic pictures) runs and writes what it says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kiosk.tools.demo import main, synthetic_thumb

pytestmark = pytest.mark.gl


def test_demo_writes_screenshots(tmp_path: Path) -> None:
    try:
        main([str(tmp_path), "--size", "640x360", "--docs"])
    except Exception as exc:  # no EGL
        if "EGL" in str(exc) or "OpenGL" in str(exc):
            pytest.skip(str(exc))
        raise
    for name in ("carousel", "carousel_moving", "carousel_scroll", "attract", "debug"):
        img = np.asarray(Image.open(tmp_path / f"{name}.png"))
        assert img.shape == (360, 640, 3) and img.std() > 10
    assert Image.open(tmp_path / "docs-carousel.png").size == (640, 360)


def test_synthetic_thumbs_differ() -> None:
    a, b = synthetic_thumb("Aria", 0), synthetic_thumb("Bruno", 1)
    assert a.shape == b.shape == (128, 128, 3) and a.dtype == np.uint8
    assert np.abs(a.astype(int) - b.astype(int)).mean() > 10
