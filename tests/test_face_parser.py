"""The occlusion face parser (BiSeNet contract) against a stand-in whose class is a function of the
pixel's colour: a green "hand" held over a skin-coloured face must stay visible (mask 0) and the
face around it be swapped (mask 1), aligned exactly like the swapper's crop of each size. Also the
signature check, the spec, and `kiosk models fetch|verify` fetching the parser only for
`mask.occlusion: true`."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only

from kiosk.cli import main
from kiosk.config import KioskConfig
from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.errors import ModelSignatureError
from kiosk.inference.parser import FACE_CLASSES, FaceParser
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import BISENET_RESNET_18, BISENET_RESNET_34, spec_for_file
from kiosk.processing.models import missing_models, model_paths, open_parser
from kiosk.tools import standins
from kiosk.types import Face

PALETTE = standins.PARSER_PALETTE_RGB
KPS = np.array([[280, 200], [360, 200], [320, 250], [290, 300], [350, 300]], np.float32)


def _bgr(cls: int) -> tuple[int, int, int]:
    r, g, b = PALETTE[cls]
    return (b, g, r)


@pytest.fixture(scope="module")
def parser(tmp_path_factory: pytest.TempPathFactory) -> FaceParser:
    path = standins.make_parser(tmp_path_factory.mktemp("parser") / "bisenet_resnet_34.onnx")
    session, used = create_session(path, cpu_only)
    return FaceParser(session, spec_for_file("parser", path), path, used)


def _scene() -> tuple[np.ndarray, Face]:
    """A skin-coloured face with lips and a nose, hair above it, and a green hand over its
    lower left (covering part of the mouth)."""
    frame = np.zeros((480, 640, 3), np.uint8)
    frame[:] = _bgr(1)
    frame[:150] = _bgr(17)
    frame[240:265, 305:335] = _bgr(10)
    frame[290:310, 280:360] = _bgr(12)
    frame[270:420, 200:320] = _bgr(0)  # the hand
    face = Face(np.array([240, 140, 400, 340], np.float32), 0.9, KPS)
    return frame, face


@pytest.mark.parametrize("size_px", [128, 256, 512])
def test_mask_is_zero_on_the_hand_and_one_on_the_face(parser: FaceParser, size_px: int) -> None:
    frame, face = _scene()
    mask = parser.face_mask(frame, face, size_px)
    assert mask.shape == (size_px, size_px) and mask.dtype == np.float32
    assert float(mask.min()) >= 0.0 and float(mask.max()) <= 1.0
    # What each pixel of the swapper's crop of this size shows: a pixel of exactly a region's
    # colour lies inside it (bilinear samples across an edge mix the colours).
    crop = warp_crop(frame, align_matrix(KPS, "arcface_128", size_px), size_px)

    def region(cls: int) -> np.ndarray:
        return np.all(crop == _bgr(cls), axis=2)

    hand, hair = region(0), region(17)
    face_px = region(1) | region(10) | region(12)
    assert hand.sum() > 0.05 * size_px**2 and hair.sum() > 0 and face_px.sum() > 0.3 * size_px**2
    # Every pixel of the hand and the hair keeps the visitor's frame: exactly 0.
    assert float(mask[hand].max()) == 0.0 and float(mask[hair].max()) == 0.0
    # The face, away from the soft edge (2 px of a 128 crop, scaled), is fully swapped.
    margin = int(np.ceil(2.0 * size_px / 128)) + 1
    inner = cv2.erode(face_px.astype(np.uint8), np.ones((2 * margin + 1, 2 * margin + 1), np.uint8)) > 0
    assert inner.sum() > 0.2 * size_px**2
    assert float(mask[inner].min()) > 0.999
    # The edge is soft, not a hard step: some values strictly between 0 and 1 next to the hand.
    assert np.count_nonzero((mask > 0.05) & (mask < 0.95)) > size_px


def test_mask_follows_the_face_alignment(parser: FaceParser) -> None:
    """A face turned and moved in the frame: the mask still lines up with the swapper's crop."""
    frame, face = _scene()
    rot = cv2.getRotationMatrix2D((320.0, 240.0), 17.0, 0.8)
    rot[:, 2] += (25.0, -10.0)
    moved = cv2.warpAffine(frame, rot, (640, 480), flags=cv2.INTER_NEAREST, borderValue=_bgr(17))
    kps = (np.c_[KPS, np.ones(5)] @ rot.T).astype(np.float32)
    mask = parser.face_mask(moved, Face(face.box_xyxy, 0.9, kps), 128)
    crop = warp_crop(moved, align_matrix(kps, "arcface_128", 128), 128)
    hand = np.all(crop == _bgr(0), axis=2)
    assert hand.sum() > 400 and float(mask[hand].max()) == 0.0
    skin = cv2.erode(np.all(crop == _bgr(1), axis=2).astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    assert float(mask[skin].min()) > 0.999


def test_mask_sizes_are_swapper_crop_sizes(parser: FaceParser) -> None:
    frame, face = _scene()
    for bad in (0, 100, 112, 896):
        with pytest.raises(ValueError, match="size_px"):
            parser.face_mask(frame, face, bad)
    np.testing.assert_allclose(parser.crop_matrix(face, 256), align_matrix(KPS, "arcface_128", 256))


def test_face_classes_are_the_swapped_parts() -> None:
    # skin, brows, eyes, glasses, nose, inner mouth, lips; not background, ears, neck, cloth, hair, hat.
    assert FACE_CLASSES == (1, 2, 3, 4, 5, 6, 10, 11, 12, 13)


def test_logits_see_the_swapper_crop_normalised(parser: FaceParser) -> None:
    frame, face = _scene()
    parser.parse_logits(frame, face)
    crop = warp_crop(frame, align_matrix(KPS, "arcface_128", 512), 512)
    rgb = crop[:, :, ::-1].astype(np.float32) / 255.0
    want = (rgb - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    np.testing.assert_allclose(parser._blob[0], want.transpose(2, 0, 1), atol=1e-5)
    np.testing.assert_allclose(parser.matrix, align_matrix(KPS, "arcface_128", 512))


def test_wrong_parser_is_rejected_naming_the_file(tmp_path: Path) -> None:
    bad = standins.make_parser(tmp_path / "bisenet_resnet_34.onnx", input_name="image")
    session, used = create_session(bad, cpu_only)
    with pytest.raises(ModelSignatureError) as exc:
        FaceParser(session, spec_for_file("parser", bad), bad, used)
    msg = str(exc.value)
    assert str(bad) in msg and "input[1,3,512,512]" in msg and "image[" in msg and "\n" not in msg
    assert "models.parser" in msg

    one_out = standins.make_parser(tmp_path / "p1.onnx", aux_outputs=False)
    session, used = create_session(one_out, cpu_only)
    with pytest.raises(ModelSignatureError, match="number of outputs"):
        FaceParser(session, spec_for_file("parser", one_out), one_out, used)


def test_parser_specs() -> None:
    for spec in (BISENET_RESNET_34, BISENET_RESNET_18):
        assert spec.role == "parser" and spec.crop_size_px == 512 and spec.template == "arcface_128"
        assert spec.inputs[0].name == "input" and spec.inputs[0].shape == (1, 3, 512, 512)
        assert [o.shape for o in spec.outputs] == [(1, 19, 512, 512)] * 3
        assert "MIT" in spec.licence and "CelebAMask-HQ" in spec.licence
        assert spec.urls[0].startswith("https://github.com/facefusion/facefusion-assets/releases/")
        assert spec.sha256 and "CRC32" in spec.sha256_source
    assert spec_for_file("parser", "bisenet_resnet_18.onnx") is BISENET_RESNET_18
    unknown = spec_for_file("parser", "my_parser.onnx")
    assert unknown.family == "bisenet" and unknown.sha256 is None


def _cfg(tmp_path: Path, models: Path, occlusion: bool, parser_file: str = "bisenet_resnet_34.onnx") -> Path:
    """A config whose other models have names the kiosk does not know (so no published hash: they
    verify as "unverified", which is not a failure), no enhancer, and the given parser."""
    p = tmp_path / "kiosk.yaml"
    p.write_text(
        f"models:\n  dir: {models}\n  detector: my_det.onnx\n  embedder: my_emb.onnx\n"
        f"  swapper: my_swap.onnx\n  enhancer: null\n  parser: {parser_file}\n"
        f"  providers: {{order: [cpu]}}\nmask:\n  occlusion: {'true' if occlusion else 'false'}\n",
        encoding="utf-8",
    )
    return p


def _mirror(tmp_path: Path, standin_dir: Path) -> Path:
    mirror = tmp_path / "usb"
    mirror.mkdir()
    for name, src in (("my_det", "det_10g"), ("my_emb", "w600k_r50"), ("my_swap", "inswapper_128")):
        shutil.copy(standin_dir / f"{src}.onnx", mirror / f"{name}.onnx")
    standins.make_parser(mirror / "my_parser.onnx")  # unknown name: no published hash
    return mirror


def test_parser_is_needed_only_for_occlusion(tmp_path: Path) -> None:
    cfg = KioskConfig.model_validate({"models": {"dir": str(tmp_path)}, "base_dir": tmp_path})
    assert model_paths(cfg)["parser"] is None
    assert all(p.name != "bisenet_resnet_34.onnx" for p in missing_models(cfg))
    on = KioskConfig.model_validate(
        {"models": {"dir": str(tmp_path)}, "mask": {"occlusion": True}, "base_dir": tmp_path}
    )
    assert model_paths(on)["parser"] == tmp_path / "bisenet_resnet_34.onnx"
    assert tmp_path / "bisenet_resnet_34.onnx" in missing_models(on)


def test_models_fetch_takes_the_parser_only_with_occlusion(
    tmp_path: Path, standin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = _mirror(tmp_path, standin_dir)
    models = tmp_path / "models"
    off = _cfg(tmp_path, models, False, "my_parser.onnx")
    assert main(["models", "fetch", "--config", str(off), "--from", str(mirror), "--quiet"]) == 0
    assert sorted(p.name for p in models.iterdir()) == ["my_det.onnx", "my_emb.onnx", "my_swap.onnx"]
    assert main(["models", "verify", "--config", str(off)]) == 0
    assert "parser" not in capsys.readouterr().out

    on = _cfg(tmp_path, models, True, "my_parser.onnx")
    assert main(["models", "verify", "--config", str(on)]) == 1
    assert "my_parser.onnx (missing)" in capsys.readouterr().err
    assert main(["models", "fetch", "--config", str(on), "--from", str(mirror), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (models / "my_parser.onnx").read_bytes() == (mirror / "my_parser.onnx").read_bytes()
    assert "parser" in out and "fetched (unverified" in out
    # The parser without a published hash is "unverified", not a failure.
    assert main(["models", "verify", "--config", str(on)]) == 0
    assert "my_parser.onnx: unverified (no published sha256)" in capsys.readouterr().out


def test_models_verify_flags_a_parser_whose_hash_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "models"
    f = standins.make_parser(models / "bisenet_resnet_34.onnx")
    assert hashlib.sha256(f.read_bytes()).hexdigest() != BISENET_RESNET_34.sha256
    assert main(["models", "verify", "--config", str(_cfg(tmp_path, models, True))]) == 1
    captured = capsys.readouterr()
    assert "bisenet_resnet_34.onnx: CORRUPT" in captured.out
    assert "bisenet_resnet_34.onnx (CORRUPT" in captured.err


def test_open_parser_follows_mask_occlusion(tmp_path: Path) -> None:
    standins.make_parser(tmp_path / "bisenet_resnet_34.onnx")
    base = {"models": {"dir": str(tmp_path), "providers": {"order": ["cpu"]}}, "base_dir": tmp_path}
    assert open_parser(KioskConfig.model_validate(base)) is None
    parser = open_parser(KioskConfig.model_validate({**base, "mask": {"occlusion": True}}))
    assert isinstance(parser, FaceParser) and parser.spec is BISENET_RESNET_34


def test_occlusion_on_keeps_the_hand_in_the_composite(tmp_path: Path) -> None:
    """``mask.occlusion: true`` end to end: ``SwapPipeline.from_config`` loads the parser and its mask
    goes into the per-face alpha, so the hand in front of the face keeps the visitor's pixels while
    the face around it is swapped (the stand-in swapper tints it). Off: the hand is swapped over."""
    from kiosk.processing.pipeline import SwapPipeline

    standins.make_all(tmp_path)
    standins.make_parser(tmp_path / "bisenet_resnet_34.onnx")
    frame, face = _scene()
    hand = np.zeros(frame.shape[:2], bool)
    hand[280:330, 290:315] = True  # inside the hand and inside the swapped crop
    skin = np.zeros(frame.shape[:2], bool)
    skin[205:235, 330:360] = True  # cheek beside the nose, no hand, no hair
    changed = {}
    for occlusion in (False, True):
        cfg = KioskConfig.model_validate(
            {
                "models": {
                    "dir": str(tmp_path),
                    "swapper": "inswapper_128.onnx",  # the stand-in neural swap, its licence accepted
                    "accept_noncommercial_licence": True,
                    "providers": {"order": ["cpu"]},
                },
                "processing": {"tracking": False},
                "mask": {"occlusion": occlusion},
                "base_dir": tmp_path,
            }
        )
        pipe = SwapPipeline.from_config(cfg)
        assert (pipe.face_parser is not None) == occlusion
        pipe.detector.detect = lambda _frame: [face]  # type: ignore[method-assign]
        pipe.use_latent(np.full((1, 512), 512**-0.5, np.float32), "test")
        out = pipe.process(frame)
        diff = np.abs(out.astype(np.int16) - frame.astype(np.int16)).max(axis=2)
        changed[occlusion] = (float(diff[hand].max()), float(diff[skin].min()))
    assert changed[False][0] > 20 and changed[False][1] > 20  # hand and face both swapped
    assert changed[True][0] <= 1, changed  # the hand keeps the visitor's pixels
    assert changed[True][1] > 20, changed  # the face around it is still swapped
