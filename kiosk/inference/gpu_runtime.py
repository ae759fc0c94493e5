"""The CUDA, cuDNN and TensorRT libraries of the GPU providers, loaded from pip packages.

``onnxruntime-gpu``'s CUDA provider links cuBLAS, cuRAND and the CUDA runtime by soname
(``libcublasLt.so.13``) and loads cuDNN while it runs; a fresh Ubuntu with only the NVIDIA driver has none
of them, and ONNX Runtime then quietly runs everything on the CPU. ``onnxruntime-gpu[cuda,cudnn]``
installs them as ``nvidia-*`` wheels inside the virtualenv, where the dynamic linker does not look:
:func:`preload_gpu_libraries` loads them by path first (``onnxruntime.preload_dlls``), so the provider's
own load finds them already in the process. TensorRT's libraries (``tensorrt-cu13-libs``) are loaded the
same way from their package folder. The booth then needs the NVIDIA driver and nothing else: no CUDA
toolkit, no ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import io
import logging
import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import onnxruntime as ort

log = logging.getLogger(__name__)

GPU_PROVIDERS = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})
#: TensorRT's libraries, in load order (the parser and plugins link libnvinfer).
TENSORRT_LIBRARIES = ("libnvinfer.so", "libnvinfer_plugin.so", "libnvonnxparser.so")


@dataclass(frozen=True)
class PreloadReport:
    #: False when this onnxruntime build has no GPU provider, or has no ``preload_dlls``.
    attempted: bool
    #: What ``onnxruntime.preload_dlls`` printed, one line each (``Failed to load libcublasLt.so.13: ...``).
    messages: tuple[str, ...] = ()
    #: TensorRT libraries loaded from a pip package (paths).
    tensorrt: tuple[str, ...] = ()


_lock = threading.Lock()
_report: PreloadReport | None = None


def tensorrt_library_dirs(paths: Iterable[str] | None = None) -> list[str]:
    """Folders of pip-installed TensorRT libraries (``site-packages/tensorrt_libs``) on ``sys.path``."""
    found: list[str] = []
    for entry in sys.path if paths is None else paths:
        for folder in sorted(glob.glob(os.path.join(entry or ".", "tensorrt*libs*"))):
            if os.path.isdir(folder) and glob.glob(os.path.join(folder, "libnvinfer.so.*")):
                found.append(folder)
    return found


def _load_tensorrt(dirs: Iterable[str]) -> list[str]:
    loaded: list[str] = []
    for folder in dirs:
        for stem in TENSORRT_LIBRARIES:
            for path in sorted(glob.glob(os.path.join(folder, stem + ".*"))):
                try:
                    ctypes.CDLL(path)
                    loaded.append(path)
                except OSError as exc:
                    log.warning("TensorRT library %s does not load: %s", path, exc)
        if loaded:
            break  # one TensorRT is enough; a second one would only clash
    return loaded


def summarise(messages: Iterable[str]) -> str:
    """What ``preload_dlls`` printed, in one line: the libraries it could not load, by name."""
    missing, other = [], []
    for line in messages:
        if line.startswith("Failed to load "):
            missing.append(line.removeprefix("Failed to load ").split(":", 1)[0].strip())
        elif not line.startswith("Please follow"):
            other.append(line)
    parts = (
        [f"not found: {', '.join(missing)} (pip install onnxruntime-gpu[cuda,cudnn]; kiosk doctor explains)"]
        if missing
        else []
    )
    return "; ".join(parts + other) or "; ".join(messages)


def preload_gpu_libraries() -> PreloadReport:
    """Load the pip-installed CUDA/cuDNN (and TensorRT) libraries into this process, once.

    Call it before the first GPU session; later calls return the first call's report. It never raises:
    what is missing is reported by the provider that needs it (and explained by ``kiosk doctor``).
    """
    global _report
    with _lock:
        if _report is not None:
            return _report
        if not GPU_PROVIDERS & set(ort.get_available_providers()):
            _report = PreloadReport(False)
            return _report
        preload = getattr(ort, "preload_dlls", None)
        messages: tuple[str, ...] = ()
        if preload is None:
            log.info(
                "onnxruntime %s has no preload_dlls (added in 1.21): CUDA/cuDNN must be on the loader path",
                ort.__version__,
            )
        else:
            out = io.StringIO()
            try:
                # preload_dlls print()s each library it cannot load; keep that off stdout (`--json`).
                with contextlib.redirect_stdout(out):
                    preload()  # (cuda=True, cudnn=True, msvc=True, directory=None): nvidia-* wheels first
            except Exception as exc:  # a broken install must not stop the kiosk: the CPU still runs
                out.write(f"preload_dlls failed: {exc}\n")
            messages = tuple(line.strip() for line in out.getvalue().splitlines() if line.strip())
            for line in messages:
                log.debug("GPU libraries: %s", line)
            if messages:  # one line for the journal (a CPU-only PC lists every library it lacks)
                log.info("GPU libraries: %s", summarise(messages))
        tensorrt = tuple(_load_tensorrt(tensorrt_library_dirs()))
        _report = PreloadReport(preload is not None, messages, tensorrt)
        return _report
