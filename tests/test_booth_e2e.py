"""The booth end to end in a real window under Xvfb: key presses sent with xdotool switch faces,
toggle swap and toggle debug, which shows in --stats-json and the screenshot.

Real det_500m (../shared/models) and stand-in embedder/swapper with the real contracts; face
photos are cut from insightface's t1.jpg at test time (never stored in the repo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import insightface_image, shared_model

from kiosk.tools.standins import make_embedder, make_swapper

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]


def _booth_folder(tmp_path: Path) -> Path:
    det = shared_model("det_500m.onnx")
    scene = cv2.imread(str(insightface_image("t1.jpg")))
    models = tmp_path / "models"
    models.mkdir()
    make_embedder(models / "w600k_r50.onnx")
    make_swapper(models / "inswapper_128.onnx")
    faces = tmp_path / "faces"
    faces.mkdir()
    for name, (x0, x1) in {"ann": (0, 300), "ben": (330, 620), "cat": (640, 900)}.items():
        cv2.imwrite(str(faces / f"{name}.jpg"), scene[150:650, x0:x1])
    (faces / "faces.yaml").write_text("- {file: cat.jpg, name: Catherine}\n")
    cv2.imwrite(str(tmp_path / "scene.jpg"), scene)
    (tmp_path / "booth.yaml").write_text(
        f"""
source: {{kind: image, path: scene.jpg, image_fps: 30, mirror: false}}
display: {{width: 640, height: 360, vsync: false, max_fps: 60}}
processing: {{det_size: 640}}
models: {{dir: models, detector: {det}, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache}}
ui: {{attract_after_s: 0}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: false}}
"""
    )
    return tmp_path


def test_keys_switch_faces_and_toggle_swap_and_debug(tmp_path, xvfb_display):
    xdotool = shutil.which("xdotool")
    if xdotool is None:
        pytest.skip("xdotool not installed (apt-get install xdotool)")
    folder = _booth_folder(tmp_path)
    stats, shot = folder / "stats.json", folder / "shot.png"
    env = dict(os.environ, DISPLAY=xvfb_display, PYTHONUNBUFFERED="1")
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(folder / "booth.yaml"), "--frames", "900",
         "--stats-json", str(stats), "--screenshot", str(shot)],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    ready = threading.Event()
    log: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if "faces loaded" in line:  # the inference thread's first refresh of the library
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert ready.wait(90), "kiosk did not get ready:\n" + "".join(log[-20:])
        time.sleep(1.0)  # a few swapped frames first
        env_x = dict(os.environ, DISPLAY=xvfb_display)
        subprocess.run([xdotool, "mousemove", "200", "200"], check=True, env=env_x, timeout=10)
        for key in ("Right", "Right", "space", "d"):
            subprocess.run([xdotool, "key", key], check=True, env=env_x, timeout=10)
            time.sleep(0.2)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, "".join(log[-20:])
    data = json.loads(stats.read_text())
    # faces.yaml puts Catherine first; then ann, ben by file name. Right, Right: Catherine → ann → ben
    assert data["faces"]["names"] == ["Catherine", "ann", "ben"]
    assert data["controls"]["selected_face"] == "ben"
    assert data["controls"]["actions_applied"] == 4
    assert data["controls"]["swap_enabled"] is False
    assert data["controls"]["debug"] is True
    assert data["processing"]["stage"].startswith("swap (CPUExecutionProvider")
    img = cv2.imread(str(shot))
    assert img.shape == (360, 640, 3)
    # swap off: the red "swap off" badge is drawn in the top-right corner
    top_right = img[:40, 480:].reshape(-1, 3).astype(int)
    assert np.any((top_right[:, 2] > 150) & (top_right[:, 1] < 90) & (top_right[:, 0] < 90))
