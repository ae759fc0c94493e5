"""What the keepsake layer draws (:class:`KeepsakeView`): plain data, no GL in here.

The keepsake flow (:mod:`kiosk.keepsake.flow`) builds one per frame; the layer
(:mod:`kiosk.render.keepsake_layer`) draws whichever parts are set: the countdown's digit over the
live picture, the consent prompt, the QR code panel with its address, or a failure line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from kiosk.types import FrameBGR


@dataclass(frozen=True)
class KeepsakeView:
    """The keepsake flow's frame, frozen."""

    #: The flow's phase (idle, consent, countdown, capture, confirm, saving, show, failed), for stats and tests.
    phase: str
    #: The countdown's digit (3, 2, 1; 0: none), and how far into that second we are (0..1).
    count: int = 0
    count_progress: float = 0.0
    #: Stop uploading new frames: the screen shows the captured picture.
    freeze: bool = False
    #: The still to show instead of the frozen frame, once composited; ``still_serial`` changes
    #: with each new still (the loop uploads it once).
    still_bgr: FrameBGR | None = None
    still_serial: int = 0
    #: Big centred prompt (consent) and its smaller second line.
    prompt: str = ""
    hint: str = ""
    #: Seconds left of the consent question or of the QR code on screen, of ``total_s``.
    remaining_s: float = 0.0
    total_s: float = 0.0
    #: The QR code's modules (1: dark, quiet zone included), its title and the short address.
    qr: NDArray[np.uint8] | None = None
    title: str = ""
    address: str = ""
    #: "Deleted after 15 min" (the QR panel's last line).
    expiry: str = ""
    #: One line when something failed.
    message: str = ""

    @property
    def active(self) -> bool:
        return self.phase != "idle"
