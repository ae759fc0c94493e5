"""The staff console's port on an installed booth: the unit's drop-in opens it (with the keepsake
server's or alone) and `kiosk doctor` checks the console's PIN, its port and those network rules."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from net_helpers import free_port

from kiosk.appliance.doctor import CHECKS, make_context, run_checks
from kiosk.appliance.doctor.console import check_console_port
from kiosk.appliance.doctor.keepsake import check_dropin
from kiosk.config import ConsoleConfig, KeepsakeConfig
from kiosk.keepsake.network import unit_dropin

ROOT = Path(__file__).resolve().parent.parent


def _rules(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_the_dropin_opens_the_consoles_port_and_networks() -> None:
    console = ConsoleConfig(enabled=True, listen="0.0.0.0:8089", allow=["192.168.60.0/24"])
    alone = unit_dropin(KeepsakeConfig(), console=console)
    assert _rules(alone) == [
        "[Service]",
        "RestrictAddressFamilies=AF_INET",
        "IPAddressAllow=localhost 192.168.60.0/24",
        "SocketBindAllow=ipv4:tcp:8089",
        "SocketBindDeny=any",
    ]
    keepsake = KeepsakeConfig(enabled=True, listen="[::]:8088", allow=["192.168.50.0/24", "192.168.60.0/24"])
    both = _rules(unit_dropin(keepsake, console=console))
    assert both == [
        "[Service]",
        "RestrictAddressFamilies=AF_INET AF_INET6",
        "IPAddressAllow=localhost 192.168.50.0/24 192.168.60.0/24",  # the union, each network once
        "SocketBindAllow=ipv6:tcp:8088",
        "SocketBindAllow=ipv4:tcp:8089",
        "SocketBindDeny=any",
    ]
    assert unit_dropin(KeepsakeConfig(), console=ConsoleConfig()) == ""  # both off: the unit as shipped


def test_keepsake_network_writes_the_consoles_rules_from_the_config(tmp_path: Path) -> None:
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text('console: {enabled: true, pin_file: pin, listen: "0.0.0.0:8090"}\n')
    out = subprocess.run(
        [sys.executable, "-m", "kiosk", "keepsake", "network", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    ).stdout
    assert "SocketBindAllow=ipv4:tcp:8090\n" in out and "IPAddressAllow=localhost 10.0.0.0/8" in out


def test_doctor_checks_the_unit_rules_for_a_console_without_keepsakes(tmp_path: Path) -> None:
    unit = tmp_path / "faceswap-kiosk.service"
    unit.write_text("[Service]\n")
    off, console = KeepsakeConfig(), ConsoleConfig(enabled=True)
    r = check_dropin(off, unit, console=console)
    assert not r[0].ok and "no network" in r[0].detail and "kiosk keepsake network --output" in r[0].fix
    dropin = tmp_path / "faceswap-kiosk.service.d" / "keepsake.conf"
    dropin.parent.mkdir()
    dropin.write_text(unit_dropin(KeepsakeConfig(enabled=True)))  # the keepsake port only
    assert not check_dropin(off, unit, console=console)[0].ok
    dropin.write_text(unit_dropin(off, console=console))
    assert check_dropin(off, unit, console=console)[0].ok
    assert not check_dropin(off, unit)[0].ok  # the console turned off: its port still open


def test_doctor_checks_the_consoles_pin_and_port(tmp_path: Path) -> None:
    cfg = tmp_path / "k.yaml"
    checks = [c for c in CHECKS if c[0] == "console"]
    assert len(checks) == 1, "kiosk doctor runs the console checks"
    cfg.write_text("console: {enabled: false}\n")
    assert [c.name for c in run_checks(make_context(cfg), checks).checks] == ["console"]

    port = free_port()
    cfg.write_text(f'console: {{enabled: true, listen: "127.0.0.1:{port}", pin_file: staff.pin}}\n')
    by_name = {c.name: c for c in run_checks(make_context(cfg), checks).checks}
    assert not by_name["console-pin"].ok and "staff.pin" in by_name["console-pin"].detail
    assert by_name["console-port"].ok

    pin = tmp_path / "staff.pin"
    pin.write_text("secret-4711\n")
    pin.chmod(0o644)
    report = run_checks(make_context(cfg), checks)
    by_name = {c.name: c for c in report.checks}
    assert not by_name["console-pin"].ok and by_name["console-pin"].severity == "warning"
    assert by_name["console-pin"].fix == f"chmod 600 {pin}"
    pin.chmod(0o600)
    by_name = {c.name: c for c in run_checks(make_context(cfg), checks).checks}
    assert by_name["console-pin"].ok
    assert all("secret-4711" not in c.detail + c.fix for c in by_name.values())  # never the PIN

    with socket.socket() as s:  # another program on the console's port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        r = check_console_port(ConsoleConfig(enabled=True, listen=f"127.0.0.1:{port}"))
    assert not r.ok and "taken by another program" in r.detail and f"sport = :{port}" in r.fix
    same = check_console_port(ConsoleConfig(enabled=True, listen="0.0.0.0:8088"), "0.0.0.0:8088")
    assert not same.ok and "keepsake server's port" in same.detail
