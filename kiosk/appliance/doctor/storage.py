"""Storage: free disk space, and folders the kiosk (or `kiosk models fetch`) must be able to write."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from kiosk import paths
from kiosk.appliance.doctor.core import CheckResult, DoctorContext, existing_parent, owner, resolve

GIB = 1024**3
#: Free space below this is an error (the models need ~1.1 GB; logs and engine caches grow).
DISK_ERROR_BYTES = 1 * GIB
DISK_WARN_BYTES = 3 * GIB


def _writable(path: Path) -> tuple[bool, str]:
    target = path if path.is_dir() else existing_parent(path)
    try:
        with tempfile.NamedTemporaryFile(dir=target, prefix=".kiosk-doctor-"):
            pass
    except OSError as exc:
        return False, f"{target} is not writable ({exc.strerror or exc})"
    where = "" if target == path else f" (will be created in {target})"
    return True, f"{path} writable{where}"


def check_disk(ctx: DoctorContext) -> list[CheckResult]:
    models_dir = resolve(ctx.cfg, ctx.cfg.models.dir)
    where = existing_parent(models_dir)
    free = shutil.disk_usage(where).free
    detail = f"{free / GIB:.1f} GiB free on the disk holding {models_dir}"
    if free < DISK_ERROR_BYTES:
        return [
            CheckResult(
                "disk",
                False,
                detail,
                "free space: `sudo journalctl --vacuum-size=200M`, "
                "remove old files; the models alone need about 1.1 GB",
            )
        ]
    if free < DISK_WARN_BYTES:
        return [
            CheckResult(
                "disk",
                False,
                detail + " (low)",
                "free some space: `sudo journalctl --vacuum-size=200M`, `sudo apt-get clean`",
                "warning",
            )
        ]
    return [CheckResult("disk", True, detail)]


def check_cache(ctx: DoctorContext) -> list[CheckResult]:
    providers = ctx.cfg.models.providers
    results = []
    models_dir = resolve(ctx.cfg, ctx.cfg.models.dir)
    ok, text = _writable(models_dir)
    # Only `kiosk models fetch` writes there; the kiosk itself only reads.
    results.append(
        CheckResult(
            "models-dir-writable", ok, text, f"sudo chown -R $USER {existing_parent(models_dir)}", "warning"
        )
    )
    trt_dir = resolve(ctx.cfg, providers.trt_cache_dir)
    ok, text = _writable(trt_dir)
    needed = "tensorrt" in providers.order
    results.append(
        CheckResult(
            "trt-cache-writable",
            ok,
            text + ("" if needed else " (TensorRT not in use)"),
            f"sudo chown -R {owner()} {existing_parent(trt_dir)} (without it TensorRT rebuilds its engines, "
            "minutes, at every start)",
            "error" if needed else "warning",
        )
    )
    results.append(_check_kernel_cache())
    return results


def _check_kernel_cache() -> CheckResult:
    """numba's kernel cache (:func:`kiosk.paths.configure_numba_cache`): without it every start
    compiles the pixel kernels again."""
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or paths.cache_dir() / "numba")
    ok, text = _writable(folder)
    return CheckResult(
        "kernel-cache-writable",
        ok,
        text,
        f"sudo chown -R $USER {existing_parent(folder)} or set NUMBA_CACHE_DIR to a writable folder "
        "(without it every start compiles the pixel kernels again, seconds)",
        "warning",
    )
