"""A real face (the NASA astronaut photo) found by the real det_500m, swapped by the stand-in swapper
(a strong tint of the visitor's own face), with any mask / colour options. Import with
``from mask_fixtures import *  # noqa: F403``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from inference_fixtures import make_cfg

from kiosk.config import KioskConfig
from kiosk.inference.mask import MaskBuilder, nose_mouth_px
from kiosk.processing.models import read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.types import Face

__all__ = ["ASTRONAUT", "CLASSIC_SOURCE", "astronaut", "face_regions", "mask_cfg", "mask_pipe"]

ASTRONAUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "astronaut_eileen_collins_nasa.png"
#: The face the classic swap puts onto the astronaut (public domain, shipped for the demo).
CLASSIC_SOURCE = (
    Path(__file__).resolve().parents[1] / "kiosk" / "data" / "demo" / "source_face_fred_marshall_1961.jpg"
)
#: The bundled face mesh (the classic swap v2).
MESH = "package:data/models/face_mesh_468.onnx"


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    return read_image(ASTRONAUT)


def mask_cfg(
    standin_dir: Path,
    det: Path,
    processing: dict[str, Any] | None = None,
    swapper: str = "inswapper_128.onnx",
    **mask: Any,
) -> KioskConfig:
    """``swapper="classic+mesh"``: the classic swap v2 (the bundled face mesh)."""
    extra = {"mesh": MESH} if swapper == "classic+mesh" else {}
    swapper = "classic" if swapper == "classic+mesh" else swapper
    cfg = make_cfg(standin_dir, detector=str(det), enhancer="GFPGANv1.4.onnx", swapper=swapper, **extra)
    proc = cfg.processing.model_copy(update={"max_faces": 1, **(processing or {})})
    return KioskConfig.model_validate(
        {
            **cfg.model_dump(exclude={"base_dir"}),
            "processing": proc.model_dump(),
            "mask": mask,
            "base_dir": cfg.base_dir,
        }
    )


def mask_pipe(
    standin_dir: Path,
    det: Path,
    source: np.ndarray,
    processing: dict[str, Any] | None = None,
    swapper: str = "inswapper_128.onnx",
    **mask: Any,
) -> SwapPipeline:
    """``swapper="classic"`` / ``"classic+mesh"``: the classic swap, 5-point / v2 (``source`` is then
    the photo whose face goes in)."""
    # mask.occlusion in from_config loads the real parser file (tests/test_face_parser.py covers
    # that); these tests switch the option on afterwards and give the pipeline a fake parser.
    occlusion = bool(mask.pop("occlusion", False))
    pipe = SwapPipeline.from_config(mask_cfg(standin_dir, det, processing, swapper, **mask))
    if occlusion:
        pipe.masks = MaskBuilder(replace(pipe.masks.options, occlusion=True))
    pipe.set_source(source)
    return pipe


def _box(cx: float, cy: float, hw: float, hh: float) -> tuple[slice, slice]:
    return slice(int(round(cy - hh)), int(round(cy + hh)) + 1), slice(
        int(round(cx - hw)), int(round(cx + hw)) + 1
    )


def face_regions(face: Face) -> dict[str, tuple[slice, slice]]:
    """Frame regions of a face from its keypoints: each eye, the nose, the mouth (inside the lips)
    and the central face (eyes to mouth)."""
    k = face.kps.astype(np.float64)
    eye_d = float(np.hypot(*(k[1] - k[0])))
    mouth_w = float(np.hypot(*(k[4] - k[3])))
    mouth = (k[3] + k[4]) / 2
    nose_mouth = nose_mouth_px(k)
    return {
        "left_eye": _box(*k[0], 0.15 * eye_d, 0.1 * eye_d),
        "right_eye": _box(*k[1], 0.15 * eye_d, 0.1 * eye_d),
        "nose": _box(*k[2], 0.12 * eye_d, 0.1 * eye_d),
        "mouth": _box(mouth[0], mouth[1] + 0.1 * nose_mouth, 0.3 * mouth_w, 0.3 * nose_mouth),
        "central": _box(
            (k[0, 0] + k[1, 0]) / 2, (k[0, 1] + mouth[1]) / 2, 0.5 * eye_d, 0.5 * (mouth[1] - k[0, 1])
        ),
    }
