"""Keepsakes: the web server's port, the address the QR code encodes, TLS, the photo folder, the
printer and the unit's network rules (only when ``keepsake.enabled``)."""

from __future__ import annotations

import errno
import http.client
import ipaddress
import shlex
import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit

from kiosk import paths
from kiosk.appliance.doctor.core import CheckResult, DoctorContext, resolve
from kiosk.config import ConsoleConfig, KeepsakeConfig
from kiosk.util.errors import one_line

#: The installed unit; its keepsake drop-in is compared with the config when it is there.
UNIT_PATH = Path("/etc/systemd/system/faceswap-kiosk.service")


def local_address(host: str) -> str:
    """Where to reach a server that listens on ``host`` from this machine."""
    return "127.0.0.1" if ipaddress.ip_address(host).is_unspecified else host


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not listen on ``host:port`` now (None: it could)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        return exc
    return None


def _kiosk_answers(host: str, port: int) -> bool:
    """Whether what listens on ``port`` is a kiosk's keepsake server (its 404 carries the kiosk CSP)."""
    from kiosk.keepsake.server import CSP

    target = local_address(host)
    try:
        conn = http.client.HTTPConnection(target, port, timeout=2)
        conn.request("GET", "/")
        resp = conn.getresponse()
        csp = resp.getheader("Content-Security-Policy")
        conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return resp.status == 404 and csp == CSP


def check_port(k: KeepsakeConfig) -> CheckResult:
    host, port = k.listen_host_port()
    if (exc := bind_error(host, port)) is not None:
        if exc.errno == errno.EADDRINUSE:
            if _kiosk_answers(host, port):
                return CheckResult(
                    "keepsake-port", True, f"{k.listen}: a running kiosk serves keepsakes there"
                )
            return CheckResult(
                "keepsake-port",
                False,
                f"{k.listen} is taken by another program",
                f"find it: `sudo ss -ltnp 'sport = :{port}'`; or choose another port in keepsake.listen",
            )
        if exc.errno == errno.EACCES:
            return CheckResult(
                "keepsake-port",
                False,
                f"{k.listen}: ports below 1024 need privileges the kiosk does not have",
                "use a port such as 8088 in keepsake.listen (the QR code carries the port)",
            )
        if exc.errno == errno.EADDRNOTAVAIL:
            return CheckResult(
                "keepsake-port",
                False,
                f"{host} is not an address of this machine",
                "set keepsake.listen to 0.0.0.0:8088 (every interface) or to this machine's LAN address",
            )
        return CheckResult(
            "keepsake-port", False, f"{k.listen}: {exc.strerror or exc}", "check keepsake.listen"
        )
    return CheckResult("keepsake-port", True, f"{k.listen} is free")


def _is_local(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((str(ip), 0))  # only an address of this machine can be bound
    except OSError:
        return False
    return True


def check_address(k: KeepsakeConfig) -> list[CheckResult]:
    from kiosk.keepsake.server import url_base_of

    base = url_base_of(k)
    host = urlsplit(base).hostname or ""
    given = "keepsake.url_base" if k.url_base else "discovered (keepsake.url_base not set)"
    try:
        ips = {ipaddress.ip_address(host)}
    except ValueError:
        try:
            ips = {ipaddress.ip_address(a[4][0]) for a in socket.getaddrinfo(host, None)}
        except OSError as exc:
            return [
                CheckResult(
                    "keepsake-address",
                    False,
                    f"the QR code points at {base} ({given}), but {host} does not resolve here: {one_line(exc)}",
                    "phones must resolve it too; use the booth's IP address in keepsake.url_base",
                )
            ]
    if all(ip.is_loopback for ip in ips):
        return [
            CheckResult(
                "keepsake-address",
                False,
                f"the QR code points at {base} ({given}): a phone cannot reach this machine's loopback",
                "connect the booth to the Wi-Fi/LAN the phones use, and name that network in keepsake.allow "
                "(or set keepsake.url_base: http://<booth address>:<port>)",
            )
        ]
    results = []
    local = [ip for ip in ips if _is_local(ip)]
    if not local:
        results.append(
            CheckResult(
                "keepsake-address",
                False,
                f"the QR code points at {base} ({given}), which is not an address of this machine",
                "set keepsake.url_base to this machine's address on the booth network (`ip -brief address`), "
                "or a name that resolves to it",
                "warning" if k.url_base else "error",  # a router's port forward or a DNS name may be meant
            )
        )
    else:
        results.append(CheckResult("keepsake-address", True, f"the QR code points at {base} ({given})"))
    nets = [ipaddress.ip_network(n) for n in k.allow]
    if not any(ip in net for ip in ips for net in nets if ip.version == net.version):
        results.append(
            CheckResult(
                "keepsake-allow",
                False,
                f"{host} is in none of keepsake.allow ({', '.join(k.allow)}): the unit's IPAddressAllow= "
                "denies the phones of that network",
                "add the booth LAN (e.g. 192.168.1.0/24) to keepsake.allow, then run install.sh again",
            )
        )
    return results


def check_printer(k: KeepsakeConfig) -> CheckResult:
    if not k.print_command:
        return CheckResult("keepsake-printer", True, "printing off (keepsake.print_command not set)")
    program = shlex.split(k.print_command)[0]
    found = shutil.which(program)
    if found is None:
        hint = " (CUPS: sudo apt-get install cups-client)" if program in ("lp", "lpr") else ""
        return CheckResult(
            "keepsake-printer",
            False,
            f"print command {program} not found{hint}",
            "install it, or give its full path in keepsake.print_command",
            "warning",  # photos are still shared by QR code; each print shows a staff line
        )
    return CheckResult("keepsake-printer", True, f"prints with {found}")


def check_tls(ctx: DoctorContext, k: KeepsakeConfig) -> list[CheckResult]:
    if not (k.tls_cert and k.tls_key):
        scheme = "https" if (k.url_base or "").startswith("https") else "http"
        if scheme == "https":
            return [
                CheckResult(
                    "keepsake-tls",
                    False,
                    "keepsake.url_base is https://, but no tls_cert/tls_key: the kiosk serves plain HTTP",
                    "set keepsake.tls_cert and keepsake.tls_key, or use http:// in keepsake.url_base",
                )
            ]
        return []
    from kiosk.keepsake.server import tls_context
    from kiosk.keepsake.store import KeepsakeError

    cert, key = resolve(ctx.cfg, k.tls_cert), resolve(ctx.cfg, k.tls_key)
    try:
        tls_context(cert, key)
    except KeepsakeError as exc:
        return [
            CheckResult(
                "keepsake-tls",
                False,
                str(exc),
                "fix the file paths or permissions (the kiosk user reads them)",
            )
        ]
    return [CheckResult("keepsake-tls", True, f"HTTPS with {cert}")]


def check_dropin(
    k: KeepsakeConfig, unit: Path = UNIT_PATH, console: ConsoleConfig | None = None
) -> list[CheckResult]:
    """On an installed booth: the unit's network rules are those the config asks for (the keepsake
    server's and the staff console's ports and networks)."""
    from kiosk.keepsake.network import DROPIN_PATH, unit_dropin

    if not unit.exists():
        return []
    dropin = unit.parent / "faceswap-kiosk.service.d" / Path(DROPIN_PATH).name
    try:
        have = dropin.read_text()
    except OSError:
        have = ""
    want = unit_dropin(k, console=console)
    rules = [line for line in want.splitlines() if line and not line.startswith("#")]
    if all(line in have.splitlines() for line in rules) and (want or not have):
        return [CheckResult("keepsake-network", True, "the unit's network rules match the config")]
    what = (
        "still has no network (no keepsake/console drop-in)"
        if not have
        else "has other network rules than the config"
    )
    return [
        CheckResult(
            "keepsake-network",
            False,
            f"faceswap-kiosk.service {what}",
            f"sudo kiosk keepsake network --output {dropin} && sudo systemctl daemon-reload && "
            "sudo systemctl restart faceswap-kiosk",
        )
    ]


def check_clip(k: KeepsakeConfig) -> list[CheckResult]:
    """``keepsake.clip``: PyAV's H.264 encoder is there (else the kiosk offers stills only)."""
    if not k.clip:
        return []
    from kiosk.keepsake.clip import encoder_problem

    if encoder_problem():
        return [
            CheckResult(
                "keepsake-clip",
                False,
                "keepsake.clip is on but PyAV (its H.264 encoder) is missing: the kiosk offers still photos only",
                "pip install 'faceswap-kiosk[clip]' into the kiosk's venv (scripts/setup.sh does)",
                severity="warning",
            )
        ]
    return [CheckResult("keepsake-clip", True, "moving keepsakes: H.264 MP4 and GIF (PyAV with libx264)")]


def check_keepsake(ctx: DoctorContext) -> list[CheckResult]:
    k, console = ctx.cfg.keepsake, ctx.cfg.console
    if not k.enabled:  # and no drop-in left open from when they were on (or missing for the console)
        ports = "the console's port only" if console.enabled else "no port"
        off = CheckResult("keepsake", True, f"keepsakes off: no photo is stored, the kiosk opens {ports}")
        return [off, *[r for r in check_dropin(k, console=console) if not r.ok]]
    folder = paths.keepsake_dir()
    results = [
        check_port(k),
        *check_address(k),
        *check_tls(ctx, k),
        check_printer(k),
        *check_clip(k),
        *check_dropin(k, console=console),
    ]
    from kiosk.appliance.doctor.storage import _writable

    ok, detail = _writable(folder)
    results.append(
        CheckResult(
            "keepsake-folder",
            ok,
            f"photos in {detail}",
            "" if ok else f"make {folder} writable for the kiosk user",
        )
    )
    return results
