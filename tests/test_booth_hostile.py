"""Any bytes in a running kiosk's faces folder or face cache: the bad file is named in the staff
view's problems and skipped, a corrupt cache entry is rebuilt, and the good faces keep swapping
(measured from the pixels on screen: the stand-in swapper changes the face regions).

Real det_500m (../shared/models) and stand-in embedder/swapper; photos cut from insightface's
t1.jpg at test time."""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib

import cv2
import numpy as np
import pytest
from inference_fixtures import insightface_image, make_cfg, shared_model

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import load_config
from kiosk.processing.pipeline import SwapPipeline
from kiosk.tools.standins import make_embedder, make_swapper

pytestmark = [pytest.mark.gl, pytest.mark.slow]


def _png_header(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels and carries a little garbage instead of them."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 4096))


def _jpeg_claiming(img: np.ndarray, width: int, height: int) -> bytes:
    """A real JPEG whose frame header (SOF0) is patched to claim width x height."""
    data = bytearray(cv2.imencode(".jpg", img)[1].tobytes())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, height, width)
    return bytes(data)


def _boxes(pipe: SwapPipeline, scene: np.ndarray) -> list[tuple[int, int, int, int]]:
    faces, _ = pipe.find_source_faces(scene)
    return [tuple(int(v) for v in f.box_xyxy) for f in faces]  # type: ignore[misc]


def test_hostile_files_are_named_and_skipped_and_good_faces_keep_swapping(tmp_path):
    det = shared_model("det_500m.onnx")
    t1 = cv2.imread(str(insightface_image("t1.jpg")))
    models = tmp_path / "models"
    models.mkdir()
    make_embedder(models / "w600k_r50.onnx")
    make_swapper(models / "inswapper_128.onnx")
    faces = tmp_path / "faces"
    faces.mkdir()
    cv2.imwrite(str(faces / "ann.jpg"), t1[150:650, 0:300])
    cv2.imwrite(str(faces / "ben.jpg"), t1[150:650, 330:620])
    scene = np.ascontiguousarray(cv2.resize(t1[100:700, 0:1066], (640, 360), interpolation=cv2.INTER_AREA))
    cv2.imwrite(str(tmp_path / "scene.png"), scene)
    cfg_path = tmp_path / "booth.yaml"
    cfg_path.write_text(
        f"""
source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: 640, height: 360, vsync: false, max_fps: 30}}
processing: {{det_size: 640}}
models: {{dir: models, detector: {det}, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache, rescan_s: 0.2}}
ui: {{attract_after_s: 0, banner: "", carousel: false}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: false, status_line: false}}
"""
    )
    cfg = load_config(cfg_path)
    shot = tmp_path / "shot.png"
    app = KioskApp(cfg, RunOptions(headless=True, seconds=120, screenshot=shot))
    cache = tmp_path / "cache"
    bad = {
        "random.jpg": np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8).tobytes(),
        "truncated.jpg": (faces / "ann.jpg").read_bytes()[:400],
        "empty.png": b"",
        "huge.png": _png_header(20000, 20000),
        "absurd.png": _png_header(2**31 - 1, 2**31 - 1),
        "big.jpg": _jpeg_claiming(t1[150:650, 0:300], 16000, 16000),  # decoded at 1/4
        "bomb.jpg": _jpeg_claiming(t1[150:650, 0:300], 65000, 65000),  # too large even at 1/8
        "text.png": b"this is a text file, not a photo\n" * 50,
    }
    seen: dict[str, object] = {}

    def wait_for(cond, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not app.stop.is_set():
            if cond():
                return True
            time.sleep(0.05)
        return False

    def inject() -> None:
        try:
            seen["loaded"] = wait_for(lambda: len(app.library.snapshot.entries) == 2, 60)
            entries = {e.name: e.key for e in app.library.snapshot.entries}
            ann_cache = cache / f"{entries['ann']}.npz"
            seen["ann_cache_existed"] = ann_cache.is_file()
            stale = cache / f"{'ab' * 12}-{'cd' * 6}.npz"  # an entry whose photo is gone
            stale.write_bytes(b"PK\x03\x04 not a zip")
            ann_cache.write_bytes(b"PK\x03\x04 corrupt cache entry")  # then make ann be rescanned
            st = (faces / "ann.jpg").stat()

            os.utime(faces / "ann.jpg", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            for name, data in bad.items():
                (faces / name).write_bytes(data)
            t0 = time.monotonic()
            seen["named"] = wait_for(
                lambda: all(any(p.startswith(n) for p in app.library.snapshot.problems) for n in bad), 60
            )
            seen["named_s"] = time.monotonic() - t0
            seen["warnings"] = list(app.library.snapshot.problems)
            seen["names"] = [e.name for e in app.library.snapshot.entries]
            seen["stage"] = app.inference.processor_name
            with np.load(ann_cache) as z:  # rebuilt, readable
                seen["ann_cache_latent"] = z["latent"].shape
            seen["stale_pruned"] = not stale.exists()
            time.sleep(1.0)  # a few more frames through the swap
        finally:
            app.stop.set()

    t = threading.Thread(target=inject)
    t.start()
    assert app.run() == 0
    t.join()
    assert seen["loaded"], "the library never loaded"
    assert seen["named"], seen.get("warnings")
    warnings = seen["warnings"]
    assert isinstance(warnings, list)
    assert len(warnings) == len(bad) and all("\n" not in w for w in warnings), warnings
    assert seen["names"] == ["ann", "ben"]
    assert "pass" not in str(seen["stage"]).lower(), seen["stage"]
    assert seen["ann_cache_existed"] and seen["ann_cache_latent"] == (1, 512)
    assert seen["stale_pruned"]
    # The swap is on: the face regions on screen differ from the camera picture, the rest does not.
    pipe = SwapPipeline.from_config(make_cfg(models, detector=str(det)))
    boxes = _boxes(pipe, scene)
    assert len(boxes) >= 2
    shown = cv2.imread(str(shot))  # BGR, like scene
    diff = np.abs(shown.astype(np.int16) - scene.astype(np.int16)).mean(axis=2)
    mask = np.zeros(diff.shape, bool)
    for x0, y0, x1, y1 in boxes:
        mask[max(y0, 0) : y1, max(x0, 0) : x1] = True
    face_diff = float(diff[mask].mean())
    rest_diff = float(diff[~mask].mean())
    print(
        f"faces {face_diff:.1f} vs rest {rest_diff:.1f} mean abs diff; bad files named in {seen['named_s']:.2f} s"
    )
    assert face_diff > 10 and face_diff > 4 * rest_diff, (face_diff, rest_diff)
