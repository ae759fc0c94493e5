"""``kiosk doctor``: can this machine run the kiosk? Each problem in plain words, with its fix.

Every check returns one or more :class:`CheckResult` and never raises: a check that crashes is
itself reported as a problem. The kiosk can run when no check failed with severity ``error``;
``warning`` means it runs, but worse than it could (CPU instead of GPU, a slower camera).

Checks that can hang or crash a process (GL context creation) run in a subprocess with a
timeout. Heavy modules are imported inside the checks, so a broken package shows up as a
failed check rather than as a traceback.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kiosk import PROJECT_ROOT, paths
from kiosk.config import ConfigError, KioskConfig, load_config

Severity = Literal["error", "warning"]

#: Where install.sh puts the booth's config; preferred when it exists.
GIB = 1024**3
#: Free space below this is an error (the models need ~1.1 GB; logs and engine caches grow).
DISK_ERROR_BYTES = 1 * GIB
DISK_WARN_BYTES = 3 * GIB

#: Distribution name → module to import, where they differ.
_IMPORT_NAMES = {
    "opencv-python-headless": "cv2",
    "opencv-python": "cv2",
    "onnxruntime-gpu": "onnxruntime",
    "pyyaml": "yaml",
    "pillow": "PIL",
}
#: Used when neither the installed metadata nor pyproject.toml can be read.
_FALLBACK_REQUIREMENTS = (
    "numpy>=1.26",
    "opencv-python-headless>=4.8",
    "onnxruntime-gpu>=1.17",
    "onnx>=1.15",
    "moderngl>=5.10",
    "glfw>=2.6",
    "numba>=0.59",
    "pydantic>=2.6",
    "PyYAML>=6.0",
    "Pillow>=10.1",
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: How bad a failure is; only meaningful when ``ok`` is False.
    severity: Severity = "error"


@dataclass
class DoctorContext:
    config_path: Path
    cfg: KioskConfig
    config_ok: bool
    headless: bool = False
    camera_seconds: float = 1.0
    #: Python running the kiosk (for subprocess checks and the fixes we print).
    python: str = sys.executable
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    config_path: str
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return not any(not c.ok and c.severity == "error" for c in self.checks)

    @property
    def errors(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok and c.severity == "error"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok and c.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "config": self.config_path,
            "errors": [c.name for c in self.errors],
            "warnings": [c.name for c in self.warnings],
            "checks": [asdict(c) for c in self.checks],
        }

    def to_text(self) -> str:
        lines = [f"kiosk doctor: config {self.config_path}"]
        for c in self.checks:
            tag = "ok  " if c.ok else ("FAIL" if c.severity == "error" else "warn")
            lines.append(f"  [{tag}] {c.name}: {c.detail}")
            if not c.ok and c.fix:
                lines.append(f"         fix: {c.fix}")
        if self.ok:
            verdict = "the kiosk can run"
            if self.warnings:
                verdict += (
                    f", with {len(self.warnings)} warning(s): {', '.join(c.name for c in self.warnings)}"
                )
        else:
            verdict = f"the kiosk cannot run: {', '.join(c.name for c in self.errors)}"
            if self.warnings:
                verdict += f" (and {len(self.warnings)} warning(s))"
        lines.append(verdict + ".")
        return "\n".join(lines)


def _resolve(cfg: KioskConfig, path: str | Path) -> Path:
    """A config path, resolved against the config's folder, without ``..`` in what we print."""
    return Path(os.path.normpath(cfg.resolve(path)))


def _venv_pip(ctx: DoctorContext) -> str:
    return str(Path(ctx.python).with_name("pip"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ----------------------------------------------------------------------------------------- packages


def _requirements() -> list[str]:
    try:
        reqs = importlib.metadata.requires("faceswap-kiosk")
        if reqs:
            return [r for r in reqs if "extra ==" not in r]
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = PROJECT_ROOT / "pyproject.toml"
    try:
        import tomllib

        return list(tomllib.loads(pyproject.read_text())["project"]["dependencies"])
    except (ImportError, OSError, KeyError, ValueError):
        return list(_FALLBACK_REQUIREMENTS)


def _version_ok(installed: str, spec: str) -> bool:
    try:
        from packaging.specifiers import SpecifierSet

        return not spec or SpecifierSet(spec).contains(installed, prereleases=True)
    except ImportError:  # packaging absent: presence is all we can say
        return True
    except Exception:
        return True


def check_packages(ctx: DoctorContext) -> list[CheckResult]:
    problems: list[str] = []
    found: list[str] = []
    pip = _venv_pip(ctx)
    to_install: list[str] = []
    for req in _requirements():
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*([^;]*)", req)
        if not m:
            continue
        dist, spec = m.group(1), m.group(2).strip()
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{dist} is not installed")
            to_install.append(req.split(";")[0].strip())
            continue
        if not _version_ok(version, spec):
            problems.append(f"{dist} {version} is too old or too new (needs {spec})")
            to_install.append(req.split(";")[0].strip())
            continue
        module = _IMPORT_NAMES.get(dist.lower(), dist.lower().replace("-", "_"))
        try:
            importlib.import_module(module)
        except Exception as exc:  # installed but broken (missing system library, ABI mismatch)
            problems.append(f"{dist} {version} is installed but `import {module}` fails: {_first_line(exc)}")
            to_install.append(req.split(";")[0].strip())
            continue
        found.append(f"{dist} {version}")
    results = []
    if problems:
        results.append(
            CheckResult(
                "python-packages",
                False,
                "; ".join(problems),
                f"{pip} install --upgrade " + " ".join(f"'{r}'" for r in to_install),
            )
        )
    else:
        results.append(CheckResult("python-packages", True, f"{len(found)} required packages import fine"))
    # Both onnxruntime wheels in one environment: the CPU one shadows the GPU providers.
    try:
        importlib.metadata.version("onnxruntime")
        importlib.metadata.version("onnxruntime-gpu")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        results.append(
            CheckResult(
                "onnxruntime-wheels",
                False,
                "both onnxruntime (CPU only) and onnxruntime-gpu are installed; they overwrite each other",
                f"{pip} uninstall -y onnxruntime onnxruntime-gpu && {pip} install onnxruntime-gpu",
                "warning",
            )
        )
    return results


# ----------------------------------------------------------------------------------------- config


def check_config(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config_ok:
        return [CheckResult("config", True, f"{ctx.config_path} is valid")]
    problems = ctx.extra.get("config_problems", [])
    return [
        CheckResult(
            "config",
            False,
            " | ".join(problems) or f"{ctx.config_path} could not be read",
            f"edit {ctx.config_path} as each message says, then run `kiosk config check {ctx.config_path}`; "
            "the checks below use the built-in defaults",
        )
    ]


# ----------------------------------------------------------------------------------------- providers


def _gpu_driver_hint() -> str:
    version_file = Path("/proc/driver/nvidia/version")
    if not version_file.exists():
        return "no NVIDIA driver is loaded (/proc/driver/nvidia/version is missing)"
    first = version_file.read_text(errors="replace").splitlines()[:1]
    return f"NVIDIA driver loaded ({first[0].strip() if first else 'unknown version'})"


def _cuda_major() -> str:
    """CUDA major version this onnxruntime build needs (``12``, ``13``), for the fix text."""
    try:
        from onnxruntime.capi import build_and_package_info

        return str(getattr(build_and_package_info, "cuda_version", "12")).split(".")[0]
    except Exception:
        return "12"


def check_providers(ctx: DoctorContext) -> list[CheckResult]:
    from kiosk.inference.sessions import PROVIDER_NAMES, probe_providers

    short_of = {v: k for k, v in PROVIDER_NAMES.items()}
    try:
        import onnxruntime as ort

        ort.set_default_logger_severity(
            4
        )  # the result is reported below; keep native errors off the terminal
    except Exception:
        pass
    # onnxruntime print()s its "EP Error ... Falling back" banner to stdout: keep --json output clean.
    with contextlib.redirect_stdout(io.StringIO()):
        probed = probe_providers(ctx.cfg.models.providers)
    cuda = _cuda_major()
    working = [name for name, err in probed.items() if err is None]
    results = []
    for name, err in probed.items():
        short = short_of.get(name, name)
        check = f"provider-{short}"
        if err is None:
            results.append(CheckResult(check, True, f"{name} runs a test session"))
            continue
        if short == "cpu":
            results.append(
                CheckResult(
                    check,
                    False,
                    f"the CPU provider does not run: {err}",
                    f"reinstall ONNX Runtime: {_venv_pip(ctx)} install --force-reinstall onnxruntime-gpu",
                )
            )
            continue
        fallback = next((short_of.get(w, w) for w in working), None)
        if short == "tensorrt":
            fix = (
                f"make the CUDA provider work first, then install TensorRT for CUDA {cuda} "
                f"(`{_venv_pip(ctx)} install tensorrt-cu{cuda}`), or remove `tensorrt` from models.providers.order"
            )
        else:
            fix = (
                "install the NVIDIA driver (`sudo ubuntu-drivers install`, reboot, check `nvidia-smi`), then the "
                f"CUDA {cuda} and cuDNN libraries this onnxruntime was built for "
                f"(`{_venv_pip(ctx)} install 'onnxruntime-gpu[cuda,cudnn]'`)"
            )
        detail = f"{err}; {_gpu_driver_hint()}"
        if fallback:
            detail += f"; the kiosk falls back to {fallback} (slower)"
        results.append(CheckResult(check, False, detail, fix, "warning" if fallback else "error"))
    return results


# ----------------------------------------------------------------------------------------- display


def _run_python(ctx: DoctorContext, code: str, timeout_s: float = 15.0) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [ctx.python, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout_s:.0f} s"
    out = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return proc.returncode == 0, (out[-1] if out else f"exit code {proc.returncode}")


_GLFW_PROBE = """
import glfw, sys
errors = []
glfw.set_error_callback(lambda code, text: errors.append(text.decode() if isinstance(text, bytes) else str(text)))
if not glfw.init():
    print("glfw.init() failed: " + ("; ".join(errors) or "unknown error")); sys.exit(1)
m = glfw.get_primary_monitor()
mode = glfw.get_video_mode(m) if m else None
print(f"{mode.size.width}x{mode.size.height} @ {mode.refresh_rate} Hz" if mode else "no monitor reported")
glfw.terminate()
"""

_EGL_PROBE = """
import moderngl
ctx = moderngl.create_standalone_context(backend="egl")
print(ctx.info["GL_RENDERER"])
"""


def check_display(ctx: DoctorContext) -> list[CheckResult]:
    x11, wayland = os.environ.get("DISPLAY"), os.environ.get("WAYLAND_DISPLAY")
    if x11 or wayland:
        where = f"DISPLAY={x11}" if x11 else f"WAYLAND_DISPLAY={wayland}"
        ok, text = _run_python(ctx, _GLFW_PROBE)
        if ok:
            return [CheckResult("display", True, f"{where} reachable, primary monitor {text}")]
        return [
            CheckResult(
                "display",
                False,
                f"{where} is set but a window cannot be opened: {text}",
                "check the session is running (`systemctl status getty@tty1`, ~/.xsession.log of the kiosk user) "
                "and that this user may use it (same user as the session, or `xhost +SI:localuser:kiosk`)",
            )
        ]
    egl_ok, egl_text = _run_python(ctx, _EGL_PROBE)
    detail = "no display: neither DISPLAY nor WAYLAND_DISPLAY is set, so no window can open"
    if egl_ok:
        detail += f"; headless (EGL) rendering works ({egl_text}), so `kiosk run --headless` can run"
    else:
        detail += f"; headless (EGL) rendering fails too ({egl_text})"
    fix = (
        "on the booth, start the kiosk session (deploy/README.md: autologin + X on tty1), or run over SSH with "
        "DISPLAY=:0; for an offscreen run use `kiosk run --headless`"
    )
    if not egl_ok:
        fix += "; for headless rendering install Mesa's EGL: `sudo apt-get install libegl1 libgl1-mesa-dri`"
    # A booth needs a screen; --headless accepts an offscreen-only machine (CI, soak runs).
    severity: Severity = "warning" if (ctx.headless and egl_ok) else "error"
    return [CheckResult("display", False, detail, fix, severity)]


# ----------------------------------------------------------------------------------------- source


def _device_users(dev: str) -> list[str]:
    """``pid (name)`` of processes holding ``dev`` open (those this user can see)."""
    users: list[str] = []
    try:
        real = os.path.realpath(dev)
    except OSError:
        return users
    for fd_dir in glob.glob("/proc/[0-9]*/fd"):
        pid = fd_dir.split("/")[2]
        if pid == str(os.getpid()):
            continue
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(f"{fd_dir}/{fd}") == real:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                    users.append(f"{pid} ({comm})")
                    break
        except OSError:
            continue
    return users


def _camera_device_path(device: int | str) -> str:
    return f"/dev/video{device}" if isinstance(device, int) else str(device)


def check_camera(ctx: DoctorContext) -> list[CheckResult]:
    import cv2

    cam = ctx.cfg.source.camera
    dev = _camera_device_path(cam.device)
    nodes = sorted(glob.glob("/dev/video*"))
    if not os.path.exists(dev):
        where = f"the cameras present are {', '.join(nodes)}" if nodes else "no /dev/video* devices exist"
        fix = "plug in the USB camera (try another port, avoid hubs), then `v4l2-ctl --list-devices`"
        if nodes:
            fix = f"set source.camera.device in {ctx.config_path} to one of {', '.join(nodes)} " + (
                "(a /dev/v4l/by-id/... path survives replugging)"
            )
        return [CheckResult("camera", False, f"no camera at {dev}: {where}", fix)]
    if not os.access(dev, os.R_OK | os.W_OK):
        return [
            CheckResult(
                "camera",
                False,
                f"{dev} exists but this user may not open it (needs the video group)",
                "sudo usermod -aG video $USER, then log out and in (the service runs as `kiosk`, already in it)",
            )
        ]
    cap = cv2.VideoCapture(cam.device if isinstance(cam.device, int) else str(cam.device), cv2.CAP_V4L2)
    try:
        if not cap.isOpened():
            busy = _device_users(dev)
            detail = f"{dev} exists but does not open"
            fix = f"unplug and replug the camera; check `v4l2-ctl -d {dev} --all`"
            if busy:
                detail += f": it is in use by {', '.join(busy)}"
                fix = "stop the other program first, e.g. `sudo systemctl stop faceswap-kiosk`"
            return [CheckResult("camera", False, detail, fix)]
        if cam.fourcc:
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*cam.fourcc))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, cam.width)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cam.height)
        cap.set(cv2.CAP_PROP_FPS, cam.fps)
        deadline = time.monotonic() + 5.0  # the first frame may take a while (auto exposure)
        first = None
        while first is None and time.monotonic() < deadline:
            ok, frame = cap.read()
            if ok and frame is not None:
                first = frame
        if first is None:
            return [
                CheckResult(
                    "camera",
                    False,
                    f"{dev} opens but delivers no frames within 5 s",
                    f"replug the camera; try another pixel format (source.camera.fourcc: YUYV or MJPG); "
                    f"list what it supports: `v4l2-ctl -d {dev} --list-formats-ext`",
                )
            ]
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < ctx.camera_seconds:
            ok, frame = cap.read()
            if not ok:
                break
            n += 1
        elapsed = time.monotonic() - t0
        fps = n / elapsed if elapsed > 0 else 0.0
        height, width = first.shape[:2]
        fourcc_code = int(cap.get(cv2.CAP_PROP_FOURCC))
        got_fourcc = "".join(chr((fourcc_code >> (8 * i)) & 0xFF) for i in range(4)).strip("\0")
    finally:
        cap.release()
    detail = f"{dev} delivers {width}x{height} {got_fourcc or '?'} at {fps:.1f} fps measured"
    detail += f" (asked {cam.width}x{cam.height} {cam.fourcc or 'driver default'} at {cam.fps:g} fps)"
    problems, fixes = [], []
    if (width, height) != (cam.width, cam.height):
        problems.append("the size differs from the config")
        fixes.append(
            f"pick a mode the camera has (`v4l2-ctl -d {dev} --list-formats-ext`) and set "
            f"source.camera.width/height in {ctx.config_path}"
        )
    if fps < 0.8 * cam.fps:
        problems.append("the frame rate is well below the config")
        fixes.append(
            "use fourcc MJPG (raw YUYV at 720p/1080p is limited by USB bandwidth), give the booth more light, "
            f"or stop auto-exposure from lowering the rate: `v4l2-ctl -d {dev} -c exposure_dynamic_framerate=0`"
        )
    if problems:
        return [
            CheckResult("camera", False, detail + "; " + ", ".join(problems), "; ".join(fixes), "warning")
        ]
    return [CheckResult("camera", True, detail)]


def check_source(ctx: DoctorContext) -> list[CheckResult]:
    src = ctx.cfg.source
    if src.kind == "camera":
        return check_camera(ctx)
    if src.kind == "synthetic":
        s = src.synthetic
        return [CheckResult("source", True, f"synthetic pattern {s.width}x{s.height} at {s.fps:g} fps")]
    import cv2

    if not src.path:
        return [
            CheckResult(
                "source",
                False,
                f"source.kind is {src.kind} but source.path is not set",
                f"set source.path in {ctx.config_path}",
            )
        ]
    path = _resolve(ctx.cfg, src.path)
    if not path.is_file():
        return [
            CheckResult(
                "source",
                False,
                f"{src.kind} file {path} does not exist",
                f"copy the file there or fix source.path in {ctx.config_path}",
            )
        ]
    if src.kind == "image":
        img = cv2.imread(str(path))
        if img is None:
            return [CheckResult("source", False, f"{path} is not a readable image", "use a JPEG or PNG file")]
        return [CheckResult("source", True, f"image {path} ({img.shape[1]}x{img.shape[0]})")]
    cap = cv2.VideoCapture(str(path))
    try:
        ok, frame = cap.read()
        fps = cap.get(cv2.CAP_PROP_FPS)
    finally:
        cap.release()
    if not ok or frame is None:
        return [
            CheckResult(
                "source",
                False,
                f"{path} does not decode",
                "re-encode it: `ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4`",
            )
        ]
    return [CheckResult("source", True, f"video {path} ({frame.shape[1]}x{frame.shape[0]} at {fps:.1f} fps)")]


# ----------------------------------------------------------------------------------------- models


def check_models(ctx: DoctorContext) -> list[CheckResult]:
    """Presence and SHA-256 of each model the config needs, with the pipeline's own rules
    (the same as ``kiosk models verify``)."""
    fix_fetch = f"kiosk models fetch --config {ctx.config_path}"
    if not ctx.cfg.processing.enabled:
        return [CheckResult("models", True, "processing.enabled is false: no models needed (camera only)")]
    from kiosk.inference.fetch import check_file
    from kiosk.inference.specs import spec_for_file
    from kiosk.pipeline import model_paths

    missing, corrupt, fine = [], [], []
    for role, path in model_paths(ctx.cfg).items():
        if path is None or (role == "enhancer" and not ctx.cfg.processing.enhance):
            continue
        path = Path(os.path.normpath(path))
        status = check_file(role, spec_for_file(role, path), path)
        if not status.present:
            missing.append(f"{role} {path}")
        elif status.verified is False:
            corrupt.append(
                f"{role} {path} (sha256 {(status.sha256 or '')[:12]}... is not the published file)"
            )
        elif status.verified is True:
            fine.append(f"{role} verified")
        else:
            fine.append(f"{role} present (no published hash to verify)")
    results = []
    if missing:
        results.append(CheckResult("models", False, "missing: " + "; ".join(missing), fix_fetch))
    if corrupt:
        results.append(
            CheckResult(
                "models-verified",
                False,
                "corrupt or not the published file: " + "; ".join(corrupt),
                f"delete the file(s), then {fix_fetch}",
            )
        )
    if not results:
        results.append(CheckResult("models", True, ", ".join(fine)))
    return results


_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp"}


def check_faces_dir(ctx: DoctorContext) -> list[CheckResult]:
    """A ``faces.dir`` library of face photos, where the config has one."""
    faces = getattr(ctx.cfg, "faces", None)
    folder = getattr(faces, "dir", None)
    if not folder or not ctx.cfg.processing.enabled:
        return []
    path = _resolve(ctx.cfg, folder)
    if not path.is_dir():
        return [
            CheckResult(
                "faces-dir",
                False,
                f"the faces folder {path} does not exist",
                f"sudo install -d -o kiosk {path} and copy JPEG/PNG portraits into it",
            )
        ]
    images = sorted(p for p in path.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
    readable = [p for p in images if os.access(p, os.R_OK)]
    if not readable:
        return [
            CheckResult(
                "faces-dir",
                False,
                f"the faces folder {path} has no readable JPEG/PNG images",
                f"copy portraits into {path} (and `sudo chmod a+r {path}/*`)",
            )
        ]
    detail = f"{path}: {len(readable)} face image(s)"
    if len(readable) < len(images):
        detail += f", {len(images) - len(readable)} not readable"
        return [CheckResult("faces-dir", False, detail, f"sudo chmod a+r {path}/*", "warning")]
    return [CheckResult("faces-dir", True, detail)]


def check_source_face(ctx: DoctorContext) -> list[CheckResult]:
    proc = ctx.cfg.processing
    if not proc.enabled:
        return [CheckResult("source-face", True, "processing is off: no face image needed")]
    if not proc.source_face and getattr(getattr(ctx.cfg, "faces", None), "dir", None):
        return []  # the faces library is checked by check_faces_dir
    if not proc.source_face:
        return [
            CheckResult(
                "source-face",
                False,
                "processing.source_face is not set: there is no face to swap in",
                f"put a clear, front-facing photo in the faces folder and set processing.source_face in "
                f"{ctx.config_path}",
            )
        ]
    path = _resolve(ctx.cfg, proc.source_face)
    if not path.is_file():
        return [
            CheckResult(
                "source-face",
                False,
                f"the face image {path} does not exist",
                f"copy a JPEG/PNG portrait to {path} (readable by user kiosk) or fix processing.source_face",
            )
        ]
    if not os.access(path, os.R_OK):
        return [CheckResult("source-face", False, f"{path} is not readable", f"sudo chmod a+r {path}")]
    import cv2

    img = cv2.imread(str(path))
    if img is None:
        return [
            CheckResult("source-face", False, f"{path} is not a readable image", "use a JPEG or PNG file")
        ]
    return [CheckResult("source-face", True, f"{path} ({img.shape[1]}x{img.shape[0]})")]


# ----------------------------------------------------------------------------------------- disk


def _existing_parent(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _writable(path: Path) -> tuple[bool, str]:
    target = path if path.is_dir() else _existing_parent(path)
    try:
        with tempfile.NamedTemporaryFile(dir=target, prefix=".kiosk-doctor-"):
            pass
    except OSError as exc:
        return False, f"{target} is not writable ({exc.strerror or exc})"
    where = "" if target == path else f" (will be created in {target})"
    return True, f"{path} writable{where}"


def check_disk(ctx: DoctorContext) -> list[CheckResult]:
    models_dir = _resolve(ctx.cfg, ctx.cfg.models.dir)
    where = _existing_parent(models_dir)
    free = shutil.disk_usage(where).free
    detail = f"{free / GIB:.1f} GiB free on the disk holding {models_dir}"
    if free < DISK_ERROR_BYTES:
        return [
            CheckResult(
                "disk",
                False,
                detail,
                "free space: `sudo journalctl --vacuum-size=200M`, "
                "remove old files; the models alone need about 1.1 GB",
            )
        ]
    if free < DISK_WARN_BYTES:
        return [
            CheckResult(
                "disk",
                False,
                detail + " (low)",
                "free some space: `sudo journalctl --vacuum-size=200M`, `sudo apt-get clean`",
                "warning",
            )
        ]
    return [CheckResult("disk", True, detail)]


def check_cache(ctx: DoctorContext) -> list[CheckResult]:
    providers = ctx.cfg.models.providers
    results = []
    models_dir = _resolve(ctx.cfg, ctx.cfg.models.dir)
    ok, text = _writable(models_dir)
    # Only `kiosk models fetch` writes there; the kiosk itself only reads.
    results.append(
        CheckResult(
            "models-dir-writable", ok, text, f"sudo chown -R $USER {_existing_parent(models_dir)}", "warning"
        )
    )
    trt_dir = _resolve(ctx.cfg, providers.trt_cache_dir)
    ok, text = _writable(trt_dir)
    needed = "tensorrt" in providers.order
    results.append(
        CheckResult(
            "trt-cache-writable",
            ok,
            text + ("" if needed else " (TensorRT not in use)"),
            f"sudo chown -R kiosk {_existing_parent(trt_dir)} (without it TensorRT rebuilds its engines, "
            "minutes, at every start)",
            "error" if needed else "warning",
        )
    )
    results.append(_check_kernel_cache())
    return results


def _check_kernel_cache() -> CheckResult:
    """numba's kernel cache (:func:`kiosk.paths.configure_numba_cache`): without it every start
    compiles the pixel kernels again."""
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or paths.cache_dir() / "numba")
    ok, text = _writable(folder)
    return CheckResult(
        "kernel-cache-writable",
        ok,
        text,
        f"sudo chown -R $USER {_existing_parent(folder)} or set NUMBA_CACHE_DIR to a writable folder "
        "(without it every start compiles the pixel kernels again, seconds)",
        "warning",
    )


# ----------------------------------------------------------------------------------------- driver

Check = Callable[[DoctorContext], Iterable[CheckResult]]

CHECKS: tuple[tuple[str, Check], ...] = (
    ("python-packages", check_packages),
    ("config", check_config),
    ("providers", check_providers),
    ("display", check_display),
    ("source", check_source),
    ("models", check_models),
    ("source-face", check_source_face),
    ("faces-dir", check_faces_dir),
    ("disk", check_disk),
    ("cache", check_cache),
)


def make_context(config_path: Path, headless: bool = False, camera_seconds: float = 1.0) -> DoctorContext:
    try:
        cfg = load_config(config_path)
        ok, problems = True, []
    except ConfigError as exc:
        cfg = KioskConfig(base_dir=config_path.absolute().parent)
        ok, problems = False, exc.problems
    ctx = DoctorContext(config_path, cfg, ok, headless=headless, camera_seconds=camera_seconds)
    ctx.extra["config_problems"] = problems
    return ctx


def run_checks(ctx: DoctorContext, checks: Iterable[tuple[str, Check]] = CHECKS) -> Report:
    results: list[CheckResult] = []
    for name, check in checks:
        try:
            results.extend(check(ctx))
        except Exception as exc:  # a crashing check is a finding, not a traceback
            results.append(
                CheckResult(
                    name,
                    False,
                    f"the check itself failed: {type(exc).__name__}: {_first_line(exc)}",
                    "report this with the output of `kiosk doctor --json`",
                )
            )
    return Report(str(ctx.config_path), tuple(results))


def print_report(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.to_text())
