"""Frame sources: camera, video file, still image and a synthetic pattern.

A source delivers BGR frames into a caller-provided array when it can (``read(out)``)
and raises :class:`SourceError` with a one-line, human message when it cannot. Pacing
(the file's frame rate, the image/synthetic rate) is the source's job; reconnecting is the
capture thread's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, cast

import cv2
import numpy as np

from kiosk.capture.errors import SourceError
from kiosk.config import SourceConfig
from kiosk.types import FrameBGR
from kiosk.util.files import read_regular_file, shown
from kiosk.util.images import ImageDecodeError, decode_image

log = logging.getLogger(__name__)
#: A still picture larger than this is not read.
MAX_IMAGE_FILE_BYTES = 64 << 20

# FFmpeg's own log (OpenCV's FFmpeg backend prints it to stderr: "moov atom not found", "overread 8"
# for every frame of a cut file, dozens of lines a second) is off unless the operator asks for it
# (OPENCV_FFMPEG_LOGLEVEL=16 shows its errors): the kiosk says once per file what is wrong with a
# video. Read by OpenCV when it opens its first video, so set before any VideoCapture.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")


@contextlib.contextmanager
def opencv_quiet() -> Iterator[None]:
    """OpenCV's own warnings off inside the block (a camera that is not there makes ``cap_v4l``
    print two WARN lines on every open; the kiosk's one line says it)."""
    try:
        previous = cv2.utils.logging.getLogLevel()
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
    except Exception:  # an OpenCV without the logging API: its default stays
        yield
        return
    try:
        yield
    finally:
        cv2.utils.logging.setLogLevel(previous)


class Source(Protocol):
    #: Short description for the status line, e.g. "camera 0 1280x720@30".
    description: str

    def open(self) -> None: ...

    def read(self, out: FrameBGR | None) -> FrameBGR:
        """Block until the next frame is due and return it (in ``out`` when its shape fits)."""
        ...

    def close(self) -> None: ...


class _Pacer:
    """Sleeps so that successive ticks are ``1/fps`` apart without drifting."""

    def __init__(self, fps: float) -> None:
        self.period = 1.0 / fps if fps > 0 else 0.0
        self._next = 0.0

    def wait(self) -> None:
        now = time.perf_counter()
        if self._next == 0.0 or now - self._next > 0.25:  # first tick, or we fell far behind
            self._next = now
        delay = self._next - now
        if delay > 0:
            time.sleep(delay)
        self._next += self.period


def camera_device(device: int | str) -> int | str:
    """What OpenCV is given for ``source.camera.device``: an index for ``0`` or ``"0"``, else the path."""
    if isinstance(device, str) and device.isdigit():
        return int(device)
    return device


def camera_device_node(device: int | str) -> str:
    """The device file behind ``source.camera.device`` (``/dev/video0`` for index 0)."""
    dev = camera_device(device)
    return f"/dev/video{dev}" if isinstance(dev, int) else dev


class CameraSource:
    """A V4L2/UVC camera by index or device path."""

    def __init__(self, cfg: SourceConfig) -> None:
        cam = cfg.camera
        self.cfg = cam
        self.description = f"camera {cam.device} {cam.width}x{cam.height}@{cam.fps:g}"
        self._cap: cv2.VideoCapture | None = None

    def open(self) -> None:
        cam = self.cfg
        device = camera_device(cam.device)
        if isinstance(device, str) and not Path(device).exists():
            raise SourceError(f"camera {device} not found (plug it in or fix source.camera.device)")
        with opencv_quiet():
            cap = (
                cv2.VideoCapture(device, cv2.CAP_V4L2)
                if isinstance(device, int)
                else cv2.VideoCapture(device)
            )
        if not cap.isOpened():
            cap.release()
            raise SourceError(f"camera {device} cannot be opened (unplugged, busy, or no permission)")
        if cam.fourcc:
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*cam.fourcc))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, cam.width)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cam.height)
        cap.set(cv2.CAP_PROP_FPS, cam.fps)
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)
        w = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        h = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps = cap.get(cv2.CAP_PROP_FPS)
        if (w, h) != (cam.width, cam.height):
            log.warning(
                "camera %s delivers %dx%d instead of the requested %dx%d", device, w, h, cam.width, cam.height
            )
        self.description = f"camera {device} {w}x{h}@{fps:g}"
        self._cap = cap

    def negotiated_fourcc(self) -> str:
        """The pixel format the driver agreed to (``MJPG``, ``YUYV``), or ``""`` when it does not say."""
        if self._cap is None:
            return ""
        code = int(self._cap.get(cv2.CAP_PROP_FOURCC))
        return "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4)).strip("\0 ")

    def read(self, out: FrameBGR | None) -> FrameBGR:
        if self._cap is None:
            raise SourceError("camera not open")
        ok, frame = self._cap.read(out) if out is not None else self._cap.read()
        if not ok or frame is None:
            raise SourceError(f"camera {self.cfg.device} stopped delivering frames (unplugged?)")
        return cast(FrameBGR, frame)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class VideoFileSource:
    """A video file, looped and paced at its own frame rate.

    A file replaced under the same name (``mv new.mp4 clip.mp4``: a new inode) is noticed within
    :attr:`CHECK_S` and reopened; the old file keeps playing until the new one opens."""

    CHECK_S = 0.5  # how often the path is stat()ed for a replacement

    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = f"video {path.name}"
        self._cap: cv2.VideoCapture | None = None
        self._pacer = _Pacer(30.0)
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._next_check = 0.0
        self.reopened = 0
        self._unreadable: tuple[int, int, int, int] | None = None  # the replacement already reported

    def _file_stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _stat_identity(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _replaced(self) -> bool:
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + self.CHECK_S
        ident = self._stat_identity()
        return ident is not None and ident != self._identity

    def open(self) -> None:
        if not self.path.is_file():
            raise SourceError(f"{self.path}: video file not found (fix source.path)")
        self._identity = self._stat_identity()
        self._next_check = time.monotonic() + self.CHECK_S
        with opencv_quiet():
            cap = cv2.VideoCapture(str(self.path))
        if not cap.isOpened():
            cap.release()
            raise SourceError(f"{self.path}: cannot decode this video (re-encode it as H.264 MP4)")
        fps = cap.get(cv2.CAP_PROP_FPS)
        fps = fps if math.isfinite(fps) and 1.0 <= fps <= 240.0 else 30.0
        self._pacer = _Pacer(fps)
        w = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        h = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self.description = f"video {self.path.name} {w}x{h}@{fps:g}"
        self._cap = cap

    def read(self, out: FrameBGR | None) -> FrameBGR:
        if self._cap is None:
            raise SourceError("video not open")
        self._pacer.wait()
        if self._replaced():
            old, old_identity = self._cap, self._identity
            try:
                self.open()
            except SourceError as exc:  # e.g. the new file is still being copied: keep the old
                self._identity = old_identity  # and look again at the next check
                seen = self._file_stamp()
                if seen != self._unreadable:  # said once per file (a copy that grows is a new try)
                    self._unreadable = seen
                    log.warning("video %s replaced but not readable yet: %s", shown(self.path.name), exc)
            else:
                old.release()
                self._unreadable = None
                self.reopened += 1
                log.info("video %s replaced on disk: reopened", self.path.name)
        assert self._cap is not None
        ok, frame = self._cap.read(out) if out is not None else self._cap.read()
        if not ok:  # end of file: loop
            if not self.path.is_file():
                raise SourceError(f"{self.path}: video file disappeared")
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = self._cap.read(out) if out is not None else self._cap.read()
            if not ok:
                raise SourceError(f"{self.path}: cannot read frames from this video")
        return cast(FrameBGR, frame)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class ImageSource:
    """A still image, delivered at a steady rate (useful for demos and tests)."""

    def __init__(self, path: Path, fps: float = 30.0) -> None:
        self.path = path
        self.description = f"image {path.name}"
        self._image: FrameBGR | None = None
        self._pacer = _Pacer(fps)

    def open(self) -> None:
        # A regular file only (a FIFO at the path never blocks the capture thread), sized from its
        # header and decoded within the decode budget (a huge JPEG comes reduced).
        try:
            data = read_regular_file(self.path, MAX_IMAGE_FILE_BYTES)
        except FileNotFoundError:
            raise SourceError(f"{shown(self.path)}: image file not found (fix source.path)") from None
        except OSError as exc:
            raise SourceError(f"{shown(self.path)}: cannot read the image: {exc.strerror or exc}") from None
        try:
            image = decode_image(data)
        except ImageDecodeError as exc:
            raise SourceError(f"{shown(self.path)}: {exc}") from None
        self._image = cast(FrameBGR, image)
        self.description = f"image {self.path.name} {image.shape[1]}x{image.shape[0]}"

    def read(self, out: FrameBGR | None) -> FrameBGR:
        if self._image is None:
            raise SourceError("image not open")
        self._pacer.wait()
        if out is None or out.shape != self._image.shape:
            return self._image.copy()
        np.copyto(out, self._image)
        return out

    def close(self) -> None:
        self._image = None


class SyntheticSource:
    """A moving test pattern: colour gradient, a bouncing disc, a sweeping bar and a counter."""

    def __init__(self, width: int, height: int, fps: float) -> None:
        self.size = (width, height)
        self.description = f"synthetic {width}x{height}@{fps:g}"
        self._pacer = _Pacer(fps)
        self._fps = fps
        self._n = 0
        self._base: FrameBGR | None = None

    def open(self) -> None:
        w, h = self.size
        x = np.linspace(0, 1, w, dtype=np.float32)[None, :]
        y = np.linspace(0, 1, h, dtype=np.float32)[:, None]
        base = np.empty((h, w, 3), np.uint8)
        base[..., 0] = (60 + 150 * y * np.ones_like(x)).astype(np.uint8)  # blue grows downwards
        base[..., 1] = (40 + 100 * x * (1 - y)).astype(np.uint8)
        base[..., 2] = (60 + 150 * x * np.ones_like(y)).astype(np.uint8)  # red grows to the right
        step = max(w, h) // 16
        base[::step, :, :] //= 2
        base[:, ::step, :] //= 2
        self._base = base
        self._n = 0

    def read(self, out: FrameBGR | None) -> FrameBGR:
        if self._base is None:
            raise SourceError("synthetic source not open")
        self._pacer.wait()
        w, h = self.size
        frame = out if out is not None and out.shape == self._base.shape else np.empty_like(self._base)
        np.copyto(frame, self._base)
        t = self._n / self._fps
        r = max(8, h // 10)
        cx = int(r + (w - 2 * r) * (0.5 + 0.5 * math.sin(t * 1.3)))
        cy = int(r + (h - 2 * r) * (0.5 + 0.5 * math.sin(t * 1.9 + 1.0)))
        cv2.circle(frame, (cx, cy), r, (40, 220, 250), -1, cv2.LINE_AA)
        bar_x = int((t * 0.25 % 1.0) * w)
        frame[:, bar_x : bar_x + max(2, w // 200)] = 255
        scale = h / 360
        cv2.putText(
            frame,
            f"frame {self._n}",
            (int(20 * scale), int(h - 20 * scale)),
            cv2.FONT_HERSHEY_SIMPLEX,
            scale,
            (255, 255, 255),
            max(1, int(2 * scale)),
            cv2.LINE_AA,
        )
        self._n += 1
        return frame

    def close(self) -> None:
        self._base = None


def make_source(cfg: SourceConfig, base_dir: Path) -> Source:
    """The source described by ``cfg``; relative paths resolve against ``base_dir``."""
    if cfg.kind == "camera":
        return CameraSource(cfg)
    if cfg.kind == "synthetic":
        s = cfg.synthetic
        return SyntheticSource(s.width, s.height, s.fps)
    if cfg.kind == "demo":  # the bundled visitor, animated (sized like the synthetic pattern)
        from kiosk.capture.demo_visitor import DemoVisitorSource

        s = cfg.synthetic
        return DemoVisitorSource(s.width, s.height, s.fps)
    if not cfg.path:
        raise SourceError(f"source.kind is {cfg.kind} but source.path is not set (add source.path: FILE)")
    path = Path(cfg.path).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if cfg.kind == "video":
        return VideoFileSource(path)
    return ImageSource(path, cfg.image_fps)
