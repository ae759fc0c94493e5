"""faceswap-kiosk: real-time face-swap kiosk for exhibition booths."""

from pathlib import Path

from kiosk.paths import configure_numba_cache

__version__ = "0.1.0"

#: The folder above the ``kiosk`` package: the checkout root when running from a source tree,
#: site-packages when installed. Shipped files are package data: see :mod:`kiosk.paths`.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

configure_numba_cache()
