"""RetinaFace (biubug6/Pytorch_Retinaface exports): prior boxes, the decoder on a contract-identical
stand-in with constant outputs (hand-computed boxes and keypoints), fixed-input letterboxing of
tracking regions, signature errors, the real mnet0.25 file on insightface's t1.jpg against an
independent decode and against det_500m, ``kiosk detect`` / ``kiosk models list``, and the
pipeline tracking faces in regions with it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only, insightface_image, make_cfg, shared_model

from kiosk.cli import main
from kiosk.inference.detector import FaceDetector, RetinaFaceDetector, make_detector, nms, retinaface_priors
from kiosk.inference.errors import ModelSignatureError
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import RETINAFACE, RETINAFACE_MNET025, detector_family_of, spec_for_file
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.tracking import box_iou
from kiosk.types import Face

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

REAL = "retinaface_mnet025_640.onnx"
MEAN_BGR = np.array([104.0, 117.0, 123.0], np.float32)


def _detector(path: Path, **kw) -> FaceDetector:  # type: ignore[no-untyped-def]
    session, used = create_session(path, cpu_only)
    return make_detector(session, spec_for_file("detector", path), path, used, **kw)


def _priorbox_reference(h: int, w: int) -> np.ndarray:
    """biubug6's ``PriorBox.forward`` written as its loops (normalised), scaled to pixels."""
    anchors = []
    for step, sizes in zip((8, 16, 32), ((16, 32), (64, 128), (256, 512)), strict=True):
        for i, j in itertools.product(range(math.ceil(h / step)), range(math.ceil(w / step))):
            for m in sizes:
                anchors += [(j + 0.5) * step / w, (i + 0.5) * step / h, m / w, m / h]
    return np.array(anchors, np.float64).reshape(-1, 4) * np.array([w, h, w, h])


# -- priors and decoder ----------------------------------------------------------------------------
@pytest.mark.parametrize("hw", [(640, 640), (64, 64), (96, 160)])
def test_priors_are_biubug6_priorbox(hw: tuple[int, int]) -> None:
    got = retinaface_priors(*hw)
    np.testing.assert_allclose(got, _priorbox_reference(*hw), rtol=1e-6)
    assert retinaface_priors(*hw) is got and not got.flags.writeable  # computed once, shared
    if hw == (640, 640):
        assert got.shape == (16800, 4)


def _constant_model(path: Path) -> tuple[Path, dict[str, object]]:
    """A fixed 64x64 RetinaFace-contract model whose outputs are constants we chose.

    64x64 priors: stride 8: 8x8 cells x 2 (0..127), stride 16: 4x4 x 2 (128..159), stride 32:
    2x2 x 2 (160..167). Two candidates score above 0.5:
    - index 140 = stride 16, cell row 1 col 2, min size 64: prior centre (40, 24), size 64;
    - index 163 = stride 32, cell row 0 col 1, min size 512: prior centre (48, 16), size 512.
    """
    n = 168
    loc = np.zeros((1, n, 4), np.float32)
    conf = np.tile(np.array([0.9, 0.1], np.float32), (1, n, 1))
    landms = np.zeros((1, n, 10), np.float32)
    loc[0, 140] = (0.5, -0.25, 1.0, -1.0)
    conf[0, 140] = (0.2, 0.8)
    landms[0, 140] = (1.0, 2.0, -1.0, 0.5, 0.0, 0.0, 2.0, -2.0, -0.5, 1.0)
    conf[0, 163] = (0.4, 0.6)
    loc[0, 163] = (0.0, 0.0, 0.0, 0.0)
    landms[0, 163] = (1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.5, -0.5, -0.5, 0.5)
    # Hand-computed in input pixels: centre = prior + loc * 0.1 * size; size * exp(loc * 0.2).
    w0, h0 = 64 * math.exp(1.0 * 0.2), 64 * math.exp(-1.0 * 0.2)
    cx0, cy0 = 40 + 0.5 * 0.1 * 64, 24 - 0.25 * 0.1 * 64  # 43.2, 22.4
    want = {
        "scores": [0.8, 0.6],
        "boxes": [
            [cx0 - w0 / 2, cy0 - h0 / 2, cx0 + w0 / 2, cy0 + h0 / 2],
            [48 - 256, 16 - 256, 48 + 256, 16 + 256],
        ],
        "kps": [
            [
                [40 + 6.4, 24 + 12.8],
                [40 - 6.4, 24 + 3.2],
                [40, 24],
                [40 + 12.8, 24 - 12.8],
                [40 - 3.2, 24 + 6.4],
            ],
            [
                [48 + 51.2, 16 + 51.2],
                [48 - 51.2, 16 - 51.2],
                [48, 16],
                [48 + 25.6, 16 - 25.6],
                [48 - 25.6, 16 + 25.6],
            ],
        ],
    }
    return standins.make_retinaface(path, size=64, constants=(loc, conf, landms)), want


def _check(faces: list[Face], want: dict[str, object], scale: float) -> None:
    assert [round(f.score, 6) for f in faces] == want["scores"]
    for f, box, kps in zip(faces, want["boxes"], want["kps"], strict=True):  # type: ignore[call-overload]
        np.testing.assert_allclose(f.box_xyxy, np.array(box) * scale, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(f.kps, np.array(kps) * scale, rtol=1e-5, atol=1e-4)
        assert f.kps.dtype == np.float32 and f.box_xyxy.dtype == np.float32


def test_decoder_on_constant_outputs(tmp_path: Path) -> None:
    path, want = _constant_model(tmp_path / "retinaface_const.onnx")
    det = _detector(path)
    assert isinstance(det, RetinaFaceDetector) and det.spec.family == "retinaface"
    assert det.input_size == det.det_size == 64  # the fixed input decides the size
    _check(det.detect(np.zeros((64, 64, 3), np.uint8)), want, 1.0)
    # Letterbox: a frame twice the input maps back at twice the input's pixels.
    _check(det.detect(np.zeros((128, 128, 3), np.uint8)), want, 2.0)
    _check(det.detect(np.zeros((64, 128, 3), np.uint8)), want, 2.0)
    # Below the threshold nothing is decoded.
    strict = _detector(path, threshold=0.85)
    assert strict.detect(np.zeros((64, 64, 3), np.uint8)) == []


def test_a_region_is_letterboxed_into_the_fixed_input(tmp_path: Path) -> None:
    path, want = _constant_model(tmp_path / "retinaface_const.onnx")
    roi = _detector(path).resized(32)
    assert (roi.det_size, roi.input_size) == (32, 64) and roi.max_faces == 0
    # A 64 px region at det_size 32: scale 0.5 into the top-left of the 64x64 input.
    crop = np.full((64, 64, 3), 200, np.uint8)
    _check(roi.detect(crop), want, 2.0)
    blob = roi._blob[0]
    np.testing.assert_array_equal(
        blob[:, :32, :32], np.broadcast_to((200 - MEAN_BGR)[:, None, None], (3, 32, 32))
    )
    np.testing.assert_array_equal(blob[:, 32:, :], np.broadcast_to(-MEAN_BGR[:, None, None], (3, 32, 64)))
    np.testing.assert_array_equal(blob[:, :, 32:], np.broadcast_to(-MEAN_BGR[:, None, None], (3, 64, 32)))
    # A larger size than the fixed input cannot be had: it stays at the input size.
    assert _detector(path).resized(128).det_size == 64


def test_input_is_bgr_minus_the_channel_means(tmp_path: Path) -> None:
    path, _ = _constant_model(tmp_path / "retinaface_const.onnx")
    det = _detector(path)
    frame = np.zeros((64, 64, 3), np.uint8)
    frame[..., 0], frame[..., 1], frame[..., 2] = 10, 20, 250  # B, G, R
    det.detect(frame)
    np.testing.assert_array_equal(det._blob[0, :, 5, 7], np.array([10, 20, 250], np.float32) - MEAN_BGR)


def test_regions_share_one_run_as_tiles(tmp_path: Path) -> None:
    path, want = _constant_model(tmp_path / "retinaface_const.onnx")
    roi = _detector(path).resized(32)
    # 64 input, 32 px tiles, no room for a gap: tile origins (y, x) (0, 0), (0, 32), (32, 0), (32, 32).
    assert roi.tiles_per_run == 4 and roi._tile_origins == [(0, 0), (0, 32), (32, 0), (32, 32)]
    crops = [np.zeros((64, 64, 3), np.uint8), np.full((64, 64, 3), 200, np.uint8)]
    runs = roi.runner.runs
    got = roi.detect_many(crops)
    assert roi.runner.runs == runs + 1
    # Both constant candidates have their centre in tile 1 (x 32..64, y 0..32): they belong to
    # crop 1, in its own pixels: (input - tile origin) / scale 0.5.
    assert got[0] == []
    shifted = {
        "scores": want["scores"],
        "boxes": [[b[0] - 32, b[1], b[2] - 32, b[3]] for b in want["boxes"]],  # type: ignore[attr-defined]
        "kps": [[[x - 32, y] for x, y in k] for k in want["kps"]],  # type: ignore[attr-defined]
    }
    _check(got[1], shifted, 2.0)
    blob = roi._blob[0]
    np.testing.assert_array_equal(
        blob[:, :32, 32:], np.broadcast_to((200 - MEAN_BGR)[:, None, None], (3, 32, 32))
    )
    # Fewer crops next time: the tiles left over hold padding again, not last call's pixels.
    assert roi.detect_many(crops[:1]) == [[]]
    np.testing.assert_array_equal(blob[:, :32, 32:], np.broadcast_to(-MEAN_BGR[:, None, None], (3, 32, 32)))
    # More crops than tiles: two runs.
    runs = roi.runner.runs
    assert len(roi.detect_many(crops * 3)) == 6 and roi.runner.runs == runs + 2
    # A plain detect after tiles sees padding around its letterbox, as on a fresh detector.
    fresh = _detector(path).resized(32)
    for a, b in zip(roi.detect(crops[1]), fresh.detect(crops[1]), strict=True):
        np.testing.assert_array_equal(a.box_xyxy, b.box_xyxy)
    np.testing.assert_array_equal(roi._blob, fresh._blob)


def test_tiles_find_what_single_region_runs_find(t1_bgr: np.ndarray) -> None:
    roi = _detector(shared_model(REAL)).resized(192)
    assert roi.tiles_per_run == 9 and roi._tile_pitch == 224  # 3 x 192 with 32 px gaps in 640
    full = _detector(shared_model(REAL)).detect(t1_bgr)
    # One 384 px region around each face (the size tracking gives regions of a 1280 px frame).
    crops, origins = [], []
    for f in full:
        cx, cy = (f.box_xyxy[:2] + f.box_xyxy[2:]) / 2
        x0, y0 = int(max(cx - 192, 0)), int(max(cy - 192, 0))
        origins.append((x0, y0))
        crop = np.zeros((384, 384, 3), np.uint8)
        part = t1_bgr[y0 : y0 + 384, x0 : x0 + 384]
        crop[: part.shape[0], : part.shape[1]] = part
        crops.append(crop)
    tiled = roi.detect_many(crops)
    single = [roi.detect(c) for c in crops]
    assert [len(t) for t in tiled] == [len(s) for s in single]
    # Each crop's face (the one at the crop's centre) against the full-frame detection: a tile's
    # neighbours 32 px away change the keypoints no more than the crop itself does.
    errors = {"tiled": [], "single": []}
    for f, crop_tiled, crop_single, (x0, y0) in zip(full, tiled, single, origins, strict=True):
        for kind, faces in (("tiled", crop_tiled), ("single", crop_single)):
            g = min(faces, key=lambda g: float(np.abs(g.kps.mean(0) + (x0, y0) - f.kps.mean(0)).sum()))
            errors[kind].append(float(np.abs(g.kps + (x0, y0) - f.kps).max()))
    print(
        f"keypoints vs full frame, max px per face: tiled {np.round(errors['tiled'], 1)}, single {np.round(errors['single'], 1)}"
    )
    assert max(errors["tiled"]) < 8.0
    assert np.mean(errors["tiled"]) <= np.mean(errors["single"]) + 1.0


# -- signatures ------------------------------------------------------------------------------------
def test_wrong_output_layout_is_a_one_line_signature_error(tmp_path: Path) -> None:
    # Named as the real file, but the confidences have one column: not the RetinaFace layout.
    bad = standins.make_retinaface(tmp_path / REAL, widths=(4, 1, 10))
    assert spec_for_file("detector", bad) is RETINAFACE_MNET025
    with pytest.raises(ModelSignatureError) as err:
        _detector(bad)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(bad)) and "retinaface_mnet025" in msg
    assert "[?,2]" in msg and "models.detector" in msg


def test_cli_reports_a_wrong_layout_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = standins.make_retinaface(tmp_path / "models" / REAL, size=None, widths=(2, 4, 10))
    cfg = tmp_path / "k.yaml"
    cfg.write_text(f"models: {{dir: models, detector: {REAL}, providers: {{order: [cpu]}}}}\n")
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), standins.white_square_frame())
    assert main(["detect", str(image), "--config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "does not match the detector contract" in err


def test_outputs_that_do_not_fit_the_priors_are_a_signature_error(tmp_path: Path) -> None:
    # The right layout, but 100 candidates where a 64x64 input has 168 prior boxes.
    consts = (np.zeros((1, 100, 4)), np.full((1, 100, 2), 0.5), np.zeros((1, 100, 10)))
    det = _detector(standins.make_retinaface(tmp_path / "short.onnx", size=64, constants=consts))
    with pytest.raises(
        ModelSignatureError, match=r"short\.onnx: RetinaFace outputs hold 100 candidates .* 168 prior"
    ):
        det.detect(np.zeros((64, 64, 3), np.uint8))


def test_unknown_files_are_picked_by_their_outputs(tmp_path: Path) -> None:
    # The file's name in the repository it came from tells nothing: its outputs do.
    renamed = standins.make_retinaface(tmp_path / "FaceDetector.onnx")
    assert detector_family_of(renamed) == "retinaface"
    spec = spec_for_file("detector", renamed)
    assert (
        spec.family == "retinaface" and spec.sha256 is None and spec.channel_mean == RETINAFACE.channel_mean
    )
    det = _detector(renamed)
    assert isinstance(det, RetinaFaceDetector)
    assert len(det.detect(standins.white_square_frame(squares=((64, 64, 64), (384, 160, 64))))) == 2
    assert spec_for_file("detector", tmp_path / "retinaface_r50.onnx").family == "retinaface"  # by name
    scrfd = standins.make_detector(tmp_path / "my_scrfd.onnx")
    assert detector_family_of(scrfd) == "scrfd"
    odd = standins.make_retinaface(tmp_path / "odd.onnx", widths=(4, 1, 10))
    assert detector_family_of(odd) == "scrfd"  # not RetinaFace's layout: the generic contract says why
    with pytest.raises(ModelSignatureError, match=r"odd\.onnx: number of outputs"):
        _detector(odd)


def test_standin_finds_white_squares(tmp_path: Path) -> None:
    det = _detector(standins.make_retinaface(tmp_path / REAL))
    assert det.spec is RETINAFACE_MNET025
    faces = det.detect(standins.white_square_frame(h=720, w=1280, squares=((256, 256, 128), (832, 128, 128))))
    assert len(faces) == 2
    for f, (x, y, side) in zip(
        sorted(faces, key=lambda f: float(f.box_xyxy[0])), ((256, 256, 128), (832, 128, 128)), strict=True
    ):
        cx, cy = (f.box_xyxy[0] + f.box_xyxy[2]) / 2, (f.box_xyxy[1] + f.box_xyxy[3]) / 2
        assert x <= cx <= x + side and y <= cy <= y + side
    assert det.detect(np.full((360, 640, 3), 90, np.uint8)) == []


def test_a_dynamic_export_runs_at_det_size_and_regions_at_their_own_size(tmp_path: Path) -> None:
    # A biubug6 export with dynamic height/width (as a ResNet-50 export with dynamic axes is).
    path = standins.make_retinaface(tmp_path / "retinaface_r50.onnx", size=None)
    det = _detector(path, det_size=320)
    assert det.spec is not RETINAFACE_MNET025 and det.spec.family == "retinaface"
    assert det.input_size == det.det_size == 320 and det.priors.shape == (
        2 * (40 * 40 + 20 * 20 + 10 * 10),
        4,
    )
    faces = det.detect(standins.white_square_frame(squares=((64, 64, 128), (384, 192, 128))))
    assert len(faces) == 2
    roi = det.resized(192)
    assert (roi.input_size, roi.det_size, roi.tiles_per_run) == (192, 192, 1)
    crop = standins.white_square_frame(h=192, w=192, squares=((64, 64, 64),))
    assert len(roi.detect(crop)) == 1 and [len(fs) for fs in roi.detect_many([crop, crop])] == [1, 1]


# -- the real mnet0.25 file ---------------------------------------------------------------------------
def _reference_decode(path: Path, image: np.ndarray, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """biubug6's ``detect.py`` decode (normalised priors, ``decode``/``decode_landm``, NMS 0.4) on a
    640x640 top-left letterbox, written independently of the kiosk's decoder."""
    import onnxruntime as ort

    h, w = image.shape[:2]
    s = 640 / max(h, w)
    canvas = np.zeros((640, 640, 3), np.float32) - MEAN_BGR
    small = cv2.resize(image, (int(w * s), int(h * s))).astype(np.float32)
    canvas[: small.shape[0], : small.shape[1]] = small - MEAN_BGR
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    loc, conf, landms = (
        o[0].astype(np.float64) for o in sess.run(None, {"input0": canvas.transpose(2, 0, 1)[None]})
    )
    priors = _priorbox_reference(640, 640) / 640.0
    boxes = np.concatenate(
        [priors[:, :2] + loc[:, :2] * 0.1 * priors[:, 2:], priors[:, 2:] * np.exp(loc[:, 2:] * 0.2)], axis=1
    )
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    kps = np.concatenate(
        [priors[:, :2] + landms[:, 2 * k : 2 * k + 2] * 0.1 * priors[:, 2:] for k in range(5)], axis=1
    )
    boxes, kps = boxes * 640 / s, kps * 640 / s
    scores = conf[:, 1]
    keep = np.nonzero(scores > threshold)[0]
    order = keep[np.argsort(-scores[keep], kind="stable")]
    picked = nms(boxes[order].astype(np.float32), scores[order].astype(np.float32), 0.4)
    return boxes[order][picked], kps[order][picked].reshape(-1, 5, 2)


def test_real_file_matches_an_independent_decode(t1_bgr: np.ndarray) -> None:
    path = shared_model(REAL)
    det = _detector(path)
    assert det.spec is RETINAFACE_MNET025 and det.input_size == 640
    faces = det.detect(t1_bgr)
    ref_boxes, ref_kps = _reference_decode(path, t1_bgr)
    assert len(faces) == len(ref_boxes) == 6
    for f, box, kps in zip(faces, ref_boxes, ref_kps, strict=True):
        np.testing.assert_allclose(f.box_xyxy, box, atol=0.05)
        np.testing.assert_allclose(f.kps, kps, atol=0.05)


def _match(a: list[Face], b: list[Face]) -> list[tuple[Face, Face, float]]:
    """Each face of ``a`` with the face of ``b`` it overlaps most, and their IoU."""
    out = []
    boxes = np.stack([g.box_xyxy for g in b])
    for f in a:
        ious = np.ravel(box_iou(f.box_xyxy, boxes))
        j = int(np.argmax(ious))
        out.append((f, b[j], float(ious[j])))
    return out


def test_real_file_finds_the_six_faces_det_500m_finds(t1_bgr: np.ndarray, det_500m: Path) -> None:
    retina = _detector(shared_model(REAL)).detect(t1_bgr)
    scrfd = _detector(det_500m).detect(t1_bgr)
    assert len(retina) == len(scrfd) == 6
    pairs = _match(retina, scrfd)
    assert len({id(g) for _, g, _ in pairs}) == 6  # one to one
    dists = np.array([np.linalg.norm(f.kps - g.kps, axis=1) for f, g, _ in pairs])
    widths = np.array([g.box_xyxy[2] - g.box_xyxy[0] for _, g, _ in pairs])
    print(
        f"RetinaFace vs det_500m on t1.jpg: IoU min {min(i for *_, i in pairs):.2f}, keypoints max "
        f"{dists.max():.2f} px, mean {dists.mean():.2f} px (faces {widths.min():.0f}-{widths.max():.0f} px wide)"
    )
    assert all(iou > 0.8 for *_, iou in pairs)
    # Two detectors label the points a little differently (det_2.5g vs det_500m: max 7.8, mean 3.4 px).
    assert dists.mean() < 5.0
    assert (dists.max(axis=1) < 0.1 * widths).all()


def test_kiosk_detect_with_retinaface(
    tmp_path: Path, det_500m: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared_model(REAL)
    image = insightface_image("t1.jpg")
    out = {}
    for name in (REAL, det_500m.name):
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(  # det_500m's weights are non-commercial: a config must accept that to run it
            f"models: {{dir: {det_500m.parent}, detector: {name}, accept_noncommercial_licence: true, "
            "providers: {order: [cpu]}}\n"
        )
        assert main(["detect", str(image), "--config", str(cfg), "--json"]) == 0
        out[name] = json.loads(capsys.readouterr().out)["faces"]
    as_faces = {
        k: [Face(np.array(f["box_xyxy"], np.float32), f["score"], np.array(f["kps"], np.float32)) for f in v]
        for k, v in out.items()
    }
    assert len(as_faces[REAL]) == len(as_faces[det_500m.name]) == 6
    for f, g, iou in _match(as_faces[REAL], as_faces[det_500m.name]):
        assert iou > 0.8 and float(np.linalg.norm(f.kps - g.kps, axis=1).max()) < 10.0


def test_models_list_shows_licence_and_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_model(REAL)
    cfg = tmp_path / "k.yaml"
    cfg.write_text(f"models: {{dir: {path.parent}, detector: {REAL}, providers: {{order: [cpu]}}}}\n")
    assert main(["models", "list", "--config", str(cfg)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if REAL in line)
    assert "yes      yes" in row and "MIT (biubug6/Pytorch_Retinaface weights)" in row
    assert (
        "source: diandianti/photo_analyze @ 2715cee6d1f39fc63b431a4fa14b0fc4f8334309 : models/FaceDetector.onnx"
        in text
    )


# -- the pipeline, tracking faces in regions ------------------------------------------------------------
def _portrait_720(image: np.ndarray) -> np.ndarray:
    s = 720 / image.shape[0]
    big = cv2.resize(image, (int(image.shape[1] * s), 720))
    frame = np.zeros((720, 1280, 3), np.uint8)
    x0 = (1280 - big.shape[1]) // 2
    frame[:, x0 : x0 + big.shape[1]] = big
    return frame


def _tracked(pipe: SwapPipeline, frames: list[np.ndarray]) -> list[list[Face]]:
    return [
        [sf.face for sf in pipe.process_into(f, None, paste=False, t=i / 30.0)] for i, f in enumerate(frames)
    ]


def test_pipeline_tracks_in_letterboxed_regions_with_the_real_file(
    standin_dir: Path, t1_bgr: np.ndarray
) -> None:
    cfg = make_cfg(standin_dir, detector=str(shared_model(REAL)))
    proc = cfg.processing.model_copy(update={"tracking": True, "detect_every": 5, "roi_det_size": 192})
    pipe = SwapPipeline.from_config(cfg.model_copy(update={"processing": proc}))
    frame = _portrait_720(t1_bgr)
    pipe.set_source(frame)
    roi = pipe.finder.roi_detector
    assert isinstance(pipe.detector, RetinaFaceDetector) and isinstance(roi, RetinaFaceDetector)
    assert (roi.det_size, roi.input_size) == (192, 640)  # regions at 192 scale inside the 640 input
    full0, roi0 = pipe.detector.runner.runs, roi.runner.runs
    tracked = _tracked(pipe, [frame] * 7)
    assert [len(fs) for fs in tracked][1:] == [6] * 6
    assert pipe.detector.runner.runs - full0 == 2  # frames 0 and 5
    # All six regions are tiles of one run per frame (frame 0: the new faces' regions).
    assert roi.runner.runs - roi0 == 7 and roi.tiles_per_run == 9
    # The tracked keypoints (from regions) sit where the full-frame detection puts them.
    full = pipe.detector.detect(frame)
    for f, g, iou in _match(tracked[-1], full):
        assert iou > 0.85 and float(np.linalg.norm(f.kps - g.kps, axis=1).max()) < 3.0


def test_pipeline_tracks_with_the_standin(standin_dir: Path, tmp_path: Path) -> None:
    det = standins.make_retinaface(tmp_path / REAL)
    cfg = make_cfg(standin_dir, detector=str(det))
    proc = cfg.processing.model_copy(update={"tracking": True, "detect_every": 4})
    pipe = SwapPipeline.from_config(cfg.model_copy(update={"processing": proc}))
    pipe.set_source(standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),)))
    frames = [
        standins.white_square_frame(h=720, w=1280, squares=((320 + 8 * i, 256, 128),)) for i in range(8)
    ]
    roi = pipe.finder.roi_detector
    assert roi is not None and (roi.det_size, roi.input_size) == (192, 640)
    roi0 = roi.runner.runs
    tracked = _tracked(pipe, frames)
    assert [len(fs) for fs in tracked] == [0] + [1] * 7  # a track is reported from its second hit
    assert roi.runner.runs - roi0 >= 8
    xs = [float(fs[0].box_xyxy[0] + fs[0].box_xyxy[2]) / 2 for fs in tracked[1:]]
    assert xs[-1] > xs[0]  # follows the square as it moves


# -- the threaded kiosk, headless ---------------------------------------------------------------------
@pytest.mark.gl
@pytest.mark.slow
def test_headless_kiosk_swaps_the_faces_retinaface_finds(tmp_path: Path, t1_bgr: np.ndarray) -> None:
    """``kiosk run --headless`` on an image source (t1.jpg), tracking on, RetinaFace as detector and
    stand-in embedder/swapper: the screenshot shows every face RetinaFace finds swapped (changed)
    and the picture around them untouched."""
    import threading
    import time

    try:
        import moderngl

        moderngl.create_standalone_context(backend="egl").release()
    except Exception:
        pytest.skip("no EGL/OpenGL context available (install libegl1 and Mesa)")
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import load_config
    from kiosk.tools.standins import make_embedder, make_swapper

    det = shared_model(REAL)
    (tmp_path / "models").mkdir()
    make_embedder(tmp_path / "models" / "w600k_r50.onnx")
    make_swapper(tmp_path / "models" / "inswapper_128.onnx")
    (tmp_path / "faces").mkdir()
    cv2.imwrite(str(tmp_path / "faces" / "ann.jpg"), t1_bgr[150:650, 0:300])
    cv2.imwrite(str(tmp_path / "scene.png"), t1_bgr)
    h, w = t1_bgr.shape[:2]
    cfg_path = tmp_path / "kiosk.yaml"
    cfg_path.write_text(
        f"""
source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: {w}, height: {h}, vsync: false, max_fps: 30, fit: fit}}
processing: {{det_size: 640, tracking: true, max_faces: 8}}
models: {{dir: models, detector: {det}, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cpu], intra_op_threads: 2}}}}
faces: {{dir: faces, cache_dir: cache}}
ui: {{attract_after_s: 0}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: false}}
"""
    )
    shot = tmp_path / "shot.png"
    app = KioskApp(load_config(cfg_path), RunOptions(headless=True, seconds=120.0, screenshot=shot))

    def stop_after_swapping() -> None:
        deadline = time.monotonic() + 110
        while time.monotonic() < deadline and not app.inference.processor_name.startswith("swap"):
            time.sleep(0.2)
        start = app.inference.meters.rate.count
        while time.monotonic() < deadline and app.inference.meters.rate.count < start + 8:
            time.sleep(0.2)
        time.sleep(0.5)
        app.stop.set()

    watcher = threading.Thread(target=stop_after_swapping, daemon=True)
    watcher.start()
    assert app.run() == 0
    watcher.join(timeout=5)
    assert app.inference.processor_name.startswith("swap"), app.inference.processor_name
    screen = cv2.imread(str(shot))
    assert screen is not None and screen.shape == t1_bgr.shape
    diff = np.abs(screen.astype(np.int16) - t1_bgr.astype(np.int16)).max(axis=2)
    faces = _detector(det).detect(t1_bgr)
    assert len(faces) == 6
    untouched = np.ones(diff.shape, bool)
    for f in faces:
        x0, y0, x1, y1 = (int(v) for v in f.box_xyxy)
        cx, cy, r = (x0 + x1) // 2, (y0 + y1) // 2, (x1 - x0) // 5
        changed = float((diff[cy - r : cy + r, cx - r : cx + r] > 12).mean())
        assert changed > 0.5, (f.box_xyxy, changed)  # the face's centre is swapped
        untouched[max(y0 - 40, 0) : y1 + 40, max(x0 - 40, 0) : x1 + 40] = False
    # Away from the faces (and from the banner at the top and the darkened face strip in the
    # bottom third) the picture is the camera's.
    untouched[:60], untouched[int(0.65 * h) :] = False, False
    assert float((diff[untouched] > 12).mean()) < 0.02
