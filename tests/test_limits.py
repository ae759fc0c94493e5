"""Resource limits named: out of file descriptors (``ulimit -n``) and out of address space
(``ulimit -v``) are reported as what they are, with the limit and how to raise it, never as a
missing driver ("install Mesa's EGL", "cannot find libGL") or a corrupt model ("delete it"), and
never as a crash (139) while shaders compile."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from egl_helpers import skip_module_without_egl

from kiosk.util import limits

ROOT = Path(__file__).resolve().parent.parent
WRONG_CAUSES = ("delete it", "Install Mesa", "cannot find libGL", "Cannot find OpenGL", "not a loadable")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "KIOSK_CONFIG"):
        env.pop(key, None)
    return env


def _limit(kind: int, value: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(kind, (value, value))

    return preexec


# -- the messages -------------------------------------------------------------------------------
def test_descriptor_errors_name_the_limit_and_the_fix() -> None:
    for exc in (
        OSError(errno.EMFILE, "Too many open files"),
        RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Load model from m.onnx failed: system error number 24"),
    ):
        msg = limits.limit_problem(exc, what="m.onnx", fds=0)
        assert msg is not None and "out of file descriptors" in msg
        assert "ulimit -n" in msg and "LimitNOFILE=" in msg and f"limit {limits.fd_limit()}" in msg


def test_memory_errors_name_the_limit_and_the_fix() -> None:
    for exc in (
        MemoryError(),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
        RuntimeError("std::bad_alloc"),
    ):
        msg = limits.limit_problem(exc, fds=0)
        assert msg is not None and "out of memory" in msg


def test_other_errors_are_not_taken_for_limits() -> None:
    assert limits.limit_problem(RuntimeError("Protobuf parsing failed"), fds=0) is None
    assert limits.limit_problem(FileNotFoundError(2, "No such file"), fds=0) is None
    assert limits.limit_problem(RuntimeError("CUDA failure 2: out of memory"), fds=0) is None  # the GPU's


# -- a model load at the descriptor limit -------------------------------------------------------
def test_a_good_model_at_the_descriptor_limit_is_not_called_corrupt(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import resource, sys
        from pathlib import Path
        from kiosk.tools.standins import make_swapper
        from kiosk.inference.sessions import ProviderOptions, create_session
        from kiosk.util.limits import open_fds
        path = Path({str(tmp_path / "swapper.onnx")!r})
        make_swapper(path)
        create_session(path, ProviderOptions(order=("cpu",)))  # it loads with descriptors to spare
        n = open_fds()
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))  # not one more descriptor
        try:
            create_session(path, ProviderOptions(order=("cpu",)))
        except Exception as exc:
            print(type(exc).__name__, exc)
            sys.exit(1)
        print("loaded")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=120
    )
    print("\n" + r.stdout.strip())
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    assert "out of file descriptors" in r.stdout and "ulimit -n" in r.stdout, r.stdout
    assert not any(w in r.stdout for w in WRONG_CAUSES), r.stdout


# -- the GL context -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.gl
def test_a_window_under_ulimit_n_12_names_the_descriptor_limit(tmp_path: Path, xvfb_display: str) -> None:
    skip_module_without_egl()
    r = subprocess.run(
        [sys.executable, "-m", "kiosk", "run", "--demo", "--frames", "5"],
        cwd=tmp_path,
        env=_env(DISPLAY=xvfb_display),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit(resource.RLIMIT_NOFILE, 12),
    )
    lines = [line for line in r.stderr.splitlines() if line.startswith("kiosk:")]
    print(f"\nulimit -n 12, window: exit {r.returncode}: {lines}")
    assert r.returncode == 3, r.stderr[-2000:]
    assert len(lines) == 1 and "out of file descriptors" in lines[0] and "LimitNOFILE=" in lines[0], lines
    assert not any(w in r.stderr for w in WRONG_CAUSES), r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("megabytes", [400, 800, 1200])
def test_a_tight_ulimit_v_is_named_before_the_gl_context_not_a_crash(tmp_path: Path, megabytes: int) -> None:
    """llvmpipe segfaults (139) while compiling shaders with too little address space, and fails
    EGL's init with a little less: the headroom is checked first and the limit named."""
    skip_module_without_egl()
    r = subprocess.run(
        [sys.executable, "-m", "kiosk", "run", "--demo", "--headless", "--frames", "5"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit(resource.RLIMIT_AS, megabytes << 20),
    )
    lines = [line for line in r.stderr.splitlines() if line.startswith("kiosk:")]
    print(f"\nulimit -v {megabytes} MB: exit {r.returncode}: {lines}")
    assert r.returncode == 3, f"exit status {r.returncode}: {r.stderr[-2000:]}"
    assert len(lines) == 1 and "address-space limit" in lines[0] and "ulimit -v" in lines[0], lines
    assert not any(w in r.stderr for w in WRONG_CAUSES)


def test_the_gl_context_checks_the_address_space_left_before_mesa_crashes() -> None:
    """The kiosk already runs (its imports done) when the limit bites: the offscreen context is
    refused with the limit named, instead of llvmpipe's segfault while compiling shaders."""
    skip_module_without_egl()
    script = textwrap.dedent(
        """
        import resource
        from kiosk.render.window import DisplayError, OffscreenSurface
        from kiosk.util.limits import vm_size
        left = vm_size() + (300 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (left, left))
        try:
            OffscreenSurface(64, 64)
        except DisplayError as exc:
            print("refused:", exc)
        else:
            print("created")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script], env=_env(), capture_output=True, text=True, timeout=120
    )
    print("\n" + r.stdout.strip())
    assert r.returncode == 0, f"exit status {r.returncode}: {r.stderr[-2000:]}"
    assert "refused:" in r.stdout and "address-space limit" in r.stdout and "ulimit -v" in r.stdout
    assert not any(w in r.stdout for w in WRONG_CAUSES)
