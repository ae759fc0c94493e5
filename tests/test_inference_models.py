"""Embedder, swapper and paste-back against insightface 2.1 on the same models and inputs; sessions;
bad model files. The swapper/embedder are stand-ins (same contract as the real files); the detector
is the real det_500m from ../shared/models."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only

from kiosk.inference.detector import make_detector
from kiosk.inference.embedder import ArcFaceEmbedder
from kiosk.inference.errors import ModelCorruptError, ModelMissingError, ModelSignatureError
from kiosk.inference.paste import PasteBack, face_region, feather_mask
from kiosk.inference.sessions import CPU, ProviderOptions, create_session, probe_providers, reset_notices
from kiosk.inference.specs import INSWAPPER_128, W600K_R50, check_signature, spec_for_file
from kiosk.inference.swapper import InSwapper

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # insightface calls a deprecated skimage API


def _open(cls, path: Path, role: str):  # type: ignore[no-untyped-def]
    session, used = create_session(path, cpu_only)
    return cls(session, spec_for_file(role, path), path, used)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def t1_faces(det_500m: Path, t1_bgr: np.ndarray):  # type: ignore[no-untyped-def]
    session, used = create_session(det_500m, cpu_only)
    faces = make_detector(session, spec_for_file("detector", det_500m), det_500m, used).detect(t1_bgr)
    assert len(faces) == 6
    return faces


def _if_face(kps: np.ndarray, embedding: np.ndarray | None = None):  # type: ignore[no-untyped-def]
    common = pytest.importorskip("insightface.app.common")
    return common.Face(kps=kps.astype(np.float32), embedding=embedding)


# -- agreement with insightface -------------------------------------------------------------------
def test_embeddings_agree_with_insightface(standin_dir: Path, t1_bgr: np.ndarray, t1_faces) -> None:  # type: ignore[no-untyped-def]
    arc = pytest.importorskip("insightface.model_zoo.arcface_onnx")
    ref = arc.ArcFaceONNX(model_file=str(standin_dir / "w600k_r50.onnx"))
    ours = _open(ArcFaceEmbedder, standin_dir / "w600k_r50.onnx", "embedder")
    for face in t1_faces:
        e = ours.embed(t1_bgr, face.kps)
        r = ref.get(t1_bgr, _if_face(face.kps))
        cos = float(e @ r / np.linalg.norm(r))
        assert cos >= 0.999, cos
        assert abs(float(np.linalg.norm(e)) - 1.0) < 1e-5


@pytest.fixture(scope="module")
def swap_pair(standin_dir: Path):  # type: ignore[no-untyped-def]
    insw = pytest.importorskip("insightface.model_zoo.inswapper")
    path = standin_dir / "inswapper_128.onnx"
    return _open(InSwapper, path, "swapper"), insw.INSwapper(model_file=str(path))


def test_emap_is_read_from_the_last_initializer(swap_pair) -> None:  # type: ignore[no-untyped-def]
    ours, ref = swap_pair
    np.testing.assert_array_equal(ours.emap, ref.emap)


def test_swapper_raw_output_agrees(swap_pair, t1_bgr: np.ndarray, t1_faces) -> None:  # type: ignore[no-untyped-def]
    ours, ref = swap_pair
    emb = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    emb /= np.linalg.norm(emb)
    latent = ours.latent(emb)
    for face in t1_faces[:3]:
        crop, m = ours.swap(t1_bgr, face.kps, latent)
        ref_crop, ref_m = ref.get(t1_bgr, _if_face(face.kps), _if_face(face.kps, emb), paste_back=False)
        np.testing.assert_allclose(m, ref_m, atol=1e-4)
        assert crop.shape == ref_crop.shape == (128, 128, 3) and crop.dtype == np.uint8
        assert np.abs(crop.astype(int) - ref_crop.astype(int)).max() <= 1


def test_composite_agrees_inside_and_leaves_outside_untouched(
    swap_pair, t1_bgr: np.ndarray, t1_faces
) -> None:  # type: ignore[no-untyped-def]
    ours, ref = swap_pair
    emb = np.random.default_rng(6).standard_normal(512).astype(np.float32)
    emb /= np.linalg.norm(emb)
    latent = ours.latent(emb)
    face = t1_faces[0]
    frame = t1_bgr.copy()
    crop, m = ours.swap(frame, face.kps, latent)
    box = PasteBack().paste(frame, crop, m)
    assert box is not None
    expected = ref.get(t1_bgr, _if_face(face.kps), _if_face(face.kps, emb), paste_back=True)
    # Inside: frame pixels whose crop coordinates are >= 32 px from the crop edge, where both
    # insightface's eroded+blurred mask and ours are fully opaque.
    h, w = frame.shape[:2]
    ys, xs = np.mgrid[:h, :w]
    u = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    v = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    inside = (u >= 32) & (u < 96) & (v >= 32) & (v < 96)
    assert inside.sum() > 500
    diff = np.abs(frame[inside].astype(int) - expected[inside].astype(int))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.05
    # Outside the box we touched (the part of the crop's footprint where the mask is not zero):
    # untouched; outside the crop's footprint insightface leaves the frame untouched too.
    x0, y0, x1, y1 = box
    outside = np.ones((h, w), bool)
    outside[y0:y1, x0:x1] = False
    np.testing.assert_array_equal(frame[outside], t1_bgr[outside])
    fx0, fy0, fx1, fy1 = face_region(m, 128, (h, w))  # type: ignore[misc]
    assert fx0 <= x0 and fy0 <= y0 and x1 <= fx1 and y1 <= fy1
    beyond = np.ones((h, w), bool)
    beyond[fy0:fy1, fx0:fx1] = False
    np.testing.assert_array_equal(expected[beyond], t1_bgr[beyond])


def test_mask_is_feathered_in_crop_space() -> None:
    m = feather_mask(128)
    assert m.shape == (128, 128) and m.dtype == np.float32
    assert m[0, 0] == 0 and m[64, 64] == 1 and m[64, 0] == 0
    assert 0 < m[64, 8] < 1
    np.testing.assert_array_equal(m, m.T)


def test_paste_outside_frame_is_a_no_op() -> None:
    frame = np.zeros((100, 100, 3), np.uint8)
    m = np.array([[1.0, 0, 500], [0, 1.0, 500]])  # crop origin far outside the frame
    assert PasteBack().paste(frame, np.full((128, 128, 3), 255, np.uint8), m) is None
    assert not frame.any()


# -- sessions --------------------------------------------------------------------------------------
def test_gpu_request_falls_back_to_cpu_loudly(standin_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    reset_notices()  # the fallback is stated once per process; this test wants to see it
    session, used = create_session(standin_dir / "w600k_r50.onnx", ProviderOptions(order=("cuda", "cpu")))
    assert used == session.get_providers()[0]
    if used == CPU:  # no usable GPU here: it must have said so
        assert any("FALLING BACK TO CPUExecutionProvider" in r.getMessage() for r in caplog.records)


def test_probe_providers() -> None:
    result = probe_providers(ProviderOptions(order=("tensorrt", "cuda", "cpu")))
    assert result[CPU] is None
    assert set(result) == {"TensorrtExecutionProvider", "CUDAExecutionProvider", CPU}
    assert all(v is None or isinstance(v, str) for v in result.values())


# -- bad model files -------------------------------------------------------------------------------
def test_missing_model(tmp_path: Path) -> None:
    with pytest.raises(ModelMissingError, match="kiosk models fetch") as exc:
        create_session(tmp_path / "nope.onnx", cpu_only)
    assert "nope.onnx" in str(exc.value)


def test_truncated_model(tmp_path: Path, standin_dir: Path) -> None:
    data = (standin_dir / "inswapper_128.onnx").read_bytes()
    bad = tmp_path / "inswapper_128.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelCorruptError) as exc:
        create_session(bad, cpu_only)
    assert str(bad) in str(exc.value) and "\n" not in str(exc.value)


def test_not_a_model(tmp_path: Path) -> None:
    bad = tmp_path / "det_10g.onnx"
    cv2.imwrite(str(tmp_path / "x.png"), np.zeros((8, 8, 3), np.uint8))
    bad.write_bytes((tmp_path / "x.png").read_bytes())
    with pytest.raises(ModelCorruptError, match="det_10g.onnx"):
        create_session(bad, cpu_only)


def test_wrong_signature_names_both_values(tmp_path: Path) -> None:
    path = standins.make_swapper(tmp_path / "inswapper_128.onnx", target_name="img")
    session, _ = create_session(path, cpu_only)
    with pytest.raises(ModelSignatureError) as exc:
        check_signature(INSWAPPER_128, session, path)
    msg = str(exc.value)
    assert "inswapper_128.onnx" in msg and "target[1,3,128,128]" in msg and "img[1,3,128,128]" in msg


def test_model_in_the_wrong_role(standin_dir: Path) -> None:
    path = standin_dir / "inswapper_128.onnx"
    session, _ = create_session(path, cpu_only)
    with pytest.raises(ModelSignatureError, match="embedder"):
        check_signature(W600K_R50, session, path)


def test_emap_must_be_last(tmp_path: Path) -> None:
    path = standins.make_swapper(tmp_path / "inswapper_128.onnx", emap_last=False)
    with pytest.raises(ModelSignatureError, match="last initializer"):
        _open(InSwapper, path, "swapper")


def test_provider_options_mirror_the_config_section() -> None:
    """The inference package's plain record has the config section's fields and defaults."""
    from kiosk.config import ProvidersConfig

    assert ProviderOptions.of(ProvidersConfig()) == ProviderOptions()
    custom = ProvidersConfig.model_validate({"order": ["cpu"], "device_id": 2, "trt_fp16": False})
    assert ProviderOptions.of(custom) == ProviderOptions(order=("cpu",), device_id=2, trt_fp16=False)
