"""System resource limits, named as what they are.

Running out of file descriptors or memory makes libraries fail with messages that blame something
else: glcontext says it "cannot find libGL" when ``dlopen`` gets EMFILE, Mesa "cannot create an EGL
context", ONNX Runtime "system error number 24" on a good model file, and llvmpipe crashes while
compiling shaders when ``ulimit -v`` leaves it too little address space. This module tells which
limit was hit, its value, and how to raise it (``ulimit -n`` / ``LimitNOFILE=``, ``ulimit -v`` /
``LimitAS=``), so the kiosk says that instead of "install Mesa's EGL" or "delete the model".

:func:`check_headroom` is asked before work known to need a lot (a GL context and its shaders);
:func:`limit_problem` after a failure, before blaming a driver or a file.
"""

from __future__ import annotations

import errno
import os
import re
import resource

#: Spare file descriptors below which a failed GL context (libGL/libEGL, the DRI driver, DRM nodes) or
#: ONNX Runtime session (the model file, its thread pool) is put down to ``ulimit -n``.
GL_FDS = 8
MODEL_FDS = 8
#: Address space Mesa needs to create a context and JIT-compile the shaders (llvmpipe: LLVM and
#: one thread stack per core); with less, llvmpipe crashes (SIGSEGV) instead of failing.
GL_ADDRESS_SPACE = 600 << 20

#: Address space ``kiosk run`` needs beyond the bare interpreter: NumPy, OpenCV, numba's LLVM, ONNX
#: Runtime and a GL context (about 650 MB mapped before the context, 600 MB more for it).
RUN_ADDRESS_SPACE = 1250 << 20

_FD_ERRNOS = (errno.EMFILE, errno.ENFILE)
_MEM_ERRNOS = (errno.ENOMEM,)
_GPU_TEXT = re.compile(r"CUDA|cuda|cuDNN|TensorRT|GPU|device memory")
_FD_TEXT = re.compile(r"too many open files|system error number (?:23|24)\b|EMFILE|ENFILE", re.I)
_MEM_TEXT = re.compile(
    r"cannot allocate memory|out of memory|bad_alloc|bad allocation|failed to allocate|"
    r"system error number 12\b|ENOMEM|MemoryError",
    re.I,
)


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.0f} MB"


def open_fds() -> int | None:
    """How many file descriptors this process has open (None where /proc is not there)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return None


def fd_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft


def fd_message(what: str = "") -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = open_fds()
    inuse = f"{n} open, " if n is not None else ""
    cap = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    head = f"{what}: " if what else ""
    return (
        f"{head}out of file descriptors ({inuse}limit {soft}, ulimit -n; hard limit {cap}) — raise it: "
        "ulimit -n 4096 before starting, or LimitNOFILE=4096 in the systemd unit"
    )


def vm_size() -> int | None:
    """This process's address space in use (VmSize, bytes), None where /proc is not there."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def address_space_limit() -> int | None:
    """The soft RLIMIT_AS (``ulimit -v``) in bytes, None when unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def memory_message(what: str = "") -> str:
    head = f"{what}: " if what else ""
    limit = address_space_limit()
    used = vm_size()
    if limit is not None:
        inuse = f", {_mb(used)} in use" if used is not None else ""
        return (
            f"{head}out of memory: the address-space limit is {_mb(limit)} (ulimit -v {limit // 1024}"
            f"{inuse}) — raise it: ulimit -v unlimited before starting, or remove LimitAS= from the "
            "systemd unit"
        )
    return f"{head}out of memory — close other programs or add memory; check MemoryMax= in the systemd unit"


def _is_fd_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _FD_ERRNOS:
        return True
    return bool(_FD_TEXT.search(str(exc)))


def _is_mem_error(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno in _MEM_ERRNOS:
        return True
    text = f"{type(exc).__name__}: {exc}"
    if _GPU_TEXT.search(text):
        return False  # the GPU's memory, not the process's limits: its own message says more
    return bool(_MEM_TEXT.search(text))


def fds_exhausted(spare: int = 2) -> bool:
    """True when fewer than ``spare`` descriptors are left below ``ulimit -n``."""
    n = open_fds()
    return n is not None and n + spare > fd_limit()


def address_space_short(need: int) -> bool:
    """True when ``ulimit -v`` leaves less than ``need`` bytes above what is in use."""
    limit, used = address_space_limit(), vm_size()
    return limit is not None and used is not None and limit - used < need


def limit_problem(
    exc: BaseException | None = None, *, what: str = "", fds: int = 2, memory: int = 0
) -> str | None:
    """A one-line message if ``exc`` (or, without one, the process's state now) is a resource limit:
    the error says so (EMFILE, ENOMEM, MemoryError, their texts), or the process is at its
    descriptor limit (fewer than ``fds`` left) or its address-space limit (less than ``memory``
    bytes left). None when no limit explains it."""
    if exc is not None and _is_fd_error(exc):
        return fd_message(what)
    if exc is not None and _is_mem_error(exc):
        return memory_message(what)
    if fds and fds_exhausted(fds):
        return fd_message(what)
    if memory and address_space_short(memory):
        return memory_message(what)
    return None


def check_headroom(what: str, *, fds: int = 0, memory: int = 0) -> str | None:
    """Before work that needs ``fds`` descriptors and ``memory`` bytes of address space: a message
    naming the limit that leaves too little, or None."""
    if fds and fds_exhausted(fds):
        return fd_message(what)
    if memory and address_space_short(memory):
        limit = address_space_limit() or 0
        used = vm_size() or 0
        return (
            f"{what}: not enough memory under the address-space limit ({_mb(limit)}, ulimit -v "
            f"{limit // 1024}; {_mb(used)} in use, about {_mb(memory)} more needed) — raise it: ulimit -v "
            "unlimited before starting, or remove LimitAS= from the systemd unit"
        )
    return None
