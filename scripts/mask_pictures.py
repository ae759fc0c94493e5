"""Regenerate README's pictures of the mask and colour options (docs/img/mask_*.jpg).

The visitor is the NASA astronaut photo (public domain, docs/img/astronaut_eileen_collins_nasa.png),
the detector the real ``det_500m`` (../shared/models), the embedder and swapper the test suite's
stand-ins: the stand-in's output is a strong tint of the visitor's own face, not another identity,
which is exactly what shows what colour correction and the masks do.

    .venv/bin/python scripts/mask_pictures.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kiosk.config import KioskConfig  # noqa: E402
from kiosk.inference.mask import crop_keypoints  # noqa: E402
from kiosk.processing.models import read_image  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402
from kiosk.tools.standins import make_embedder, make_swapper  # noqa: E402
from kiosk.types import SwappedFace  # noqa: E402

VISITOR = ROOT / "docs" / "img" / "astronaut_eileen_collins_nasa.png"
DETECTOR = ROOT.parent / "shared" / "models" / "det_500m.onnx"

#: (label, processing overrides, mask overrides)
COLOUR: list[tuple[str, dict[str, object], dict[str, object]]] = [
    ("color_correction: none", {"color_correction": "none"}, {}),
    ("mean_std, strength 0.5", {"color_correction": "mean_std", "color_strength": 0.5}, {}),
    ("mean_std, strength 1.0", {"color_correction": "mean_std"}, {}),
]
#: Without colour correction, so the stand-in's tint shows where the swap goes.
MASKS: list[tuple[str, dict[str, object], dict[str, object]]] = [
    ("shape: box (default)", {}, {"shape": "box"}),
    ("shape: face", {}, {"shape": "face"}),
    ("shape: face, mouth: 1.0", {}, {"shape": "face", "mouth": 1.0}),
    ("box, mouth: 0.5", {}, {"mouth": 0.5}),
]


def pipeline(models: Path, processing: dict[str, object], mask: dict[str, object]) -> SwapPipeline:
    cfg = KioskConfig.model_validate(
        {
            "models": {
                "dir": str(models),
                "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
                "accept_noncommercial_licence": True,
                "detector": str(DETECTOR),
                "enhancer": None,
                "providers": {"order": ["cpu"], "intra_op_threads": 1},
            },
            "processing": {"det_size": 640, "max_faces": 1, **processing},
            "mask": mask,
        }
    )
    return SwapPipeline.from_config(cfg)


def label(img: np.ndarray, text: str) -> np.ndarray:
    bar = np.full((34, img.shape[1], 3), 255, np.uint8)
    cv2.putText(bar, text, (6, 23), cv2.FONT_HERSHEY_SIMPLEX, 0.55, (0, 0, 0), 1, cv2.LINE_AA)
    return np.vstack([bar, img])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = ap.parse_args()
    if not DETECTOR.is_file():
        print(f"{DETECTOR}: not found (the real det_500m lives in ../shared/models)", file=sys.stderr)
        return 1
    out_dir = Path(args.out)
    visitor = read_image(VISITOR)
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp)
        make_embedder(models / "w600k_r50.onnx")
        make_swapper(models / "inswapper_128.onnx")
        colour = [run(models, visitor, proc, mask) for _, proc, mask in COLOUR]
        masks = [run(models, visitor, proc, mask) for _, proc, mask in MASKS]
    # Zoom to the face: its box grown by 45 %, square, clipped to the photo, shown at 300 px.
    x0, y0, x1, y1 = (float(v) for v in colour[0][1].face.box_xyxy)
    cx, cy, half = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * 0.72
    h, w = visitor.shape[:2]
    ax0, ay0 = max(int(cx - half), 0), max(int(cy - half), 0)
    ax1, ay1 = min(int(cx + half), w), min(int(cy + half), h)

    def zoom(img: np.ndarray) -> np.ndarray:
        return cv2.resize(img[ay0:ay1, ax0:ax1], (300, 300), interpolation=cv2.INTER_AREA)

    tiles = [label(zoom(visitor), "visitor (input)")]
    tiles += [label(zoom(out), name) for (out, _), (name, _, _) in zip(colour, COLOUR, strict=True)]
    cv2.imwrite(str(out_dir / "mask_colour.jpg"), np.hstack(tiles), [cv2.IMWRITE_JPEG_QUALITY, 92])
    rows = []
    for (out, sf), (name, _, _) in zip(masks, MASKS, strict=True):
        assert sf.alpha is not None
        alpha = cv2.resize(sf.alpha, (300, 300), interpolation=cv2.INTER_LINEAR)
        tile = cv2.cvtColor(alpha, cv2.COLOR_GRAY2BGR)
        for x, y in crop_keypoints(sf.face.kps, sf.affine) * (300 / sf.alpha.shape[0]):
            cv2.circle(tile, (int(round(x)), int(round(y))), 4, (0, 0, 255), -1)
        rows.append(np.vstack([label(zoom(out), name), tile]))
    cv2.imwrite(str(out_dir / "mask_shapes.jpg"), np.hstack(rows), [cv2.IMWRITE_JPEG_QUALITY, 92])
    print(f"wrote {out_dir / 'mask_colour.jpg'} and {out_dir / 'mask_shapes.jpg'}")
    return 0


def run(
    models: Path, visitor: np.ndarray, proc: dict[str, object], mask: dict[str, object]
) -> tuple[np.ndarray, SwappedFace]:
    pipe = pipeline(models, proc, mask)
    pipe.set_source(visitor)
    out = np.empty_like(visitor)
    faces = pipe.process_into(visitor, out)
    if not faces:
        raise SystemExit(f"{VISITOR}: no face found")
    return out, faces[0]


if __name__ == "__main__":
    raise SystemExit(main())
