"""The face library: cache hit, stale cache, bad photos, names/order, hot add/remove.

Uses the real det_500m detector (../shared/models) on crops of insightface's t1.jpg, with
stand-in embedder/swapper models (same contracts as the real ones)."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from inference_fixtures import make_cfg

from kiosk.booth.faces import FaceLibrary, make_library
from kiosk.booth.photo_files import ModelDigests
from kiosk.processing.pipeline import SwapPipeline


class Spy:
    """Counts the expensive calls the library makes on the pipeline."""

    def __init__(self, pipe: SwapPipeline) -> None:
        self.pipe = pipe
        self.analyzed = 0

    def find_source_faces(self, img):
        self.analyzed += 1
        return self.pipe.find_source_faces(img)

    def source_latent(self, img, face):
        return self.pipe.source_latent(img, face)


@pytest.fixture(scope="module")
def pipe(standin_dir: Path, det_500m: Path) -> SwapPipeline:
    return SwapPipeline.from_config(make_cfg(standin_dir, detector=str(det_500m)))


@pytest.fixture(scope="module")
def face_crops(t1_bgr) -> list[np.ndarray]:
    """Single-face photos cut from t1.jpg around each detected face."""

    crops = []
    for x0, x1 in ((0, 300), (330, 620), (640, 900), (930, 1280)):
        crop = t1_bgr[150:650, x0:x1]
        crops.append(np.ascontiguousarray(crop))
    return crops


def _write(path: Path, img: np.ndarray) -> Path:
    assert cv2.imwrite(str(path), img)
    return path


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_library_loads_good_photos_and_skips_bad_ones(tmp_path, pipe, face_crops, t1_bgr):
    folder = tmp_path / "faces"
    folder.mkdir()
    _write(folder / "alice.jpg", face_crops[0])
    _write(folder / "bob.png", face_crops[1])
    _write(folder / "empty.png", np.full((200, 200, 3), 128, np.uint8))  # no face
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 this is not really a jpeg")
    _write(folder / "group.jpg", t1_bgr)  # six faces of similar size
    (folder / "notes.txt").write_text("ignored: not an image")
    lib = FaceLibrary(folder, tmp_path / "cache", thumb_px=96)
    spy = Spy(pipe)
    assert lib.refresh(spy, "models-1")
    assert [e.name for e in lib.snapshot.entries] == ["alice", "bob"]
    for e in lib.snapshot.entries:
        assert e.latent.shape[-1] == 512 and abs(float(np.linalg.norm(e.latent)) - 1) < 1e-4
        assert e.thumb_bgr.shape == (96, 96, 3) and e.thumb_bgr.dtype == np.uint8
    problems = "\n".join(lib.snapshot.problems)
    assert "empty.png: no face found" in problems
    assert "broken.jpg: not a readable image" in problems
    assert "group.jpg: 6 faces of similar size" in problems
    assert len(lib.snapshot.problems) == 3


def test_cache_hit_and_stale_cache(tmp_path, pipe, face_crops):
    folder = tmp_path / "faces"
    folder.mkdir()
    photo = _write(folder / "carol.jpg", face_crops[2])
    cache = tmp_path / "cache"
    first = FaceLibrary(folder, cache)
    spy1 = Spy(pipe)
    first.refresh(spy1, "models-1")
    assert spy1.analyzed == 1 and len(list(cache.glob("*.npz"))) == 1
    # a new start with the same photo and models: served from the cache, no model call
    second = FaceLibrary(folder, cache)
    spy2 = Spy(pipe)
    second.refresh(spy2, "models-1")
    assert spy2.analyzed == 0
    assert np.array_equal(second.snapshot.entries[0].latent, first.snapshot.entries[0].latent)
    assert np.array_equal(second.snapshot.entries[0].thumb_bgr, first.snapshot.entries[0].thumb_bgr)
    # the photo changes: its cache entry is stale and the face is analysed again
    _write(photo, face_crops[3])
    _bump_mtime(photo)
    second.refresh(spy2, "models-1")
    assert spy2.analyzed == 1
    assert second.snapshot.entries[0].key != first.snapshot.entries[0].key
    # the models change: every entry is rebuilt
    third = FaceLibrary(folder, cache)
    spy3 = Spy(pipe)
    third.refresh(spy3, "models-2")
    assert spy3.analyzed == 1


def test_corrupt_cache_file_is_rebuilt(tmp_path, pipe, face_crops):
    folder = tmp_path / "faces"
    folder.mkdir()
    _write(folder / "dan.jpg", face_crops[0])
    cache = tmp_path / "cache"
    FaceLibrary(folder, cache).refresh(Spy(pipe), "m")
    (npz,) = cache.glob("*.npz")
    npz.write_bytes(b"garbage")
    lib = FaceLibrary(folder, cache)
    spy = Spy(pipe)
    lib.refresh(spy, "m")
    assert spy.analyzed == 1 and len(lib.snapshot.entries) == 1


def test_hot_add_change_remove_without_restart(tmp_path, pipe, face_crops):
    folder = tmp_path / "faces"
    folder.mkdir()
    _write(folder / "a.jpg", face_crops[0])
    lib = FaceLibrary(folder, tmp_path / "cache")
    spy = Spy(pipe)
    lib.refresh(spy, "m")
    v = lib.snapshot.version
    assert not lib.refresh(spy, "m") and spy.analyzed == 1  # nothing changed: only stat calls
    _write(folder / "b.jpg", face_crops[1])
    assert lib.refresh(spy, "m")
    assert [e.name for e in lib.snapshot.entries] == ["a", "b"] and lib.snapshot.version > v
    (folder / "a.jpg").unlink()
    assert lib.refresh(spy, "m")
    assert [e.name for e in lib.snapshot.entries] == ["b"]


def test_names_and_order_from_faces_yaml(tmp_path, pipe, face_crops):
    folder = tmp_path / "faces"
    folder.mkdir()
    for name, crop in zip(("x.jpg", "y.jpg", "z.jpg"), face_crops, strict=False):
        _write(folder / name, crop)
    (folder / "faces.yaml").write_text("- {file: z.jpg, name: Zelda}\n- {file: x.jpg}\n")
    lib = FaceLibrary(folder, tmp_path / "cache")
    lib.refresh(Spy(pipe), "m")
    assert [e.name for e in lib.snapshot.entries] == ["Zelda", "x", "y"]
    (folder / "faces.yaml").write_text("z.jpg: Zed\ny.jpg: Yann\n")
    _bump_mtime(folder / "faces.yaml")
    assert lib.refresh(Spy(pipe), "m")
    assert [e.name for e in lib.snapshot.entries] == ["Zed", "Yann", "x"]
    (folder / "faces.yaml").write_text("[unclosed\n")
    _bump_mtime(folder / "faces.yaml")
    lib.refresh(Spy(pipe), "m")
    assert any("faces.yaml: cannot read" in p for p in lib.snapshot.problems)
    assert len(lib.snapshot.entries) == 3  # the photos still work


def test_missing_folder_is_a_problem_not_a_crash(tmp_path, pipe):
    lib = FaceLibrary(tmp_path / "nope", tmp_path / "cache")
    lib.refresh(Spy(pipe), "m")
    assert lib.snapshot.entries == () and "faces folder not found" in lib.snapshot.problems[0]


def test_model_digests_hash_once(tmp_path):
    a = tmp_path / "a.onnx"
    a.write_bytes(b"x" * 1000)
    d = ModelDigests(tmp_path / "digests.json")
    first = d.digest([a])
    again = ModelDigests(tmp_path / "digests.json")  # remembered across starts
    assert again.digest([a]) == first
    a.write_bytes(b"y" * 1000)
    _bump_mtime(a)
    assert ModelDigests(tmp_path / "digests.json").digest([a]) != first


def test_make_library_from_config(tmp_path):
    from kiosk.config import parse_config

    cfg = parse_config(
        "faces: {dir: faces, cache_dir: cache}\nprocessing: {source_face: me.jpg}\n",
        "k.yaml",
        base_dir=tmp_path,
    )
    lib = make_library(cfg)
    assert lib.folder == tmp_path / "faces" and lib.cache_dir == tmp_path / "cache"
    assert lib.extra_photos == (tmp_path / "me.jpg",)


def test_decode_photo_bounds_memory_by_the_header(face_crops):
    import struct

    from kiosk.booth.photo_files import PhotoError, decode_photo

    data = bytearray(cv2.imencode(".jpg", face_crops[0])[1].tobytes())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, 16000, 16000)  # claims 256 megapixels
    img = decode_photo(bytes(data))
    assert img.shape == (4000, 4000, 3)  # decoded at 1/4 by the JPEG decoder
    struct.pack_into(">HH", data, sof + 5, 60000, 60000)
    with pytest.raises(PhotoError, match="too large"):
        decode_photo(bytes(data))
    png = cv2.imencode(".png", face_crops[0])[1].tobytes()
    import zlib

    ihdr = b"IHDR" + struct.pack(">II", 20000, 20000) + png[24:29]  # width, height; same depth etc.
    big_png = png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]
    with pytest.raises(PhotoError, match="20000x20000 PNG is too large"):
        decode_photo(big_png)
    with pytest.raises(PhotoError, match="empty file"):
        decode_photo(b"")
