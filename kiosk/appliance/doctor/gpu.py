"""ONNX Runtime providers: does each configured one run, and if a GPU provider does not, why not.

A GPU provider that cannot run is told apart as one of:

* ``no-driver``: no NVIDIA driver (``libcuda.so.1`` does not load);
* ``driver-too-old``: the driver supports an older CUDA than this onnxruntime-gpu is built for;
* ``missing-library``: a named CUDA/cuDNN/TensorRT library is not installed (with the pip command);
* ``no-device``: driver and libraries load but no GPU is visible (``CUDA_VISIBLE_DEVICES``, container);
* ``works``: it runs a test session.

The probes (library loader, driver query, provider creation, the libraries a provider needs) are
injectable (:class:`GpuProbes`), so each case is tested with fakes on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kiosk.appliance.doctor.core import CheckResult, DoctorContext, venv_pip
from kiosk.config import ProvidersConfig

Kind = Literal[
    "works", "no-driver", "driver-too-old", "missing-library", "no-device", "driver-error", "failed"
]

#: Oldest Linux driver for each CUDA major (CUDA minor version compatibility: any 13.x runs on 580+).
MIN_DRIVER = {12: "525.60.13", 13: "580.65.06"}
#: Libraries of the system and the driver itself: never from pip, not checked as runtime libraries.
_SYSTEM_PREFIXES: tuple[str, ...] = (
    "libc.so",
    "libm.so",
    "libdl.so",
    "libpthread.so",
    "librt.so",
    "libstdc++.so",
    "libgcc_s.so",
    "ld-linux",
    "libcuda.so",
)
_CUDA_NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE
_CUDA_DRIVER_MISMATCH = 803  # CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: driver updated, old kernel module loaded


# ----------------------------------------------------------------------------------------- probes


@dataclass(frozen=True)
class DriverInfo:
    #: libcuda.so.1 (the driver's CUDA library) loads.
    loaded: bool
    #: Why it does not load.
    error: str = ""
    #: The kernel module's version (``580.95.05``) from /proc/driver/nvidia/version; "" without one.
    kernel_module: str = ""
    #: Newest CUDA the driver supports (``cuDriverGetVersion``), e.g. (13, 0).
    cuda: tuple[int, int] | None = None
    #: GPUs visible to this process after ``cuInit``; None when cuInit failed for another reason.
    devices: int | None = None
    #: cuInit's error (``CUDA_ERROR_NO_DEVICE``), "" when it succeeded.
    init_error: str = ""
    init_code: int = 0


def kernel_module_version(path: Path = Path("/proc/driver/nvidia/version")) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    first = text.splitlines()[0] if text else ""
    found = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", first + " ")  # "... Kernel Module  580.95.05  ..."
    if found:
        return found.group(1)
    return "unknown version"


def query_driver() -> DriverInfo:
    """Ask the NVIDIA driver itself (libcuda via ctypes): its CUDA version, and how many GPUs it shows."""
    kernel = kernel_module_version()
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return DriverInfo(False, str(exc), kernel)
    version = ctypes.c_int(0)
    cuda = None
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value > 0:
        cuda = (version.value // 1000, (version.value % 1000) // 10)
    rc = int(lib.cuInit(0))
    if rc != 0:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(rc, ctypes.byref(name))
        text = name.value.decode() if name.value else f"CUDA error {rc}"
        return DriverInfo(True, "", kernel, cuda, 0 if rc == _CUDA_NO_DEVICE else None, text, rc)
    count = ctypes.c_int(0)
    lib.cuDeviceGetCount(ctypes.byref(count))
    return DriverInfo(True, "", kernel, cuda, int(count.value))


def load_library(name: str) -> str | None:
    """None when ``name`` loads (after the kiosk's own preload), else the loader's message."""
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)
    return None


def elf_needed(path: Path) -> list[str]:
    """The DT_NEEDED entries (sonames) of a 64-bit little-endian ELF shared library, read from its
    section headers without loading it (provider libraries are hundreds of MB: we seek, not read)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ValueError(f"{path} is not a 64-bit little-endian ELF file")
        (shoff,) = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        for sec in sections:
            if sec[1] != 6:  # SHT_DYNAMIC
                continue
            f.seek(sec[4])
            dynamic = f.read(sec[5])
            strtab = sections[sec[6]]
            f.seek(strtab[4])
            strings = f.read(strtab[5])
            needed = []
            for off in range(0, len(dynamic) - 15, 16):
                tag, value = struct.unpack_from("<qQ", dynamic, off)
                if tag == 0:  # DT_NULL
                    break
                if tag == 1:  # DT_NEEDED
                    needed.append(strings[value : strings.index(b"\0", value)].decode())
            return needed
    return []


_PROVIDER_LIBRARY = {
    "CUDAExecutionProvider": "libonnxruntime_providers_cuda.so",
    "TensorrtExecutionProvider": "libonnxruntime_providers_tensorrt.so",
}


def _cudnn_libraries() -> list[str]:
    """cuDNN, which the CUDA provider loads while it runs rather than by link (so no DT_NEEDED)."""
    try:
        import onnxruntime as ort

        paths = ort._get_nvidia_dll_paths(False, cuda=False, cudnn=True)  # type: ignore[attr-defined]
        return [p[-1] for p in paths] or ["libcudnn.so.9"]
    except Exception:
        return ["libcudnn.so.9"]


def runtime_libraries(provider: str) -> list[str]:
    """The CUDA/cuDNN/TensorRT sonames ``provider`` needs in this onnxruntime build (not the system's
    or the driver's). TensorRT's provider needs the CUDA provider's libraries too."""
    import onnxruntime as ort

    capi = Path(ort.__file__).parent / "capi"
    names = ["CUDAExecutionProvider"] + (
        ["TensorrtExecutionProvider"] if provider != "CUDAExecutionProvider" else []
    )
    out: list[str] = []
    for name in names:
        lib = capi / _PROVIDER_LIBRARY[name]
        try:
            needed = elf_needed(lib)
        except (OSError, ValueError):
            continue
        out += [n for n in needed if not n.startswith(_SYSTEM_PREFIXES) and n not in out]
    out += [n for n in _cudnn_libraries() if n not in out]
    return out


def build_cuda_version() -> tuple[int, int] | None:
    """The CUDA version this onnxruntime-gpu is built for (``build_and_package_info.cuda_version``)."""
    try:
        from onnxruntime.capi import build_and_package_info

        text = str(build_and_package_info.cuda_version)
        major, _, minor = text.partition(".")
        return int(major), int(minor or 0)
    except Exception:
        return None


def _probe_sessions(providers: ProvidersConfig) -> dict[str, str | None]:
    from kiosk.inference.sessions import ProviderOptions, probe_providers

    try:
        import onnxruntime as ort

        ort.set_default_logger_severity(
            4
        )  # the result is reported below; keep native errors off the terminal
    except Exception:
        pass
    # onnxruntime print()s its "EP Error ... Falling back" banner to stdout: keep --json output clean.
    with contextlib.redirect_stdout(io.StringIO()):
        return probe_providers(ProviderOptions.of(providers))


def _onnxruntime_version() -> str:
    try:
        import importlib.metadata

        return importlib.metadata.version("onnxruntime-gpu")
    except Exception:
        return ""


@dataclass
class GpuProbes:
    """Everything the diagnosis asks the machine; tests replace each with a fake."""

    #: Config providers → for each provider name, None if it runs a test session, else the error.
    create_providers: Callable[[ProvidersConfig], dict[str, str | None]] = _probe_sessions
    query_driver: Callable[[], DriverInfo] = query_driver
    load_library: Callable[[str], str | None] = load_library
    runtime_libraries: Callable[[str], list[str]] = runtime_libraries
    build_cuda: Callable[[], tuple[int, int] | None] = build_cuda_version
    onnxruntime_version: Callable[[], str] = _onnxruntime_version
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))


# ----------------------------------------------------------------------------------------- diagnosis


@dataclass(frozen=True)
class Diagnosis:
    kind: Kind
    detail: str
    fix: str = ""


def pip_package(soname: str, cuda_major: int) -> str:
    """The pip distribution that ships ``soname`` for CUDA ``cuda_major``."""
    stem = soname.split(".so")[0]
    cu = f"cu{cuda_major}"
    if stem.startswith("libcudnn"):
        return f"nvidia-cudnn-{cu}"
    if stem.startswith(("libnvinfer", "libnvonnxparser")):
        return f"tensorrt-{cu}-libs"
    base = {
        "libcublasLt": "nvidia-cublas",
        "libcublas": "nvidia-cublas",
        "libcudart": "nvidia-cuda-runtime",
        "libcurand": "nvidia-curand",
        "libcufft": "nvidia-cufft",
        "libnvrtc": "nvidia-cuda-nvrtc",
        "libnvJitLink": "nvidia-nvjitlink",
    }.get(stem, stem.removeprefix("lib"))
    # CUDA 13 merged the per-version wheels: nvidia-cublas, not nvidia-cublas-cu13.
    return base if cuda_major >= 13 else f"{base}-{cu}"


def tensorrt_pip_spec(soname: str, cuda_major: int) -> str:
    """What to install for the TensorRT library ``soname`` (``libnvinfer.so.10``): the TensorRT major
    this onnxruntime links (PyPI's newest TensorRT is another major, whose sonames do not match)."""
    major = soname.rsplit(".so.", 1)[-1].split(".")[0]
    if not major.isdigit():
        return f"tensorrt-cu{cuda_major}-libs"
    return f"tensorrt-cu{cuda_major}-libs>={major},<{int(major) + 1}"


def _library_fix(missing: list[str], cuda_major: int, pip: str, ort_version: str) -> str:
    cuda = [m for m in missing if not m.startswith(("libnvinfer", "libnvonnxparser"))]
    trt = [m for m in missing if m not in cuda]
    fixes = []
    if cuda:
        pin = f"=={ort_version}" if ort_version else ""
        fixes.append(f"`{pip} install 'onnxruntime-gpu[cuda,cudnn]{pin}'`")
    if trt:
        fixes.append(f"`{pip} install '{tensorrt_pip_spec(trt[0], cuda_major)}'`")
    return " and ".join(fixes)


def _version(v: tuple[int, int] | None) -> str:
    return f"{v[0]}.{v[1]}" if v else "?"


def diagnose(provider: str, error: str | None, probes: GpuProbes, pip: str, device_id: int = 0) -> Diagnosis:
    """Why GPU ``provider`` does or does not run (``error`` is what creating a test session said)."""
    driver = probes.query_driver()
    need = probes.build_cuda() or (13, 0)
    ort_version = probes.onnxruntime_version()
    built = f"{'onnxruntime-gpu ' + ort_version if ort_version else 'this onnxruntime-gpu'} is built for CUDA {_version(need)}"
    if error is None:
        where = f"GPU {device_id}"
        if driver.loaded:
            where += f", driver {driver.kernel_module or '?'} (CUDA {_version(driver.cuda)})"
        return Diagnosis("works", f"{provider} runs a test session on {where}")
    missing = [n for n in probes.runtime_libraries(provider) if probes.load_library(n) is not None]
    named = ", ".join(f"{n} (from {pip_package(n, need[0])})" for n in missing)
    lib_fix = _library_fix(missing, need[0], pip, ort_version)
    also = f"; also missing: {named}" if missing else ""
    also_fix = f"; then {lib_fix}" if missing else ""
    min_driver = MIN_DRIVER.get(need[0], "")
    driver_cmd = (
        f"`sudo ubuntu-drivers install` (or `sudo apt-get install nvidia-driver-{min_driver.split('.')[0]}`)"
        if min_driver
        else "`sudo ubuntu-drivers install`"
    )
    if not driver.loaded:
        if driver.kernel_module:
            branch = driver.kernel_module.split(".")[0]
            return Diagnosis(
                "no-driver",
                f"the NVIDIA kernel driver {driver.kernel_module} is loaded but its CUDA library libcuda.so.1 "
                f"does not load ({driver.error}){also}",
                f"install the driver's CUDA library for the same version (`sudo apt-get install "
                f"libnvidia-compute-{branch}`); in a container, start it with the NVIDIA container toolkit "
                f"(`docker run --gpus all ...`){also_fix}",
            )
        return Diagnosis(
            "no-driver",
            f"no NVIDIA driver: /proc/driver/nvidia/version is missing and libcuda.so.1 does not load{also}",
            f"install the NVIDIA driver: {driver_cmd}, reboot, check `nvidia-smi`{also_fix}",
        )
    if driver.cuda is not None and driver.cuda < need:
        return Diagnosis(
            "driver-too-old",
            f"the NVIDIA driver {driver.kernel_module or '?'} supports CUDA up to {_version(driver.cuda)}, but "
            f"{built}, which needs driver {min_driver or 'a newer one'} or newer{also}",
            f"update the driver: {driver_cmd}, reboot, check that `nvidia-smi` shows CUDA Version "
            f"{_version(need)} or higher{also_fix}",
        )
    if driver.init_code == _CUDA_DRIVER_MISMATCH:
        return Diagnosis(
            "driver-error",
            f"the NVIDIA driver does not start ({driver.init_error}): the driver was updated but the old "
            f"kernel module {driver.kernel_module} is still loaded{also}",
            f"reboot{also_fix}",
        )
    if missing:
        return Diagnosis(
            "missing-library",
            f"{provider} needs libraries that are not installed: {named}",
            f"install them into the kiosk's virtualenv: {lib_fix} (no CUDA toolkit needed)",
        )
    visible = probes.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
    if driver.devices == 0 or (driver.devices is not None and device_id >= driver.devices):
        seen = "no GPU is visible" if driver.devices == 0 else f"only {driver.devices} GPU(s) are visible"
        detail = (
            f"the NVIDIA driver {driver.kernel_module or '?'} (CUDA {_version(driver.cuda)}) and all libraries "
            f"load, but {seen}"
        )
        if driver.init_error:
            detail += f" (cuInit: {driver.init_error})"
        if driver.devices and device_id >= driver.devices:
            detail += f" and models.providers.device_id is {device_id}"
        return Diagnosis(
            "no-device",
            detail + hidden,
            "check that `nvidia-smi -L` lists the GPU; unset CUDA_VISIBLE_DEVICES (or set it to the GPU's "
            "index) in /etc/default/faceswap-kiosk; in a container pass the GPU in (`docker run --gpus all`); "
            "set models.providers.device_id to a listed GPU",
        )
    if driver.init_error:
        return Diagnosis(
            "driver-error",
            f"the NVIDIA driver does not start: cuInit fails with {driver.init_error}{hidden}",
            "check `nvidia-smi` and `sudo dmesg | grep -i nvrm`; reinstall the driver "
            f"({driver_cmd}) and reboot",
        )
    return Diagnosis(
        "failed",
        f"{error} (driver {driver.kernel_module or '?'}, CUDA {_version(driver.cuda)}, all libraries load)",
        "remove it from models.providers.order, and report this with the output of `kiosk doctor --json`",
    )


# ----------------------------------------------------------------------------------------- the check


def check_providers(ctx: DoctorContext, probes: GpuProbes | None = None) -> list[CheckResult]:
    from kiosk.inference.sessions import PROVIDER_NAMES

    probes = probes or GpuProbes()
    providers = ctx.cfg.models.providers
    short_of = {v: k for k, v in PROVIDER_NAMES.items()}
    pip = venv_pip(ctx)
    probed = probes.create_providers(providers)
    working = [name for name, err in probed.items() if err is None]
    results = []
    for name, err in probed.items():
        short = short_of.get(name, name)
        check = f"provider-{short}"
        if short == "cpu":
            if err is None:
                results.append(CheckResult(check, True, f"{name} runs a test session"))
            else:
                results.append(
                    CheckResult(
                        check,
                        False,
                        f"the CPU provider does not run: {err}",
                        f"reinstall ONNX Runtime: {pip} install --force-reinstall onnxruntime-gpu",
                    )
                )
            continue
        if err is not None and "is not in this onnxruntime build" in err:
            results.append(
                CheckResult(
                    check,
                    False,
                    err,
                    f"{pip} uninstall -y onnxruntime && {pip} install --force-reinstall 'onnxruntime-gpu[cuda,cudnn]'",
                    "warning" if working else "error",
                )
            )
            continue
        found = diagnose(name, err, probes, pip, providers.device_id)
        if found.kind == "works":
            results.append(CheckResult(check, True, found.detail))
            continue
        fallback = next((short_of.get(w, w) for w in working), None)
        detail = f"{name} cannot run: {found.detail}"
        if fallback:
            detail += f"; the kiosk falls back to {fallback} (slower)"
        fix = found.fix
        if short == "tensorrt":
            fix += "; or remove `tensorrt` from models.providers.order"
        results.append(CheckResult(check, False, detail, fix, "warning" if fallback else "error"))
    return results
