"""The staff console: its PIN and its port (only when ``console.enabled``). The unit's network
rules for the console's port are checked with the keepsake server's (:func:`check_dropin`)."""

from __future__ import annotations

import errno
import http.client
import stat

from kiosk.appliance.doctor.core import CheckResult, DoctorContext, resolve
from kiosk.appliance.doctor.keepsake import bind_error, local_address
from kiosk.config import ConsoleConfig


def _console_answers(host: str, port: int) -> bool:
    """Whether what listens on ``port`` is a kiosk's staff console (its login page, our Server header)."""
    try:
        conn = http.client.HTTPConnection(local_address(host), port, timeout=2)
        conn.request("GET", "/login")
        resp = conn.getresponse()
        server = resp.getheader("Server")
        conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return resp.status == 200 and server == "faceswap-kiosk"


def check_console_port(c: ConsoleConfig, keepsake_listen: str | None = None) -> CheckResult:
    host, port = c.listen_host_port()
    if keepsake_listen is not None and keepsake_listen.rsplit(":", 1)[-1] == str(port):
        return CheckResult(
            "console-port",
            False,
            f"console.listen {c.listen} uses the keepsake server's port",
            "give the console a port of its own in console.listen (the default is 8089)",
        )
    if (exc := bind_error(host, port)) is not None:
        if exc.errno == errno.EADDRINUSE:
            if _console_answers(host, port):
                return CheckResult(
                    "console-port", True, f"{c.listen}: a running kiosk serves its console there"
                )
            return CheckResult(
                "console-port",
                False,
                f"{c.listen} is taken by another program",
                f"find it: `sudo ss -ltnp 'sport = :{port}'`; or choose another port in console.listen",
            )
        if exc.errno == errno.EACCES:
            return CheckResult(
                "console-port",
                False,
                f"{c.listen}: ports below 1024 need privileges the kiosk does not have",
                "use a port such as 8089 in console.listen",
            )
        return CheckResult(
            "console-port",
            False,
            f"cannot listen on {c.listen}: {exc.strerror or exc}",
            "use an address of this machine (or 0.0.0.0) in console.listen",
        )
    return CheckResult("console-port", True, f"{c.listen} is free for the staff console")


def check_console_pin(ctx: DoctorContext, c: ConsoleConfig) -> CheckResult:
    """A PIN the console can start with; a PIN file only the kiosk's user reads. Never the PIN."""
    from kiosk.console.auth import PinError, read_pin

    pin_file = resolve(ctx.cfg, c.pin_file) if c.pin_file and c.pin is None else None
    try:
        read_pin(c.pin, pin_file)
    except PinError as exc:
        return CheckResult(
            "console-pin", False, f"{exc}: the console does not start", "put the PIN in console.pin_file"
        )
    if pin_file is None:
        return CheckResult(
            "console-pin",
            True,
            "PIN set in the config (console.pin; a file of mode 0600 in console.pin_file keeps it out of it)",
        )
    mode = stat.S_IMODE(pin_file.stat().st_mode)
    if mode & 0o077:
        return CheckResult(
            "console-pin",
            False,
            f"the PIN file {pin_file} is readable by other users (mode {mode:04o})",
            f"chmod 600 {pin_file}",
            severity="warning",
        )
    return CheckResult("console-pin", True, f"PIN read from {pin_file} (mode {mode:04o})")


def check_console(ctx: DoctorContext) -> list[CheckResult]:
    c, k = ctx.cfg.console, ctx.cfg.keepsake
    if not c.enabled:
        return [CheckResult("console", True, "staff console off: no console port")]
    return [
        check_console_pin(ctx, c),
        check_console_port(c, k.listen if k.enabled else None),
    ]
