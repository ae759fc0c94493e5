"""Detectors: NMS, stand-in SCRFD contract (plain and batched outputs), and the real det_500m / YuNet
on insightface's t1.jpg against insightface 2.1's SCRFD."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only, shared_model

from kiosk.inference.detector import ScrfdDetector, make_detector, nms
from kiosk.inference.errors import ImageError
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import DET_10G, spec_for_file


def _detector(path: Path, **kw):  # type: ignore[no-untyped-def]
    session, used = create_session(path, cpu_only)
    return make_detector(session, spec_for_file("detector", path), path, used, **kw)


def test_nms_keeps_best_of_overlapping() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.9, 0.95, 0.5], np.float32)
    assert nms(boxes, scores, 0.4) == [1, 2]


def test_standin_finds_white_squares(standin_dir: Path) -> None:
    det = _detector(standin_dir / "det_10g.onnx")
    assert isinstance(det, ScrfdDetector) and det.spec is DET_10G
    frame = standins.white_square_frame(squares=((64, 64, 64), (384, 160, 64)))
    faces = det.detect(frame)
    assert len(faces) == 2
    for f in faces:
        assert f.kps.shape == (5, 2) and f.kps.dtype == np.float32
        assert f.box_xyxy.shape == (4,) and f.score > 0.9
    centres = sorted(
        ((f.box_xyxy[0] + f.box_xyxy[2]) / 2, (f.box_xyxy[1] + f.box_xyxy[3]) / 2) for f in faces
    )
    for (cx, cy), (x, y) in zip(centres, [(64, 64), (384, 160)], strict=True):
        assert x <= cx <= x + 64 and y <= cy <= y + 64  # the stand-in puts the box on the white cell
    assert det.detect(np.full((360, 640, 3), 90, np.uint8)) == []


def test_batched_outputs_decode_the_same(tmp_path: Path) -> None:
    plain = _detector(standins.make_detector(tmp_path / "plain.onnx"))
    batched = _detector(standins.make_detector(tmp_path / "batched.onnx", batched=True))
    frame = standins.white_square_frame(h=480, w=480, squares=((96, 96, 64),))
    a, b = plain.detect(frame), batched.detect(frame)
    assert len(a) == len(b) == 1
    np.testing.assert_array_equal(a[0].box_xyxy, b[0].box_xyxy)


def test_letterbox_maps_back_to_frame_pixels(standin_dir: Path) -> None:
    det = _detector(standin_dir / "det_10g.onnx", det_size=320)
    frame = standins.white_square_frame(h=720, w=1280, squares=((256, 256, 128),))
    faces = det.detect(frame)
    assert len(faces) == 1
    cx = (faces[0].box_xyxy[0] + faces[0].box_xyxy[2]) / 2
    assert 256 <= cx <= 384


def test_bad_frame_is_a_clear_error(standin_dir: Path) -> None:
    det = _detector(standin_dir / "det_10g.onnx")
    with pytest.raises(ImageError, match="BGR image"):
        det.detect(np.zeros((10, 10), np.uint8))


def test_max_faces(standin_dir: Path) -> None:
    det = _detector(standin_dir / "det_10g.onnx", max_faces=1)
    frame = standins.white_square_frame(squares=((64, 64, 64), (384, 160, 64)))
    assert len(det.detect(frame)) == 1


def test_det_500m_agrees_with_insightface(det_500m: Path, t1_bgr: np.ndarray) -> None:
    scrfd = pytest.importorskip("insightface.model_zoo.scrfd")
    ref = scrfd.SCRFD(str(det_500m))
    ref.prepare(-1, input_size=(640, 640), det_thresh=0.5)
    ref_det, ref_kps = ref.detect(t1_bgr, input_size=(640, 640))
    ours = _detector(det_500m).detect(t1_bgr)
    assert len(ours) == len(ref_det) == 6
    for i, face in enumerate(ours):
        np.testing.assert_allclose(face.box_xyxy, ref_det[i, :4], atol=1.0)
        np.testing.assert_allclose(face.kps, ref_kps[i], atol=1.0)
        assert abs(face.score - ref_det[i, 4]) < 1e-4


@pytest.mark.parametrize("name", ["face_detection_yunet_2023mar.onnx", "face_detection_yunet_2026may.onnx"])
def test_yunet_agrees_with_opencv(name: str, t1_bgr: np.ndarray) -> None:
    import cv2

    path = shared_model(name)
    yunet = _detector(path)
    assert yunet.spec.family == "yunet"
    assert len(yunet.detect(t1_bgr)) == 6
    # Same 640x640 input for both: OpenCV's own YuNet decoder is the reference.
    h, w = t1_bgr.shape[:2]
    canvas = np.zeros((640, 640, 3), np.uint8)
    small = cv2.resize(t1_bgr, (640, int(h * 640 / w)))
    canvas[: small.shape[0]] = small
    ref = cv2.FaceDetectorYN.create(str(path), "", (640, 640), 0.5, 0.4, 5000)
    _, ref_faces = ref.detect(canvas)
    ours = sorted(yunet.detect(canvas), key=lambda f: float(f.box_xyxy[0]))
    ref_sorted = sorted(ref_faces, key=lambda f: float(f[0]))
    assert len(ours) == len(ref_sorted) == 6
    for f, r in zip(ours, ref_sorted, strict=True):
        np.testing.assert_allclose(f.box_xyxy[:2], r[:2], atol=0.5)
        np.testing.assert_allclose(f.box_xyxy[2:] - f.box_xyxy[:2], r[2:4], atol=0.5)
        np.testing.assert_allclose(f.kps.ravel(), r[4:14], atol=0.5)
