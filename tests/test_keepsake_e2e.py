"""Keepsakes as a visitor meets them: ``kiosk run`` in a REAL window under Xvfb, the keepsake key
pressed with real X key presses (xdotool), the QR code read by OpenCV from the kiosk's own
screenshot, its address fetched with a real HTTP client, the photo compared with what the screen
showed and with the camera picture.

The booth is the one of ``tests/test_booth_e2e.py``: insightface's t1.jpg (six faces) as the
camera, the real det_500m (../shared/models), stand-in embedder and swapper with the real contracts
(the stand-in swapper tints each source face its own colour, so which library face a visitor got
shows in the pixels), three face photos cut from the scene. The web server listens on
127.0.0.1:18101-18103 only.

``KIOSK_TEST_PYTHON=/path/to/venv/bin/python`` runs the kiosk of that environment (e.g. the venv
``scripts/check_wheel.sh`` installs the wheel into) from the booth folder, outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import requests
from egl_helpers import skip_module_without_egl
from inference_fixtures import insightface_image, shared_model

from kiosk.tools.standins import make_embedder, make_swapper

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]

skip_module_without_egl()

XDOTOOL = shutil.which("xdotool")
if XDOTOOL is None:
    pytest.skip("xdotool not installed (apt-get install xdotool)", allow_module_level=True)

#: Window size; the camera picture (1280x886) is letterboxed into it.
WIN = (640, 360)


def booth(tmp_path: Path, port: int, keepsake: str, processing: str = "", mode: str = "synced") -> Path:
    det = shared_model("det_500m.onnx")
    scene = cv2.imread(str(insightface_image("t1.jpg")))
    models = tmp_path / "models"
    models.mkdir()
    make_embedder(models / "w600k_r50.onnx")
    make_swapper(models / "inswapper_128.onnx")
    faces = tmp_path / "faces"
    faces.mkdir()
    for name, (x0, x1) in {"ann": (0, 300), "ben": (330, 620), "cat": (640, 900)}.items():
        cv2.imwrite(str(faces / f"{name}.jpg"), scene[150:650, x0:x1])
    cv2.imwrite(str(tmp_path / "scene.png"), scene)
    (tmp_path / "booth.yaml").write_text(
        f"""
source: {{kind: image, path: scene.png, image_fps: 15, mirror: false}}
display: {{width: {WIN[0]}, height: {WIN[1]}, vsync: false, max_fps: 30, title: keepsake-e2e, mode: {mode}}}
processing: {{det_size: 640, max_faces: 6, tracking: true{processing}}}
models: {{dir: models, detector: {det}, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache}}
ui: {{attract_after_s: 0}}
controls: {{gamepad_enabled: false}}
overlay: {{status_line: false}}
keepsake: {{enabled: true, listen: "127.0.0.1:{port}", url_base: "http://127.0.0.1:{port}", {keepsake}}}
"""
    )
    return tmp_path


class Kiosk:
    """``kiosk run`` in a window; screenshots and stats rewritten every 0.2 s."""

    def __init__(self, folder: Path, display: str) -> None:
        self.folder = folder
        self.display = display
        self.shot = folder / "shot.png"
        self.stats_path = folder / "stats.json"
        self.photos = folder / "keepsakes"
        env = dict(os.environ, DISPLAY=display, PYTHONUNBUFFERED="1", KIOSK_KEEPSAKE_DIR=str(self.photos))
        env.pop("WAYLAND_DISPLAY", None)
        self.env_x = dict(os.environ, DISPLAY=display)
        self.log: list[str] = []
        self.ready = threading.Event()
        python = os.environ.get("KIOSK_TEST_PYTHON", "")
        if python:
            env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", "kiosk", "run", "--config", str(folder / "booth.yaml"), "--seconds", "240",
             "--screenshot", str(self.shot), "--screenshot-every", "0.2",
             "--stats-json", str(self.stats_path), "--stats-interval", "0.2"],
            cwd=folder if python else ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if "faces loaded" in line:
                self.ready.set()

    def tail(self, n: int = 30) -> str:
        return "".join(self.log[-n:])

    def start(self) -> None:
        assert self.ready.wait(120), "kiosk did not get ready:\n" + self.tail()

        def swapped() -> int:
            s = self.stats()
            on = str(s.get("processing", {}).get("stage", "")).startswith("swap")
            return int(s.get("frames", {}).get("processed", 0)) if on else 0

        first = self.wait(swapped, 90, "the face swap")
        self.wait(lambda: swapped() >= first + 5, 60, "swapped frames")
        time.sleep(0.5)  # a screenshot of them
        subprocess.run([XDOTOOL, "mousemove", "200", "200"], check=True, env=self.env_x, timeout=10)

    def key(self, name: str = "Return") -> float:
        subprocess.run([XDOTOOL, "key", name], check=True, env=self.env_x, timeout=10)
        return time.monotonic()

    def stats(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.stats_path.read_text()))
        except (OSError, ValueError):
            return {}

    def phase(self) -> str:
        return str(self.stats().get("keepsake_flow", {}).get("phase", ""))

    def screen(self) -> np.ndarray:
        """A screenshot drawn after this call (the file is rewritten every 0.2 s)."""
        t0 = time.time()
        for _ in range(200):
            try:
                fresh = self.shot.stat().st_mtime > t0 + 0.05
            except FileNotFoundError:
                fresh = False
            img = cv2.imread(str(self.shot)) if fresh else None
            if img is not None and img.shape[:2] == (WIN[1], WIN[0]):
                return img
            time.sleep(0.05)
        raise AssertionError("no new screenshot within 10 s")

    def wait(self, ok: Any, timeout_s: float, what: str) -> Any:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            assert self.proc.poll() is None, f"the kiosk exited while waiting for {what}:\n{self.tail()}"
            got = ok()
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"{what}: not within {timeout_s:.0f} s\n{self.tail()}")

    def qr_text(self) -> str:
        self.last_screen = self.screen()
        text, _, _ = cv2.QRCodeDetector().detectAndDecode(self.last_screen)
        return str(text)

    def wait_qr(self, timeout_s: float, keep: Path) -> str:
        """The QR code's text; when none is read in time, the last screenshot tried is kept at
        ``keep`` and named in the failure (a drawing gap and a decoding miss look alike in a log)."""
        try:
            return str(self.wait(self.qr_text, timeout_s, "a QR code on screen"))
        except AssertionError as exc:
            if getattr(self, "last_screen", None) is not None:
                cv2.imwrite(str(keep), self.last_screen)
            raise AssertionError(f"{exc}\nthe last screenshot read: {keep}") from None

    def stored(self) -> list[Path]:
        return sorted(self.photos.glob("*.jpg")) if self.photos.is_dir() else []

    def exit_cleanly(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        rc = self.proc.wait(30)
        assert rc == 0, self.tail()
        assert "Traceback" not in "".join(self.log), self.tail(60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def tints(photo: np.ndarray, scene: np.ndarray) -> list[np.ndarray]:
    """The stand-in swapper's tint of each swapped face in ``photo`` (BGR), from the scene it was
    swapped on: that swapper outputs about ``0.5 x + 0.25 + 0.5 t`` for a face pixel ``x`` and a
    per-source tint ``t``, so ``t = 2 (photo - x / 2) - 0.5`` (in 0..1 units) inside each face."""
    diff = np.abs(photo.astype(np.int16) - scene.astype(np.int16)).max(axis=2)
    mask = (diff > 30).astype(np.uint8)
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask)
    out = []
    for i in range(1, n):
        if stats[i, cv2.CC_STAT_AREA] < 1500:
            continue
        inner = cv2.erode((labels == i).astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
        p = photo[inner].astype(np.float64) / 255.0
        x = scene[inner].astype(np.float64) / 255.0
        out.append(np.median(2.0 * (p - 0.5 * x) - 0.5, axis=0))
    return out


def distinct(vectors: list[np.ndarray], apart: float = 0.08) -> int:
    groups: list[np.ndarray] = []
    for v in vectors:
        if all(np.abs(v - g).max() > apart for g in groups):
            groups.append(v)
    return len(groups)


def picture_region(img: np.ndarray, camera_hw: tuple[int, int]) -> tuple[slice, slice]:
    """Where the letterboxed camera picture lies in a ``WIN`` screenshot."""
    h, w = camera_hw
    s = min(WIN[0] / w, WIN[1] / h)
    pw, ph = round(w * s), round(h * s)
    x0, y0 = (WIN[0] - pw) // 2, (WIN[1] - ph) // 2
    return slice(y0, y0 + ph), slice(x0, x0 + pw)


@pytest.mark.parametrize(("mode", "port"), [("synced", 18101), ("live", 18103)])
def test_key_countdown_still_qr_fetch_per_visitor(
    tmp_path: Path, xvfb_display: str, mode: str, port: int
) -> None:
    """display.mode synced: the still is the processed frame; live: the newest camera frame with
    the swapped crops the tracker carries onto it."""
    folder = booth(tmp_path, port, "countdown_s: 2, show_s: 12", ", assign: per_visitor", mode)
    scene = cv2.imread(str(folder / "scene.png"))
    k = Kiosk(folder, xvfb_display)
    try:
        k.start()
        live = k.screen()
        # -- cancel: the same key during the countdown; nothing is taken
        k.key()
        k.wait(lambda: k.phase() == "countdown", 10, "the countdown")
        k.key()
        k.wait(lambda: k.phase() == "idle", 10, "back to live after the cancel")
        time.sleep(2.5)
        assert k.stored() == [] and k.stats()["keepsake_flow"]["cancelled"] == 1
        assert k.qr_text() == ""
        # -- the keepsake: countdown (drawn large over the live picture), still, QR code
        t_key = k.key()
        k.wait(lambda: k.phase() == "countdown", 10, "the countdown")
        during = k.screen()
        centre = np.abs(during.astype(int) - live.astype(int)).max(axis=2)[120:240, 260:380]
        assert (centre > 60).mean() > 0.1, "no countdown digit drawn in the middle of the screen"
        url = k.wait_qr(30, tmp_path / "qr_miss.png")
        t_qr = time.monotonic()
        shown = k.screen()
        assert url.startswith(f"http://127.0.0.1:{port}/p/")
        assert len(k.stored()) == 1
        # -- the visitor's phone: the page, then the photo
        page = requests.get(url, timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
        photo_resp = requests.get(url + ".jpg", timeout=10)
        assert photo_resp.status_code == 200 and photo_resp.headers["Content-Type"] == "image/jpeg"
        photo = cv2.imdecode(np.frombuffer(photo_resp.content, np.uint8), cv2.IMREAD_COLOR)
        # at the camera's resolution, the swapped still: every visitor swapped, three faces for six
        assert photo.shape == scene.shape
        found = tints(photo, scene)
        assert len(found) == 6, f"{len(found)} swapped faces in the photo"
        assert distinct(found) == 3, "per_visitor: the six visitors should wear the three library faces"
        # the same pixels as the screen: the frozen still under the QR card, and the live picture
        ys, xs = picture_region(shown, scene.shape[:2])
        small = cv2.resize(photo, (xs.stop - xs.start, ys.stop - ys.start), interpolation=cv2.INTER_AREA)
        band = slice(40, 250)  # below the banner, above the carousel
        left = slice(0, 360)  # left of the QR card
        for screen in (shown, live):
            d = np.abs(screen[ys, xs].astype(int) - small.astype(int))[band, left]
            assert d.mean() < 6.0, f"the photo differs from the screen by {d.mean():.1f} levels"
        stats = k.stats()["keepsake_flow"]
        latency_s = t_qr - t_key
        print(
            f"\nkeepsake latency, key to QR code decoded from a screenshot: {latency_s:.2f} s "
            f"(countdown 2 s; the kiosk's own key-to-QR figure: {stats['latency_ms_last']} ms, "
            f"still to QR {stats['capture_to_qr_ms_last']} ms)"
        )
        # -- back to live after show_s: the QR code goes, the photo stays available
        k.wait(lambda: k.phase() == "idle", 20, "back to live")
        time.sleep(0.5)
        assert k.qr_text() == ""
        assert requests.get(url + ".jpg", timeout=10).status_code == 200
        stats_text = k.stats_path.read_text()
        k.proc.send_signal(signal.SIGUSR1)  # before: the kiosk died with 138, the photo left on disk
        time.sleep(0.5)
        assert k.proc.poll() is None and requests.get(url + ".jpg", timeout=10).status_code == 200
        k.exit_cleanly(signal.SIGQUIT if mode == "live" else signal.SIGTERM)
        assert k.stored() == []  # a clean exit deletes the keepsakes (keep_on_disk: false)
        token = url.rsplit("/", 1)[1]  # the photo's only key: in no log line, nor the stats
        assert token not in "".join(k.log) and token not in stats_text, "a token was logged"
    finally:
        k.kill()


def test_confirm_without_the_second_press_nothing_is_stored(tmp_path: Path, xvfb_display: str) -> None:
    folder = booth(tmp_path, 18102, "countdown_s: 1, show_s: 3, confirm: true")
    k = Kiosk(folder, xvfb_display)
    try:
        k.start()
        # keepsakes on: the disclosure banner says how long photos are kept
        banner = k.screen()[:30]
        assert (banner.min(axis=2) > 200).sum() > 100  # its white text
        k.key()
        k.wait(lambda: k.phase() == "confirm", 20, "the consent question")
        asking = k.screen()
        r, g, b = (asking[..., i].astype(int) for i in (2, 1, 0))
        assert ((r > 200) & (g > 150) & (g < 225) & (b < 120))[150:330].sum() > 300, "no prompt drawn"
        assert k.qr_text() == "" and k.stored() == []
        k.wait(lambda: k.phase() == "idle", 10, "back to live without the second press")
        time.sleep(0.5)
        assert k.stored() == [] and k.qr_text() == ""
        assert k.stats()["keepsake_flow"]["declined"] == 1 and k.stats()["keepsakes"]["stored"] == 0
        # with the second press the photo is kept and its code shown
        k.key()
        k.wait(lambda: k.phase() == "confirm", 20, "the consent question")
        k.key()
        url = k.wait_qr(20, tmp_path / "qr_miss.png")
        assert len(k.stored()) == 1
        assert requests.get(url + ".jpg", timeout=10).status_code == 200
        k.exit_cleanly()
    finally:
        k.kill()
