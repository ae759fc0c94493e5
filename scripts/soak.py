#!/usr/bin/env python3
"""Soak test: run the kiosk headless for a long time and watch memory and frame rate.

A booth runs 10+ hours, so resident memory must be flat after warm-up. This starts
``kiosk run --headless --seconds S --stats-json P --stats-interval I`` as a subprocess, samples its
RSS, thread count and open file descriptors from ``/proc/<pid>`` every ``--every`` seconds, reads the
fps the kiosk writes to the stats file, prints a table as it goes and a summary at the end:
RSS at start, after warm-up and at the end, the RSS slope after warm-up (MB/h, least squares),
and fps min/mean/max. Exit status 1 when the slope exceeds ``--max-slope-mb-h``, the fps drops
below ``--min-fps``, or the kiosk dies early.

    .venv/bin/python scripts/soak.py --config configs/demo.yaml --minutes 20
    .venv/bin/python scripts/soak.py --config my.yaml --minutes 600 --every 60 --csv soak.csv

Fault mode (``--faults``): the harness builds its own booth in a temp folder (stand-in models from
``kiosk.tools.standins``, one face photo, a looping 640x360 video with two white-square "faces"
and a 6-bit frame counter), runs ``kiosk run --headless --screenshot P --screenshot-every 0.5`` and,
once the swap is on screen, injects a fault every ``--fault-every`` seconds, cycling through

- ``source_gone``: the video file renamed away for 3 s, then back;
- ``bad_photos``: random bytes, a truncated JPEG, a zero-byte and a half PNG added to the faces
  folder, removed half a period later;
- ``config_churn``: the YAML rewritten with a harmless change; every second time first half of it
  (invalid), completed 1.5 s later;
- ``model_errors``: for 4 s, ``--error-rate`` of the ONNX Runtime calls raise ``Fail``;
- ``hung_call``: once per run, one call blocks for ``--hang-s`` seconds;
- ``bomb_photo``: a decompression bomb (a 30000x30000 progressive JPEG of a few hundred bytes,
  :func:`bomb_jpeg`) added to the faces folder, removed half a period later;
- ``full_cache_disk``: the booth's cache folder (the face latents and ``NUMBA_CACHE_DIR``) is a
  16 MB tmpfs the harness mounts (root only; elsewhere the kind is skipped with a note); the fault
  fills it to the last byte and adds a new good photo (its latent cannot be cached), then frees
  the space and removes the photo half a period later.
- ``slow_stage``: for up to 8 s every swapper call takes ``--slow-s`` (3 s) longer, so a frame of
  the two faces takes longer than ``processing.stall_s``; every call returns, so nothing may be
  abandoned (the run fails when more threads were abandoned than calls hung).

Model faults are injected by ``scripts/soak_inject.py``, loaded into the child as ``sitecustomize``
(it wraps ``InferenceSession.run``/``run_with_iobinding`` as a JSON control file says); the
kiosk has no hook for it. Each screenshot counts as "swap on" when both face squares carry the
stand-in swapper's tint and the frame counter moved since the previous one (a frozen picture is not
live). Each fault opens an outage window from the fault to the end of its expected recovery
(``ALLOWANCE_S`` below, per kind); the share of screenshots showing the swap outside those windows,
from the first swapped screenshot on, must reach ``--min-swap-share``. The summary also gives RSS,
threads and fds at start and end, the RSS slope after ``--warmup``, crashes (kiosk exit) and the
share inside the windows by kind (for information). Exit 1 on a crash, an RSS slope above
``--max-slope-mb-h``, or a share below ``--min-swap-share``.

    .venv/bin/python scripts/soak.py --faults --minutes 5 --fault-every 10 --warmup 60 --json f.json

Real window (``--faults --window``): the same booth in a real glfw window (on ``--display``, else
on a private ``Xvfb`` the harness starts, else on ``$DISPLAY`` where Xvfb is not installed), with
four face photos instead of one, staff face keys (``pick_face_1..9``, next/prev) pressed into the
window with ``xdotool key --window`` in bursts every ``--key-every`` seconds for the whole run, and
one more fault kind cycled:

- ``faces_churn``: three more good photos added, then the photos under the selection removed and
  put back (half a period later), while the keys keep coming.

    .venv/bin/python scripts/soak.py --faults --window --minutes 30 --fault-every 10 --json w.json

Keepsakes on (``--keepsakes``): the booth with ``keepsake.enabled: true`` on a free loopback port
(``countdown_s`` 1, ``show_s`` 4); with ``--window`` the keepsake key (Enter) is pressed every
``--keepsake-every`` seconds (each photo opens a ``keepsake_photo`` window: the still and its QR code
are not the live swap), the QR code is read off the screenshots and the photo fetched as a phone
would (``<url>.jpg`` on 127.0.0.1, 5 s timeout, once per token). Four kinds join the cycle:

- ``server_kill``: ``kill -9`` of the keepsake server (the kiosk's child process);
- ``server_stop``: ``kill -STOP`` of the server for 3 s, then ``-CONT``;
- ``keepsake_dir_gone``: the booth's ``keepsakes`` folder removed;
- ``stray_signal``: SIGUSR1, then SIGHUP next time, to the kiosk: it must keep running.

The summary adds photos taken / fetched OK / refused, the kiosk's keepsake counts and
``server_up`` from the stats JSON, and the tokens read from QR codes that the kiosk's log shows
(any: exit 1).

    .venv/bin/python scripts/soak.py --faults --window --keepsakes --minutes 30 --fault-every 10
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Sample:
    t_s: float
    rss_mb: float
    threads: int
    fds: int
    fps_render: float | None
    fps_capture: float | None
    fps_processing: float | None
    frames_rendered: int | None
    source_reconnects: int | None
    processing_restarts: int | None


def read_proc(pid: int) -> tuple[float, int, int] | None:
    """(RSS MiB, threads, open fds) of ``pid``; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    return rss_kb / 1024, int(fields.get("Threads", "0").strip()), fds


def read_stats(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}  # not written yet, or caught mid-rewrite


def _num(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) in value per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600


def summarise(samples: list[Sample], warmup_s: float) -> dict[str, Any]:
    after = [s for s in samples if s.t_s >= warmup_s] or samples[-1:]
    fps = [s.fps_render for s in after if s.fps_render is not None]
    return {
        "duration_s": round(samples[-1].t_s, 1) if samples else 0.0,
        "samples": len(samples),
        "rss_start_mb": round(samples[0].rss_mb, 1) if samples else None,
        "rss_after_warmup_mb": round(after[0].rss_mb, 1) if after else None,
        "rss_end_mb": round(samples[-1].rss_mb, 1) if samples else None,
        "rss_max_mb": round(max(s.rss_mb for s in samples), 1) if samples else None,
        "rss_slope_mb_per_h": round(slope_per_hour([(s.t_s, s.rss_mb) for s in after]), 2),
        "threads_start_end": (after[0].threads, samples[-1].threads) if samples else None,
        "fds_start_end": (after[0].fds, samples[-1].fds) if samples else None,
        "fps_render_min": round(min(fps), 2) if fps else None,
        "fps_render_mean": round(sum(fps) / len(fps), 2) if fps else None,
        "fps_render_max": round(max(fps), 2) if fps else None,
    }


def _fmt(v: float | None, spec: str = "6.1f") -> str:
    return format(v, spec) if v is not None else "     -"


# -- fault mode (--faults) ---------------------------------------------------------------------------

#: Fault kinds, in the order they are cycled through.
FAULT_KINDS = (
    "source_gone",
    "bad_photos",
    "bomb_photo",
    "config_churn",
    "model_errors",
    "full_cache_disk",
    "slow_stage",
    "hung_call",  # last: once injected it leaves the cycle, which then goes on with the others
)
#: ``--window``: the kinds cycled by default (face keys are pressed all the time besides).
WINDOW_FAULT_KINDS = (*FAULT_KINDS[:2], "faces_churn", *FAULT_KINDS[2:])
#: ``--keepsakes``: the keepsake server's fault kinds, added to the cycle.
KEEPSAKE_FAULT_KINDS = ("server_kill", "server_stop", "keepsake_dir_gone", "stray_signal")

#: Kinds injected once per run: one hung call; the test-only swap_off.
ONCE = ("hung_call", "swap_off")

#: Seconds after a fault (or the end of a fault that lasts) in which the swap may be off screen;
#: the share of time the swap is on screen is measured outside these windows.
ALLOWANCE_S = {
    "source_gone": 4.0,  # file back → next reconnect try (source.reconnect_max_s 2 s) + reopen
    "bad_photos": 2.0,  # each of: photos added, photos removed (a library rescan)
    "config_churn": 3.0,  # the watcher polls every 1 s; a rebuild, if any, must be quick
    "model_errors": 5.0,  # after the error burst: one rebuild with back-off
    "hung_call": 10.0,  # processing.stall_s (5 s) to abandon the call + a rebuild
    "swap_off": 3.0,  # test-only: a config churn that disables processing for good
    "faces_churn": 2.0,  # --window: each of the library changes (faces.rescan_s 2 s)
    "bomb_photo": 2.0,  # refused from its header at the next library rescan: never off screen
    "full_cache_disk": 2.0,  # the new photo's latent is not cached: the swap goes on
    # The picture renews once a slow frame (two faces x --slow-s); after it, the next frame
    "slow_stage": 3.0,
    # --keepsakes: the keepsake server is a child process; the swap must not notice its faults
    "server_kill": 2.0,  # kill -9 of the server child: restarted, the render loop goes on
    "server_stop": 2.0,  # kill -STOP for a few seconds, then -CONT
    "keepsake_dir_gone": 2.0,  # the keepsake folder removed: recreated at the next photo
    "stray_signal": 2.0,  # SIGUSR1 / SIGHUP to the kiosk: it must keep running
    # a keepsake taken (--keepsakes --window): the countdown, then the frozen still and its QR code
    "keepsake_photo": 3.0,
}

#: Where the harness's synthetic booth shows its two "faces" (white squares the stand-in
#: detector finds) and a 6-bit frame counter (16 px blocks) that tells a frozen picture.
FACE_SQUARES = ((128, 160, 64), (416, 160, 64))
MARKER_XY = (640 - 8 - 6 * 20, 360 - 24)
VIDEO_FRAMES = 64
SIZE = (640, 360)


def _marker_blocks() -> list[tuple[int, int]]:
    x0, y0 = MARKER_XY
    return [(x0 + 20 * b, y0) for b in range(6)]


def make_scene(i: int) -> Any:
    from kiosk.tools.standins import white_square_frame

    frame = white_square_frame(SIZE[1], SIZE[0], FACE_SQUARES)
    for b, (x, y) in enumerate(_marker_blocks()):
        frame[y : y + 16, x : x + 16] = 170 if (i >> b) & 1 else 20
    return frame


def classify_shot(bgr: Any) -> tuple[bool, int]:
    """(the stand-in swap's tint is on every face square, the frame counter) of a screenshot."""
    import numpy as np

    tinted = True
    for x, y, side in FACE_SQUARES:
        inner = bgr[y + 8 : y + side - 8, x + 8 : x + side - 8].reshape(-1, 3).astype(np.float32)
        mean = inner.mean(axis=0)
        dev = float(np.abs(255.0 - mean).mean())
        # White (pass-through) reads ~255; the stand-in swapper tints it to about (198, 226, 189).
        tinted = tinted and 20.0 < dev < 110.0 and float(mean.max() - mean.min()) > 12.0
    counter = 0
    for b, (x, y) in enumerate(_marker_blocks()):
        if float(bgr[y + 4 : y + 12, x + 4 : x + 12].mean()) > 95.0:
            counter |= 1 << b
    return tinted, counter


BOOTH_YAML = """\
# written by scripts/soak.py --faults (churn {churn})
source: {{kind: video, path: scene.mp4, mirror: false, reconnect_initial_s: 0.5, reconnect_max_s: 2}}
display: {{width: {w}, height: {h}, vsync: false, max_fps: 30, title: {title}}}
processing: {{enabled: {enabled}, tracking: false}}
models: {{dir: models, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null,
          providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache}}
ui: {{attract_after_s: 0, carousel: false, banner: ""}}
controls: {{gamepad_enabled: false, repeat_interval_s: {repeat}}}
overlay: {{debug: false, status_line: false}}
logging: {{level: INFO}}
"""


#: The window title (``--window`` finds the kiosk's window by it).
TITLE = "faceswap-kiosk-soak"


def booth_yaml(churn: int, enabled: bool = True, keepsake_port: int | None = None) -> str:
    """The soak booth's YAML; ``keepsake_port`` (``--keepsakes``) turns keepsakes on, on loopback."""
    text = BOOTH_YAML.format(
        churn=churn,
        w=SIZE[0],
        h=SIZE[1],
        title=TITLE,
        enabled=str(enabled).lower(),
        repeat=0.2 + 0.01 * (churn % 2),
    )
    if keepsake_port is not None:
        url = f"http://127.0.0.1:{keepsake_port}"
        text += (
            f'keepsake: {{enabled: true, listen: "127.0.0.1:{keepsake_port}", url_base: "{url}", '
            f"countdown_s: {KEEPSAKE_COUNTDOWN_S}, show_s: {KEEPSAKE_SHOW_S}, takes_per_visitor: 0}}\n"
        )
    return text


#: --keepsakes: the booth's keepsake countdown and how long the still + QR code stay on screen.
KEEPSAKE_COUNTDOWN_S = 1
KEEPSAKE_SHOW_S = 4.0


def tokens_in_log(log_text: str, tokens: set[str]) -> list[str]:
    """The keepsake tokens (read off QR codes) that the kiosk's log shows: must be none."""
    return sorted(t for t in tokens if t and t in log_text)


def free_loopback_port() -> int:
    """A free TCP port on 127.0.0.1 for the soak booth's keepsake server."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (the keepsake server is the kiosk's child process)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return sorted(set(out))


def server_pid(kiosk_pid: int) -> int | None:
    """The keepsake server's process among the kiosk's children: the one multiprocessing's spawn
    started (``spawn_main`` in its command line). The kiosk's other child, multiprocessing's
    resource tracker, is started first; killing it (what taking the first child did) leaves the
    server up and the fault a no-op."""
    for pid in child_pids(kiosk_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            return pid
    return None


#: Face photos: a white square each (64 px on the detector's 64 px grid: one face per photo), in
#: its own place, so each has its own embedding. ``ann`` is the booth's; ``--window`` adds the rest.
PHOTO_SQUARES = {
    "ann": (64, 64, 64),
    "ben": (320, 64, 64),
    "cat": (448, 192, 64),
    "dan": (192, 192, 64),
    "eve": (64, 256, 64),
    "fay": (512, 64, 64),
    "gus": (256, 128, 64),
}
WINDOW_PHOTOS = ("ann", "ben", "cat", "dan")


def photo_png(name: str, squares: Mapping[str, tuple[int, int, int]] = PHOTO_SQUARES) -> bytes:
    """The face photo ``name`` of ``squares``: its white square on black, PNG."""
    import cv2

    from kiosk.tools.standins import white_square_frame

    ok, buf = cv2.imencode(".png", white_square_frame(360, 640, (squares[name],)))
    return bytes(buf) if ok else b""


def mount_tmpfs(folder: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` (``16m``) on ``folder``; False where that is not allowed (not root)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def bomb_jpeg(width: int = 30000, height: int = 30000) -> bytes:
    """A decompression bomb: a real progressive JPEG (Pillow, a solid colour) whose frame header
    claims ``width`` x ``height`` pixels, a few hundred bytes on disk. OpenCV's decoder holds the
    full-size coefficient buffer of a progressive JPEG even at 1/8 scale: 2.7 GB and 9 s for the
    default size (measured with the code before the decode budget)."""
    import io
    import struct

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 120, 80)).save(buf, "JPEG", progressive=True, quality=90)
    data = bytearray(buf.getvalue())
    i = 2
    while i + 4 <= len(data):
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker == 0xC2:  # SOF2, progressive: precision, height, width
            struct.pack_into(">HH", data, i + 5, height, width)
            return bytes(data)
        i += 2 + length
    raise AssertionError("Pillow wrote no progressive frame header")


def make_booth(
    folder: Path,
    photos: tuple[str, ...] = ("ann",),
    *,
    squares: Mapping[str, tuple[int, int, int]] = PHOTO_SQUARES,
    yaml: str | None = None,
) -> Path:
    """Stand-in models, face photos (``photos`` of ``squares``), a looping video with two faces and
    the YAML (``yaml``, default the soak's own), in ``folder``; returns the YAML's path."""
    import cv2

    from kiosk.tools.standins import make_all

    make_all(folder / "models")
    (folder / "faces").mkdir()
    for name in photos:
        (folder / "faces" / f"{name}.png").write_bytes(photo_png(name, squares))
    video = cv2.VideoWriter(str(folder / "scene.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 30, SIZE)
    for i in range(VIDEO_FRAMES):
        video.write(make_scene(i))
    video.release()
    (folder / "kiosk.yaml").write_text(booth_yaml(0) if yaml is None else yaml)
    return folder / "kiosk.yaml"


@dataclass
class Window:
    kind: str
    start: float  # unix seconds
    end: float


class Injector:
    """Starts each fault and schedules its end; records the outage windows."""

    def __init__(
        self,
        folder: Path,
        control: Path,
        period_s: float,
        hang_s: float,
        error_rate: float,
        slow_s: float = 3.0,
    ) -> None:
        self.folder = folder
        self.control = control
        self.period_s = period_s
        self.hang_s = hang_s
        self.slow_s = slow_s
        self.error_rate = error_rate
        self.counts: dict[str, int] = {}
        self.windows: list[Window] = []
        self.events: list[dict[str, Any]] = []
        self.pending: list[tuple[float, str, Any]] = []  # (unix time, label, action)
        self._ctl: dict[str, Any] = {}
        self._churn = 0
        self._bad_photo = 0
        self.cache_mounted = False  # the booth's cache folder is the harness's tmpfs (full_cache_disk)
        self.kiosk_pid: int | None = None  # --keepsakes: the kiosk, whose child is the keepsake server
        self.stop_s = 3.0  # server_stop: how long the server is kept stopped
        self.keepsake_port: int | None = None  # --keepsakes: config churn keeps the keepsake section

    def _write_control(self) -> None:
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._ctl))
        tmp.replace(self.control)

    def _later(self, delay: float, label: str, action: Any) -> None:
        self.pending.append((time.time() + delay, label, action))

    def _log(self, what: str) -> None:
        self.events.append({"t_unix": round(time.time(), 3), "event": what})
        print(f"soak: fault {what}", flush=True)

    def _window(self, kind: str, start: float, end: float) -> None:
        self.windows.append(Window(kind, start, end + ALLOWANCE_S[kind]))

    def tick(self) -> None:
        now = time.time()
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, label, action in due:
            action()
            self._log(label)

    def finish(self) -> None:
        """Undo whatever is still injected (the run is ending)."""
        for _, _label, action in sorted(self.pending, key=lambda p: p[0]):
            action()
        self.pending = []
        self._ctl = {}
        self._write_control()

    def inject(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        getattr(self, f"_{kind}")()
        self._log(f"{kind} #{self.counts[kind]}")

    # -- the kinds ---------------------------------------------------------------------------
    def _source_gone(self) -> None:
        video, away = self.folder / "scene.mp4", self.folder / "scene.mp4.away"
        start, down = time.time(), min(3.0, self.period_s * 0.5)
        video.rename(away)
        self._window("source_gone", start, start + down)
        self._later(down, "source_gone: video back", lambda: away.rename(video))

    def _bad_photos(self) -> None:
        import os as _os

        faces = self.folder / "faces"
        self._bad_photo += 1
        n = self._bad_photo
        good = (faces / "ann.png").read_bytes()
        bad = {
            faces / f"zz_random_{n}.jpg": _os.urandom(20_000),
            faces / f"zz_truncated_{n}.jpg": _jpeg_bytes()[:700],
            faces / f"zz_empty_{n}.png": b"",
            faces / f"zz_half_{n}.png": good[: len(good) // 2],
        }
        for path, data in bad.items():
            path.write_bytes(data)
        start = time.time()
        self._window("bad_photos", start, start)
        stay = self.period_s * 0.5

        def remove() -> None:
            for path in bad:
                path.unlink(missing_ok=True)
            self._window("bad_photos", time.time(), time.time())

        self._later(stay, "bad_photos: removed", remove)

    def _config_churn(self) -> None:
        self._churn += 1
        path = self.folder / "kiosk.yaml"
        text = booth_yaml(self._churn, keepsake_port=self.keepsake_port)
        start = time.time()
        if self._churn % 2:
            path.write_text(text)  # a harmless change (controls.repeat_interval_s)
            self._window("config_churn", start, start)
            return
        path.write_text(text[: len(text) // 2])  # an editor caught mid-save: invalid for a while
        done = min(1.5, self.period_s * 0.4)
        self._window("config_churn", start, start + done)
        self._later(done, "config_churn: file completed", lambda: path.write_text(text))

    def _model_errors(self) -> None:
        start, burst = time.time(), min(4.0, self.period_s * 0.6)
        self._ctl["errors"] = {"until": start + burst, "rate": self.error_rate}
        self._write_control()
        self._window("model_errors", start, start + burst)

    def _hung_call(self) -> None:
        start = time.time()
        self._ctl["hang"] = {"id": self.counts["hung_call"], "seconds": self.hang_s}
        self._write_control()
        self._window("hung_call", start, start)

        def release() -> None:
            self._ctl.pop("hang", None)
            self._write_control()

        self._later(self.hang_s + 1.0, "hung_call: released", release)

    def _slow_stage(self) -> None:
        """Every swapper call takes ``slow_s`` longer for a while: frames of two faces take longer
        than processing.stall_s, every call returns; the swap must stay (nothing abandoned)."""
        start, slow = time.time(), min(8.0, self.period_s * 0.8)
        self._ctl["slow"] = {"until": start + slow, "seconds": self.slow_s}
        self._write_control()
        # The swap stays, but the picture renews once a frame: an outage for the frozen-frame count.
        self._window("slow_stage", start, start + slow + 2 * self.slow_s)

        def done() -> None:
            self._ctl.pop("slow", None)
            self._write_control()

        self._later(slow, "slow_stage: back to speed", done)

    def _faces_churn(self) -> None:
        """Good photos added, then the ones staff are likely to have picked (the 3rd..) removed and
        put back half a period later; ``ann`` stays, so the library is never empty."""
        faces = self.folder / "faces"
        extra = ("eve", "fay", "gus")
        for name in extra:
            _write_atomically(faces / f"{name}.png", photo_png(name))
        start = time.time()
        self._window("faces_churn", start, start)
        gone = ("cat", "dan", *extra)

        def shrink() -> None:
            for name in gone:
                (faces / f"{name}.png").unlink(missing_ok=True)
            self._window("faces_churn", time.time(), time.time())

        def restore() -> None:
            for name in ("cat", "dan"):
                _write_atomically(faces / f"{name}.png", photo_png(name))
            self._window("faces_churn", time.time(), time.time())

        self._later(self.period_s * 0.25, "faces_churn: photos removed", shrink)
        self._later(self.period_s * 0.5, "faces_churn: photos back", restore)

    def _bomb_photo(self) -> None:
        bomb = self.folder / "faces" / f"zz_bomb_{self.counts['bomb_photo']}.jpg"
        _write_atomically(bomb, bomb_jpeg())
        start = time.time()
        self._window("bomb_photo", start, start)

        def remove() -> None:
            bomb.unlink(missing_ok=True)
            self._window("bomb_photo", time.time(), time.time())

        self._later(self.period_s * 0.5, "bomb_photo: removed", remove)

    def _full_cache_disk(self) -> None:
        cache = self.folder / "cache"
        if not self.cache_mounted:
            self._log("full_cache_disk: skipped (the cache folder is not a tmpfs: needs root to mount)")
            return
        filler = cache / "zz_filler.bin"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:  # to the last byte: ENOSPC for every write after this
            for size in (1 << 20, 4096, 1):
                try:
                    while os.write(fd, b"\0" * size):
                        pass
                except OSError:
                    pass
        finally:
            os.close(fd)
        photo = self.folder / "faces" / f"zz_new_{self.counts['full_cache_disk']}.png"
        _write_atomically(photo, photo_png("eve"))  # a new face whose latent cannot be cached
        start = time.time()
        stay = self.period_s * 0.5
        self._window("full_cache_disk", start, start + stay)

        def free() -> None:
            filler.unlink(missing_ok=True)
            photo.unlink(missing_ok=True)

        self._later(stay, "full_cache_disk: space freed, photo removed", free)

    def _swap_off(self) -> None:
        start = time.time()
        (self.folder / "kiosk.yaml").write_text(
            booth_yaml(self._churn, enabled=False, keepsake_port=self.keepsake_port)
        )
        self._window("swap_off", start, start)

    # -- the keepsake kinds (--keepsakes) -----------------------------------------------------

    def _server(self) -> int | None:
        return server_pid(self.kiosk_pid) if self.kiosk_pid else None

    def _server_kill(self) -> None:
        start, pid = time.time(), self._server()
        if pid is not None:
            _signal(pid, signal.SIGKILL)
        self._window("server_kill", start, start)

    def _server_stop(self) -> None:
        start, pid = time.time(), self._server()
        if pid is None:
            self._window("server_stop", start, start)
            return
        _signal(pid, signal.SIGSTOP)

        def resume() -> None:
            _signal(pid, signal.SIGCONT)
            self._window("server_stop", start, time.time())

        self._later(self.stop_s, "server_stop resumed", resume)

    def _keepsake_dir_gone(self) -> None:
        start = time.time()
        shutil.rmtree(self.folder / "keepsakes", ignore_errors=True)
        self._window("keepsake_dir_gone", start, start)

    def _stray_signal(self) -> None:
        start = time.time()
        if self.kiosk_pid:
            sig = signal.SIGUSR1 if self.counts["stray_signal"] % 2 else signal.SIGHUP
            _signal(self.kiosk_pid, sig)
        self._window("stray_signal", start, start)


def _signal(pid: int, sig: int) -> None:
    import contextlib

    with contextlib.suppress(OSError):  # already gone
        os.kill(pid, sig)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    tmp.replace(path)


#: X keysyms of the face keys of the default bindings (kiosk/bindings.py).
FACE_KEYS = (*(str(n) for n in range(1, 10)), "Right", "Left", "Next", "Prior", "n", "p")


class KeyPresser:
    """``--window``: bursts of random face keys pressed into the kiosk's window (``xdotool key
    --window``) every ``every_s`` seconds, on a thread; finds the window again when it is reopened."""

    def __init__(self, xdotool: str, env: dict[str, str], title: str, every_s: float, seed: int = 7) -> None:
        import random
        import threading

        self.xdotool, self.env, self.title, self.every_s = xdotool, env, title, every_s
        self.presses = 0
        self.failures = 0
        self.started = False
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keys", daemon=True)

    def start(self) -> None:
        self.started = True
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.started:
            self._thread.join(10)

    def _window(self) -> str:
        r = subprocess.run(
            [self.xdotool, "search", "--name", f"^{self.title}$"], env=self.env, capture_output=True, text=True,
            timeout=10,
        )  # fmt: skip
        ids = r.stdout.split()
        return ids[-1] if ids else ""

    def _run(self) -> None:
        wid = ""
        while not self._stop.wait(self.every_s):
            wid = wid or self._window()
            if not wid:
                continue
            burst = [self._rng.choice(FACE_KEYS) for _ in range(8)]
            try:
                subprocess.run(
                    [self.xdotool, "key", "--window", wid, "--delay", "30", *burst], env=self.env, check=True,
                    capture_output=True, timeout=30,
                )  # fmt: skip
                self.presses += len(burst)
            except (subprocess.SubprocessError, OSError):
                self.failures += 1
                wid = ""  # reopened (display change) or gone: look it up again


class Visitor:
    """``--keepsakes --window``: presses the keepsake key (Enter) every ``every_s`` seconds, reads the
    QR code off the screenshots, and fetches the photo as a phone would (loopback only, 5 s each)."""

    def __init__(self, keys: KeyPresser, port: int, every_s: float, injector: Injector) -> None:
        self.keys, self.port, self.every_s, self.injector = keys, port, every_s, injector
        self.taken = self.fetched = self.refused = 0
        self.tokens: set[str] = set()
        self._next = time.monotonic() + every_s

    def tick(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every_s
        window = self.keys._window()
        if not window:
            return
        r = subprocess.run(
            [self.keys.xdotool, "key", "--window", window, "Return"],
            env=self.keys.env, capture_output=True, timeout=10, check=False,
        )  # fmt: skip
        if r.returncode == 0:
            self.taken += 1
            start = time.time()
            self.injector._window("keepsake_photo", start, start + KEEPSAKE_COUNTDOWN_S + KEEPSAKE_SHOW_S)

    def see(self, img: Any) -> None:
        import cv2

        text, _, _ = cv2.QRCodeDetector().detectAndDecode(img)
        prefix = f"http://127.0.0.1:{self.port}/"
        if not text or not text.startswith(prefix):
            return
        token = text.rsplit("/", 1)[1]
        if token in self.tokens:
            return
        self.tokens.add(token)
        self.fetch(text)

    def fetch(self, url: str) -> None:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(url + ".jpg", timeout=5) as resp:  # noqa: S310 (loopback)
                ok = resp.status == 200 and resp.read(4)[:2] == b"\xff\xd8"
        except (urllib.error.URLError, OSError, ValueError):
            ok = False
        if ok:
            self.fetched += 1
        else:
            self.refused += 1


def start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    """A private Xvfb on a display number it picks itself (``-displayfd``); (process, ":N")."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp", "-noreset"],
        pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        raise RuntimeError("Xvfb did not start")
    return proc, f":{number}"


def _jpeg_bytes() -> bytes:
    import cv2

    from kiosk.tools.standins import white_square_frame

    ok, buf = cv2.imencode(".jpg", white_square_frame(360, 640, ((64, 64, 64),)))
    return bytes(buf) if ok else b""


def take_shot(
    img: Any,
    t_unix: float,
    shots: list[tuple[float, bool, int]],
    visitor: Visitor | None,
    misses: Path | None,
) -> bool:
    """Classify a new screenshot and add it to ``shots``; True when it shows the live swap. One that
    does not is kept in ``misses`` (``--keep-misses``) and handed to the visitor: a keepsake still
    with its QR code is frozen, and its card may leave a face square tinted (the visitor looked at
    untinted shots only, so it missed photos)."""
    tinted, counter = classify_shot(img)
    live = tinted and (not shots or counter != shots[-1][2])
    shots.append((t_unix, tinted, counter))
    if not live:
        if misses is not None:
            import cv2

            cv2.imwrite(str(misses / f"{t_unix:.3f}.png"), img)
        if visitor is not None:
            visitor.see(img)
    return live


def swap_share(shots: list[tuple[float, bool, int]], windows: list[Window]) -> dict[str, Any]:
    """Share of screenshots outside the outage windows that show the swap on a live picture.

    A screenshot counts as "swap on" when every face square carries the stand-in swap's tint
    and the frame counter moved since the previous screenshot (a frozen picture is not live).
    Measured from the first "swap on" screenshot (start-up and model warm-up excluded)."""
    live: list[tuple[float, bool]] = []
    prev: int | None = None
    for t, tinted, counter in shots:
        live.append((t, tinted and counter != prev))
        prev = counter
    first = next((t for t, on in live if on), None)
    if first is None:
        return {"share": 0.0, "samples": 0, "samples_on": 0, "first_swap_unix": None, "by_kind": {}}

    def inside(t: float) -> str | None:
        return next((w.kind for w in windows if w.start <= t < w.end), None)

    rest = [(t, on) for t, on in live if t >= first and inside(t) is None]
    by_kind: dict[str, list[bool]] = {}
    for t, on in live:
        kind = inside(t)
        if kind is not None:
            by_kind.setdefault(kind, []).append(on)
    first_fault = min((w.start for w in windows), default=None)
    before = [on for t, on in rest if first_fault is None or t < first_fault]
    n_on = sum(on for _, on in rest)
    return {
        "share": round(n_on / len(rest), 4) if rest else 0.0,
        "samples": len(rest),
        "samples_on": n_on,
        "share_before_first_fault": round(sum(before) / len(before), 4) if before else None,
        "samples_in_outages": sum(len(v) for v in by_kind.values()),
        "share_in_outages_by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())},
        "first_swap_unix": round(first, 3),
    }


def _tidy(tmp: Path, failures: list[str], keep: bool) -> None:
    """Remove the run's folder (the booth, the kiosk's log, the screenshots: megabytes a run) after a
    run that passed; keep it, and say where, after one that failed or with ``--keep-files``."""
    mounted = [str(p) for p in tmp.rglob("*") if p.is_dir() and os.path.ismount(p)]
    if failures or keep or mounted:  # a mount left behind: never empty it from here
        print(f"soak: the run's files are kept in {tmp}", flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def run_faults(args: argparse.Namespace) -> int:
    """``--faults``: the harness's own booth, faults injected on a schedule, the swap read from pixels."""
    import cv2

    default_kinds = WINDOW_FAULT_KINDS if args.window else FAULT_KINDS
    if args.keepsakes:
        default_kinds = (*default_kinds[:-1], *KEEPSAKE_FAULT_KINDS, default_kinds[-1])  # hung_call last
    fault_kinds = args.fault_kinds or ",".join(default_kinds)
    kinds = [k for k in fault_kinds.split(",") if k] if fault_kinds != "none" else []
    unknown = sorted(set(kinds) - set(ALLOWANCE_S))
    if unknown:
        print(f"soak: unknown fault kind(s) {', '.join(unknown)} (known: {', '.join(ALLOWANCE_S)})")
        return 2
    seconds = args.minutes * 60
    tmp = Path(tempfile.mkdtemp(prefix="kiosk-soak-faults-"))
    booth = tmp / "booth"
    booth.mkdir()
    port = free_loopback_port() if args.keepsakes else None
    yaml_text = booth_yaml(0, keepsake_port=port) if port is not None else None
    config = make_booth(booth, WINDOW_PHOTOS if args.window else ("ann",), yaml=yaml_text)
    inject_dir = tmp / "inject"
    inject_dir.mkdir()
    shutil.copy(ROOT / "scripts" / "soak_inject.py", inject_dir / "sitecustomize.py")
    control = tmp / "faults.json"
    control.write_text("{}")
    shot, stats_path, log_path = tmp / "live.png", tmp / "stats.json", tmp / "kiosk.log"
    paths = [str(inject_dir), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, KIOSK_SOAK_FAULTS=str(control), PYTHONPATH=os.pathsep.join(paths))
    cache_mounted = "full_cache_disk" in kinds and mount_tmpfs(booth / "cache", "16m")
    if cache_mounted:  # the kernel cache and the face latents on a disk the harness can fill
        env["NUMBA_CACHE_DIR"] = str(booth / "cache" / "numba")
    cmd = [
        sys.executable, "-m", "kiosk", "run", "--config", str(config), "--headless", "--seconds", f"{seconds:g}",
        "--stats-json", str(stats_path), "--stats-interval", "2", "--screenshot", str(shot),
        "--screenshot-every", f"{args.shot_every:g}",
    ]  # fmt: skip
    xvfb: subprocess.Popen[bytes] | None = None
    keys: KeyPresser | None = None
    if args.window:
        cmd.remove("--headless")
        xdotool = shutil.which("xdotool")
        if xdotool is None:
            print("soak: --window needs xdotool (apt-get install xdotool)")
            return 2
        display = args.display or ("" if shutil.which("Xvfb") else os.environ.get("DISPLAY", ""))
        if not display:
            if shutil.which("Xvfb") is None:
                print("soak: --window needs an X display: --display :N, $DISPLAY or Xvfb installed")
                return 2
            xvfb, display = start_xvfb()
        env["DISPLAY"] = display
        env.pop("WAYLAND_DISPLAY", None)
        keys = KeyPresser(xdotool, env, TITLE, args.key_every)
        print(f"soak: real window on DISPLAY={display}, face keys every {args.key_every:g} s", flush=True)
    print(f"soak: {' '.join(cmd)}\nsoak: booth {booth}, kiosk log {log_path}", flush=True)
    injector = Injector(booth, control, args.fault_every, args.hang_s, args.error_rate, args.slow_s)
    injector.cache_mounted = cache_mounted
    shots: list[tuple[float, bool, int]] = []
    samples: list[Sample] = []
    last_mtime: int | None = None
    misses = Path(args.keep_misses) if args.keep_misses else None
    if misses is not None:
        misses.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    injector.kiosk_pid = proc.pid
    injector.keepsake_port = port
    visitor = Visitor(keys, port, args.keepsake_every, injector) if keys is not None and port else None
    t0 = time.monotonic()
    next_sample, next_fault, cycle, finished = t0 + 2.0, None, 0, False
    try:
        while proc.poll() is None:
            now = time.monotonic()
            try:
                st = shot.stat()
            except FileNotFoundError:
                st = None
            if st is not None and st.st_mtime_ns != last_mtime:
                img = cv2.imread(str(shot))
                if img is not None and img.shape[:2] == (SIZE[1], SIZE[0]):
                    last_mtime = st.st_mtime_ns
                    take_shot(img, st.st_mtime_ns / 1e9, shots, visitor, misses)
            if next_fault is None and kinds and args.fault_every > 0 and any(on for _, on, _ in shots):
                next_fault = now + args.fault_every  # faults start once the swap is on screen
            if keys is not None and not keys.started and any(on for _, on, _ in shots):
                keys.start()  # so do the face keys
            if visitor is not None and keys is not None and keys.started and not finished:
                visitor.tick()
            if not finished and next_fault is not None and now >= next_fault and now - t0 < seconds - 3:
                todo = [k for k in kinds if not (k in ONCE and injector.counts.get(k))]
                if todo:
                    injector.inject(todo[cycle % len(todo)])
                    cycle += 1
                next_fault += args.fault_every
            injector.tick()
            if not finished and now - t0 >= seconds - 1.0:
                injector.finish()  # leave the booth as it was before the kiosk stops
                finished = True
            if now >= next_sample:
                info = read_proc(proc.pid)
                if info is not None:
                    stj = read_stats(stats_path)
                    samples.append(
                        Sample(
                            now - t0,
                            info[0],
                            info[1],
                            info[2],
                            _num(stj, "fps", "render"),
                            _num(stj, "fps", "capture"),
                            _num(stj, "fps", "processing"),
                            _num(stj, "frames", "rendered"),
                            _num(stj, "source", "reconnects"),
                            _num(stj, "processing", "restarts"),
                        )  # fmt: skip
                    )
                next_sample += args.every
            time.sleep(0.05)
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
    finally:
        if keys is not None:
            keys.stop()
        injector.finish()
        if cache_mounted and sys.exc_info()[0] is not None:  # the harness failed: never leave the mount
            proc.kill()
            subprocess.run(
                ["umount", "-l", str(booth / "cache")], capture_output=True, timeout=30, check=False
            )
    try:
        rc = proc.wait(timeout=max(30.0, args.hang_s + 10))
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    if xvfb is not None:
        xvfb.terminate()
        xvfb.wait(5)
    if cache_mounted:
        subprocess.run(["umount", str(booth / "cache")], capture_output=True, timeout=30, check=False)
    elapsed = time.monotonic() - t0
    crashed = rc != 0 or elapsed < seconds * 0.95
    summary = summarise(samples, args.warmup)
    share = swap_share(shots, injector.windows)
    final = read_stats(stats_path)
    report: dict[str, Any] = {
        "duration_s": round(elapsed, 1),
        "crashes": int(crashed),
        "kiosk_exit_code": rc,
        "rss_start_mb": summary["rss_start_mb"],
        "rss_after_warmup_mb": summary["rss_after_warmup_mb"],
        "rss_end_mb": summary["rss_end_mb"],
        "rss_max_mb": summary["rss_max_mb"],
        "rss_slope_mb_per_h": summary["rss_slope_mb_per_h"],
        "threads_start": samples[0].threads if samples else None,
        "threads_end": samples[-1].threads if samples else None,
        "fds_start": samples[0].fds if samples else None,
        "fds_end": samples[-1].fds if samples else None,
        "faults": dict(sorted(injector.counts.items())),
        "fault_every_s": args.fault_every,
        "allowance_s": {k: ALLOWANCE_S[k] for k in sorted(set(kinds))},
        "outage_s": round(sum(w.end - w.start for w in injector.windows), 1),
        "screenshots": len(shots),
        "swap": share,
        "kiosk_errors": _num(final, "processing", "errors"),
        "kiosk_restarts": _num(final, "processing", "restarts"),
        "kiosk_reconnects": _num(final, "source", "reconnects"),
        "kiosk_thread_restarts": final.get("thread_restarts"),
        # Only the one hung_call may be abandoned: a slow stage never is.
        "kiosk_abandoned_threads": _num(final, "processing", "abandoned_threads"),
        "window": bool(args.window),
        "face_key_presses": keys.presses if keys is not None else 0,
        "face_key_failures": keys.failures if keys is not None else 0,
    }
    if args.keepsakes:
        ks = final.get("keepsakes", {}) if isinstance(final.get("keepsakes"), dict) else {}
        report["keepsakes"] = {
            "kiosk_taken": ks.get("taken"),
            "kiosk_refused": ks.get("refused"),
            "server_up": ks.get("server_up"),
            "photos_taken": visitor.taken if visitor else 0,
            "photos_fetched_ok": visitor.fetched if visitor else 0,
            "photos_refused": visitor.refused if visitor else 0,
            "tokens_seen": len(visitor.tokens) if visitor else 0,
            "tokens_in_log": tokens_in_log(
                log_path.read_text(errors="replace"), visitor.tokens if visitor else set()
            ),
        }
    rows = [
        ("duration", f"{report['duration_s']} s", "crashes", str(report["crashes"])),
        ("RSS start", f"{_fmt(report['rss_start_mb'])} MB", "RSS end", f"{_fmt(report['rss_end_mb'])} MB"),
        ("RSS warm", f"{_fmt(report['rss_after_warmup_mb'])} MB", "slope", f"{report['rss_slope_mb_per_h']} MB/h"),
        ("threads", f"{report['threads_start']} → {report['threads_end']}", "fds",
         f"{report['fds_start']} → {report['fds_end']}"),
        ("swap share", f"{share['share']:.3f}", "samples", f"{share.get('samples_on', 0)}/{share['samples']}"),
        ("outages", f"{report['outage_s']} s", "errors/restarts",
         f"{report['kiosk_errors']}/{report['kiosk_restarts']}"),
    ]  # fmt: skip
    print("soak summary (faults):")
    for a, av, b, bv in rows:
        print(f"  {a:<12} {av:>14}   {b:<16} {bv:>10}")
    print(f"  faults injected: {report['faults']}")
    if keys is not None:
        print(f"  face keys pressed into the window: {keys.presses} ({keys.failures} bursts failed)")
    print(f"  swap share inside the outage windows, by kind: {share.get('share_in_outages_by_kind', {})}")
    if "keepsakes" in report:
        k = report["keepsakes"]
        print(
            f"  keepsakes: photos taken {k['photos_taken']}, fetched OK {k['photos_fetched_ok']}, refused "
            f"{k['photos_refused']}; server up {k['server_up']}; tokens in the kiosk log "
            f"{len(k['tokens_in_log'])} of {k['tokens_seen']} seen"
        )
    failures = []
    if report.get("keepsakes", {}).get("tokens_in_log"):
        failures.append(f"{len(report['keepsakes']['tokens_in_log'])} keepsake token(s) in the kiosk log")
    if crashed:
        failures.append(f"kiosk exited with {rc} after {elapsed:.0f} s of {seconds:.0f} s (log {log_path})")
    if report["rss_slope_mb_per_h"] > args.max_slope_mb_h:
        failures.append(
            f"RSS grows {report['rss_slope_mb_per_h']} MB/h after warm-up (> {args.max_slope_mb_h})"
        )
    if share["share"] < args.min_swap_share:
        failures.append(
            f"swap on screen {share['share']:.3f} of the time outside outages (< {args.min_swap_share})"
        )
    abandoned, hung = report["kiosk_abandoned_threads"] or 0, injector.counts.get("hung_call", 0)
    if abandoned > hung:
        failures.append(f"{abandoned} inference threads abandoned for {hung} hung call(s): a slow stage was")
    report["failures"] = failures
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "summary": report,
                    "windows": [asdict(w) for w in injector.windows],
                    "events": injector.events,
                    "screenshots": [
                        {"t_unix": round(t, 3), "tinted": on, "counter": c} for t, on, c in shots
                    ],
                    "samples": [asdict(s) for s in samples],
                    "kiosk_final_stats": final,
                },
                indent=2,
            )
        )
    for failure in failures:
        print(f"soak FAILED: {failure}")
    if not failures:
        print("soak OK")
    _tidy(tmp, failures, args.keep_files)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="kiosk YAML config (synthetic or video source); not with --faults")
    ap.add_argument("--minutes", type=float, default=20.0, help="how long to run")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=120.0, help="seconds before RSS must be flat")
    ap.add_argument(
        "--max-slope-mb-h", type=float, default=10.0, help="fail above this RSS growth after warm-up"
    )
    ap.add_argument("--min-fps", type=float, default=0.0, help="fail if the render fps drops below this")
    ap.add_argument("--csv", metavar="PATH", help="also write every sample as CSV")
    ap.add_argument("--json", metavar="PATH", help="also write samples and summary as JSON")
    ap.add_argument(
        "--keep-files",
        action="store_true",
        help="keep the run's folder (booth, kiosk log, screenshots) after a run that passed "
        "(a failed run always keeps it)",
    )
    ap.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="run this instead of `python -m kiosk run ...` ({stats} and {seconds} are substituted)",
    )
    faults = ap.add_argument_group("fault mode")
    faults.add_argument(
        "--faults", action="store_true", help="run the harness's own booth and inject faults (see above)"
    )
    faults.add_argument("--fault-every", type=float, default=10.0, metavar="S", help="seconds between faults")
    faults.add_argument(
        "--fault-kinds",
        default=None,
        help="comma list to cycle through (default all; 'none': no faults; swap_off: disables the swap)",
    )
    faults.add_argument(
        "--window",
        action="store_true",
        help="a real glfw window (not --headless) with face keys pressed by xdotool; faces_churn cycled too",
    )
    faults.add_argument(
        "--keepsakes",
        action="store_true",
        help="keepsakes on (loopback port); adds the kinds server_kill, server_stop, keepsake_dir_gone, stray_signal",
    )
    faults.add_argument(
        "--keepsake-every",
        type=float,
        default=20.0,
        metavar="S",
        help="--keepsakes --window: seconds between photos",
    )
    faults.add_argument("--display", help="--window: the X display (default: a private Xvfb, else $DISPLAY)")
    faults.add_argument(
        "--key-every", type=float, default=0.5, metavar="S", help="--window: seconds between key bursts"
    )
    faults.add_argument("--hang-s", type=float, default=20.0, help="how long the one hung model call blocks")
    faults.add_argument("--error-rate", type=float, default=0.03, help="share of model calls that raise")
    faults.add_argument(
        "--slow-s", type=float, default=3.0, help="slow_stage: seconds added to every swapper call"
    )
    faults.add_argument("--shot-every", type=float, default=0.5, help="seconds between screenshots")
    faults.add_argument(
        "--keep-misses",
        metavar="DIR",
        help="save each screenshot judged not swapped (untinted or frozen) in DIR as <unix time>.png",
    )
    faults.add_argument(
        "--min-swap-share",
        type=float,
        default=0.95,
        help="fail if the swap is on screen less than this share of the time outside outages",
    )
    args = ap.parse_args(argv)
    if args.window and not args.faults:
        ap.error("--window is a fault-mode option: add --faults")
    if args.faults:
        if args.config or args.command:
            ap.error("--faults runs its own booth: drop --config/--command")
        return run_faults(args)
    if not args.config and not args.command:
        ap.error("--config is required (or --faults)")

    seconds = args.minutes * 60
    tmp = Path(tempfile.mkdtemp(prefix="kiosk-soak-"))
    stats_path = tmp / "stats.json"
    stats_every = max(1.0, min(args.every / 2, 10.0))
    if args.command:
        cmd = [
            c.replace("{stats}", str(stats_path)).replace("{seconds}", f"{seconds:g}") for c in args.command
        ]
    else:
        cmd = [
            sys.executable, "-m", "kiosk", "run", "--config", args.config, "--headless",
            "--seconds", f"{seconds:g}", "--stats-json", str(stats_path), "--stats-interval", f"{stats_every:g}",
        ]  # fmt: skip
    log_path = tmp / "kiosk.log"
    print(f"soak: {' '.join(cmd)}\nsoak: kiosk log {log_path}", flush=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    samples: list[Sample] = []
    t0 = time.monotonic()
    print(f"{'t_min':>6} {'rss_MB':>7} {'thr':>4} {'fds':>4} {'fps_rnd':>7} {'fps_cap':>7} {'fps_prc':>7} "
          f"{'frames':>8} {'recon':>5} {'restart':>7}", flush=True)  # fmt: skip
    next_t = t0
    try:
        while proc.poll() is None:
            next_t += args.every if samples else 2.0  # first sample right after start-up
            while proc.poll() is None and time.monotonic() < next_t:
                time.sleep(min(0.5, max(0.0, next_t - time.monotonic())))
            proc_info = read_proc(proc.pid)
            if proc_info is None or proc.poll() is not None:
                break
            st = read_stats(stats_path)
            s = Sample(
                t_s=time.monotonic() - t0,
                rss_mb=proc_info[0],
                threads=proc_info[1],
                fds=proc_info[2],
                fps_render=_num(st, "fps", "render"),
                fps_capture=_num(st, "fps", "capture"),
                fps_processing=_num(st, "fps", "processing"),
                frames_rendered=_num(st, "frames", "rendered"),
                source_reconnects=_num(st, "source", "reconnects"),
                processing_restarts=_num(st, "processing", "restarts"),
            )
            samples.append(s)
            print(
                f"{s.t_s / 60:6.1f} {s.rss_mb:7.1f} {s.threads:4d} {s.fds:4d} {_fmt(s.fps_render, '7.1f')} "
                f"{_fmt(s.fps_capture, '7.1f')} {_fmt(s.fps_processing, '7.1f')} "
                f"{s.frames_rendered if s.frames_rendered is not None else '-':>8} "
                f"{s.source_reconnects if s.source_reconnects is not None else '-':>5} "
                f"{s.processing_restarts if s.processing_restarts is not None else '-':>7}",
                flush=True,
            )
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    elapsed = time.monotonic() - t0
    summary = summarise(samples, args.warmup)
    final = read_stats(stats_path)
    summary["kiosk_exit_code"] = rc
    summary["kiosk_final_stats"] = final
    print("soak summary:")
    for k, v in summary.items():
        if k != "kiosk_final_stats":
            print(f"  {k}: {v}")
    if final.get("fps"):
        print(f"  final fps (whole run, from the kiosk): {final['fps']}")

    failures = []
    if rc != 0:
        failures.append(f"kiosk exited with {rc} (log {log_path})")
    if elapsed < seconds * 0.95 and not args.command:
        failures.append(f"kiosk stopped after {elapsed:.0f} s of {seconds:.0f} s")
    if summary["rss_slope_mb_per_h"] > args.max_slope_mb_h:
        failures.append(
            f"RSS grows {summary['rss_slope_mb_per_h']} MB/h after warm-up (> {args.max_slope_mb_h})"
        )
    if args.min_fps and (summary["fps_render_min"] or 0) < args.min_fps:
        failures.append(f"render fps fell to {summary['fps_render_min']} (< {args.min_fps})")
    if args.csv and samples:
        with open(args.csv, "w", newline="") as out:
            w = csv.DictWriter(out, fieldnames=list(asdict(samples[0])))
            w.writeheader()
            w.writerows(asdict(s) for s in samples)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"samples": [asdict(s) for s in samples], "summary": summary}, indent=2)
        )
    for failure in failures:
        print(f"soak FAILED: {failure}")
    if not failures:
        print("soak OK")
    _tidy(tmp, failures, args.keep_files)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
