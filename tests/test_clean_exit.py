"""Every exit is clean: whatever thread sits inside native code, ``kiosk run`` ends with the status it
chose, within 2 s, without a C++ abort (``terminate called without an active exception``, 134) or a
crash, with the metrics file saying ``faceswap_kiosk_up 0``.

The swapper's calls hang inside ONNX Runtime (:func:`fault_inject.native_hang`: a model whose
``Loop`` never ends), so the supervisor abandons the inference thread while it is in native code,
as a CPU fallback or a wedged GPU driver leaves it on a real booth. The window exit paths (quit
key, display lost) are in ``test_display_lost.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from egl_helpers import skip_module_without_egl
from fault_inject import booth_folder

ROOT = Path(__file__).resolve().parent.parent

skip_module_without_egl()
pytestmark = pytest.mark.slow

ABORTS = ("terminate called", "Aborted", "core dumped", "Fatal Python error", "Segmentation fault")


def kiosk_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(key, None)
    return env


def start_hanging_kiosk(
    tmp_path: Path, processing: str, *kiosk_args: str
) -> tuple[subprocess.Popen[str], Path]:
    """A headless kiosk whose swapper calls hang in native code after the first 20; returns the
    process and the file that gets the time of the first hang."""
    cfg = booth_folder(
        tmp_path, f"processing: {{{processing}}}\nmonitoring: {{textfile: metrics.prom, interval_s: 1}}"
    )
    mark = tmp_path / "hang.txt"
    cmd = [sys.executable, str(ROOT / "tests" / "fault_inject.py"), "--native-hang-after", "20"]
    cmd += ["--mark", str(mark), "--", "run", "--config", str(cfg), "--headless", *kiosk_args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=kiosk_env(), stderr=subprocess.PIPE, text=True)
    return proc, mark


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _out, err = proc.communicate()
            raise AssertionError(f"{path.name} never appeared (rc {proc.returncode}): {err[-2000:]}")
        time.sleep(0.05)


def finish(proc: subprocess.Popen[str], timeout_s: float) -> tuple[int, str]:
    try:
        _out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"the kiosk did not exit within {timeout_s} s: {err[-2000:]}") from None
    return proc.returncode, err


def assert_clean(rc: int, expected: int, err: str, metrics: Path) -> None:
    bad = [a for a in ABORTS if a in err]
    assert rc == expected and not bad, f"exit status {rc} (wanted {expected}), {bad}: {err[-3000:]}"
    text = metrics.read_text()
    assert "faceswap_kiosk_up 0" in text, text[:400]


def test_sigterm_with_a_thread_inside_onnx_runtime_exits_0_within_2_s(tmp_path: Path) -> None:
    proc, mark = start_hanging_kiosk(tmp_path, "stall_s: 0.5, load_stall_s: 1.0, recovery_s: 60")
    wait_for(mark, proc, 60)
    time.sleep(1.5)  # past stall_s: the supervisor abandons the thread, which stays in native code
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc, err = finish(proc, 10)
    took = time.monotonic() - t0
    print(f"\nSIGTERM -> exit status {rc} in {took:.2f} s, a thread inside session.run")
    assert "abandoning it" in err, "the hung call was not abandoned: the test did not test the exit"
    assert_clean(rc, 0, err, tmp_path / "metrics.prom")
    assert took < 2.0, f"exit took {took:.2f} s"


def test_recovery_exit_3_with_threads_inside_onnx_runtime_is_status_3(tmp_path: Path) -> None:
    proc, mark = start_hanging_kiosk(tmp_path, "stall_s: 0.5, load_stall_s: 1.0, recovery_s: 2.0")
    wait_for(mark, proc, 60)
    t0 = time.monotonic()
    rc, err = finish(proc, 30)
    print(f"\nrecovery exit: status {rc} {time.monotonic() - t0:.2f} s after the first hang")
    assert "exiting with status 3" in err
    assert_clean(rc, 3, err, tmp_path / "metrics.prom")


def test_frames_limit_exit_with_a_thread_inside_onnx_runtime_is_status_0(tmp_path: Path) -> None:
    """The run ends by itself (--seconds) while the abandoned thread is still inside native code."""
    proc, mark = start_hanging_kiosk(
        tmp_path, "stall_s: 0.5, load_stall_s: 1.0, recovery_s: 60", "--seconds", "12"
    )
    wait_for(mark, proc, 60)
    rc, err = finish(proc, 30)
    assert "abandoning it" in err
    assert_clean(rc, 0, err, tmp_path / "metrics.prom")
