"""The picture source: the camera (opened by the booth's own source class, then measured), or the
video/image file or synthetic pattern the config names instead."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from kiosk.appliance.doctor.core import CheckResult, DoctorContext, resolve


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


def check_camera(ctx: DoctorContext) -> list[CheckResult]:
    """Opens the camera exactly as the booth does (:class:`kiosk.capture.sources.CameraSource`) and
    measures what it really delivers."""
    from kiosk.capture.sources import CameraSource, SourceError, camera_device_node

    cam = ctx.cfg.source.camera
    dev = camera_device_node(cam.device)
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
    source = CameraSource(ctx.cfg.source)
    try:
        source.open()
    except SourceError as exc:
        busy = _device_users(dev)
        detail = f"{dev} exists but does not open: {exc}"
        fix = f"unplug and replug the camera; check `v4l2-ctl -d {dev} --all`"
        if busy:
            detail += f"; it is in use by {', '.join(busy)}"
            fix = "stop the other program first, e.g. `sudo systemctl stop faceswap-kiosk`"
        return [CheckResult("camera", False, detail, fix)]
    try:
        deadline = time.monotonic() + 5.0  # the first frame may take a while (auto exposure)
        first = None
        while first is None and time.monotonic() < deadline:
            try:
                first = source.read(None)
            except SourceError:
                continue
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
            try:
                source.read(None)
            except SourceError:
                break
            n += 1
        elapsed = time.monotonic() - t0
        fps = n / elapsed if elapsed > 0 else 0.0
        height, width = first.shape[:2]
        got_fourcc = source.negotiated_fourcc()
    finally:
        source.close()
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
    path = resolve(ctx.cfg, src.path)
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
