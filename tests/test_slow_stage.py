"""Progress, not frames, proves life.

A swapper of 1.5 s a call (every call returns: a CPU fallback, an enhancer on a slow PC) with
``processing.stall_s`` 1.0 makes every frame longer than ``stall_s``. The kiosk must keep the swap
on screen, abandon nothing, say "slow (N s a frame)" (stats, metrics, STATUS) and exit 0; a call
that never returns is still caught (``test_faults.py``, ``test_clean_exit.py``, ``test_heartbeat.py``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import pytest
from egl_helpers import skip_module_without_egl
from fault_inject import booth_folder, swapped

ROOT = Path(__file__).resolve().parent.parent


# -- a real kiosk with a slow stage -------------------------------------------------------------
@pytest.mark.slow
def test_a_slow_but_progressing_stage_keeps_the_swap_and_is_reported_slow(tmp_path: Path) -> None:
    skip_module_without_egl()
    cfg = booth_folder(
        tmp_path,
        "processing: {stall_s: 1.0, load_stall_s: 20.0, recovery_s: 8.0}\n"
        "monitoring: {textfile: metrics.prom, interval_s: 1}",
    )
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    statuses: list[str] = []
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            try:
                data = sock.recv(4096).decode()
            except TimeoutError:
                continue
            except OSError:
                return
            statuses.extend(line[7:] for line in data.splitlines() if line.startswith("STATUS="))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env.pop("WATCHDOG_USEC", None)
    shot, stats = tmp_path / "shot.png", tmp_path / "stats.json"
    cmd = [sys.executable, str(ROOT / "tests" / "fault_inject.py"), "--slow-s", "1.5", "--"]
    cmd += ["run", "--config", str(cfg), "--headless", "--seconds", "22", "--screenshot", str(shot)]
    cmd += ["--screenshot-every", "0.5", "--stats-json", str(stats), "--stats-interval", "1"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    on_screen: list[bool] = []
    slow_seen: list[float] = []  # slow_frame_s of the stats files that said "slow"
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            img = cv2.imread(str(shot)) if shot.exists() else None
            if img is not None:
                on_screen.append(swapped(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)))
            if stats.exists():
                try:
                    doc = json.loads(stats.read_text())["processing"]
                except (ValueError, KeyError):
                    continue
                if doc.get("state") == "slow":
                    slow_seen.append(doc["slow_frame_s"])
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        done.set()
        listener.join(1)
        sock.close()
    rc = proc.returncode
    final = json.loads(stats.read_text())
    later = on_screen[len(on_screen) // 2 :]
    print(
        f"\nslow stage: exit {rc}, abandoned {final['processing']['abandoned_threads']}, "
        f"swap on {sum(later)}/{len(later)} screenshots of the second half, "
        f"slow {slow_seen[-3:]} s a frame, STATUS {statuses[-1:]}"
    )
    assert rc == 0, f"exit status {rc}: {err[-3000:]}"
    assert final["processing"]["abandoned_threads"] == 0, err[-3000:]
    assert later and all(later), f"the swap left the screen: {on_screen}"
    assert slow_seen and final["processing"].get("state") == "slow"
    # The first slow frame reads how long it has run so far (from 1 s on), the next ones how long
    # the last one took: 1.5 s per swapper call, on a loaded machine.
    assert all(1.0 <= s < 10.0 for s in slow_seen) and max(slow_seen) > 1.5, slow_seen
    assert any("process slow (" in s and "s a frame)" in s for s in statuses), statuses
    metrics = (tmp_path / "metrics.prom").read_text()
    assert "faceswap_kiosk_up 0" in metrics
    assert 'faceswap_kiosk_processing_state{state="slow"} 1' in metrics, metrics
