"""faceswap-kiosk: real-time face-swap kiosk for exhibition booths."""

import os
from pathlib import Path

# Privacy: ONNX Runtime (1.2x+) otherwise writes a device id and a usage database to
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime on the first session. It reads this once, when
# onnxruntime is imported, so it is set here, before any kiosk module imports it.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
from kiosk.paths import configure_numba_cache

__version__ = "0.1.0"

#: The folder above the ``kiosk`` package: the checkout root when running from a source tree,
#: site-packages when installed. Shipped files are package data: see :mod:`kiosk.paths`.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

configure_numba_cache()
