"""Through the whole runtime, headless: the booth swaps faces from the library, and the GPU
composite (crops + affines to the shader) shows the same picture as the CPU paste-back."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import insightface_image, shared_model

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import load_config
from kiosk.tools.standins import make_embedder, make_swapper

pytestmark = [pytest.mark.gl, pytest.mark.slow]


def _booth(tmp_path: Path, composite: str, swapper: str = "inswapper_128.onnx") -> Path:
    det = shared_model("det_500m.onnx")
    scene = cv2.imread(str(insightface_image("t1.jpg")))
    models = tmp_path / "models"
    if not models.exists():
        models.mkdir()
        make_embedder(models / "w600k_r50.onnx")
        make_swapper(models / "inswapper_128.onnx")
        (tmp_path / "faces").mkdir()
        cv2.imwrite(str(tmp_path / "faces" / "ann.jpg"), scene[150:650, 0:300])
        cv2.imwrite(str(tmp_path / "scene.png"), scene)
    cfg = tmp_path / f"{composite}.yaml"
    cfg.write_text(
        f"""
source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: 1280, height: 886, composite: {composite}, max_fps: 30}}
processing: {{det_size: 640, tracking: false}}
models: {{dir: models, detector: {det}, swapper: {swapper}, enhancer: null,
  accept_noncommercial_licence: true,  # det_500m: InsightFace's non-commercial weights
  providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache}}
ui: {{attract_after_s: 0, carousel: false, banner: ""}}
overlay: {{status_line: false, debug: false}}
controls: {{gamepad_enabled: false}}
"""
    )
    return cfg


@pytest.mark.parametrize("swapper", ["inswapper_128.onnx", "classic"])
def test_gpu_composite_matches_cpu_paste_back_in_the_running_kiosk(tmp_path, swapper):
    shots = {}
    for mode in ("cpu", "gpu"):
        cfg = load_config(_booth(tmp_path, mode, swapper))
        shot, stats = tmp_path / f"{mode}.png", tmp_path / f"{mode}.json"
        app = KioskApp(cfg, RunOptions(headless=True, seconds=6, screenshot=shot, stats_json=stats))
        assert app.run() == 0
        data = json.loads(stats.read_text())
        assert data["faces"]["names"] == ["ann"]
        assert data["processing"]["stage"].startswith(
            "classic swap (" if swapper == "classic" else "swap ("
        ), data["processing"]
        assert data["frames"]["processed"] > 3
        shots[mode] = cv2.imread(str(shot)).astype(np.int16)
    scene = cv2.imread(str(tmp_path / "scene.png")).astype(np.int16)
    changed = np.abs(shots["cpu"] - scene).max(axis=2) > 8
    assert changed.mean() > 0.01, "no face was swapped"
    diff = np.abs(shots["gpu"] - shots["cpu"])
    assert diff[changed].mean() <= 2.0
    assert diff[~changed].mean() <= 1.0
