"""``kiosk doctor`` tells apart why a GPU provider does not run, each with its fix. The machine is
faked (library loader, driver query, provider creation), so no GPU is needed."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from kiosk.appliance.doctor import gpu, make_context
from kiosk.appliance.doctor.core import CheckResult, DoctorContext
from kiosk.appliance.doctor.gpu import DriverInfo, GpuProbes

CUDA_LIBS = ["libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudart.so.13", "libcudnn.so.9"]
TRT_LIBS = ["libnvinfer.so.10", "libnvonnxparser.so.10"]
NO_DRIVER = DriverInfo(False, "libcuda.so.1: cannot open shared object file: No such file or directory")
GOOD_DRIVER = DriverInfo(True, kernel_module="580.95.05", cuda=(13, 0), devices=1)


def _ctx(tmp_path: Path, order: str = "[cuda, cpu]", device_id: int = 0) -> DoctorContext:
    path = tmp_path / "kiosk.yaml"
    path.write_text(f"models:\n  providers: {{order: {order}, device_id: {device_id}}}\n")
    return make_context(path)


def _probes(
    driver: DriverInfo,
    *,
    missing: tuple[str, ...] = (),
    errors: dict[str, str | None] | None = None,
    environ: dict[str, str] | None = None,
) -> GpuProbes:
    created = errors or {"CUDAExecutionProvider": "CUDAExecutionProvider could not be created"}
    return GpuProbes(
        create_providers=lambda cfg: {**created, "CPUExecutionProvider": None},
        query_driver=lambda: driver,
        load_library=lambda name: f"{name}: cannot open shared object file" if name in missing else None,
        runtime_libraries=lambda p: CUDA_LIBS + (TRT_LIBS if p == "TensorrtExecutionProvider" else []),
        build_cuda=lambda: (13, 0),
        onnxruntime_version=lambda: "1.31.1",
        environ=environ or {},
    )


def _check(ctx: DoctorContext, probes: GpuProbes, name: str = "provider-cuda") -> CheckResult:
    return next(r for r in gpu.check_providers(ctx, probes) if r.name == name)


def _pip(ctx: DoctorContext) -> str:
    return str(Path(ctx.python).with_name("pip"))


def test_a_no_nvidia_driver(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    r = _check(ctx, _probes(NO_DRIVER))
    assert not r.ok and r.severity == "warning"  # the CPU takes over
    assert "no NVIDIA driver" in r.detail and "falls back to cpu" in r.detail
    assert "also missing" not in r.detail
    assert r.fix == (
        "install the NVIDIA driver: `sudo ubuntu-drivers install` (or `sudo apt-get install nvidia-driver-580`), "
        "reboot, check `nvidia-smi`"
    )


def test_a_no_driver_and_no_libraries_names_both_fixes(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    r = _check(ctx, _probes(NO_DRIVER, missing=("libcublasLt.so.13", "libcudnn.so.9")))
    assert "no NVIDIA driver" in r.detail
    assert (
        "also missing: libcublasLt.so.13 (from nvidia-cublas), libcudnn.so.9 (from nvidia-cudnn-cu13)"
        in r.detail
    )
    assert r.fix.endswith(f"; then `{_pip(ctx)} install 'onnxruntime-gpu[cuda,cudnn]==1.31.1'`")


def test_a_kernel_module_without_its_cuda_library(tmp_path: Path) -> None:
    driver = DriverInfo(False, "libcuda.so.1: cannot open shared object file", kernel_module="550.54.14")
    r = _check(_ctx(tmp_path), _probes(driver))
    assert "kernel driver 550.54.14 is loaded but its CUDA library libcuda.so.1 does not load" in r.detail
    assert "libnvidia-compute-550" in r.fix and "--gpus all" in r.fix


def test_b_driver_too_old_for_this_cuda(tmp_path: Path) -> None:
    old = DriverInfo(True, kernel_module="550.54.14", cuda=(12, 4), devices=1)
    r = _check(_ctx(tmp_path), _probes(old))
    assert not r.ok
    assert (
        "the NVIDIA driver 550.54.14 supports CUDA up to 12.4, but onnxruntime-gpu 1.31.1 is built for CUDA 13.0, "
        "which needs driver 580.65.06 or newer"
    ) in r.detail
    assert "nvidia-driver-580" in r.fix and "CUDA Version 13.0 or higher" in r.fix


def test_c_missing_library_named_with_the_pip_command(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    r = _check(ctx, _probes(GOOD_DRIVER, missing=("libcudnn.so.9",)))
    assert "needs libraries that are not installed: libcudnn.so.9 (from nvidia-cudnn-cu13)" in r.detail
    assert f"`{_pip(ctx)} install 'onnxruntime-gpu[cuda,cudnn]==1.31.1'`" in r.fix
    assert "no CUDA toolkit needed" in r.fix


def test_c_missing_tensorrt_falls_back_to_cuda(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "[tensorrt, cuda, cpu]")
    probes = _probes(
        GOOD_DRIVER,
        missing=("libnvinfer.so.10", "libnvonnxparser.so.10"),
        errors={"TensorrtExecutionProvider": "could not be created", "CUDAExecutionProvider": None},
    )
    results = {r.name: r for r in gpu.check_providers(ctx, probes)}
    trt = results["provider-tensorrt"]
    assert results["provider-cuda"].ok
    assert not trt.ok and trt.severity == "warning" and "falls back to cuda" in trt.detail
    assert "libnvinfer.so.10 (from tensorrt-cu13-libs)" in trt.detail
    assert f"`{_pip(ctx)} install 'tensorrt-cu13-libs>=10,<11'`" in trt.fix
    assert "onnxruntime-gpu[cuda,cudnn]" not in trt.fix  # the CUDA libraries are there


def test_d_driver_and_libraries_fine_but_no_device_visible(tmp_path: Path) -> None:
    hidden = DriverInfo(
        True,
        kernel_module="580.95.05",
        cuda=(13, 0),
        devices=0,
        init_error="CUDA_ERROR_NO_DEVICE",
        init_code=100,
    )
    r = _check(_ctx(tmp_path), _probes(hidden, environ={"CUDA_VISIBLE_DEVICES": ""}))
    assert "all libraries load, but no GPU is visible (cuInit: CUDA_ERROR_NO_DEVICE)" in r.detail
    assert "CUDA_VISIBLE_DEVICES=''" in r.detail
    assert "unset CUDA_VISIBLE_DEVICES" in r.fix and "nvidia-smi -L" in r.fix


def test_d_device_id_beyond_the_visible_gpus(tmp_path: Path) -> None:
    r = _check(_ctx(tmp_path, device_id=1), _probes(GOOD_DRIVER))
    assert "only 1 GPU(s) are visible and models.providers.device_id is 1" in r.detail
    assert "models.providers.device_id" in r.fix


def test_e_works(tmp_path: Path) -> None:
    r = _check(_ctx(tmp_path), _probes(GOOD_DRIVER, errors={"CUDAExecutionProvider": None}))
    assert r.ok
    assert r.detail == "CUDAExecutionProvider runs a test session on GPU 0, driver 580.95.05 (CUDA 13.0)"


def test_no_gpu_at_all_is_an_error_when_the_cpu_is_not_configured_to_take_over(tmp_path: Path) -> None:
    probes = _probes(NO_DRIVER)
    probes.create_providers = lambda cfg: {
        "CUDAExecutionProvider": "could not be created",
        "CPUExecutionProvider": "broken",
    }
    r = _check(_ctx(tmp_path), probes)
    assert r.severity == "error" and "falls back" not in r.detail


def test_pip_package_names_follow_the_cuda_major() -> None:
    assert gpu.pip_package("libcublasLt.so.13", 13) == "nvidia-cublas"
    assert gpu.pip_package("libcublasLt.so.12", 12) == "nvidia-cublas-cu12"
    assert gpu.pip_package("libcudart.so.13", 13) == "nvidia-cuda-runtime"
    assert gpu.pip_package("libcudnn.so.9", 12) == "nvidia-cudnn-cu12"
    assert gpu.pip_package("libnvinfer.so.10", 13) == "tensorrt-cu13-libs"
    assert gpu.tensorrt_pip_spec("libnvinfer.so.10", 13) == "tensorrt-cu13-libs>=10,<11"


def test_kernel_module_version_from_proc(tmp_path: Path) -> None:
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)\n"
        "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
    )
    assert gpu.kernel_module_version(proc) == "580.95.05"
    proc.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
    )
    assert gpu.kernel_module_version(proc) == "550.54.14"
    assert gpu.kernel_module_version(tmp_path / "absent") == ""


@pytest.mark.skipif(Path("/proc/driver/nvidia/version").exists(), reason="this machine has an NVIDIA driver")
def test_real_driver_query_without_a_driver() -> None:
    info = gpu.query_driver()
    assert not info.loaded and "libcuda.so.1" in info.error


def _provider_library(name: str) -> Path:
    return Path(ort.__file__).parent / "capi" / name


def test_elf_needed_reads_what_the_cuda_provider_links() -> None:
    lib = _provider_library("libonnxruntime_providers_cuda.so")
    if not lib.exists():
        pytest.skip("this onnxruntime build has no CUDA provider library")
    needed = gpu.elf_needed(lib)
    assert "libcuda.so.1" in needed and any(n.startswith("libcublasLt.so.") for n in needed)
    runtime = gpu.runtime_libraries("CUDAExecutionProvider")
    assert any(n.startswith("libcudnn.so.") for n in runtime)  # loaded at run time, not linked
    assert not any(n.startswith(("libc.so", "libcuda.so", "libstdc++")) for n in runtime)


def test_elf_needed_rejects_a_file_that_is_not_a_library(tmp_path: Path) -> None:
    bogus = tmp_path / "libnot.so"
    bogus.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        gpu.elf_needed(bogus)
