"""Which colour space for ``processing.color_correction: mean_std``: BGR or Lab?

Real faces (insightface's t1.jpg, six people, and the NASA astronaut photo) are aligned to the
swapper's 128 px crop with the real ``det_500m``. Each visitor crop V is turned into a "swapped"
crop S by a known colour change; S is corrected back towards V's statistics inside the box mask
(BGR: the kiosk's implementation; Lab: the same statistics transfer in float CIE Lab), and we
report the error of the corrected crop against V inside the mask: mean absolute error per pixel
and per-channel mean colour error (levels), plus the cost of one correction. Changes:

- ``standin``: the stand-in swapper's output (half contrast + a strong per-channel tint)
- ``warm light`` / ``cool light``: a white-balance change in linear light (gains per channel)
- ``contrast``: a gamma and contrast change with a colour cast (a different camera)
- ``other skin``: V's luminance with another person's chroma statistics (Lab transfer; favours Lab)

    PYTHONPATH=. .venv/bin/python benchmarks/color_space.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kiosk.config import KioskConfig  # noqa: E402
from kiosk.inference.color import ColorCorrector, ColorOptions  # noqa: E402
from kiosk.inference.mask import MaskBuilder  # noqa: E402
from kiosk.processing.models import read_image  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402
from kiosk.tools.standins import make_embedder, make_swapper  # noqa: E402


def lab_correct(visitor: np.ndarray, swap: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """mean_std in float Lab (cv2: L 0..100, a/b about -127..127)."""
    v = cv2.cvtColor(visitor.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)
    s = cv2.cvtColor(swap.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)
    w = weight.astype(np.float64)[..., None] / 255.0
    n = w.sum()
    mv = (v * w).sum((0, 1)) / n
    ms = (s * w).sum((0, 1)) / n
    sv = np.sqrt(((v - mv) ** 2 * w).sum((0, 1)) / n)
    ss = np.sqrt(((s - ms) ** 2 * w).sum((0, 1)) / n)
    gain = np.clip(np.maximum(sv, 0.5) / np.maximum(ss, 0.5), 0.25, 4.0)
    out = (s - ms) * gain + mv
    bgr = cv2.cvtColor(out.astype(np.float32), cv2.COLOR_Lab2BGR)
    return np.clip(np.rint(bgr * 255.0), 0, 255).astype(np.uint8)


def bgr_correct(visitor: np.ndarray, swap: np.ndarray, weight: np.ndarray) -> np.ndarray:
    out = swap.copy()
    ColorCorrector(ColorOptions("mean_std")).correct(visitor, out, weight)
    return out


def to_linear(x: np.ndarray) -> np.ndarray:
    x = x / 255.0
    return np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def to_srgb(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0, 1)
    y = np.where(x <= 0.0031308, x * 12.92, 1.055 * x ** (1 / 2.4) - 0.055)
    return np.clip(np.rint(y * 255), 0, 255).astype(np.uint8)


def main() -> int:
    det = ROOT.parent / "shared" / "models" / "det_500m.onnx"
    import insightface

    t1 = Path(insightface.__file__).parent / "data" / "images" / "t1.jpg"
    photos = [read_image(t1), read_image(ROOT / "docs" / "img" / "astronaut_eileen_collins_nasa.png")]
    with tempfile.TemporaryDirectory() as tmp:
        make_embedder(Path(tmp) / "w600k_r50.onnx")
        make_swapper(Path(tmp) / "inswapper_128.onnx")
        cfg = KioskConfig.model_validate(
            {
                "models": {
                    "dir": tmp,
                    "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
                    "accept_noncommercial_licence": True,
                    "detector": str(det),
                    "enhancer": None,
                    "providers": {"order": ["cpu"]},
                },
                "processing": {"max_faces": 8},
            }
        )
        pipe = SwapPipeline.from_config(cfg)
        pipe.set_source(photos[1])
        visitors, standin = [], []
        for photo in photos:
            for sf in pipe.process_into(photo, None, paste=False):
                pipe.swapper.align(photo, sf.face.kps)
                visitors.append(pipe.swapper.aligned_crop.copy())
                standin.append(sf.crop_bgr.copy())
    weight = MaskBuilder().static_alpha(128)
    inside = weight > 0
    rng = np.random.default_rng(0)
    changes: dict[str, list[np.ndarray]] = {"standin": standin}
    changes["warm light"] = [to_srgb(to_linear(v) * np.array([0.75, 1.0, 1.3])) for v in visitors]
    changes["cool light"] = [to_srgb(to_linear(v) * np.array([1.3, 1.0, 0.8])) for v in visitors]
    changes["contrast"] = [
        np.clip(255 * (v / 255.0) ** 0.7 * 0.85 + np.array([20, 5, -10]), 0, 255).astype(np.uint8)
        for v in visitors
    ]
    others = [
        visitors[(i + 1 + int(rng.integers(0, len(visitors) - 1))) % len(visitors)]
        for i in range(len(visitors))
    ]
    changes["other skin"] = []
    for v, o in zip(visitors, others, strict=True):
        lv = cv2.cvtColor(v.astype(np.float32) / 255, cv2.COLOR_BGR2Lab)
        lo = cv2.cvtColor(o.astype(np.float32) / 255, cv2.COLOR_BGR2Lab)
        for c in (1, 2):
            lv[..., c] = (lv[..., c] - lv[..., c].mean()) * (
                lo[..., c].std() / max(lv[..., c].std(), 1e-3)
            ) + lo[..., c].mean()
        changes["other skin"].append(
            np.clip(np.rint(cv2.cvtColor(lv, cv2.COLOR_Lab2BGR) * 255), 0, 255).astype(np.uint8)
        )
    print(
        f"{len(visitors)} real faces, 128 px crops, box mask weights; error of the corrected crop vs the visitor"
    )
    print(f"{'change':<12} {'space':<5} {'MAE/px':>7} {'mean err B,G,R':>18} {'before MAE':>10}")
    totals = {"BGR": [], "Lab": []}
    for name, swaps in changes.items():
        for space, fn in (("BGR", bgr_correct), ("Lab", lab_correct)):
            maes, means, before = [], [], []
            for v, s in zip(visitors, swaps, strict=True):
                c = fn(v, s, weight)
                d = np.abs(c.astype(np.float64) - v)[inside]
                maes.append(d.mean())
                before.append(np.abs(s.astype(np.float64) - v)[inside].mean())
                means.append(np.abs(c[inside].mean(0) - v[inside].mean(0)))
            totals[space].append(float(np.mean(maes)))
            m = np.mean(means, axis=0)
            print(
                f"{name:<12} {space:<5} {np.mean(maes):7.2f} {m[0]:6.2f},{m[1]:5.2f},{m[2]:5.2f} {np.mean(before):10.2f}"
            )
    reps = 500
    corrector = ColorCorrector(ColorOptions("mean_std"))
    work = standin[0].copy()
    t = time.perf_counter()
    for i in range(reps):
        np.copyto(work, standin[i % len(visitors)])
        corrector.correct(visitors[i % len(visitors)], work, weight)
    bgr_us = (time.perf_counter() - t) / reps * 1e6
    f32 = visitors[0].astype(np.float32) / 255.0
    t = time.perf_counter()
    for _ in range(reps):  # the conversions alone: visitor and swap to Lab, the result back
        lab = cv2.cvtColor(f32, cv2.COLOR_BGR2Lab)
        cv2.cvtColor(f32, cv2.COLOR_BGR2Lab)
        cv2.cvtColor(lab, cv2.COLOR_Lab2BGR)
    lab_us = (time.perf_counter() - t) / reps * 1e6
    print(
        f"BGR: mean MAE over the changes {np.mean(totals['BGR']):.2f}; {bgr_us:.0f} µs per correction (ColorCorrector)"
    )
    print(
        f"Lab: mean MAE over the changes {np.mean(totals['Lab']):.2f}; its three colour conversions alone {lab_us:.0f} µs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
