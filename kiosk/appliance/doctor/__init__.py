"""``kiosk doctor``: can this machine run the kiosk? Each problem in plain words, with its fix.

Every check returns one or more :class:`CheckResult` and never raises: a check that crashes is
itself reported as a problem. The kiosk can run when no check failed with severity ``error``;
``warning`` means it runs, but worse than it could (CPU instead of GPU, a slower camera).

One module per concern: :mod:`.packages`, :mod:`.gpu` (ONNX Runtime providers, driver, CUDA
libraries), :mod:`.display`, :mod:`.camera` (the picture source), :mod:`.models` (model files, face
library, source face) and :mod:`.storage` (disk, writable caches), :mod:`.keepsake` (port, QR address, printer); :mod:`.core` holds what they
share. Heavy modules are imported inside the checks, so a broken package shows up as a failed check
rather than as a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from kiosk.appliance.doctor.camera import check_camera, check_source
from kiosk.appliance.doctor.console import check_console
from kiosk.appliance.doctor.core import (
    CheckResult,
    DoctorContext,
    Report,
    Severity,
    check_config,
)
from kiosk.appliance.doctor.display import check_display
from kiosk.appliance.doctor.gpu import check_providers
from kiosk.appliance.doctor.keepsake import check_keepsake
from kiosk.appliance.doctor.models import check_faces_dir, check_models, check_source_face
from kiosk.appliance.doctor.packages import check_packages
from kiosk.appliance.doctor.storage import check_cache, check_disk
from kiosk.config import ConfigError, KioskConfig, load_config
from kiosk.util.errors import one_line

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "DoctorContext",
    "Report",
    "Severity",
    "check_cache",
    "check_camera",
    "check_config",
    "check_console",
    "check_disk",
    "check_display",
    "check_faces_dir",
    "check_keepsake",
    "check_models",
    "check_packages",
    "check_providers",
    "check_source",
    "check_source_face",
    "make_context",
    "print_report",
    "run_checks",
]

Check = Callable[[DoctorContext], Iterable[CheckResult]]

CHECKS: tuple[tuple[str, Check], ...] = (
    ("python-packages", check_packages),
    ("config", check_config),
    ("providers", check_providers),
    ("display", check_display),
    ("source", check_source),
    ("models", check_models),
    ("source-face", check_source_face),
    ("faces-dir", check_faces_dir),
    ("disk", check_disk),
    ("cache", check_cache),
    ("keepsake", check_keepsake),
    ("console", check_console),
)


def make_context(config_path: Path, headless: bool = False, camera_seconds: float = 1.0) -> DoctorContext:
    try:
        cfg = load_config(config_path)
        ok, problems = True, []
    except ConfigError as exc:
        cfg = KioskConfig(base_dir=config_path.absolute().parent)
        ok, problems = False, exc.problems
    ctx = DoctorContext(config_path, cfg, ok, headless=headless, camera_seconds=camera_seconds)
    ctx.extra["config_problems"] = problems
    return ctx


def run_checks(ctx: DoctorContext, checks: Iterable[tuple[str, Check]] = CHECKS) -> Report:
    results: list[CheckResult] = []
    for name, check in checks:
        try:
            results.extend(check(ctx))
        except Exception as exc:  # a crashing check is a finding, not a traceback
            results.append(
                CheckResult(
                    name,
                    False,
                    f"the check itself failed: {type(exc).__name__}: {one_line(exc)}",
                    "report this with the output of `kiosk doctor --json`",
                )
            )
    return Report(str(ctx.config_path), tuple(results))


def print_report(report: Report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.to_text())
