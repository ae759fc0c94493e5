"""The brand frame on keepsakes (kiosk/keepsake/brand.py): the photo fetched from its QR address has
the frame's pixels where the frame is opaque and the swap where it is clear; the frame is scaled to
cover the photo; a missing, damaged, alpha-less or huge file is one log line and no frame."""

from __future__ import annotations

import http.client
import logging
import struct
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import cv2
import numpy as np
import pytest
from net_helpers import free_port

from kiosk.config import parse_config
from kiosk.keepsake.brand import MAX_SIDE_PX, cover, load_frame
from kiosk.keepsake.flow import FlowOptions, KeepsakeFlow, Saved
from kiosk.keepsake.service import KeepsakeService
from kiosk.keepsake.still import Picture
from kiosk.types import Face, SwappedFace

RED = (0, 0, 255)  # BGR
GREEN = (20, 200, 40)


def _frame_png(path: Path, width: int, height: int, border: float = 0.2) -> Path:
    """A red frame, opaque on a border of ``border`` of each side, clear inside."""
    bgra = np.zeros((height, width, 4), np.uint8)
    bgra[:, :, :3] = RED
    bgra[:, :, 3] = 255
    bx, by = int(width * border), int(height * border)
    bgra[by : height - by, bx : width - bx, 3] = 0
    assert cv2.imwrite(str(path), bgra)
    return path


def _fetch(url: str) -> bytes:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    try:
        conn.request("GET", u.path + ".jpg")
        resp = conn.getresponse()
        assert resp.status == 200
        return resp.read()
    finally:
        conn.close()


def test_the_photo_fetched_from_its_qr_has_the_frame_where_opaque_and_the_swap_where_clear(
    tmp_path: Path,
) -> None:
    port = free_port()
    frame = _frame_png(tmp_path / "brand.png", 640, 360)  # twice the photo's size, same aspect
    cfg = parse_config(
        f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}", frame: {frame.name}}}\n', base_dir=tmp_path
    )
    svc = KeepsakeService(cfg.keepsake, tmp_path / "k", separate_process=False).start()
    kept: list[Saved] = []

    def save(jpeg: bytes) -> Saved:
        k = svc.keep(jpeg)
        kept.append(Saved(k.url, k.record.expires, k.record.token))
        return kept[-1]

    t = [0.0]
    flow = KeepsakeFlow(FlowOptions(enabled=True, countdown_s=0), save, clock=lambda: t[0])
    flow.brand = load_frame(cfg.keepsake.frame, cfg.keepsake.frame_text, cfg.resolve)
    # the screen: a grey camera frame with one GPU-composited face (a green crop) in the middle
    camera = np.full((180, 320, 3), 90, np.uint8)
    crop = np.full((128, 128, 3), GREEN, np.uint8)
    affine = np.array([[2.0, 0.0, -2 * 128.0], [0.0, 2.0, -2 * 58.0]])  # a 64 px face at (128, 58)
    face = Face(np.array([128, 58, 192, 122], np.float32), 0.9, np.zeros((5, 2), np.float32))
    try:
        assert svc.wait_ready()
        flow.press()
        for _ in range(400):
            t[0] += 0.01
            view = flow.step(lambda: Picture.copy_of(camera, [SwappedFace(crop, affine, face)]))
            if view.phase == "show":
                break
            import time

            time.sleep(0.01)
        assert view.phase == "show", view
        photo = cv2.imdecode(np.frombuffer(_fetch(kept[0].url), np.uint8), cv2.IMREAD_COLOR)
    finally:
        flow.close()
        svc.close()
    assert photo.shape == (180, 320, 3)
    # the opaque border (20 % of each side, 64x36 px here): the frame's red, within JPEG's error
    border = np.concatenate(
        [photo[:30].reshape(-1, 3), photo[-30:].reshape(-1, 3), photo[40:140, :55].reshape(-1, 3)]
    )
    assert np.abs(np.median(border, axis=0) - RED).max() <= 6
    assert np.percentile(np.abs(border.astype(int) - RED).max(axis=1), 95) <= 24
    # the clear middle: the swapped face (green) and the camera's grey around it
    assert np.abs(np.median(photo[80:100, 150:170].reshape(-1, 3), axis=0) - GREEN).max() <= 8
    assert np.abs(np.median(photo[50:60, 80:100].reshape(-1, 3), axis=0) - 90).max() <= 6
    # the QR screen's preview is that photo
    assert view.still_bgr is not None and view.still_bgr.shape == photo.shape
    assert np.abs(view.still_bgr.astype(int) - photo).mean() < 3


def test_a_frame_of_another_aspect_covers_the_photo_centred(tmp_path: Path) -> None:
    bgra = np.zeros((100, 100, 4), np.uint8)  # square; the photo is 2:1
    bgra[:, :50] = (255, 0, 0, 255)
    bgra[:, 50:] = (0, 255, 0, 128)
    out = cover(bgra, 200, 100)
    assert out.shape == (100, 200, 4)
    assert tuple(out[50, 10]) == (255, 0, 0, 255) and tuple(out[50, 190]) == (0, 255, 0, 128)
    tall = cover(bgra, 50, 100)  # a portrait photo: the square's middle
    assert tall.shape == (100, 50, 4) and tuple(tall[50, 0]) == (255, 0, 0, 255)
    assert tuple(tall[50, 49]) == (0, 255, 0, 128)


def test_half_transparent_frame_and_text_line_blend_over_the_photo(tmp_path: Path) -> None:
    bgra = np.zeros((90, 160, 4), np.uint8)
    bgra[:45] = (0, 0, 0, 128)  # top half: half-transparent black
    brand = load_frame(str(_write(tmp_path / "half.png", bgra)), "Expo 2026")
    photo = np.full((90, 160, 3), 200, np.uint8)
    brand.apply(photo)
    assert abs(int(photo[10, 80, 0]) - 100) <= 1  # 200 * (1 - 128/255)
    assert tuple(photo[55, 80]) == (200, 200, 200)  # clear, above the text band
    band = photo[-8:]
    assert band.min() < 120 and band.max() >= 240  # a dark band with white text


def _write(path: Path, bgra: np.ndarray) -> Path:
    assert cv2.imwrite(str(path), bgra)
    return path


def _huge_png(path: Path) -> Path:
    """A PNG whose header says 20000x20000 (its pixels are never decoded)."""
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 6, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )
    return path


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("missing.png", None, "cannot be read"),
        ("broken.png", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40), "is not a PNG"),
        ("cut.png", "cut", "damaged"),
        ("logo.jpg", lambda p: cv2.imwrite(str(p), np.zeros((8, 8, 3), np.uint8)), "is not a PNG"),
        ("opaque.png", lambda p: cv2.imwrite(str(p), np.zeros((8, 8, 3), np.uint8)), "no alpha channel"),
        ("huge.png", _huge_png, f"at most {MAX_SIDE_PX} px"),
    ],
)
def test_an_unusable_frame_is_one_line_and_no_frame(tmp_path: Path, caplog, name, make, says) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / name
    if make == "cut":
        _write(path, np.zeros((64, 64, 4), np.uint8) + 7)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif make is not None:
        make(path)
    with caplog.at_level(logging.INFO, logger="kiosk.keepsake.brand"):
        brand = load_frame(name, "", lambda f: tmp_path / f)
    assert brand.bgra is None and brand.empty
    lines = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1, caplog.text
    msg = lines[0].getMessage()
    assert "\n" not in msg and str(path) in msg and says in msg and "without a frame" in msg
    photo = np.full((20, 30, 3), 77, np.uint8)
    assert np.array_equal(brand.apply(photo), np.full((20, 30, 3), 77, np.uint8))  # runs without it


def test_a_reloaded_config_loads_the_new_frame(tmp_path: Path) -> None:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import KioskConfig
    from kiosk.processing.stage import PassThrough

    cfg = KioskConfig.model_validate({"source": {"kind": "synthetic"}, "keepsake": {"enabled": True}})
    app = KioskApp(cfg, RunOptions(headless=True), processor_factory=PassThrough)
    try:
        app.keepsake.flow = KeepsakeFlow(FlowOptions.of(cfg.keepsake), lambda jpeg: Saved("x", 0.0))
        assert app.keepsake.flow.brand.empty
        png = _frame_png(tmp_path / "new.png", 64, 36)
        new = cfg.model_copy(
            update={"keepsake": cfg.keepsake.model_copy(update={"frame": str(png), "frame_text": "Expo"})}
        )
        app.apply_config(new)
        brand = app.keepsake.flow.brand
        assert brand.bgra is not None and brand.bgra.shape == (36, 64, 4) and brand.text == "Expo"
    finally:
        app.keepsake.flow = None
        app.shutdown(0.5)
