"""Stand-in ONNX models for the tests: re-exported from :mod:`kiosk.tools.standins`, where the
generator lives so that ``kiosk bench --standins`` builds exactly the same models."""

from kiosk.tools.standins import (
    RETINAFACE_OUTPUT_NAMES,
    SCRFD_OUTPUT_NAMES,
    STANDIN_FILES,
    make_all,
    make_detector,
    make_embedder,
    make_enhancer,
    make_retinaface,
    make_swapper,
    white_square_frame,
)

__all__ = [
    "RETINAFACE_OUTPUT_NAMES",
    "SCRFD_OUTPUT_NAMES",
    "STANDIN_FILES",
    "make_all",
    "make_detector",
    "make_embedder",
    "make_enhancer",
    "make_retinaface",
    "make_swapper",
    "white_square_frame",
]
