"""Each source type, mirror/rotation, and failure → reconnect → recovery in the capture thread."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from kiosk.capture.sources import (
    CameraSource,
    ImageSource,
    SourceError,
    SyntheticSource,
    VideoFileSource,
    make_source,
)
from kiosk.capture.thread import CaptureThread, new_captured_frame
from kiosk.config import SourceConfig
from kiosk.sync import TripleBuffer


def write_video(path: Path, n: int = 12, size=(160, 120), fps: float = 25.0) -> None:
    w, h = size
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    assert vw.isOpened()
    for i in range(n):
        frame = np.full((h, w, 3), 0, np.uint8)
        frame[:, : (i + 1) * w // n] = (0, 0, 255)  # red bar grows with the frame index
        vw.write(frame)
    vw.release()


def test_synthetic_moves_and_reuses_the_output_array():
    src = SyntheticSource(320, 180, 200.0)
    src.open()
    a = src.read(None).copy()
    out = np.empty((180, 320, 3), np.uint8)
    b = src.read(out)
    assert b is out
    assert b.shape == (180, 320, 3)
    assert np.mean(np.abs(a.astype(int) - b.astype(int))) > 0.1  # the pattern moves


def test_image_source_delivers_the_image_paced(tmp_path):
    img = np.random.default_rng(0).integers(0, 255, (90, 120, 3), np.uint8)
    cv2.imwrite(str(tmp_path / "still.png"), img)
    src = ImageSource(tmp_path / "still.png", fps=50.0)
    src.open()
    t0 = time.perf_counter()
    for _ in range(6):
        frame = src.read(None)
    assert np.array_equal(frame, img)
    assert time.perf_counter() - t0 >= 5 / 50.0 * 0.9


def test_image_source_errors_are_one_line(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        ImageSource(tmp_path / "none.png").open()
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(SourceError, match="not a readable image"):
        ImageSource(tmp_path / "junk.png").open()


def test_video_loops_and_is_paced_at_file_rate(tmp_path):
    write_video(tmp_path / "v.avi", n=5, fps=25.0)
    src = VideoFileSource(tmp_path / "v.avi")
    src.open()
    assert "25" in src.description
    t0 = time.perf_counter()
    widths = []
    for _ in range(12):
        frame = src.read(None)
        widths.append(int((frame[60, :, 2] > 128).sum()))
    elapsed = time.perf_counter() - t0
    assert elapsed >= 11 / 25.0 * 0.9  # paced, not as fast as decoding allows
    assert widths[5] < widths[4]  # wrapped around to the first frame
    src.close()


def test_missing_video_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match="video file not found"):
        VideoFileSource(tmp_path / "gone.mp4").open()


def test_camera_missing_device_is_a_clear_error():
    cfg = SourceConfig(kind="camera", camera={"device": "/dev/video-does-not-exist"})
    with pytest.raises(SourceError, match="not found"):
        CameraSource(cfg).open()


def test_camera_index_that_cannot_open():
    cfg = SourceConfig(kind="camera", camera={"device": 63})
    with pytest.raises(SourceError, match="cannot be opened"):
        CameraSource(cfg).open()


def test_camera_source_reads_a_device_path(tmp_path):
    # No camera on CI: OpenCV opens a file given as a device path the same way, which
    # exercises the camera code path (open, property requests, read into the slot).
    write_video(tmp_path / "cam.avi", n=4)
    cfg = SourceConfig(
        kind="camera", camera={"device": str(tmp_path / "cam.avi"), "width": 160, "height": 120}
    )
    src = CameraSource(cfg)
    src.open()
    frame = src.read(np.empty((120, 160, 3), np.uint8))
    assert frame.shape == (120, 160, 3)
    src.close()


def test_make_source_requires_path_for_files(tmp_path):
    with pytest.raises(SourceError, match="source.path"):
        make_source(SourceConfig(kind="video"), tmp_path)
    assert isinstance(make_source(SourceConfig(kind="image", path="a.png"), tmp_path), ImageSource)


def _run_capture(cfg: SourceConfig, base: Path, seconds: float):
    buf = TripleBuffer(new_captured_frame)
    stop = threading.Event()
    thread = CaptureThread(cfg, lambda: make_source(cfg, base), buf, stop)
    thread.start()
    return thread, buf, stop


@pytest.mark.parametrize(
    ("mirror", "rotate", "expect_shape", "corner"),
    [
        (False, 0, (90, 160, 3), (0, 0)),
        (True, 0, (90, 160, 3), (0, 159)),
        (False, 90, (160, 90, 3), (0, 89)),
        (False, 180, (90, 160, 3), (89, 159)),
        (False, 270, (160, 90, 3), (159, 0)),
        (True, 90, (160, 90, 3), (159, 89)),
    ],
)
def test_mirror_and_rotation(tmp_path, mirror, rotate, expect_shape, corner):
    img = np.zeros((90, 160, 3), np.uint8)
    img[:10, :10] = (0, 255, 0)  # green marker in the top-left corner
    cv2.imwrite(str(tmp_path / "m.png"), img)
    cfg = SourceConfig(kind="image", path="m.png", mirror=mirror, rotate=rotate, image_fps=100)
    thread, buf, stop = _run_capture(cfg, tmp_path, 0.5)
    try:
        assert buf.wait(3.0)
        slot = buf.read()
        assert slot is not None
        assert slot.frame_bgr.shape == expect_shape
        y, x = corner
        assert tuple(slot.frame_bgr[y, x]) == (0, 255, 0)
    finally:
        stop.set()
        thread.join(2)


def test_capture_reconnects_when_the_source_appears_and_recovers_after_failure(tmp_path):
    cfg = SourceConfig(kind="video", path="late.avi", reconnect_initial_s=0.05, reconnect_max_s=0.2)
    thread, buf, stop = _run_capture(cfg, tmp_path, 0)
    try:
        deadline = time.time() + 3
        while thread.state != "reconnecting" and time.time() < deadline:
            time.sleep(0.02)
        assert thread.state == "reconnecting"
        assert "late.avi" in thread.last_error and "not found" in thread.last_error
        write_video(tmp_path / "late.avi", n=30)
        assert buf.wait(5.0), "capture did not recover once the file appeared"
        deadline = time.time() + 3
        while thread.state != "running" and time.time() < deadline:
            time.sleep(0.02)
        assert thread.state == "running"
        assert thread.meters.reconnects >= 1
        assert thread.meters.rate.count > 0
    finally:
        stop.set()
        thread.join(2)
    assert thread.state == "stopped"


class FlakySource:
    """Delivers frames, then fails a read, then works again after reopening."""

    description = "flaky"
    opens = 0

    def __init__(self) -> None:
        self.reads = 0

    def open(self) -> None:
        FlakySource.opens += 1

    def read(self, out):
        self.reads += 1
        time.sleep(0.005)
        if FlakySource.opens == 1 and self.reads > 5:
            raise SourceError("unplugged")
        return np.full((8, 8, 3), FlakySource.opens, np.uint8)

    def close(self) -> None:
        pass


def test_capture_survives_a_failing_read_and_resumes():
    FlakySource.opens = 0
    cfg = SourceConfig(kind="synthetic", mirror=False, reconnect_initial_s=0.05)
    buf = TripleBuffer(new_captured_frame)
    stop = threading.Event()
    thread = CaptureThread(cfg, FlakySource, buf, stop)
    thread.start()
    try:
        deadline = time.time() + 5
        seen_second = False
        while time.time() < deadline and not seen_second:
            buf.wait(0.1)
            slot = buf.read()
            seen_second = slot is not None and slot.frame_bgr[0, 0, 0] == 2
        assert seen_second, "no frame after the source was reopened"
        assert thread.meters.reconnects == 1
        assert thread.state == "running"
    finally:
        stop.set()
        thread.join(2)


def _solid_video(
    path: Path, bgr: tuple[int, int, int], n: int = 10, size=(96, 64), fps: float = 50.0
) -> None:
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, size)
    assert vw.isOpened()
    for _ in range(n):
        vw.write(np.full((size[1], size[0], 3), bgr, np.uint8))
    vw.release()


def test_video_replaced_by_rename_is_reopened(tmp_path):
    """`mv new.avi clip.avi` while the kiosk plays clip.avi: the new file plays within a second."""
    clip = tmp_path / "clip.avi"
    _solid_video(clip, (0, 0, 255))  # red
    src = VideoFileSource(clip)
    src.open()
    assert src.read(None)[..., 2].mean() > 200
    _solid_video(tmp_path / "new.avi", (255, 0, 0))  # blue
    os.replace(tmp_path / "new.avi", clip)
    t0 = time.monotonic()
    blue_after = None
    while time.monotonic() - t0 < 3.0:
        frame = src.read(None)
        if frame[..., 0].mean() > 200 and frame[..., 2].mean() < 50:
            blue_after = time.monotonic() - t0
            break
    src.close()
    assert blue_after is not None, "still playing the old file 3 s after the rename"
    assert src.reopened == 1
