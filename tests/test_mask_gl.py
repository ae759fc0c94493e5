"""The composite shader and the CPU paste-back agree for every mask and colour option, and what the
kiosk shows (headless screenshot, snapshot) has the visitor's colour and mouth."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import moderngl
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from mask_fixtures import *  # noqa: F403
from mask_fixtures import ASTRONAUT, CLASSIC_SOURCE, face_regions, mask_pipe
from test_composite_gl import gpu_composite
from test_mask import LowerHalfParser

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import load_config
from kiosk.processing.models import read_image
from kiosk.tools.standins import make_embedder, make_swapper

pytestmark = pytest.mark.gl

OPTIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("box", {}, {}),
    ("box+mean_std", {"color_correction": "mean_std"}, {}),
    ("mean_std 0.4", {"color_correction": "mean_std", "color_strength": 0.4}, {}),
    ("face", {}, {"shape": "face"}),
    ("face+mouth+mean_std", {"color_correction": "mean_std"}, {"shape": "face", "mouth": 1.0}),
    ("mouth 0.5, padding, feather", {}, {"mouth": 0.5, "padding": (0.1, 0.0, 0.2, 0.05), "feather": 0.05}),
    ("hard edges", {}, {"shape": "face", "padding": (0, 0, 0, 0), "feather": 0.0}),
    ("occlusion", {}, {"occlusion": True}),
    (
        "enhancer + face + mouth",
        {"enhance": True, "color_correction": "mean_std"},
        {"shape": "face", "mouth": 1.0},
    ),
]


@pytest.mark.parametrize("swapper", ["inswapper_128.onnx", "classic", "classic+mesh"])
@pytest.mark.parametrize(("name", "processing", "mask"), OPTIONS, ids=[o[0] for o in OPTIONS])
def test_shader_and_cpu_paste_back_agree_for_every_option(
    ctx: moderngl.Context,
    standin_dir: Path,
    det_500m: Path,
    astronaut: np.ndarray,
    name: str,
    processing: dict[str, Any],
    mask: dict[str, Any],
    swapper: str,
) -> None:
    # The classic source is a halftone scan: softened, so that the 512 enhancer crop minified onto
    # the face does not alias differently in the shader's and cv2's bilinear sampling.
    classic = swapper.startswith("classic")
    source = cv2.GaussianBlur(read_image(CLASSIC_SOURCE), (0, 0), 2.0) if classic else astronaut
    pipe = mask_pipe(standin_dir, det_500m, source, processing, swapper, **mask)
    pipe.face_parser = LowerHalfParser()
    cpu = np.empty_like(astronaut)
    pipe.process_into(astronaut, cpu)
    faces = pipe.process_into(astronaut, None, paste=False)
    assert len(faces) == 1 and faces[0].alpha is not None
    if swapper == "classic+mesh":  # v2: swapped through the mesh, its alpha the mesh's outline
        assert pipe.models.swapper.face_alpha is not None
    gpu = gpu_composite(ctx, astronaut, faces)
    changed = np.abs(cpu.astype(np.int16) - astronaut).max(axis=2) > 0
    assert changed.sum() > 2000, "the face was swapped"
    diff = np.abs(cpu.astype(np.int16) - gpu.astype(np.int16))
    assert diff[changed].mean() <= 2.0, f"{name}: mean abs diff {diff[changed].mean():.3f}"
    assert np.percentile(diff[changed], 99) <= 8
    if not processing.get("enhance"):  # 128 px crops: every pixel within 2 levels
        assert diff.max() <= 2, f"{name}: max abs diff {diff.max()}"
    assert diff[~changed].mean() <= 0.01  # outside the face the screen is the frame


# -- on the kiosk's screen --------------------------------------------------------------------------------
def _booth(tmp_path: Path, processing: str, mask: str, swapper: str = "inswapper_128.onnx") -> Path:
    det = shared_model("det_500m.onnx")  # noqa: F405
    models = tmp_path / "models"
    if not models.exists():
        models.mkdir()
        make_embedder(models / "w600k_r50.onnx")
        make_swapper(models / "inswapper_128.onnx")
        (tmp_path / "faces").mkdir()
        # the stand-in swapper tints the visitor's own face; the classic swap puts another face on
        face = CLASSIC_SOURCE if swapper == "classic" else ASTRONAUT
        cv2.imwrite(str(tmp_path / "faces" / "eileen.png"), cv2.imread(str(face)))
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(
        f"""
source: {{kind: image, path: {ASTRONAUT}, image_fps: 30, mirror: false}}
display: {{width: 512, height: 512, composite: gpu, max_fps: 30}}
processing: {{det_size: 640, tracking: true, max_faces: 1, {processing}}}
mask: {{{mask}}}
models: {{dir: models, detector: {det}, swapper: {swapper}, enhancer: null,
  accept_noncommercial_licence: true,  # det_500m: InsightFace's non-commercial weights
  providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache}}
snapshots: {{enabled: true, dir: snaps}}
ui: {{attract_after_s: 0, carousel: false, banner: ""}}
overlay: {{status_line: false, debug: false}}
controls: {{gamepad_enabled: false}}
"""
    )
    return cfg


def _run_kiosk(cfg_path: Path, shot: Path, snapshot_after_s: float = 0.0) -> np.ndarray:
    cfg = load_config(cfg_path)
    stats = shot.with_suffix(".json")
    app = KioskApp(cfg, RunOptions(headless=True, seconds=7, screenshot=shot, stats_json=stats))
    timer = None
    if snapshot_after_s:

        def request() -> None:
            app.controls.snapshot_requested = True

        timer = threading.Timer(snapshot_after_s, request)
        timer.start()
    t0 = time.monotonic()
    assert app.run() == 0
    if timer is not None:
        timer.cancel()
    data = json.loads(stats.read_text())
    assert data["processing"]["stage"].startswith(("swap (", "classic swap (")), data["processing"]
    assert data["frames"]["processed"] > 3, (data["frames"], time.monotonic() - t0)
    return cv2.imread(str(shot))


@pytest.mark.slow
@pytest.mark.parametrize("swapper", ["inswapper_128.onnx", "classic"])
def test_the_screen_and_snapshots_show_the_visitors_colour_and_mouth(
    tmp_path: Path, det_500m: Path, astronaut: np.ndarray, swapper: str
) -> None:
    from kiosk.processing.models import open_detector

    face = open_detector(load_config(_booth(tmp_path, "", "", swapper))).detect(astronaut)[0]
    regions = face_regions(face)
    visitor = astronaut.astype(np.int16)

    def mean_diff(img: np.ndarray, region: str) -> np.ndarray:
        r = regions[region]
        return img[r].reshape(-1, 3).mean(0) - visitor[r].reshape(-1, 3).mean(0)

    # colour correction on: the face on the screen and in the snapshot has the visitor's colour
    corrected = _run_kiosk(
        _booth(tmp_path, "color_correction: mean_std", "shape: face", swapper), tmp_path / "mean_std.png", 5.0
    ).astype(np.int16)
    # The correction matches the statistics over the whole face mask: the stand-in's tinted copy of
    # the visitor then matches in any part of it; another person's face (classic) has its light
    # spread its own way, so its central part is matched less closely.
    tol = 8.0 if swapper == "classic" else 3.0
    assert np.abs(mean_diff(corrected, "central")).max() <= tol, mean_diff(corrected, "central")
    snaps = sorted((tmp_path / "snaps").glob("snapshot-*.jpg"))
    assert snaps, "the snapshot was written"
    snap = cv2.imread(str(snaps[-1])).astype(np.int16)
    assert snap.shape == astronaut.shape
    assert np.abs(mean_diff(snap, "central")).max() <= tol + 1.0, mean_diff(snap, "central")  # JPEG
    # the snapshot shows what the screen showed (the same still frame, swapped the same way)
    face_box = regions["central"]
    assert np.abs(snap[face_box] - corrected[face_box]).mean() <= 3.0
    # off, mouth kept: the tint shows everywhere but on the visitor's own mouth
    mouth = _run_kiosk(
        _booth(tmp_path, "color_correction: none", "shape: face, mouth: 1.0", swapper), tmp_path / "mouth.png"
    ).astype(np.int16)
    assert np.abs(mean_diff(mouth, "central")).max() > 20, "without correction the tint shows"
    m = np.abs(mouth - visitor)[regions["mouth"]]
    assert m.mean() <= 1.5 and np.percentile(m, 99) <= 4, (m.mean(), m.max())
    # The classic swap moves the visitor's own eyes into the photo's eye openings (which lie where
    # the photo's eyes are posed, not exactly on the visitor's keypoints): only its nose is sure to
    # be the photo's.
    parts = ("nose",) if swapper == "classic" else ("left_eye", "right_eye", "nose")
    for part in parts:
        assert np.abs(mouth - visitor)[regions[part]].mean() > 20, part
