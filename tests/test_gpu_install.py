"""deploy/gpu-runtime.sh: the pip packages of the GPU runtime, chosen by whether an NVIDIA driver is
present, pinned to the installed onnxruntime-gpu and to the TensorRT major its provider links."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

from kiosk.appliance.doctor import gpu

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "gpu-runtime.sh"
ORT_VERSION = importlib.metadata.version("onnxruntime-gpu")


def _specs(tmp_path: Path, *args: str, driver: bool) -> tuple[list[str], str]:
    proc_dir = tmp_path / "proc-nvidia"
    proc_dir.mkdir(exist_ok=True)
    version = proc_dir / "version"
    if driver:
        version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\n")
    elif version.exists():
        version.unlink()
    env = dict(os.environ, NVIDIA_PROC=str(proc_dir), NVIDIA_SMI="no-such-nvidia-smi")
    proc = subprocess.run(
        ["bash", str(SCRIPT), sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split(), proc.stderr


def test_script_is_executable_and_passes_shellcheck() -> None:
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    if shutil.which("shellcheck"):
        for script in (SCRIPT, ROOT / "scripts" / "setup.sh", ROOT / "deploy" / "install.sh"):
            proc = subprocess.run(
                ["shellcheck", "-x", str(script)], cwd=ROOT, capture_output=True, text=True, check=False
            )
            assert proc.returncode == 0, proc.stdout


def test_with_a_driver_the_cuda_and_cudnn_libraries_matching_onnxruntime(tmp_path: Path) -> None:
    specs, _ = _specs(tmp_path, driver=True)
    assert specs == [f"onnxruntime-gpu[cuda,cudnn]=={ORT_VERSION}"]


def test_without_a_driver_nothing_unless_forced(tmp_path: Path) -> None:
    specs, err = _specs(tmp_path, driver=False)
    assert specs == [] and "no NVIDIA driver" in err and "--gpu" in err
    forced, err = _specs(tmp_path, "--gpu", driver=False)
    assert forced == [f"onnxruntime-gpu[cuda,cudnn]=={ORT_VERSION}"] and "sudo ubuntu-drivers install" in err


def test_no_gpu_skips_even_with_a_driver(tmp_path: Path) -> None:
    assert _specs(tmp_path, "--no-gpu", driver=True)[0] == []


def test_tensorrt_pin_is_the_major_this_onnxruntime_links(tmp_path: Path) -> None:
    specs, _ = _specs(tmp_path, "--tensorrt", driver=True)
    assert len(specs) == 2
    lib = Path(ort.__file__).parent / "capi" / "libonnxruntime_providers_tensorrt.so"
    cuda = gpu.build_cuda_version()
    if not lib.exists() or cuda is None:
        pytest.skip("this onnxruntime build has no TensorRT provider")
    nvinfer = next(n for n in gpu.elf_needed(lib) if n.startswith("libnvinfer.so."))
    assert specs[1] == gpu.tensorrt_pip_spec(nvinfer, cuda[0])  # what kiosk doctor tells people to install
