"""Faults of a real PC's disks and files (issue 18): a decompression-bomb photo, a full or
unwritable cache folder, a full snapshot folder, a FIFO or device where a file should be, file
names that are not UTF-8, a faces folder that is away for a moment, a video cut mid-copy, a
camera that is not there, a CPU-only PC's provider report. Each test here fails on the code
before these fixes (commit 119d615); the kiosk-level ones (the screen keeps swapping, the staff
line names the problem) are in ``test_faults_disk_files_kiosk.py``."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from kiosk.booth.faces import FaceLibrary
from kiosk.booth.photo_files import PhotoError, decode_photo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import soak  # noqa: E402
from test_faces_snapshot import FakeAnalyzer, _library  # noqa: E402


def _run(
    code: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
        check=False,
        cwd=str(ROOT),
    )


# -- 1. photos decoded within bounds ---------------------------------------------------------------


def test_the_bomb_is_a_small_progressive_jpeg_of_30000_square():
    from PIL import Image

    data = soak.bomb_jpeg()
    assert len(data) < 4096  # a few hundred bytes on disk
    Image.MAX_IMAGE_PIXELS = None
    import io

    with Image.open(io.BytesIO(data)) as im:
        assert im.size == (30000, 30000) and im.info.get("progressive")


def test_a_bomb_photo_is_refused_from_its_header_without_decoding(monkeypatch):
    """Before: 30000x30000 passed the 40-megapixel guard (decoded at 1/8), and OpenCV then held the
    full coefficient buffer: 2.7 GB, 9 s. Now the header alone refuses it, naming size and memory."""

    def no_decode(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the bomb reached the decoder")

    monkeypatch.setattr(cv2, "imdecode", no_decode)
    with pytest.raises(
        PhotoError, match=r"30000x30000 progressive JPEG is too large .*MB.*256 MB budget"
    ) as exc:
        decode_photo(soak.bomb_jpeg())
    assert "\n" not in str(exc.value)


def test_the_decode_budget_covers_every_format():
    from kiosk.util.images import decode_cost, probe_image

    img = np.full((48, 64, 3), 90, np.uint8)
    for ext in (".jpg", ".png", ".webp", ".bmp", ".tiff"):
        data = cv2.imencode(ext, img)[1].tobytes()
        assert decode_photo(data).shape == (48, 64, 3), ext
        info = probe_image(data)
        assert (info.width, info.height) == (64, 48) and decode_cost(info)[0] < 1 << 20
    # A sequential JPEG with one scan per component buffers every coefficient too.
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buf, "JPEG", progressive=False)
    baseline = probe_image(buf.getvalue())
    assert not baseline.progressive
    big = soak.bomb_jpeg(20000, 20000)
    assert probe_image(big).progressive
    assert decode_cost(probe_image(big))[0] > 1 << 30


def test_decoding_a_new_photo_never_holds_the_refresh(tmp_path, monkeypatch):
    """A photo whose decode takes long (here: held until the test lets it go) is decoded on the
    photo reader's thread: a refresh with a scan budget returns meanwhile (the photo pending)
    and a later one takes the result. Before, the decode ran inside the refresh."""
    import kiosk.booth.photo_files as photo_files

    lib = _library(tmp_path, ("ann",))
    analyzer = FakeAnalyzer()
    gate = threading.Event()
    real = photo_files.decode_photo
    slow_photo = cv2.imencode(".png", np.full((64, 64, 3), 200, np.uint8))[1].tobytes()

    def slow(data: bytes):  # type: ignore[no-untyped-def]
        if data == slow_photo:
            assert gate.wait(60)
        return real(data)

    monkeypatch.setattr(photo_files, "decode_photo", slow)
    (lib.folder / "ben.png").write_bytes(slow_photo)  # type: ignore[operator]
    lib.read_wait_s = 0.2
    t = threading.Thread(target=lambda: lib.refresh(analyzer, "m", budget_s=0.1))
    t.start()
    t.join(20)
    returned = not t.is_alive()
    snap = lib.snapshot
    gate.set()
    t.join(60)
    lib.claim()  # this thread goes on as the library's writer
    assert returned, "the refresh waited for the decode"
    assert snap.pending >= 1 and "ben" not in [e.name for e in snap.entries]
    for _ in range(200):
        lib.refresh(analyzer, "m", budget_s=0.1)
        if not lib.snapshot.pending:
            break
        time.sleep(0.05)
    assert [e.name for e in lib.snapshot.entries] == ["ann", "ben"]


def test_a_failed_photo_is_not_read_again_until_it_changes_even_by_a_fresh_writer(tmp_path, monkeypatch):
    """Before: the abandoned inference thread was inside the bomb's decode when a fresh thread
    claimed the library, and the fresh one decoded the same file again (RSS 3.7 GB). Now reading
    is the photo reader's: a fresh writer asking for the same file does not read it again, and a
    failed read is remembered until the file changes."""
    import kiosk.booth.photo_files as photo_files
    from kiosk.booth.faces import LibraryWriterError

    lib = _library(tmp_path, ("ann",))
    bomb = lib.folder / "bomb.jpg"  # type: ignore[operator]
    bomb.write_bytes(soak.bomb_jpeg())
    decodes: list[int] = []
    gate = threading.Event()
    real = photo_files.decode_photo

    def counted(data: bytes):  # type: ignore[no-untyped-def]
        if data == bomb.read_bytes():
            decodes.append(len(data))
            gate.wait(10)  # the decode that takes long
        return real(data)

    monkeypatch.setattr(photo_files, "decode_photo", counted)

    def abandoned() -> None:
        with contextlib.suppress(LibraryWriterError):  # revoked meanwhile: refused, as it should be
            lib.refresh(FakeAnalyzer(), "m")

    writer = threading.Thread(target=abandoned, name="inference-1")
    writer.start()
    for _ in range(400):
        if decodes:
            break
        time.sleep(0.025)
    assert decodes, "the abandoned writer never started the decode"
    lib.revoke(writer)  # the supervisor gives up on it; a fresh thread (this one) takes over
    lib.claim()
    lib.read_wait_s = 0.01
    lib.refresh(FakeAnalyzer(), "m", budget_s=0.1)
    during = len(decodes)
    gate.set()
    writer.join(30)
    for _ in range(200):
        lib.refresh(FakeAnalyzer(), "m", budget_s=0.1)
        if not lib.snapshot.pending:
            break
        time.sleep(0.05)
    assert during == 1, "the fresh writer decoded the file again"
    problems = lib.snapshot.problems
    assert any(p.startswith("bomb.jpg: 30000x30000 progressive JPEG is too large") for p in problems), (
        problems
    )
    for _ in range(3):
        lib.refresh(FakeAnalyzer(), "m", budget_s=0.1)
    assert len(decodes) == 1  # not retried while the file is the same
    st = bomb.stat()
    os.utime(bomb, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the file changed
    for _ in range(200):
        lib.refresh(FakeAnalyzer(), "m", budget_s=0.1)
        if len(decodes) == 2 and not lib.snapshot.pending:
            break
        time.sleep(0.05)
    assert len(decodes) == 2


# -- 2. disks fill up ------------------------------------------------------------------------------

_WARM_UP = """
    import logging, sys
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    {prelude}
    from kiosk.inference import kernels, jit
    for attempt in range(2):  # the inference thread's build, then its retry
        kernels.warm_up()
    print("PROBLEM:", jit.cache_problem())
"""


def _umount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True, timeout=30, check=False)


@pytest.mark.slow
def test_a_full_kernel_cache_folder_compiles_in_memory_and_says_which_folder(tmp_path):
    """Before: every warm-up raised ENOSPC out of numba (a 35-line traceback per try) and the swap
    never started. Now the kernels compile in memory, one line names the folder. A 64 KB tmpfs is
    the full disk where mounting is allowed; elsewhere a file size limit (EFBIG) stands in."""
    full = tmp_path / "full"
    mounted = soak.mount_tmpfs(full, "64k")
    try:
        prelude = ""
        if not mounted:  # RLIMIT_FSIZE: any write past 1 KB fails (EFBIG), the process lives on
            prelude = (
                "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))"
            )
        proc = _run(_WARM_UP.format(prelude=prelude), env={"NUMBA_CACHE_DIR": str(full / "numba")})
    finally:
        if mounted:
            _umount(full)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    problem = proc.stdout.split("PROBLEM:", 1)[1].strip()
    why = "is full" if mounted else "hit the file size limit"
    assert problem.startswith(f"kernel cache folder {full / 'numba'} {why}"), problem
    assert "compiled in memory" in problem
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("WARNING kiosk.inference.jit:"), proc.stderr


@pytest.mark.slow
def test_no_writable_kernel_cache_folder_at_all_still_compiles(tmp_path):
    """Before: numba refused to define a cached kernel (RuntimeError at import) when no folder was
    writable: the whole pipeline module failed to import."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    env = {
        "NUMBA_CACHE_DIR": str(blocker / "numba"),
        "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator",
    }
    proc = _run(_WARM_UP.format(prelude=""), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problem = proc.stdout.split("PROBLEM:", 1)[1].strip()
    assert problem.startswith(f"kernel cache folder {blocker / 'numba'} is not writable"), problem


def test_the_swap_stage_notice_names_the_kernel_cache_folder(monkeypatch):
    from kiosk.inference import jit
    from kiosk.processing.swap_stage import SwapProcessor

    monkeypatch.setattr(
        jit, "_problem", "kernel cache folder /x is full: kernels compiled in memory this run"
    )

    class Stub:
        notice = "GPU fallback"

    out = type("Out", (), {})()
    # the notice composition of SwapProcessor.process, on a stub (no models needed)
    SwapProcessor._notice_into(Stub(), out)  # type: ignore[arg-type]
    assert out.notice == "GPU fallback · kernel cache folder /x is full: kernels compiled in memory this run"


def test_a_full_snapshot_folder_keeps_the_snapshot_and_writes_it_when_space_returns(tmp_path, monkeypatch):
    """Before: the snapshot was lost with one ERROR line. Now it is kept in memory, the staff
    line says so, and it is written (under the time it was taken) once the folder takes it."""
    import kiosk.booth.snapshots as snapshots
    from kiosk.booth.snapshots import SnapshotKeeper

    real = snapshots.atomic_write
    full = {"on": True}

    def write(path, data, **kw):  # type: ignore[no-untyped-def]
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, **kw)

    monkeypatch.setattr(snapshots, "atomic_write", write)
    clock = [0.0]
    keeper = SnapshotKeeper(clock=lambda: clock[0])
    rgb = np.zeros((24, 32, 3), np.uint8)
    folder = tmp_path / "snaps"
    taken = time.time() - 60
    assert keeper.save(rgb, folder, 0, 100, now=taken) is False
    assert keeper.kept == 1 and keeper.problem.startswith(
        f"snapshot not saved: {folder} is full; 1 kept in memory"
    )
    assert not keeper.claim_retry()  # the next try comes after RETRY_S
    for i in range(6):  # more than MAX_KEPT: the oldest are given up and counted
        keeper.save(rgb, folder, 0, 100, now=taken + 1 + i)
    assert keeper.kept == SnapshotKeeper.MAX_KEPT and keeper.lost == 3 and "3 lost" in keeper.problem
    full["on"] = False
    clock[0] += SnapshotKeeper.RETRY_S
    assert keeper.claim_retry()
    keeper.retry()
    files = sorted(p.name for p in folder.glob("snapshot-*.jpg"))
    assert len(files) == SnapshotKeeper.MAX_KEPT and keeper.kept == 0
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(taken + 3))
    assert any(stamp in f for f in files), files  # named by when they were taken
    assert keeper.problem == "3 snapshots could not be saved (disk was full)"


def test_a_failing_screenshot_logs_once_not_every_try(tmp_path, monkeypatch, caplog):
    import kiosk.render.shots as shots

    def fail(path, rgb):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shots, "write_screenshot", fail)
    writer = shots.ShotWriter()
    rgb = np.zeros((4, 4, 3), np.uint8)
    with caplog.at_level(logging.INFO, logger="kiosk.render.shots"):
        for _ in range(10):
            writer.screenshot(tmp_path / "s.png", rgb)
            assert writer.flush(10)
        writer.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert writer.screenshots_failing == 10


def test_repeated_identical_log_lines_are_said_once_then_counted():
    from kiosk.util.logs import RepeatFilter

    clock = [100.0]
    f = RepeatFilter(window_s=60, clock=lambda: clock[0])
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handlers = [Keep(), Keep()]
    logger = logging.getLogger("kiosk.test_repeat")
    logger.propagate = False
    for h in handlers:
        h.addFilter(f)
        logger.addHandler(h)
    try:
        for _ in range(120):  # every 0.5 s for a minute
            logger.error("screenshot not written: %s", "[Errno 28] No space left on device")
            clock[0] += 0.5
        logger.error("another line")
        logger.error("screenshot not written: %s", "[Errno 28] No space left on device")
    finally:
        for h in handlers:
            logger.removeHandler(h)
    # each handler: the first, the other line, then the same line again with the count
    assert lines[0::2] == lines[1::2]
    assert lines[0::2] == [
        "screenshot not written: [Errno 28] No space left on device",
        "another line",
        "screenshot not written: [Errno 28] No space left on device (repeated 119 times in the last 60 s)",
    ], lines


def test_the_kiosk_log_setup_quiets_repeats_and_writes_any_file_name(tmp_path):
    """Before: the log file used the locale's strict encoding: a photo name with a byte that is not
    UTF-8 raised UnicodeEncodeError inside logging ("--- Logging error ---") and the line was lost."""
    log_file = tmp_path / "kiosk.log"
    proc = _run(
        f"""
        import logging, os
        from pathlib import Path
        from kiosk.config import parse_config
        from kiosk.cli.commands import setup_logging
        cfg = parse_config("logging: {{file: {str(log_file)!r}, level: INFO}}\\n", "k.yaml")
        setup_logging(cfg)
        name = os.fsdecode(b"caf\\xe9-\\xff.jpg")  # Latin-1 bytes from a USB stick
        log = logging.getLogger("kiosk.booth.faces")
        for _ in range(50):
            log.warning("face photo skipped: %s: no face found", name)
        from kiosk.util.files import shown
        log.warning("shown: %s", shown(Path("/faces") / name))
        """,
        env={"LC_ALL": "C", "PYTHONIOENCODING": "ascii:backslashreplace", "PYTHONUTF8": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Logging error" not in proc.stderr and "UnicodeEncodeError" not in proc.stderr, proc.stderr
    text = log_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len([ln for ln in lines if "face photo skipped" in ln]) == 1, text  # said once
    assert "caf\\xe9-\\xff.jpg" in lines[0]
    assert lines[-1].endswith("shown: /faces/caf\\xe9-\\xff.jpg")


def test_a_photo_name_that_is_not_utf8_is_named_escaped_in_the_problems(tmp_path):
    lib = _library(tmp_path, ("ann",))
    bad = os.fsdecode(b"caf\xe9.png")
    (lib.folder / bad).write_bytes(b"not an image at all")  # type: ignore[operator]
    lib.refresh(FakeAnalyzer(), "m")
    problems = lib.snapshot.problems
    assert problems == ("caf\\xe9.png: not a readable image; use a JPEG or PNG",), problems
    problems[0].encode("utf-8")  # printable by the log file and the screen's font


# -- 3. only regular files are read ----------------------------------------------------------------


def _fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def _release(fifo: Path) -> None:
    """Let a reader blocked on ``fifo`` go (the old code's open): open it for writing and close."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def _returns(fn, timeout_s: float = 10.0, unblock=None):  # type: ignore[no-untyped-def]
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    blocked = t.is_alive()
    if blocked and unblock is not None:
        unblock()
        t.join(10)
    assert not blocked, "blocked on a FIFO"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def test_read_regular_file_refuses_fifos_devices_and_folders_without_blocking(tmp_path):
    from kiosk.util.files import FileTooLargeError, NotRegularFileError, read_regular_file

    fifo = _fifo(tmp_path / "x.yaml")
    with pytest.raises(NotRegularFileError, match="is a FIFO"):
        _returns(lambda: read_regular_file(fifo, 100), unblock=lambda: _release(fifo))
    with pytest.raises(NotRegularFileError, match="is a device"):
        read_regular_file("/dev/zero", 100)
    with pytest.raises(NotRegularFileError, match="is a folder"):
        read_regular_file(tmp_path, 100)
    (tmp_path / "ok").write_bytes(b"12345")
    assert read_regular_file(tmp_path / "ok", 5) == b"12345"
    with pytest.raises(FileTooLargeError):
        read_regular_file(tmp_path / "ok", 4)


def test_a_config_replaced_by_a_fifo_is_named_and_never_blocks_the_watcher(tmp_path):
    """Before: the watcher's open() of the FIFO blocked the render loop until someone wrote to it
    (the screen and stats stopped, SIGTERM was ignored)."""
    from kiosk.app.config_watch import ConfigWatcher
    from kiosk.config import ConfigError, load_config

    path = tmp_path / "kiosk.yaml"
    path.write_text("processing: {enabled: false}\n")
    watcher = ConfigWatcher(path, interval_s=0.0, settle_s=0.0)
    _fifo(path)
    events = []
    for i in range(4):
        event = _returns(lambda i=i: watcher.poll(now=float(i + 1)), unblock=lambda: _release(path))
        if event is not None:
            events.append(event)
    assert len(events) == 1 and events[0].config is None, events
    assert events[0].problems == (
        f"{path}: is a FIFO (named pipe), not a config file; replace it with the YAML file",
    )
    with pytest.raises(ConfigError, match="is a FIFO"):
        _returns(lambda: load_config(path), unblock=lambda: _release(path))


def test_a_model_path_that_is_a_fifo_is_named_not_opened(tmp_path):
    from kiosk.inference.errors import ModelCorruptError
    from kiosk.inference.sessions import ProviderOptions, create_session

    fifo = _fifo(tmp_path / "w600k_r50.onnx")
    with pytest.raises(ModelCorruptError, match=r"is a FIFO \(named pipe\), not a model file"):
        _returns(
            lambda: create_session(fifo, ProviderOptions(order=("cpu",))), unblock=lambda: _release(fifo)
        )


def test_model_digests_never_block_on_a_fifo(tmp_path):
    from kiosk.booth.photo_files import ModelDigests

    fifo = _fifo(tmp_path / "inswapper_128.onnx")
    with pytest.raises(OSError, match="is a FIFO"):
        _returns(lambda: ModelDigests(tmp_path / "d.json").digest([fifo]), unblock=lambda: _release(fifo))


def test_a_cache_entry_that_is_a_fifo_is_replaced_not_read(tmp_path):
    lib = _library(tmp_path, ("ann",))
    analyzer = FakeAnalyzer()
    lib.refresh(analyzer, "m")
    (entry,) = lib.snapshot.entries
    cache = tmp_path / "cache" / f"{entry.key}.npz"
    assert cache.is_file()
    fresh = FaceLibrary(lib.folder, tmp_path / "cache", thumb_px=16)
    _fifo(cache)
    _returns(lambda: fresh.refresh(analyzer, "m"), unblock=lambda: _release(cache))
    assert [e.name for e in fresh.snapshot.entries] == ["ann"]
    assert stat.S_ISREG(cache.stat().st_mode)  # rebuilt as a regular file


# -- 4. quiet, exact logs --------------------------------------------------------------------------


def test_a_faces_folder_away_for_a_moment_keeps_the_faces_and_the_cache(tmp_path):
    """Before: a refresh while the folder was gone pruned every cached latent, so its return cost a
    model run per photo; a regular file in its place was reported as "not found"."""
    lib = _library(tmp_path)
    analyzer = FakeAnalyzer()
    lib.refresh(analyzer, "m")
    cache = tmp_path / "cache"
    entries = sorted(cache.glob("*.npz"))
    assert len(entries) == 2 and analyzer.calls == 2
    folder = lib.folder
    assert folder is not None
    away = tmp_path / "away"
    folder.rename(away)
    lib.refresh(analyzer, "m")
    assert sorted(cache.glob("*.npz")) == entries  # nothing pruned
    assert [e.name for e in lib.snapshot.entries] == ["ann", "ben"]  # still swapping
    assert lib.snapshot.problems == (
        f"{folder}: faces folder not found (create it or fix faces.dir); keeping the 2 faces loaded before",
    )
    folder.write_text("oops\n")  # a file where the folder should be
    lib.refresh(analyzer, "m")
    assert lib.snapshot.problems[0].startswith(f"faces folder {folder} is a file, not a folder"), (
        lib.snapshot.problems
    )
    assert sorted(cache.glob("*.npz")) == entries
    folder.unlink()
    away.rename(folder)
    fresh = FaceLibrary(folder, cache, thumb_px=16)  # even a restart finds them cached
    fresh.refresh(analyzer, "m")
    assert [e.name for e in fresh.snapshot.entries] == ["ann", "ben"] and analyzer.calls == 2
    assert fresh.snapshot.problems == ()


_VIDEO = """
    import logging, os, shutil, sys, time
    from pathlib import Path
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.path.insert(0, "scripts")
    import cv2, soak
    from kiosk.capture.sources import VideoFileSource
    d = Path({folder!r})
    v = cv2.VideoWriter(str(d / "full.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 30, soak.SIZE)
    for i in range(32):
        v.write(soak.make_scene(i))
    v.release()
    shutil.copy(d / "full.mp4", d / "scene.mp4")
    VideoFileSource.CHECK_S = 0.05
    src = VideoFileSource(d / "scene.mp4")
    src.open()
    data = (d / "full.mp4").read_bytes()
    (d / "cut.mp4").write_bytes(data[: len(data) // 2])  # a copy cut mid-file (no index)
    os.replace(d / "cut.mp4", d / "scene.mp4")
    frames = 0
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        src.read(None)
        frames += 1
    print("FRAMES", frames)
"""


@pytest.mark.slow
def test_a_video_replaced_by_a_cut_copy_is_reported_once_without_ffmpeg_lines(tmp_path):
    """Before: a WARNING on every check (0.5 s) and FFmpeg's own lines on stderr at every try;
    the old file plays on meanwhile, as before."""
    proc = _run(_VIDEO.format(folder=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split("FRAMES", 1)[1]) > 10  # the old file kept playing
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "replaced but not readable yet" in lines[0], proc.stderr[-3000:]


@pytest.mark.slow
def test_a_camera_that_is_not_there_says_one_line_not_opencvs_warnings():
    proc = _run(
        """
        from kiosk.capture.sources import CameraSource, SourceError
        from kiosk.config import parse_config
        cfg = parse_config("source: {kind: camera, camera: {device: 57}}\\n", "k.yaml").source
        for _ in range(3):  # three retries
            try:
                CameraSource(cfg).open()
            except SourceError as exc:
                print("ERR", exc)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ERR camera 57 cannot be opened") == 3, proc.stdout
    assert "cap_v4l" not in proc.stderr and "WARN" not in proc.stderr, proc.stderr


def test_a_fifo_named_like_a_photo_is_named_not_opened(tmp_path):
    lib = _library(tmp_path, ("ann",))
    fifo = _fifo(lib.folder / "pipe.jpg")  # type: ignore[operator]
    _returns(lambda: lib.refresh(FakeAnalyzer(), "m"), unblock=lambda: _release(fifo))
    assert [e.name for e in lib.snapshot.entries] == ["ann"]
    assert lib.snapshot.problems == (
        "pipe.jpg: is a FIFO (named pipe), not a photo file; replace it with a JPEG or PNG",
    )
