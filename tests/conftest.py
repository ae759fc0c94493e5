"""Shared fixtures: a headless GL context (GL errors checked after each test), and a private Xvfb
server for real-window tests. A contract test that skips because insightface is missing fails in CI."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import moderngl

#: insightface is the reference the contract tests compare against. It is not in the ``test`` extra:
#: it must be installed with --no-deps (its wheel pulls the CPU onnxruntime over onnxruntime-gpu).
INSIGHTFACE_MISSING = "insightface missing: run scripts/setup.sh (pip install --no-deps insightface==2.1)"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _skipped_for_insightface(reason: str) -> bool:
    """The test skipped because insightface (or a module of it) cannot be imported."""
    if "insightface" not in reason.lower():
        return False
    return importlib.util.find_spec("insightface") is None or "could not import 'insightface" in reason


def _gate_insightface(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if not _skipped_for_insightface(reason):
        return
    if _in_ci():
        report.outcome = "failed"
        report.longrepr = f"{INSIGHTFACE_MISSING} (CI=true: this test must not skip; it said: {reason})"
    elif isinstance(report.longrepr, tuple) and not reason.startswith(INSIGHTFACE_MISSING):
        path, line, _ = report.longrepr
        report.longrepr = (path, line, f"Skipped: {INSIGHTFACE_MISSING} ({reason})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> pytest.TestReport:
    """A skip for want of insightface fails in CI (``CI=true``), so the contract tests can never be
    skipped there unnoticed; elsewhere it stays a skip whose reason says how to install it."""
    report: pytest.TestReport = yield
    _gate_insightface(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    """The same for a whole module skipped at import (``pytest.importorskip`` at the top)."""
    report: pytest.CollectReport = yield
    _gate_insightface(report)
    return report


@pytest.fixture(scope="module")
def ctx() -> Iterator[moderngl.Context]:
    """A headless (EGL, Mesa) OpenGL 3.3 context for one test module; skips where there is none."""
    import moderngl

    from kiosk.render.window import release_standalone_context

    try:
        context = moderngl.create_standalone_context(require=330, backend="egl")
    except Exception as exc:  # no libEGL / no Mesa
        pytest.skip(f"EGL OpenGL 3.3 context unavailable: {exc}")
    yield context
    release_standalone_context(context)


@pytest.fixture(autouse=True)
def _no_gl_error_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that uses ``ctx``: no GL error is pending (``glGetError``), so a test need
    not check it itself; the error shows at that test's teardown."""
    if "ctx" not in request.fixturenames:
        yield
        return
    context = request.getfixturevalue("ctx")
    yield
    error = context.error
    assert error == "GL_NO_ERROR", f"{request.node.nodeid} left the GL error {error}"


@pytest.fixture(scope="session")
def xvfb_display() -> Iterator[str]:
    """Start a private ``Xvfb`` on a display number it picks itself (``-displayfd``, so parallel
    runs never collide); yields ``":N"``. ``-noreset``: by default the server resets when its last
    client disconnects, and a window opened during that reset fails to connect. Skips when Xvfb
    is not installed."""
    proc, display = start_xvfb()
    try:
        yield display
    finally:
        proc.terminate()
        proc.wait(5)


def start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    """A private ``Xvfb`` on the display number it picks itself: ``(process, ":N")``; skips the
    test when Xvfb is not installed or does not start. The caller stops it."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb not installed (apt-get install xvfb)")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp", "-noreset"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        pytest.skip("Xvfb did not start")
    return proc, f":{number}"
