"""Faults injected into a RUNNING kiosk (headless KioskApp / `kiosk run`, stand-in models): what the
screen shows (swap on or off, read from the pixels of the stand-in swapper's tint on the white
square) and the exit status. ONNX Runtime calls of the swapper are wrapped to fail or hang
(tests/fault_inject.py). Each test prints the recovery time it measured."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import pytest
from egl_helpers import skip_module_without_egl
from fault_inject import CountingSource, Faults, ScreenSampler, booth_folder, booth_yaml

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import load_config
from kiosk.tools.standins import make_swapper

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]


skip_module_without_egl()


def _run(
    cfg_path: Path,
    scenario: Callable[[KioskApp], None],
    counting: bool = False,
    watch_config: bool = False,
) -> tuple[KioskApp, int]:
    """Run the kiosk headless on the main thread while ``scenario(app)`` runs beside it and
    finally stops it; return the app and run()'s exit status."""
    cfg = load_config(cfg_path)
    source = None
    if counting:
        scene = cv2.imread(str(cfg_path.parent / "scene.png"))
        source = lambda: CountingSource(scene)  # noqa: E731
    app = KioskApp(
        cfg,
        RunOptions(headless=True, seconds=90),
        source_factory=source,
        config_path=cfg_path if watch_config else None,
    )
    if app.reload.watcher is not None:
        app.reload.watcher.interval_s = 0.05
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            scenario(app)
        except BaseException as exc:
            errors.append(exc)
        finally:
            app.stop.set()

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    rc = app.run()
    t.join(5)
    if errors:
        raise errors[0]
    return app, rc


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Any:
    f = Faults()
    f.install(monkeypatch)
    yield f
    f.release.set()


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> ScreenSampler:
    s = ScreenSampler(0.1)
    s.install(monkeypatch)
    return s


def test_two_percent_failed_calls_keep_the_swap_on_screen(tmp_path, faults, screen):
    window: list[float] = []

    def scenario(app: KioskApp) -> None:
        screen.wait_on()
        time.sleep(0.5)
        faults.every = 50  # 2 % of the swapper's calls raise
        window.append(time.perf_counter())
        time.sleep(8.0)
        window.append(time.perf_counter())

    app, rc = _run(booth_folder(tmp_path), scenario)
    assert rc == 0
    assert faults.failed >= 2, "no fault was injected"
    samples = screen.between(*window)
    assert len(samples) >= 30
    share = sum(samples) / len(samples)
    print(f"\nswap on screen in {share:.1%} of {len(samples)} samples, {faults.failed} failed calls")
    assert share >= 0.95
    assert app.inference.meters.restarts == 0  # a transient failure never rebuilds the stage


def test_persistent_failure_rebuilds_with_backoff_and_heals(tmp_path, faults, screen):
    marks: dict[str, float] = {}
    seen: dict[str, Any] = {}

    def scenario(app: KioskApp) -> None:
        screen.wait_on()
        faults.persistent = True
        marks["fail"] = time.perf_counter()
        time.sleep(6.0)
        seen["notice"] = app.overlay_texts(time.perf_counter())["notice"]
        inf = app.inference
        seen["restarts"], seen["errors"] = inf.meters.restarts, inf.meters.errors
        seen["builds"] = inf.meters.restarts + inf.meters.build_failures  # rebuild attempts
        faults.persistent = False
        marks["heal"] = time.perf_counter()
        deadline = marks["heal"] + 12.0
        while screen.first_on_after(marks["heal"]) is None and time.perf_counter() < deadline:
            time.sleep(0.1)

    _, rc = _run(booth_folder(tmp_path), scenario)
    assert rc == 0
    # Back-off 1, 2, 4 s: at most 4 rebuild attempts in 6 s (a rebuild per error would be dozens);
    # the stand-in swapper's warm-up at build time fails too, so rebuilds fail and back off.
    assert seen["restarts"] >= 1 and seen["builds"] <= 4
    assert seen["errors"] >= 5 * seen["restarts"]  # five failures in a row before each rebuild
    assert "injected failure" in seen["notice"]  # the notice says why
    off = screen.between(marks["fail"] + 2.0, marks["heal"])
    assert off and not any(off)  # the visitor's real face, not a frozen swap
    back = screen.first_on_after(marks["heal"])
    assert back is not None, "the swap did not come back once the fault cleared"
    print(
        f"\n{seen['builds']} rebuild attempts, {seen['errors']} errors; swap back "
        f"{back - marks['heal']:.2f} s after the fault cleared"
    )


def test_corrupt_model_replaced_while_running_heals_without_restart(tmp_path, faults, screen):
    cfg = booth_folder(tmp_path)
    swapper = tmp_path / "models" / "inswapper_128.onnx"
    swapper.write_bytes(b"not a model")
    marks: dict[str, Any] = {}

    def scenario(app: KioskApp) -> None:
        time.sleep(4.0)  # models load (the first build in a process is slow), then retry, retry
        marks["notice"] = app.overlay_texts(time.perf_counter())["notice"]
        good = tmp_path / "good.onnx"
        make_swapper(good)
        os.replace(good, swapper)  # the operator copies the right file in
        marks["fixed"] = time.perf_counter()
        deadline = marks["fixed"] + 10.0
        while screen.first_on_after(marks["fixed"]) is None and time.perf_counter() < deadline:
            time.sleep(0.05)

    _, rc = _run(cfg, scenario)
    assert rc == 0
    assert not any(screen.between(0.0, marks["fixed"]))
    assert "inswapper_128.onnx" in marks["notice"]
    back = screen.first_on_after(marks["fixed"])
    assert back is not None, "the repaired model was never picked up"
    print(f"\nswap on screen {back - marks['fixed']:.2f} s after the model file was replaced")
    assert back - marks["fixed"] < 5.0


def test_live_reload_to_broken_models_keeps_the_last_working_swap(tmp_path, faults, screen):
    cfg = booth_folder(tmp_path)
    (tmp_path / "models" / "broken.onnx").write_bytes(b"\x08\x07garbage")
    marks: dict[str, Any] = {}

    def scenario(app: KioskApp) -> None:
        screen.wait_on()
        time.sleep(0.5)
        tmp = cfg.with_name("new.yaml")
        tmp.write_text(booth_yaml(swapper="broken.onnx"))
        os.replace(tmp, cfg)  # atomically: the watcher must not read a half-written file
        marks["reload"] = time.perf_counter()
        time.sleep(3.0)
        marks["notice"] = app.overlay_texts(time.perf_counter())["notice"]
        marks["end"] = time.perf_counter()
        make_swapper(tmp_path / "models" / "fixed.onnx")
        os.replace(tmp_path / "models" / "fixed.onnx", tmp_path / "models" / "broken.onnx")
        marks["fixed"] = time.perf_counter()
        time.sleep(2.0)
        marks["stage_after_fix"] = app.stats()["processing"]
        marks["notice_after_fix"] = app.overlay_texts(time.perf_counter())["notice"]

    _, rc = _run(cfg, scenario, watch_config=True)
    assert rc == 0
    during = screen.between(marks["reload"], marks["end"])
    assert len(during) >= 10
    share = sum(during) / len(during)
    print(f"\nswap on screen in {share:.1%} of samples after a reload to a broken model")
    assert share >= 0.95  # the last working swap stays
    assert "broken.onnx" in marks["notice"] and "keeping the previous face swap" in marks["notice"]
    assert "broken.onnx" not in marks["notice_after_fix"]  # the repaired file was built and installed
    assert all(screen.between(marks["fixed"]))


def test_hung_call_is_abandoned_and_a_fresh_thread_takes_over(tmp_path, faults, screen):
    cfg = booth_folder(tmp_path, "processing: {stall_s: 0.5, load_stall_s: 10, recovery_s: 30}")
    marks: dict[str, Any] = {}

    def scenario(app: KioskApp) -> None:
        screen.wait_on()
        time.sleep(1.0)
        deadline = time.perf_counter() + 10
        while getattr(app.inference, "ok_calls", 99) < 5 and time.perf_counter() < deadline:
            time.sleep(0.05)  # past the first calls, which get load_stall_s
        marks["first"] = app.inference
        faults.hang_next = 1  # one swapper call never returns
        deadline = time.perf_counter() + 10
        while not faults.t_hang and time.perf_counter() < deadline:
            time.sleep(0.01)
        deadline = faults.t_hang + 8.0
        while screen.first_live_on_after(faults.t_hang + 0.2) is None and time.perf_counter() < deadline:
            time.sleep(0.05)
        marks["stats"] = app.stats()["processing"]
        marks["fresh"], marks["writer"] = app.inference, app.library.writer

    _, rc = _run(cfg, scenario, counting=True)
    assert rc == 0
    assert faults.t_hang
    back = screen.first_live_on_after(faults.t_hang + 0.2)
    assert back is not None, f"the screen stayed frozen on the hung call's last frame: {marks}"
    print(f"\nlive swap back {back - faults.t_hang:.2f} s after the call hung (stall_s 0.5)")
    assert back - faults.t_hang < 0.5 + 3.0
    # the face library's one writer moved to the fresh inference thread with the stage
    assert marks["fresh"] is not marks["first"] and marks["writer"] is marks["fresh"]


def test_unrecoverable_hang_stops_the_watchdog_and_exits_non_zero(tmp_path):
    cfg = booth_folder(tmp_path, "processing: {stall_s: 0.5, load_stall_s: 1.0, recovery_s: 2.0}")
    mark = tmp_path / "hang.txt"
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    pings: list[float] = []
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if b"WATCHDOG=1" in data:
                pings.append(time.time())

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="400000", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env.pop("WATCHDOG_PID", None)
    cmd = [sys.executable, str(ROOT / "tests" / "fault_inject.py"), "--hang-after", "40", "--mark", str(mark)]
    cmd += ["--", "run", "--config", str(cfg), "--headless"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    try:
        rc = proc.wait(timeout=60)
        t_exit = time.time()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        done.set()
        listener.join(1)
        sock.close()
    assert mark.exists(), "the swapper never ran"
    t_hang = float(mark.read_text())
    assert rc == 3, f"exit status {rc}"
    print(f"\nexit status {rc} {t_exit - t_hang:.2f} s after the hang (stall_s 0.5, recovery_s 2)")
    assert t_exit - t_hang < 0.5 + 2.0 + 3.0
    assert any(t < t_hang for t in pings), "no watchdog ping while healthy"
    late = [round(t - t_hang, 2) for t in pings if t > t_hang + 0.5 + 0.5 + 0.2 + 0.5]
    assert not late, f"watchdog fed while the pipeline was stalled: {late}"
