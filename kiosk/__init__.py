"""faceswap-kiosk: real-time face-swap kiosk for exhibition booths."""

from pathlib import Path

__version__ = "0.1.0"

#: Repository/package root (where shaders/, configs/ and models/ live).
PROJECT_ROOT = Path(__file__).resolve().parent.parent
