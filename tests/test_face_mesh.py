"""The dense face mesh (issue 26 item 1): MediaPipe Face Mesh converted to ONNX and bundled with its
hash, provenance and licence; run through the kiosk's session layer on the detector's box; on each
library photo once (packed into the photo's cached latent); a corrupt file is one line in the log
and the 5-point swap."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import cpu_only

from kiosk.config import parse_config
from kiosk.inference.align import align_matrix
from kiosk.inference.classic import SOURCE_PX, ClassicSwapper, pack_source, unpack_source
from kiosk.inference.errors import ModelError
from kiosk.inference.face_mesh import (
    LEFT_EYE,
    LIPS_INNER,
    MESH_POINTS,
    RIGHT_EYE,
    FaceMesh,
    bundled_mesh_path,
    open_face_mesh,
    triangles,
)
from kiosk.inference.specs import FACE_MESH
from kiosk.paths import package_file
from kiosk.processing.models import open_detector, read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.types import Face

DEMO = package_file("data", "demo")


def _cfg(extra: str = "", base: Path | None = None):  # type: ignore[no-untyped-def]
    return parse_config(
        "models: {swapper: classic, enhancer: null, providers: {order: [cpu], intra_op_threads: 1}"
        + extra
        + "}\n",
        "<test>",
        base_dir=base,
        env=False,
    )


@pytest.fixture(scope="module")
def mesh() -> FaceMesh:
    return open_face_mesh(bundled_mesh_path(), cpu_only)


@pytest.fixture(scope="module")
def visitor() -> tuple[np.ndarray, Face]:
    img = read_image(DEMO / "visitor_eileen_collins_nasa.jpg")
    faces = open_detector(_cfg()).detect(img)
    assert len(faces) == 1
    return img, faces[0]


def test_the_bundled_mesh_is_the_converted_file_with_its_licence_and_provenance() -> None:
    folder = bundled_mesh_path().parent
    data = bundled_mesh_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == FACE_MESH.sha256 and len(data) == FACE_MESH.size_bytes
    prov = (folder / "PROVENANCE.md").read_text()
    tris = (folder / "face_mesh_triangles.npy").read_bytes()
    for fact in (
        FACE_MESH.sha256,
        hashlib.sha256(tris).hexdigest(),
        "a807328339e7356fda0bb14df12fedbf1d33bdf81649c5f8666b0026b1cc30b4",  # the mediapipe wheel
        "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814",  # its face_landmark.tflite
        "max |landmark difference|",
    ):
        assert fact and fact in prov, fact
    assert "Apache License" in (folder / "LICENSE.mediapipe").read_text()
    assert (Path(__file__).resolve().parents[1] / "scripts" / "convert_face_mesh.py").is_file()


def test_the_triangulation_leaves_the_eyes_and_the_inside_of_the_mouth_open(
    mesh: FaceMesh, visitor: tuple[np.ndarray, Face]
) -> None:
    tris = triangles()
    assert tris.shape == (852, 3) and tris.max() == MESH_POINTS - 1
    img, face = visitor
    xy = mesh.points(img, face).xy
    h, w = img.shape[:2]
    cover = np.zeros((h, w), np.uint8)
    cv2.fillPoly(cover, [np.rint(xy[t]).astype(np.int32) for t in tris], 255)
    holes = [LIPS_INNER, LEFT_EYE, RIGHT_EYE]
    for loop in holes:
        centre = np.rint(xy[list(loop)].mean(axis=0)).astype(int)
        assert cover[centre[1], centre[0]] == 0, loop
    assert cover[int(xy[4, 1]), int(xy[4, 0])] == 255  # the nose tip is covered


def test_the_mesh_lands_on_the_face_and_follows_it_when_the_photo_turns(
    mesh: FaceMesh, visitor: tuple[np.ndarray, Face]
) -> None:
    """On the real photo the mesh's eye and mouth corners are where the detector's keypoints are;
    rotating the photo by 25° rotates the mesh with it (it is found on the detector's box, upright
    by the eye line)."""
    img, face = visitor
    got = mesh.points(img, face)
    assert got.presence > 0.95
    eye_dist = float(np.hypot(*(face.kps[1] - face.kps[0])))
    marks = {
        0: got.xy[list(RIGHT_EYE)].mean(0),
        1: got.xy[list(LEFT_EYE)].mean(0),
        3: got.xy[61],
        4: got.xy[291],
    }
    for k, p in marks.items():
        assert np.hypot(*(p - face.kps[k])) < 0.15 * eye_dist, (k, p, face.kps[k])
    rot = cv2.getRotationMatrix2D((256.0, 256.0), 25.0, 1.0)
    turned = cv2.warpAffine(img, rot, (512, 512), borderMode=cv2.BORDER_REPLICATE)
    faces = open_detector(_cfg()).detect(turned)
    moved = mesh.points(turned, faces[0])
    expect = got.xy @ rot[:, :2].T.astype(np.float32) + rot[:, 2].astype(np.float32)
    err = np.hypot(*(moved.xy - expect).T)
    assert moved.presence > 0.9 and float(np.median(err)) < 0.05 * eye_dist, float(np.median(err))


def test_a_corrupt_mesh_file_is_one_line_naming_it_and_the_swap_falls_back_to_five_points(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    bad = tmp_path / "face_mesh_468.onnx"  # the bundled name, other bytes: the hash says so
    bad.write_bytes(bundled_mesh_path().read_bytes()[:100_000])
    with pytest.raises(ModelError, match="reinstall the kiosk") as err:
        open_face_mesh(bad, cpu_only)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    junk = tmp_path / "mesh.onnx"  # another name: not a loadable model
    junk.write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="not a loadable ONNX model"):
        open_face_mesh(junk, cpu_only)
    for path in (bad, junk):
        caplog.clear()
        pipe = SwapPipeline.from_config(_cfg(f", mesh: {path}"))
        sw = pipe.models.swapper
        assert isinstance(sw, ClassicSwapper) and sw.mesh is None
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(lines) == 1 and str(path) in lines[0] and "five keypoints" in lines[0], lines
        assert "Traceback" not in caplog.text
        src = read_image(DEMO / "source_face_fred_marshall_1961.jpg")
        pipe.set_source(src)
        frame = read_image(DEMO / "visitor_eileen_collins_nasa.jpg")
        out = np.empty_like(frame)
        pipe.process_into(frame, out)
        assert pipe.times.faces == 1 and np.abs(out.astype(int) - frame).mean() > 1.0  # still swaps
    off = SwapPipeline.from_config(_cfg(", mesh: null")).models.swapper
    assert isinstance(off, ClassicSwapper) and off.mesh is None


def test_each_library_photo_keeps_its_mesh_in_its_cached_latent(mesh: FaceMesh) -> None:
    """The photo's mesh is found once, packed with its aligned crop (the latent the face cache
    stores) in that crop's pixels: where the same face's mesh lands in the crop; a version 1 entry
    (no mesh) is refused, so the library recomputes it."""
    crop = np.random.default_rng(1).integers(0, 256, (SOURCE_PX, SOURCE_PX, 3), dtype=np.uint8)
    kps = np.arange(10, dtype=np.float32).reshape(5, 2)
    pts = np.random.default_rng(2).uniform(0, SOURCE_PX, (MESH_POINTS, 3)).astype(np.float32)
    back, kps_back, mesh_back = unpack_source(pack_source(crop, kps, pts))
    assert np.array_equal(back, crop) and np.array_equal(kps_back, kps) and np.array_equal(mesh_back, pts)
    flat = unpack_source(pack_source(crop, kps, pts[:, :2]))[2]  # (x, y) only: a depth of 0
    assert flat is not None and np.array_equal(flat[:, :2], pts[:, :2]) and not flat[:, 2].any()
    assert unpack_source(pack_source(crop, kps))[2] is None
    v1 = np.concatenate([[1.0, SOURCE_PX], kps.reshape(-1), crop.reshape(-1)]).astype(np.float32)
    with pytest.raises(ValueError, match="not a classic source"):
        unpack_source(v1)
    src = read_image(DEMO / "source_face_fred_marshall_1961.jpg")
    face = open_detector(_cfg()).detect(src)[0]
    sw = ClassicSwapper(mesh=mesh)
    packed_crop, packed_kps, packed_mesh = unpack_source(sw.source_latent(src, face.kps, face))
    assert packed_mesh is not None
    m = align_matrix(face.kps, "arcface_128", SOURCE_PX)
    found = mesh.points(src, face)
    expect = found.xy @ m[:, :2].T + m[:, 2]
    assert np.allclose(packed_mesh[:, :2], expect, atol=1e-3)
    # the depth in the crop's scale too (the mesh's depth times the crop's scale)
    assert np.allclose(packed_mesh[:, 2], found.z * np.hypot(m[0, 0], m[1, 0]), atol=1e-3)
    # in the crop's pixels: the eye openings are where the crop's keypoints are
    for k, loop in ((0, RIGHT_EYE), (1, LEFT_EYE)):
        assert np.hypot(*(packed_mesh[list(loop), :2].mean(0) - packed_kps[k])) < 8.0


def test_the_face_cache_key_changes_with_the_mesh() -> None:
    from kiosk.processing.booth_stage import _classic_digest

    assert _classic_digest("d", "") != _classic_digest("d", "m1") != _classic_digest("d", "m2")


def test_the_mesh_session_runs_on_one_thread_unless_the_config_names_a_count() -> None:
    """The mesh is a small model run once per face: with ``intra_op_threads: 0`` (ONNX Runtime
    decides: every core) it would contend with the detector, the capture and the render loop."""
    import dataclasses

    auto = dataclasses.replace(cpu_only, intra_op_threads=0)
    opts = open_face_mesh(bundled_mesh_path(), auto).runner.session.get_session_options()
    assert opts.intra_op_num_threads == 1
    two = dataclasses.replace(cpu_only, intra_op_threads=2)
    opts = open_face_mesh(bundled_mesh_path(), two).runner.session.get_session_options()
    assert opts.intra_op_num_threads == 2
