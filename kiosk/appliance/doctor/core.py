"""What every check shares: its result, the context it runs in, and the report it ends up in."""

from __future__ import annotations

import getpass
import os
import pwd
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from kiosk.config import KioskConfig

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: How bad a failure is; only meaningful when ``ok`` is False.
    severity: Severity = "error"


@dataclass
class DoctorContext:
    config_path: Path
    cfg: KioskConfig
    config_ok: bool
    headless: bool = False
    camera_seconds: float = 1.0
    #: Python running the kiosk (for subprocess checks and the fixes we print).
    python: str = sys.executable
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    config_path: str
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return not any(not c.ok and c.severity == "error" for c in self.checks)

    @property
    def errors(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok and c.severity == "error"]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.ok and c.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "config": self.config_path,
            "errors": [c.name for c in self.errors],
            "warnings": [c.name for c in self.warnings],
            "checks": [asdict(c) for c in self.checks],
        }

    def to_text(self) -> str:
        lines = [f"kiosk doctor: config {self.config_path}"]
        for c in self.checks:
            tag = "ok  " if c.ok else ("FAIL" if c.severity == "error" else "warn")
            lines.append(f"  [{tag}] {c.name}: {c.detail}")
            if not c.ok and c.fix:
                lines.append(f"         fix: {c.fix}")
        if self.ok:
            verdict = "the kiosk can run"
            if self.warnings:
                verdict += (
                    f", with {len(self.warnings)} warning(s): {', '.join(c.name for c in self.warnings)}"
                )
        else:
            verdict = f"the kiosk cannot run: {', '.join(c.name for c in self.errors)}"
            if self.warnings:
                verdict += f" (and {len(self.warnings)} warning(s))"
        lines.append(verdict + ".")
        return "\n".join(lines)


def resolve(cfg: KioskConfig, path: str | Path) -> Path:
    """A config path, resolved against the config's folder, without ``..`` in what we print."""
    return Path(os.path.normpath(cfg.resolve(path)))


#: The installed service (deploy/install.sh); its ``User=`` is the user the kiosk runs as.
SERVICE_UNIT = Path("/etc/systemd/system/faceswap-kiosk.service")
#: install.sh's default for that user.
DEFAULT_SERVICE_USER = "kiosk"


def service_user(unit: Path = SERVICE_UNIT) -> str | None:
    """The user the kiosk service runs as (``User=`` of the installed unit, else ``kiosk``) when
    that user exists on this machine; None on a desktop or a dev machine without it."""
    name = DEFAULT_SERVICE_USER
    try:
        for line in unit.read_text(encoding="utf-8").splitlines():
            if line.strip().startswith("User="):
                name = line.split("=", 1)[1].strip() or name
    except (OSError, UnicodeDecodeError):
        pass
    try:
        pwd.getpwnam(name)
    except KeyError:
        return None
    return name


def existing_parent(path: Path) -> Path:
    """``path`` or its nearest folder that exists."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def owner() -> str:
    """Who should own the kiosk's folders here: the service user, else whoever runs the doctor."""
    user = service_user()
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "$USER"


def make_dir_fix(path: Path) -> str:
    """The command that creates folder ``path`` for the kiosk: owned by the service user on a
    booth; on a desktop a plain ``mkdir -p`` (``sudo install -d -o $me`` where the parent is not
    writable)."""
    quoted = shlex.quote(str(path))
    user = service_user()
    if user:
        return f"sudo install -d -o {user} {quoted}"
    if os.access(existing_parent(path), os.W_OK):
        return f"mkdir -p {quoted}"
    return f"sudo install -d -o {owner()} {quoted}"


def venv_pip(ctx: DoctorContext) -> str:
    """The pip beside the Python that runs the kiosk (what the fixes tell people to run)."""
    return str(Path(ctx.python).with_name("pip"))


def check_config(ctx: DoctorContext) -> list[CheckResult]:
    if ctx.config_ok:
        return [CheckResult("config", True, f"{ctx.config_path} is valid")]
    problems = ctx.extra.get("config_problems", [])
    return [
        CheckResult(
            "config",
            False,
            " | ".join(problems) or f"{ctx.config_path} could not be read",
            f"edit {ctx.config_path} as each message says, then run `kiosk config check {ctx.config_path}`; "
            "the checks below use the built-in defaults",
        )
    ]
