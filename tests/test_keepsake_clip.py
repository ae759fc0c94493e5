"""keepsake.clip: the ring of the screen's last seconds (bounded), the MP4 and GIF built from it, the
store keeping them beside the photo and deleting them with it, the page linking both over a real
server on loopback, and the kiosk's host making a clip of every kept photo (off by default: no ring,
no files). The encoding tests need PyAV (the extra ``clip``) and skip without it."""

from __future__ import annotations

import http.client
import os
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from net_helpers import free_port

from kiosk.config import KeepsakeConfig, parse_config
from kiosk.keepsake.clip import (
    CLIP_WIDTH_PX,
    MISSING_ENCODER,
    ClipRing,
    build_clip,
    encoder_problem,
    small_frame,
)
from kiosk.keepsake.process import StoreMirror
from kiosk.keepsake.server import KeepsakeServer, RateLimiter, byte_range
from kiosk.keepsake.store import Found, KeepsakeError, KeepsakeStore, StoreLimits
from kiosk.types import Face, SwappedFace

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40 + b"\xff\xd9"
#: Without PyAV the encoding tests skip, except in CI (``CI=true``: setup.sh installs it), where they fail.
needs_encoder = pytest.mark.skipif(
    bool(encoder_problem()) and os.environ.get("CI", "").lower() in ("", "0", "false", "no"),
    reason=MISSING_ENCODER,
)
GREY, RED = 90, (0, 0, 230)


def _face() -> Face:
    return Face(box_xyxy=np.array([0, 0, 1, 1], np.float32), score=1.0, kps=np.zeros((5, 2), np.float32))


def _picture(i: int, w: int = 1280, h: int = 720) -> tuple[np.ndarray, tuple[SwappedFace, ...]]:
    """A grey camera frame and one swapped face (a red 128 px crop) the GPU would paste on it, a
    little further right in each frame: the swap is only in the crop, as on screen."""
    frame = np.full((h, w, 3), GREY, np.uint8)
    crop = np.zeros((128, 128, 3), np.uint8)
    crop[:] = RED
    x0, y0, side = 400 + 2 * i, 200, 320  # the face's box in the frame: side px map to the 128 px crop
    s = 128 / side
    affine = np.array([[s, 0, -x0 * s], [0, s, -y0 * s]], np.float64)
    return frame, (SwappedFace(crop_bgr=crop, affine=affine, face=_face()),)


def _ring_of(n: int, ring: ClipRing | None = None) -> ClipRing:
    ring = ring or ClipRing()
    for i in range(n):
        ring.offer(i / ring.fps, lambda i=i: _picture(i))  # type: ignore[misc]
    return ring


# -- the ring ---------------------------------------------------------------------------------
def test_the_ring_keeps_the_last_seconds_downscaled_at_its_rate() -> None:
    ring, shown = ClipRing(fps=12.0, seconds=2.5), _picture(0, 960, 540)
    taken = sum(ring.offer(k / 60.0, lambda: shown) for k in range(240))  # 4 s at 60 Hz
    assert taken == 48  # one frame in five at 60 Hz: 12 a second
    frames = ring.snapshot()
    assert len(frames) == 30 == ring.max_frames  # the last 2.5 s only
    assert frames[0].frame_bgr.shape == (270, CLIP_WIDTH_PX, 3)  # 960x540 capped to 480 wide
    assert ring.offer(1000.0, lambda: None) is False and len(ring) == 30  # nothing on screen yet


def test_the_ring_is_bounded_in_memory_and_copies_what_it_keeps() -> None:
    ring = ClipRing(max_mb=2.0)
    shown = _picture(0, 1920, 1080)
    for i in range(40):
        ring.offer(float(i), lambda: shown)
    one = ring.snapshot()[0].nbytes
    assert ring.nbytes <= 2_000_000 and len(ring) == 2_000_000 // one  # the oldest went first
    shown[0][:] = 0  # the triple buffer's slot is written again: the ring's copies stay
    shown[1][0].crop_bgr[:] = 0
    kept = ring.snapshot()[-1]
    assert kept.frame_bgr.max() == GREY and kept.faces[0].crop_bgr.max() == 230


def test_a_small_frame_pastes_the_face_where_the_full_frame_does() -> None:
    from kiosk.keepsake.clip import composite_frames
    from kiosk.keepsake.still import Picture, composite

    frame, faces = _picture(0)
    full = composite(Picture.copy_of(frame, faces))
    small = composite_frames([small_frame(frame, faces, 480)])[0]
    ref = cv2.resize(full, (480, 270), interpolation=cv2.INTER_AREA)
    red_full, red_small = ref[:, :, 2] > 160, small[:, :, 2] > 160
    assert red_small.sum() > 1000
    assert (red_full ^ red_small).sum() < 0.05 * red_full.sum()  # the same place, to a pixel's edge


# -- the encoding -----------------------------------------------------------------------------
@needs_encoder
def test_a_clip_from_the_ring_decodes_with_opencv_to_20_frames_showing_the_swap(tmp_path: Path) -> None:
    files = build_clip(_ring_of(40).snapshot())
    assert set(files) == {"mp4", "gif"}
    path = tmp_path / "clip.mp4"
    path.write_bytes(files["mp4"])
    frames = _decode(path)
    assert len(frames) >= 20 and frames[0].shape == (270, 480, 3)
    cap = cv2.VideoCapture(str(path))
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(12, abs=0.5)
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode()
    assert fourcc in ("avc1", "h264", "H264")  # H.264: plays on any phone
    for f in frames:
        assert _is_red(f[110, 200]) and _is_grey(f[10, 10])  # the swapped face, the camera's grey
    assert _red_column(frames[-1]) > _red_column(frames[0])  # it moves: frames in order
    gif = tmp_path / "clip.gif"
    gif.write_bytes(files["gif"])
    from PIL import Image

    with Image.open(gif) as im:
        n = im.n_frames
        assert im.info.get("loop") == 0 and n == 2 * 30 - 2  # a boomerang: forward, then back
        assert im.size == (320, 180)
        im.seek(n // 2 - 1)
        middle = np.asarray(im.convert("RGB"))[:, :, ::-1]
    assert _is_red(middle[74, 133])  # the face in the GIF too


@needs_encoder
def test_too_few_frames_make_no_clip() -> None:
    assert build_clip(_ring_of(3).snapshot()) == {}


def _decode(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            return frames
        frames.append(f)


def _is_red(px: np.ndarray) -> bool:
    return bool(px[2] > 170 and px[0] < 60 and px[1] < 60)


def _is_grey(px: np.ndarray) -> bool:
    return bool(np.all(np.abs(px.astype(int) - GREY) < 12))


def _red_column(f: np.ndarray) -> float:
    return float(np.nonzero((f[:, :, 2] > 170).any(axis=0))[0].mean())


# -- the store --------------------------------------------------------------------------------
CLIP = {"mp4": b"\x00\x00\x00\x20ftypisom" + b"m" * 5000, "gif": b"GIF89a" + b"g" * 3000}
CLIP_BYTES = sum(len(v) for v in CLIP.values())


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def _files(folder: Path) -> list[str]:
    return sorted(p.suffix for p in folder.iterdir() if not p.name.startswith("."))


def test_the_store_keeps_a_clip_beside_its_photo_and_deletes_it_with_it(tmp_path: Path) -> None:
    clock = Clock()
    store = KeepsakeStore(tmp_path / "k", StoreLimits(900, 50, 200), clock).open()
    rec = store.add(JPEG)
    clip = store.add_clip(rec.token, CLIP)
    assert clip.clips == ("mp4", "gif") and _files(store.folder) == [".gif", ".jpg", ".mp4"]
    assert store.total_bytes() == len(JPEG) + CLIP_BYTES == clip.size_bytes
    assert store.read(rec.token, "mp4") == (store.lookup(rec.token), CLIP["mp4"])
    assert (store.folder / f"{rec.token}.gif").stat().st_mode & 0o777 == 0o600
    clock.t += 901  # the photo's time-to-live: the clip goes with it
    store.sweep()
    assert _files(store.folder) == [] and store.total_bytes() == 0
    assert store.read(rec.token, "gif")[0].found is Found.GONE
    other = store.add(JPEG)
    store.add_clip(other.token, CLIP)
    store.discard(other.token)  # a QR code withdrawn
    assert _files(store.folder) == []
    with pytest.raises(KeepsakeError, match="its photo was deleted"):
        store.add_clip(other.token, CLIP)
    assert _files(store.folder) == []
    third = store.add(JPEG)
    store.add_clip(third.token, CLIP)
    store.close()  # the kiosk exits: every file goes
    assert _files(store.folder) == []


def test_a_clip_counts_in_max_mb_and_is_refused_over_it(tmp_path: Path) -> None:
    store = KeepsakeStore(tmp_path / "k", StoreLimits(900, 50, 0.012), Clock()).open()
    rec = store.add(JPEG)  # 10 kB of 12
    with pytest.raises(KeepsakeError, match=r"keepsake.max_mb \(0.012\)"):
        store.add_clip(rec.token, CLIP)
    assert _files(store.folder) == [".jpg"] and store.total_bytes() == len(JPEG)
    assert store.read(rec.token, "mp4")[0].found is Found.UNKNOWN  # the photo stays, without a clip


def test_a_kept_folder_takes_its_clips_back_and_drops_orphans(tmp_path: Path) -> None:
    limits = StoreLimits(900, 50, 200, keep_on_disk=True)
    store = KeepsakeStore(tmp_path / "k", limits).open()
    rec = store.add(JPEG)
    store.add_clip(rec.token, CLIP)
    store.close()
    (store.folder / ("A" * 22 + ".mp4")).write_bytes(b"orphan")
    again = KeepsakeStore(tmp_path / "k", limits).open()
    (back,) = again.records()
    assert back.clips and set(back.clips) == {"mp4", "gif"} and back.size_bytes == len(JPEG) + CLIP_BYTES
    assert again.read(rec.token, "gif")[1] == CLIP["gif"]
    assert not (store.folder / ("A" * 22 + ".mp4")).exists()
    again.close()


def test_the_server_process_mirror_serves_the_clip_and_forgets_it_with_the_photo(tmp_path: Path) -> None:
    store = KeepsakeStore(tmp_path / "k", StoreLimits(900, 50, 200)).open()
    mirror = StoreMirror()
    store.listener = mirror.apply
    rec = store.add(JPEG)
    assert mirror.read(rec.token, "mp4")[0].found is Found.UNKNOWN  # not made yet
    store.add_clip(rec.token, CLIP)
    assert mirror.read(rec.token, "mp4")[1] == CLIP["mp4"]
    store.discard(rec.token)
    assert mirror.read(rec.token, "gif")[0].found is Found.GONE
    store.close()


# -- the page, over a real server on loopback -------------------------------------------------
@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[KeepsakeServer, KeepsakeStore, Clock]]:
    clock = Clock()
    store = KeepsakeStore(tmp_path / "k", StoreLimits(900, 50, 200), clock).open()
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{free_port()}", allow=["127.0.0.0/8"])
    srv = KeepsakeServer(store, cfg, clock=clock, limiter=RateLimiter(burst=1000, per_s=1000)).start()
    yield srv, store, clock
    srv.stop()
    store.close()


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_page_links_the_mp4_and_the_gif_and_both_answer_200_then_410(served) -> None:  # type: ignore[no-untyped-def]
    srv, store, clock = served
    rec = store.add(JPEG)
    page = _get(srv.port, f"/p/{rec.token}")[2].decode()
    assert ".mp4" not in page and ".gif" not in page  # no clip (yet): the still only
    assert _get(srv.port, f"/p/{rec.token}.mp4")[0] == 404
    store.add_clip(rec.token, CLIP)
    status, headers, body = _get(srv.port, f"/p/{rec.token}")
    page = body.decode()
    assert status == 200 and "media-src 'self'" in headers["content-security-policy"]
    assert f"<video src=/p/{rec.token}.mp4 autoplay loop muted playsinline>" in page
    assert f"href=/p/{rec.token}.mp4 download=" in page and f"href=/p/{rec.token}.gif download=" in page
    assert f"<img src=/p/{rec.token}.jpg" in page  # the still as before
    for kind, ctype in (("mp4", "video/mp4"), ("gif", "image/gif")):
        status, headers, body = _get(srv.port, f"/p/{rec.token}.{kind}")
        assert (status, headers["content-type"], body) == (200, ctype, CLIP[kind])
        assert headers["cache-control"] == "no-store"
    status, headers, body = _get(srv.port, f"/p/{rec.token}.mp4", {"Range": "bytes=0-1"})  # a phone's player
    assert (status, body, headers["content-range"]) == (206, CLIP["mp4"][:2], f"bytes 0-1/{len(CLIP['mp4'])}")
    assert _get(srv.port, f"/p/{rec.token}.mp4", {"Range": "bytes=99999-"})[0] == 416
    assert srv.counts.clip_downloads == 2 and srv.counts.downloads == 0  # the probe of 2 bytes is none
    clock.t += 901  # the photo's time-to-live: page, still and clip go together
    for suffix in ("", ".jpg", ".mp4", ".gif"):
        assert _get(srv.port, f"/p/{rec.token}{suffix}")[0] == 410, suffix
    assert _files(store.folder) == []


def test_byte_range() -> None:
    assert byte_range("bytes=0-1", 10) == (0, 1)
    assert byte_range("bytes=5-", 10) == (5, 9)
    assert byte_range("bytes=-3", 10) == (7, 9)
    assert byte_range("bytes=0-99", 10) == (0, 9)
    for bad in ("bytes=10-", "bytes=-", "bytes=0-1,4-5", "items=0-1", "bytes=5-2"):
        assert byte_range(bad, 10) is None, bad


# -- the kiosk's host -------------------------------------------------------------------------
def test_clip_is_off_by_default_no_ring_no_files(tmp_path: Path) -> None:
    from kiosk.app.keepsake_host import KeepsakeHost

    assert KeepsakeConfig().clip is False
    booth = _Booth(tmp_path, clip=False)
    try:
        assert booth.host.clips is None
        booth.take()
        assert _files(booth.folder) == [".jpg"]
        assert booth.host.metrics()["clips_made"] == 0  # type: ignore[index]
    finally:
        booth.close()
    assert isinstance(booth.host, KeepsakeHost)


@needs_encoder
def test_with_clip_on_the_page_links_a_clip_of_the_swapped_screen(tmp_path: Path) -> None:
    booth = _Booth(tmp_path, clip=True)
    try:
        assert booth.host.clips is not None
        url = booth.take()
        assert booth.host.clips.wait(30)
        port = int(url.split(":")[2].split("/")[0])
        path = url.split(str(port), 1)[1]
        page = _get(port, path)[2].decode()
        assert f"{path}.mp4" in page and f"{path}.gif" in page
        status, _, mp4 = _get(port, f"{path}.mp4")
        assert status == 200 and _get(port, f"{path}.gif")[0] == 200
        (tmp_path / "got.mp4").write_bytes(mp4)
        frames = _decode(tmp_path / "got.mp4")
        assert len(frames) >= 20 and all(_is_red(f[110, 200]) for f in frames)  # the swapped face
        m = booth.host.metrics()
        assert m is not None and m["clips_made"] == 1 and m["clips_downloaded"] == 2
    finally:
        booth.close()
    assert _files(booth.folder) == []  # the clip went with the photo at exit


class _Booth:
    """A keepsake host with a real service (the web server in a thread) and a fake screen: the
    render loop's calls, frame by frame, at 60 Hz of a fake clock."""

    def __init__(self, tmp_path: Path, clip: bool) -> None:
        from kiosk.app.keepsake_host import KeepsakeHost
        from kiosk.keepsake.flow import FlowOptions, KeepsakeFlow
        from kiosk.keepsake.service import KeepsakeService

        cfg = parse_config(
            f'keepsake: {{enabled: true, listen: "127.0.0.1:{free_port()}", countdown_s: 1, show_s: 5, '
            f"clip: {str(clip).lower()}}}\n"
        )
        self.folder = tmp_path / "k"
        self.i = 0

        class Session:
            attract = False
            keepsake_options = None

        self.host = KeepsakeHost(Session(), self._shown)  # type: ignore[arg-type]
        self.host.service = KeepsakeService(cfg.keepsake, self.folder, separate_process=False).start()
        assert self.host.service.wait_ready()
        self.host.flow = KeepsakeFlow(FlowOptions.of(cfg.keepsake), self.host._keep)
        self.host._set_clip(cfg.keepsake.clip)
        self.t = 0.0

    def _shown(self):  # type: ignore[no-untyped-def]
        return _picture(self.i // 8)

    def frame(self, actions: tuple[str, ...] = ()) -> None:
        class Renderer:
            def set_frame(self, *_: object) -> None:
                pass

        self.i += 1
        self.t += 1 / 60
        self.host.step(actions, self.t, Renderer())

    def take(self) -> str:
        for _ in range(180):  # 3 s of live screen
            self.frame()
        self.frame(("keepsake",))
        deadline = time.monotonic() + 20
        flow = self.host.flow
        assert flow is not None
        while flow.phase.value != "show" and time.monotonic() < deadline:
            self.frame()
            time.sleep(0.002)
        assert flow.phase.value == "show"
        assert flow._saved is not None
        return flow._saved.url

    def close(self) -> None:
        self.host.close()


def test_clip_on_without_pyav_logs_one_line_and_keeps_stills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "av", None)  # PyAV not installed: `import av` fails
    with caplog.at_level("ERROR", logger="kiosk.app.keepsake_host"):
        booth = _Booth(tmp_path, clip=True)
    try:
        assert booth.host.clips is None  # no ring, no clip thread: stills only
        assert [r.getMessage() for r in caplog.records] == [MISSING_ENCODER]
        booth.take()
        assert _files(booth.folder) == [".jpg"]
    finally:
        booth.close()
