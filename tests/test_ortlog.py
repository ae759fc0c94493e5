"""ONNX Runtime's C++ log goes through Python logging (levels, no colour codes), and a provider
fallback is stated once, not once per model (:mod:`kiosk.inference.ortlog`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kiosk.inference import ortlog

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = (
    "before\n"
    "\x1b[1;31m2026-12-01 08:40:12.790771359 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] "
    "/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:2043 onnxruntime::Provider& "
    "onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
    "libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot open shared object file\n\x1b[m\n"
    "a line of another thread\n"
    "\x1b[0;93m2026-12-01 08:40:12.790815892 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:1295 "
    "CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider.\x1b[m\n"
    "2026-12-01 08:40:13.000000001 [I:onnxruntime:sess, inference_session.cc:1 Init] plain record\n"
    "after\n"
)


def test_parse_turns_records_into_levels_and_keeps_other_text() -> None:
    records, other = ortlog.parse(SAMPLE)
    assert [r.level for r in records] == [logging.ERROR, logging.WARNING, logging.INFO]
    assert records[0].message == (
        "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: "
        "cannot open shared object file"
    )
    assert records[1].message == "Failed to create CUDAExecutionProvider."
    assert records[2].message == "plain record" and records[2].logger == "sess"
    assert all("\x1b" not in r.message for r in records)
    assert other == "before\na line of another thread\nafter\n"
    assert ortlog.Captured(records).reason() == records[0].message


def test_repeated_message_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    ortlog.reset()
    caplog.set_level(logging.DEBUG, logger="kiosk.onnxruntime")
    records, _ = ortlog.parse(SAMPLE)
    ortlog.emit(records)
    ortlog.emit(records)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [records[0].message, records[1].message]
    assert sum(r.getMessage().startswith("(again)") for r in caplog.records) == 3


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_cuda_fallback_is_stated_once_without_colour_codes(tmp_path: Path) -> None:
    """Three models on a machine where onnxruntime-gpu lists CUDA but cannot run it: the journal gets
    one plain fallback line with ONNX Runtime's reason, without ANSI codes, and at most 3 lines in
    all (the GPU libraries' summary, the fallback)."""
    proc = _run(
        f"""
        import logging, sys
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
        from pathlib import Path
        from kiosk.config import ProvidersConfig
        from kiosk.tools import standins
        from kiosk.inference.sessions import create_session
        d = Path({str(tmp_path)!r})
        models = [standins.make_embedder(d / "w600k_r50.onnx"), standins.make_swapper(d / "inswapper_128.onnx"),
                  standins.make_enhancer(d / "GFPGANv1.4.onnx")]
        for m in models:
            _, used = create_session(m, ProvidersConfig(order=["cuda", "cpu"]))
            print(used)
        """
    )
    assert proc.returncode == 0, proc.stderr
    used = proc.stdout.split()
    assert len(used) == 3
    assert "\x1b[" not in proc.stderr, proc.stderr
    if used[0] == "CUDAExecutionProvider":
        pytest.skip("CUDA really runs here: no fallback to state")
    lines = proc.stderr.splitlines()
    fallback = [ln for ln in lines if "FALLING BACK TO CPUExecutionProvider" in ln]
    assert len(fallback) == 1 and fallback[0].startswith("WARNING kiosk.inference.sessions:"), proc.stderr
    # ONNX Runtime's reason is in the fallback line, said once (its own records stay at DEBUG)...
    assert "cannot run here (" in fallback[0], fallback
    assert "WARNING: " not in fallback[0], fallback  # the level is said once, by logging
    # ...and the whole provider report of a CPU-only PC is at most 3 lines (was 8).
    assert len(lines) <= 3, proc.stderr
    assert not [ln for ln in lines if "[W:onnxruntime" in ln or "[E:onnxruntime" in ln], proc.stderr


def test_capture_passes_other_stderr_through() -> None:
    proc = _run(
        """
        import os, sys, threading
        from kiosk.inference import ortlog
        with ortlog.capture():
            print("python text", file=sys.stderr)
            t = threading.Thread(target=lambda: os.write(2, b"thread text\\n"))
            t.start(); t.join()
        print("after", file=sys.stderr)
        """
    )
    assert proc.returncode == 0
    assert proc.stderr == "python text\nthread text\nafter\n"
