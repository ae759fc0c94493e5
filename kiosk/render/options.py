"""What the window and the renderer need to know of the display: a plain record.

The fields mirror the config's ``display`` section (same names and defaults; a test keeps them in
step), so the render package never imports the pydantic config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kiosk.util.options import copy_fields


@dataclass(frozen=True)
class DisplayOptions:
    fullscreen: bool = False
    monitor: int = 0
    width: int = 1280
    height: int = 720
    fit: str = "fit"
    rotate: int = 0
    vsync: bool = True
    title: str = "faceswap-kiosk"
    text_scale: float = 1.0

    @classmethod
    def of(cls, section: Any) -> DisplayOptions:
        """From a ``display`` config section (or anything with these attributes)."""
        return copy_fields(cls, section)
