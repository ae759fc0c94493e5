"""``kiosk doctor``: names exactly what is missing, explains the fix, exits non-zero when it must."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from kiosk.appliance import doctor
from kiosk.appliance.doctor import CheckResult, DoctorContext, make_context, run_checks

ROOT = Path(__file__).resolve().parent.parent
HAS_NVIDIA = Path("/proc/driver/nvidia/version").exists()


def _env_without_display() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "KIOSK_CONFIG"):
        env.pop(key, None)
    return env


def _write_config(tmp_path: Path, body: str) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    face = tmp_path / "faces" / "face.jpg"
    face.parent.mkdir(exist_ok=True)
    cv2.imwrite(str(face), np.full((64, 64, 3), 128, np.uint8))
    path = tmp_path / "kiosk.yaml"
    path.write_text(body)
    return path


BOOTH_CONFIG = """\
source:
  kind: camera
  camera: {device: /dev/video0, width: 1280, height: 720, fps: 30, fourcc: MJPG}
processing:
  enabled: true
  source_face: faces/face.jpg
models:
  dir: models
  swapper: inswapper_128.onnx
  accept_noncommercial_licence: true
  providers: {order: [cuda, cpu], trt_cache_dir: cache/trt}
"""


def _run_doctor(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kiosk doctor --config CFG ARGS`` in a subprocess without a display."""
    return subprocess.run(
        [sys.executable, "-m", "kiosk", "doctor", "--config", str(cfg), *args],
        capture_output=True,
        text=True,
        env=_env_without_display(),
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(Path("/dev/video0").exists(), reason="this machine has a camera")
def test_doctor_json_on_this_machine_names_what_is_missing(tmp_path: Path) -> None:
    cfg = _write_config(tmp_path, BOOTH_CONFIG)
    proc = _run_doctor(cfg, "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)  # stdout is pure JSON (no onnxruntime banners)
    assert report["ok"] is False
    assert set(report["errors"]) == {"display", "camera", "models"}
    by_name = {c["name"]: c for c in report["checks"]}
    for name in ("python-packages", "config", "provider-cpu", "source-face", "disk", "trt-cache-writable"):
        assert by_name[name]["ok"], by_name[name]
    assert "no /dev/video" in by_name["camera"]["detail"]
    assert "DISPLAY" in by_name["display"]["detail"]
    assert "det_10g.onnx" in by_name["models"]["detail"]
    assert by_name["models"]["fix"].startswith("kiosk models fetch --config")
    if not HAS_NVIDIA:  # CUDA is listed by onnxruntime-gpu but cannot run: a warning, CPU takes over
        assert by_name["provider-cuda"]["severity"] == "warning"
        assert "falls back to cpu" in by_name["provider-cuda"]["detail"]
        assert "provider-cuda" in report["warnings"]
    for check in report["checks"]:
        assert set(check) == {"name", "ok", "severity", "detail", "fix"}
        if not check["ok"]:
            assert check["fix"], check


def test_text_report_and_exit_code(tmp_path: Path) -> None:
    cfg = _write_config(tmp_path, "source: {kind: synthetic}\nprocessing: {enabled: false}\n")
    proc = _run_doctor(cfg, "--headless")
    # Synthetic source, no processing, headless: runnable here (EGL), or not when EGL is missing.
    assert "kiosk doctor: config" in proc.stdout
    if proc.returncode == 0:
        assert "the kiosk can run" in proc.stdout
    else:
        assert "headless (EGL) rendering fails" in proc.stdout


def _ctx(tmp_path: Path, body: str, **kw: Any) -> DoctorContext:
    return make_context(_write_config(tmp_path, body), **kw)


def test_invalid_config_is_reported_and_other_checks_still_run(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "source:\n  kind: webcam\n")
    report = run_checks(ctx)
    config = next(c for c in report.checks if c.name == "config")
    assert not config.ok and "kiosk.yaml:2: source.kind: must be one of" in config.detail
    assert len(report.checks) > 5


def test_models_missing_corrupt_and_unknown(tmp_path: Path) -> None:
    body = BOOTH_CONFIG.replace("models:\n", "models:\n  embedder: my_arcface.onnx\n")
    ctx = _ctx(tmp_path, body)
    (tmp_path / "models" / "det_10g.onnx").write_bytes(b"not a model")  # known file, wrong hash
    (tmp_path / "models" / "my_arcface.onnx").write_bytes(b"x")  # unknown file: no published hash
    results = {r.name: r for r in doctor.check_models(ctx)}
    assert "inswapper_128.onnx" in results["models"].detail and "det_10g" not in results["models"].detail
    assert (
        "det_10g.onnx" in results["models-verified"].detail and "sha256" in results["models-verified"].detail
    )


def test_display_warning_only_when_headless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(doctor.display, "_run_python", lambda ctx, code, timeout_s=15.0: (True, "llvmpipe"))
    booth = doctor.check_display(_ctx(tmp_path, ""))[0]
    ci = doctor.check_display(_ctx(tmp_path, "", headless=True))[0]
    assert not booth.ok and booth.severity == "error"
    assert not ci.ok and ci.severity == "warning" and "llvmpipe" in ci.detail


def test_unreachable_display_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":4097")  # nothing listens there
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    result = doctor.check_display(_ctx(tmp_path, ""))[0]
    assert not result.ok and result.severity == "error"
    assert "DISPLAY=:4097 is set but a window cannot be opened" in result.detail


def test_reachable_display_is_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xvfb_display: str) -> None:
    monkeypatch.setenv("DISPLAY", xvfb_display)
    result = doctor.check_display(_ctx(tmp_path, ""))[0]
    assert result.ok, result
    assert "1280x720" in result.detail


class _FakeCapture:
    """cv2.VideoCapture stand-in: a camera that ignores the requested size and runs at ``fps``."""

    fps = 15.0

    def __init__(self, *args: Any) -> None:
        self.props: dict[int, float] = {}
        self.last = time.monotonic()

    def isOpened(self) -> bool:  # noqa: N802 (OpenCV's name)
        return True

    def set(self, prop: int, value: float) -> bool:
        self.props[prop] = value
        return True

    def get(self, prop: int) -> float:
        return float(cv2.VideoWriter.fourcc(*"MJPG")) if prop == cv2.CAP_PROP_FOURCC else 0.0

    def read(self) -> tuple[bool, np.ndarray]:
        wait = self.last + 1 / self.fps - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.last = time.monotonic()
        return True, np.zeros((480, 640, 3), np.uint8)

    def release(self) -> None:
        pass


def test_camera_reports_real_size_and_fps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dev = tmp_path / "video0"
    fake_dev.write_bytes(b"")
    body = BOOTH_CONFIG.replace("/dev/video0", str(fake_dev))
    monkeypatch.setattr(cv2, "VideoCapture", _FakeCapture)
    result = doctor.check_camera(_ctx(tmp_path, body, camera_seconds=0.5))[0]
    assert not result.ok and result.severity == "warning"
    assert "640x480 MJPG" in result.detail and "asked 1280x720" in result.detail
    measured = float(result.detail.split(" at ")[1].split(" fps")[0])
    assert 10 <= measured <= 16
    assert "list-formats-ext" in result.fix and "MJPG" in result.fix


def test_a_crashing_check_becomes_a_finding(tmp_path: Path) -> None:
    def boom(ctx: DoctorContext) -> list[CheckResult]:
        raise RuntimeError("driver exploded")

    report = run_checks(_ctx(tmp_path, ""), checks=(("boom", boom),))
    assert not report.ok
    assert report.checks[0].name == "boom" and "driver exploded" in report.checks[0].detail


def test_source_face_and_video_source(tmp_path: Path) -> None:
    ctx = _ctx(
        tmp_path, "source: {kind: video, path: clip.mp4}\nprocessing: {source_face: faces/nobody.jpg}\n"
    )
    src = doctor.check_source(ctx)[0]
    face = doctor.check_source_face(ctx)[0]
    assert not src.ok and "clip.mp4 does not exist" in src.detail
    assert not face.ok and "nobody.jpg does not exist" in face.detail


def test_faces_dir_when_the_config_has_one(tmp_path: Path) -> None:
    assert doctor.check_faces_dir(_ctx(tmp_path, "")) == []  # no faces library in this config
    result = doctor.check_faces_dir(_ctx(tmp_path, "faces: {dir: faces}\n"))[0]
    assert result.ok and "1 face image(s)" in result.detail


@pytest.mark.skipif(Path("/dev/video0").exists(), reason="this machine has a camera")
def test_camera_device_zero_as_text_is_index_zero_like_the_booth(tmp_path: Path) -> None:
    body = BOOTH_CONFIG.replace("device: /dev/video0", 'device: "0"')
    ctx = _ctx(tmp_path, body)
    assert ctx.cfg.source.camera.device == "0"
    result = doctor.check_camera(ctx)[0]
    assert "no camera at /dev/video0" in result.detail  # not "no camera at 0"


def test_camera_is_opened_by_the_booths_camera_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same open as the booth: a device path goes to OpenCV's default backend (no CAP_V4L2), and the
    booth's own failure message is what the doctor reports."""
    from kiosk.capture import sources

    fake_dev = tmp_path / "video7"
    fake_dev.write_bytes(b"")
    opened: list[tuple[Any, ...]] = []

    class Recording(_FakeCapture):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            opened.append(args)

    monkeypatch.setattr(cv2, "VideoCapture", Recording)
    ctx = _ctx(tmp_path, BOOTH_CONFIG.replace("/dev/video0", str(fake_dev)), camera_seconds=0.1)
    doctor.check_camera(ctx)
    assert opened == [(str(fake_dev),)]

    def refuse(self: sources.CameraSource) -> None:
        raise sources.SourceError(f"camera {fake_dev} cannot be opened (unplugged, busy, or no permission)")

    monkeypatch.setattr(sources.CameraSource, "open", refuse)
    result = doctor.check_camera(ctx)[0]
    assert not result.ok and "cannot be opened (unplugged, busy, or no permission)" in result.detail


def test_faces_dir_counts_what_the_face_library_lists(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "faces: {dir: faces}\n")
    (tmp_path / "faces" / "album.jpg").mkdir()  # a folder named like a photo: the library skips it
    (tmp_path / "faces" / "notes.txt").write_text("not a photo")
    from kiosk.booth.faces import make_library

    listed = make_library(ctx.cfg).photos()
    result = doctor.check_faces_dir(ctx)[0]
    assert result.ok and f"{len(listed)} face image(s)" in result.detail
    assert len(listed) == 1


def _users(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make this machine's user database hold exactly ``names`` (as far as the doctor asks)."""
    import pwd

    def getpwnam(name: str) -> Any:
        if name not in names:
            raise KeyError(name)
        return pwd.struct_passwd((name, "x", 990, 990, "", f"/home/{name}", "/bin/sh"))

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)


def _fixes(tmp_path: Path) -> dict[str, str]:
    """The fixes the doctor gives for a missing faces folder, source face and TensorRT cache."""
    ctx = _ctx(tmp_path, BOOTH_CONFIG.replace("faces/face.jpg", "faces/nobody.jpg") + "faces: {dir: album}\n")
    results = [*doctor.check_faces_dir(ctx), *doctor.check_source_face(ctx), *doctor.check_cache(ctx)]
    return {c.name: c.fix for c in results}


def test_fixes_on_a_desktop_name_no_kiosk_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _users(monkeypatch)  # a desktop: no user kiosk
    fixes = _fixes(tmp_path)
    assert fixes["faces-dir"] == f"mkdir -p {tmp_path / 'album'} and copy JPEG/PNG portraits into it"
    assert "user kiosk" not in fixes["source-face"]
    assert "chown -R kiosk" not in fixes["trt-cache-writable"]
    assert all("-o kiosk" not in fix for fix in fixes.values())


def test_fixes_on_a_booth_name_the_service_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _users(monkeypatch, "kiosk")
    fixes = _fixes(tmp_path)
    assert fixes["faces-dir"].startswith(f"sudo install -d -o kiosk {tmp_path / 'album'} ")
    assert "(readable by user kiosk)" in fixes["source-face"]
    assert fixes["trt-cache-writable"].startswith("sudo chown -R kiosk ")


def test_service_user_is_the_installed_units(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kiosk.appliance.doctor.core import service_user

    unit = tmp_path / "faceswap-kiosk.service"
    unit.write_text("[Service]\nUser=booth\nGroup=booth\n")  # install.sh --user booth
    _users(monkeypatch, "kiosk", "booth")
    assert service_user(unit) == "booth"
    assert service_user(tmp_path / "no.service") == "kiosk"
    _users(monkeypatch, "kiosk")
    assert service_user(unit) is None  # the unit names a user that is gone
