"""The moving keepsake (``keepsake.clip``): the last seconds of the swapped screen as an MP4 and a GIF.

While keepsakes run with ``clip`` on, the render loop offers the ring (:class:`ClipRing`) the
picture on screen every frame; the ring takes one at :data:`CLIP_FPS` (the rest return at once),
downscaled to at most :data:`CLIP_WIDTH_PX` wide, with the swapped crops the screen composites on
the GPU (their affines scaled to the small frame): about 0.5 ms every fifth frame, and at most
:data:`CLIP_SECONDS` of frames and :data:`RING_MAX_MB` in memory, oldest dropped first. When the
still is taken the ring's frames are copied out (:meth:`ClipRing.snapshot`, references only), and
:func:`build_clip` (a background thread, never the render loop) pastes the crops on the CPU with
the still's paste-back, draws the brand frame, and encodes an H.264 MP4 (libx264 from PyAV, one
encoder thread, ``+faststart`` so a phone plays it while it loads) and a looping boomerang GIF
(Pillow: forward then backward, :data:`GIF_WIDTH_PX` wide). The store keeps both beside the photo,
under its token, within the same time-to-live and size limits, and deletes them with it.

PyAV is the optional extra ``clip`` (``pip install 'faceswap-kiosk[clip]'``): its wheels bundle
FFmpeg with libx264 (GPL); OpenCV's wheels have no H.264 encoder. Without it :func:`encoder_problem`
says so in one line and the kiosk offers stills only.
"""

from __future__ import annotations

import io
import logging
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from kiosk.keepsake.brand import NO_FRAME, BrandFrame
from kiosk.types import FrameBGR, SwappedFace

log = logging.getLogger(__name__)

#: Frames a second kept in the ring (and played back).
CLIP_FPS = 12.0
#: The clip's length: the last this many seconds before the still.
CLIP_SECONDS = 2.5
#: Frames in the ring are downscaled to at most this wide (the camera's resolution capped).
CLIP_WIDTH_PX = 480
#: The boomerang GIF's width (a GIF is far larger than the MP4 for the same pixels).
GIF_WIDTH_PX = 320
#: The ring's memory bound (frames and crops); the oldest frames go first.
RING_MAX_MB = 16.0
#: A clip of fewer frames than this (the booth had just started) is not made.
MIN_FRAMES = 6
#: libx264's quality (constant rate factor: lower is better and larger) and speed preset.
CRF = 23
PRESET = "veryfast"
#: The files of a clip, by suffix, with their content type.
CLIP_KINDS = {"mp4": "video/mp4", "gif": "image/gif"}
MISSING_ENCODER = (
    "keepsake: keepsake.clip needs PyAV (its H.264 encoder): pip install 'faceswap-kiosk[clip]' "
    "into the kiosk's venv (scripts/setup.sh does); the kiosk offers still photos only"
)


def encoder_problem() -> str:
    """ "" when the MP4 encoder is there, else one line saying how to install it."""
    try:
        import av

        av.codec.Codec("libx264", "w")
    except Exception:  # noqa: BLE001 - not installed, or a build without libx264
        return MISSING_ENCODER
    return ""


@dataclass(frozen=True)
class ClipFrame:
    """One frame of the ring: the downscaled picture and the swapped crops still to paste on it
    (their affines map the small frame's pixels to the crop's)."""

    frame_bgr: FrameBGR
    faces: tuple[SwappedFace, ...] = ()

    @property
    def nbytes(self) -> int:
        crops = sum(f.crop_bgr.nbytes + (f.alpha.nbytes if f.alpha is not None else 0) for f in self.faces)
        return int(self.frame_bgr.nbytes) + crops


def small_frame(frame_bgr: FrameBGR, faces: Sequence[SwappedFace] | None, width_px: int) -> ClipFrame:
    """A private, downscaled copy of the picture on screen (at most ``width_px`` wide)."""
    h, w = frame_bgr.shape[:2]
    scale = min(1.0, width_px / w)
    size = (max(2, round(w * scale) // 2 * 2), max(2, round(h * scale) // 2 * 2))  # even: yuv420p
    sx, sy = size[0] / w, size[1] / h
    small = cv2.resize(frame_bgr, size, interpolation=cv2.INTER_AREA)
    to_full = np.array([[1 / sx, 0.0], [0.0, 1 / sy]])
    copies = []
    for f in faces or ():
        a = np.array(f.affine, np.float64)
        affine = np.hstack([a[:, :2] @ to_full, a[:, 2:]])  # small pixel → full pixel → crop
        alpha = None if f.alpha is None else f.alpha.copy()
        copies.append(SwappedFace(crop_bgr=f.crop_bgr.copy(), affine=affine, face=f.face, alpha=alpha))
    return ClipFrame(np.asarray(small, np.uint8), tuple(copies))


class ClipRing:
    """The last ``seconds`` of the screen at ``fps``, bounded to ``max_mb``; see the module
    docstring. :meth:`offer` is called by the render loop only; :meth:`snapshot` from any thread."""

    def __init__(
        self,
        fps: float = CLIP_FPS,
        seconds: float = CLIP_SECONDS,
        width_px: int = CLIP_WIDTH_PX,
        max_mb: float = RING_MAX_MB,
    ) -> None:
        self.fps = fps
        self.max_frames = max(1, round(fps * seconds))
        self.width_px = width_px
        self.max_bytes = int(max_mb * 1_000_000)
        self._frames: deque[ClipFrame] = deque()
        self._bytes = 0
        self._next = 0.0  # monotonic time of the next frame taken
        self._lock = threading.Lock()

    def offer(self, now: float, shown: Callable[[], tuple[Any, Any] | None]) -> bool:
        """Take the picture on screen (``shown()``: frame and crops) when one is due; True if taken."""
        if now < self._next:
            return False
        picture = shown()
        if picture is None:
            return False
        self._next = max(self._next + 1.0 / self.fps, now)  # steady, no burst after a stall
        self.add(small_frame(picture[0], picture[1], self.width_px))
        return True

    def add(self, frame: ClipFrame) -> None:
        with self._lock:
            self._frames.append(frame)
            self._bytes += frame.nbytes
            while len(self._frames) > self.max_frames or (self._bytes > self.max_bytes and self._frames):
                self._bytes -= self._frames.popleft().nbytes

    def snapshot(self) -> list[ClipFrame]:
        """The frames in the ring, oldest first (the ring's own: nothing writes into them)."""
        with self._lock:
            return list(self._frames)

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._frames)


def composite_frames(frames: Sequence[ClipFrame], brand: BrandFrame = NO_FRAME) -> list[FrameBGR]:
    """Each frame with its crops pasted (the still's paste-back) and the brand frame drawn."""
    from kiosk.inference.paste import PasteBack  # numba kernels: imported on the worker thread

    paste = PasteBack()
    out = []
    for f in frames:
        bgr = f.frame_bgr.copy()
        for face in f.faces:
            paste.paste(bgr, face.crop_bgr, face.affine, face.alpha)
        out.append(brand.apply(bgr))
    return out


def encode_mp4(frames: Sequence[FrameBGR], fps: float = CLIP_FPS) -> bytes:
    """H.264 (yuv420p, plays on any phone) in an MP4 with its index first; ImportError without PyAV."""
    import av

    h, w = frames[0].shape[:2]
    with tempfile.TemporaryDirectory(prefix="kiosk-clip-") as tmp:  # +faststart rewrites the file
        path = Path(tmp) / "clip.mp4"
        with av.open(str(path), "w", format="mp4", options={"movflags": "+faststart"}) as out:
            stream: Any = out.add_stream("libx264", rate=round(fps))
            stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
            stream.options = {"crf": str(CRF), "preset": PRESET}
            stream.codec_context.thread_count = 1  # a booth has few cores: the render loop's first
            for bgr in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(bgr, format="bgr24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        return path.read_bytes()


def encode_gif(frames: Sequence[FrameBGR], fps: float = CLIP_FPS, width_px: int = GIF_WIDTH_PX) -> bytes:
    """A boomerang (forward, then backward) that loops forever, ``width_px`` wide, 128 colours."""
    from PIL import Image

    h, w = frames[0].shape[:2]
    size = (min(w, width_px), max(1, round(h * min(w, width_px) / w)))
    images = [
        Image.fromarray(
            np.ascontiguousarray(cv2.resize(f, size, interpolation=cv2.INTER_AREA)[:, :, ::-1])
        ).quantize(colors=128, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
        for f in frames
    ]
    loop = images + images[-2:0:-1]
    buf = io.BytesIO()
    loop[0].save(buf, format="GIF", save_all=True, append_images=loop[1:], duration=round(1000 / fps), loop=0)
    return buf.getvalue()


def build_clip(
    frames: Sequence[ClipFrame], brand: BrandFrame = NO_FRAME, fps: float = CLIP_FPS
) -> dict[str, bytes]:
    """The clip's files (``{"mp4": ..., "gif": ...}``) of the ring's ``frames``; {} when there are
    fewer than :data:`MIN_FRAMES` (nothing worth a clip). ImportError without PyAV."""
    if len(frames) < MIN_FRAMES:
        return {}
    size = frames[-1].frame_bgr.shape
    bgr = composite_frames([f for f in frames if f.frame_bgr.shape == size], brand)  # a resize: the last's
    return {"mp4": encode_mp4(bgr, fps), "gif": encode_gif(bgr, fps)}


@dataclass
class ClipCounts:
    made: int = 0  # clips stored beside their photo
    failed: int = 0  # not made: the encoder failed, the store was full, the photo already gone


#: Stores a clip's files beside the photo of a token (the keepsake service's ``keep_clip``).
KeepClip = Callable[[str, dict[str, bytes]], object]


class ClipMaker:
    """``keepsake.clip``: the ring the render loop feeds and the background thread that builds and
    keeps a clip for each kept photo. Its thread runs at a lower priority than the render loop
    (Linux ``nice`` is per thread); one clip at a time, a second waits for the first."""

    def __init__(
        self, ring: ClipRing | None = None, counts: ClipCounts | None = None, nice: int = 10
    ) -> None:
        self.ring = ring or ClipRing()
        self.counts = counts or ClipCounts()  # the owner's: totals outlive a maker a reload replaced
        self._nice = nice
        self._executor: Any = None
        self._jobs: list[Any] = []

    def make(self, token: str, frames: Sequence[ClipFrame], brand: BrandFrame, keep: KeepClip) -> Any:
        """Build the clip of ``frames`` for the photo of ``token`` in the background; the future."""
        import concurrent.futures as cf

        if self._executor is None:
            self._executor = cf.ThreadPoolExecutor(1, "keepsake-clip", initializer=self._lower_priority)
        job = self._executor.submit(self._make, token, list(frames), brand, keep)
        self._jobs = [j for j in self._jobs if not j.done()] + [job]
        return job

    def _lower_priority(self) -> None:
        import os

        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self._nice)
        except (OSError, AttributeError) as exc:
            log.debug("keepsake: the clip thread stays at the kiosk's priority: %s", exc)

    def _make(self, token: str, frames: list[ClipFrame], brand: BrandFrame, keep: KeepClip) -> bool:
        from kiosk.keepsake.privacy import photo_id

        try:
            files = build_clip(frames, brand, self.ring.fps)
            if not files:
                log.info("keepsake: no clip for photo %s (only %d frames yet)", photo_id(token), len(frames))
                return False
            keep(token, files)
        except Exception as exc:  # noqa: BLE001 - the still is kept: one line, no traceback
            self.counts.failed += 1
            log.error(
                "keepsake: clip of photo %s not made: %s",
                photo_id(token),
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
            return False
        self.counts.made += 1
        log.info(
            "keepsake: clip of photo %s kept (%d frames, %s)",
            photo_id(token),
            len(frames),
            ", ".join(f"{k} {len(v) // 1000} kB" for k, v in files.items()),
        )
        return True

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the clips in progress (tests, a clean exit); True when none is left."""
        import concurrent.futures as cf

        _, pending = cf.wait(self._jobs, timeout_s)
        return not pending

    def close(self) -> None:
        """Drop the ring; a clip in progress finishes (or finds its photo gone), none starts."""
        self.ring.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
