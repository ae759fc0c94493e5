"""The QR code a visitor scans: the keepsake's address as a module matrix (``segno``, pure Python).

The renderer draws the matrix as a texture sampled nearest-neighbour, each module a whole number of
screen pixels (:mod:`kiosk.render.keepsake_layer`), so a phone camera (and OpenCV's
``cv2.QRCodeDetector`` reading the kiosk's own screenshot) sees sharp modules.
"""

from __future__ import annotations

import numpy as np
import segno
from numpy.typing import NDArray

#: Light modules around the code (the QR standard's quiet zone).
QUIET_ZONE = 4


def qr_matrix(text: str, border: int = QUIET_ZONE) -> NDArray[np.uint8]:
    """``text`` as a QR code: (N, N) uint8, 1 for a dark module, with ``border`` light modules
    around it. Error correction M (15 %) or better when the size allows; never a Micro QR (phones'
    camera apps do not read those). ValueError when the text is too long for any QR code."""
    try:
        code = segno.make_qr(text, error="m", boost_error=True)
    except segno.DataOverflowError as exc:
        raise ValueError(f"address too long for a QR code ({len(text)} characters)") from exc
    rows = [list(row) for row in code.matrix_iter(scale=1, border=border)]
    return np.asarray(rows, dtype=np.uint8)
