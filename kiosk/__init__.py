"""faceswap-kiosk: real-time face-swap kiosk for exhibition booths."""

import os
from pathlib import Path

# Privacy: ONNX Runtime (1.2x+) otherwise writes a device id and a usage database to
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime on the first session. It reads this once, when
# onnxruntime is imported, so it is set here, before any kiosk module imports it.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__version__ = "0.1.0"

#: Repository/package root (where shaders/, configs/ and models/ live).
PROJECT_ROOT = Path(__file__).resolve().parent.parent
