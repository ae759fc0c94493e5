"""The enhancer: processing.enhance_blend mixes the restored crop over the swapped one, and GPEN-BFR
256/512 run through the same class as GFPGAN with their own size (picked by file name from the
spec), checked against the contract at load."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only, make_cfg

from kiosk.config import ProcessingConfig
from kiosk.inference.align import FFHQ_512, align_matrix, warp_crop
from kiosk.inference.enhancer import GfpganEnhancer
from kiosk.inference.errors import ModelSignatureError
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import GFPGAN_1_4, GPEN_BFR_256, GPEN_BFR_512, spec_for_file
from kiosk.processing.pipeline import SwapPipeline
from kiosk.tools import standins

KPS = np.array([[281.3, 201.7], [359.2, 197.9], [322.4, 251.1], [291.8, 302.6], [349.5, 299.4]], np.float32)


def _open(path: Path) -> GfpganEnhancer:
    session, used = create_session(path, cpu_only)
    return GfpganEnhancer(session, spec_for_file("enhancer", path), path, used)


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    rng = np.random.default_rng(1)
    return cv2.GaussianBlur(rng.integers(0, 256, (480, 640, 3)).astype(np.uint8), (0, 0), 2.0)


@pytest.fixture(scope="module")
def gpen256(tmp_path_factory: pytest.TempPathFactory) -> GfpganEnhancer:
    return _open(standins.make_gpen(tmp_path_factory.mktemp("gpen") / "GPEN-BFR-256.onnx", 256))


def test_blend_mixes_the_restored_crop_over_the_swapped_one(
    gpen256: GfpganEnhancer, frame: np.ndarray
) -> None:
    aligned = warp_crop(frame, align_matrix(KPS, "ffhq_512", 256), 256)
    full, m = gpen256.enhance(frame, KPS, 1.0)
    full = full.copy()
    none, _ = gpen256.enhance(frame, KPS, 0.0)
    assert np.array_equal(none, aligned)  # strength 0: the swapped face unchanged
    assert not np.array_equal(full, aligned)
    half, _ = gpen256.enhance(frame, KPS, 0.5)
    want = (full.astype(np.float32) + aligned) / 2
    assert np.abs(half - want).max() <= 1.0
    q, _ = gpen256.enhance(frame, KPS, 0.25)
    assert np.abs(q - (0.25 * full.astype(np.float32) + 0.75 * aligned)).max() <= 1.0
    np.testing.assert_allclose(m, align_matrix(KPS, "ffhq_512", 256))


def test_gpen_input_is_the_ffhq_crop_scaled_to_its_size(gpen256: GfpganEnhancer, frame: np.ndarray) -> None:
    assert gpen256.size_px == 256 and gpen256.spec is GPEN_BFR_256
    kps = (FFHQ_512 * 0.37 + np.array([150.0, 90.0], np.float32)).astype(np.float32)  # a template-shaped face
    gpen256.enhance(frame, kps)
    m = align_matrix(kps, "ffhq_512", 256)
    pts = np.c_[kps, np.ones(5)] @ m.T
    np.testing.assert_allclose(pts, FFHQ_512 * 0.5, atol=1e-3)  # the FFHQ template scaled to 256
    rgb = warp_crop(frame, m, 256)[:, :, ::-1].astype(np.float32)
    np.testing.assert_allclose(gpen256._blob[0], ((rgb / 255 - 0.5) / 0.5).transpose(2, 0, 1), atol=1e-5)


def test_gpen_specs_and_names() -> None:
    for spec, size in ((GPEN_BFR_256, 256), (GPEN_BFR_512, 512)):
        assert spec.family == "gpen" and spec.crop_size_px == size and spec.template == "ffhq_512"
        assert spec.inputs[0].name == "input" and spec.inputs[0].shape == (1, 3, size, size)
        assert spec.mean == 127.5 and spec.std == 127.5
        assert "NON-COMMERCIAL" in spec.licence and spec.sha256 and len(spec.known_hashes) == 2
        assert spec_for_file("enhancer", spec.file) is spec
        assert spec_for_file("enhancer", f"gpen_bfr_{size}.onnx") is spec  # FaceFusion's file name
    assert spec_for_file("enhancer", "GFPGANv1.4.onnx") is GFPGAN_1_4


def test_gpen_of_the_wrong_size_is_rejected_naming_the_file(tmp_path: Path) -> None:
    wrong = standins.make_gpen(tmp_path / "GPEN-BFR-512.onnx", 256)
    with pytest.raises(ModelSignatureError) as exc:
        _open(wrong)
    msg = str(exc.value)
    assert str(wrong) in msg and "input[1,3,512,512]" in msg and "input[1,3,256,256]" in msg
    assert "models.enhancer" in msg and "\n" not in msg


@pytest.mark.parametrize("name,size", [("GPEN-BFR-256.onnx", 256), ("gpen_bfr_512.onnx", 512)])
def test_pipeline_uses_gpen_and_enhance_blend(
    tmp_path: Path, standin_dir: Path, name: str, size: int
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    for f in standin_dir.iterdir():
        (models / f.name).symlink_to(f)
    standins.make_gpen(models / name, size)
    results = {}
    for blend in (0.0, 1.0):
        cfg = make_cfg(models, enhancer=name)
        proc = ProcessingConfig.model_validate(
            {"det_size": 640, "max_faces": 8, "enhance": True, "enhance_blend": blend}
        )
        pipe = SwapPipeline.from_config(cfg.model_copy(update={"processing": proc}))
        assert pipe.enhancer is not None and pipe.enhancer.size_px == size and pipe.enhance_blend == blend
        pipe.set_source(standins.white_square_frame(squares=((200, 120, 96),)))
        frame = standins.white_square_frame(squares=((64, 64, 96), (384, 160, 96)))
        faces = pipe.process_into(frame, None, paste=False)
        assert faces and all(f.crop_bgr.shape == (size, size, 3) for f in faces)
        results[blend] = [f.crop_bgr.copy() for f in faces]
        assert pipe.times.enhance_ms > 0
    assert any(not np.array_equal(a, b) for a, b in zip(results[0.0], results[1.0], strict=True))


def test_fetch_finds_a_model_under_the_name_the_config_uses(tmp_path: Path) -> None:
    from dataclasses import replace
    from hashlib import sha256

    from kiosk.inference.fetch import fetch_model

    usb = tmp_path / "usb"
    src = standins.make_gpen(usb / "gpen_bfr_256.onnx", 256)  # FaceFusion's name for the file
    spec = replace(GPEN_BFR_256, sha256=sha256(src.read_bytes()).hexdigest(), also_sha256=())
    dest = tmp_path / "models" / "gpen_bfr_256.onnx"
    assert fetch_model(spec, dest, source=str(usb), show_progress=False) == "fetched"
    assert dest.read_bytes() == src.read_bytes()
