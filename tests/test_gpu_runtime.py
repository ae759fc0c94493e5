"""The pip-installed CUDA/cuDNN/TensorRT libraries are loaded once, before the first GPU session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

from kiosk.inference import gpu_runtime, sessions

HAS_CUDA_PROVIDER = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No preload has happened yet; ``preload_dlls`` is a fake that records its calls and, like the
    real one on a machine without the nvidia-* wheels, prints what it cannot load."""
    calls: list[str] = []

    def fake_preload(
        cuda: bool = True, cudnn: bool = True, msvc: bool = True, directory: str | None = None
    ) -> None:
        calls.append("preload")
        print("Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file")

    monkeypatch.setattr(gpu_runtime, "_report", None)
    monkeypatch.setattr(ort, "preload_dlls", fake_preload)
    monkeypatch.setattr(gpu_runtime, "tensorrt_library_dirs", lambda paths=None: [])
    return calls


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    path.write_bytes(sessions._tiny_model_bytes())
    return path


@pytest.mark.skipif(not HAS_CUDA_PROVIDER, reason="this onnxruntime build has no CUDA provider")
def test_gpu_session_preloads_once_and_keeps_stdout_clean(
    tmp_path: Path, fresh: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    model = _model(tmp_path)
    cfg = sessions.ProviderOptions(order=("cuda", "cpu"))
    sessions.create_session(model, cfg)
    sessions.create_session(model, cfg)
    assert fresh == ["preload"]  # once per process, not per session
    assert "Failed to load" not in capsys.readouterr().out  # logged, never printed (`kiosk doctor --json`)
    report = gpu_runtime.preload_gpu_libraries()
    assert report.attempted
    assert report.messages == (
        "Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file",
    )


def test_cpu_only_config_loads_no_gpu_libraries(tmp_path: Path, fresh: list[str]) -> None:
    _, used = sessions.create_session(_model(tmp_path), sessions.ProviderOptions(order=("cpu",)))
    assert used == "CPUExecutionProvider"
    assert fresh == []


@pytest.mark.skipif(not HAS_CUDA_PROVIDER, reason="this onnxruntime build has no CUDA provider")
def test_doctor_probe_preloads_too(fresh: list[str]) -> None:
    sessions.probe_providers(sessions.ProviderOptions(order=("cuda", "cpu")))
    assert fresh == ["preload"]


def test_a_failing_preload_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: object) -> None:
        raise RuntimeError("Invalid parameter of directory")

    monkeypatch.setattr(gpu_runtime, "_report", None)
    monkeypatch.setattr(ort, "preload_dlls", broken)
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    report = gpu_runtime.preload_gpu_libraries()
    assert report.messages == ("preload_dlls failed: Invalid parameter of directory",)


def test_tensorrt_libraries_are_found_and_loaded_from_their_pip_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libz = next(
        (p for p in (Path("/lib/x86_64-linux-gnu/libz.so.1"), Path("/usr/lib64/libz.so.1")) if p.exists()),
        None,
    )
    if libz is None:
        pytest.skip("no libz.so.1 to stand in for a TensorRT library")
    site = tmp_path / "site-packages"
    folder = site / "tensorrt_libs"
    folder.mkdir(parents=True)
    shutil.copy(libz, folder / "libnvinfer.so.10")  # any real shared library loads the same way
    (site / "unrelated").mkdir()
    assert gpu_runtime.tensorrt_library_dirs([str(site)]) == [str(folder)]
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    monkeypatch.setattr(gpu_runtime, "_report", None)
    monkeypatch.setattr(ort, "preload_dlls", lambda **kw: None)
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["TensorrtExecutionProvider", "CPUExecutionProvider"]
    )
    assert gpu_runtime.preload_gpu_libraries().tensorrt == (str(folder / "libnvinfer.so.10"),)
