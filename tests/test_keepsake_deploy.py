"""The unit's network rules follow keepsake.*: no network when keepsakes are off (the unit as shipped),
a generated drop-in opening only the listen port and keepsake.allow when on; `systemd-analyze verify`
accepts it and `systemd-analyze security --offline` still rates the unit OK (<= 4.9); install.sh writes
and removes the drop-in from the booth's config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_deploy import (  # the shared stand-ins and helpers of the deploy tests
    _install,
    _kiosk_unit_with_standins,
    _security_score,
    _systemd_version,
    _verify,
    needs_analyze,
    source_tree,  # noqa: F401 - a fixture
)

from kiosk.config import ConsoleConfig, KeepsakeConfig
from kiosk.keepsake.network import unit_dropin

ROOT = Path(__file__).resolve().parent.parent


def test_no_dropin_when_keepsakes_are_off_and_exact_rules_when_on() -> None:
    assert unit_dropin(KeepsakeConfig()) == ""
    text = unit_dropin(KeepsakeConfig(enabled=True, listen="0.0.0.0:8088", allow=["192.168.50.0/24"]))
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert rules == [
        "[Service]",
        "RestrictAddressFamilies=AF_INET",
        "IPAddressAllow=localhost 192.168.50.0/24",
        "SocketBindAllow=ipv4:tcp:8088",
        "SocketBindDeny=any",
    ]
    v6 = unit_dropin(KeepsakeConfig(enabled=True, listen="[::]:8443", allow=["fd00:1::/64", "10.1.0.0/16"]))
    assert "RestrictAddressFamilies=AF_INET AF_INET6\n" in v6 and "SocketBindAllow=ipv6:tcp:8443\n" in v6
    assert "IPAddressAllow=localhost fd00:1::/64 10.1.0.0/16\n" in v6


@needs_analyze
def test_the_unit_with_the_keepsake_dropin_verifies_and_stays_ok(tmp_path: Path) -> None:
    if _systemd_version() < 250:
        pytest.skip("systemd-analyze security --offline needs systemd 250+")
    unit = _kiosk_unit_with_standins(tmp_path)
    off = _security_score(unit)
    dropin = unit_dropin(KeepsakeConfig(enabled=True))
    dropins = unit.parent / "faceswap-kiosk.service.d"
    dropins.mkdir()
    v6 = unit_dropin(KeepsakeConfig(enabled=True, listen="[::]:8443", allow=["fd00::/8", "10.0.0.0/8"]))
    both = unit_dropin(KeepsakeConfig(enabled=True), console=ConsoleConfig(enabled=True))
    for text in (v6, both, dropin):  # an IPv6 listen address, with the staff console, then the default
        (dropins / "keepsake.conf").write_text(text)
        rc, complaints = _verify(unit)
        assert rc == 0 and complaints == [], complaints
    # --offline reads one file: the unit with the drop-in's [Service] lines appended (what systemd merges)
    merged = tmp_path / "merged" / "faceswap-kiosk.service"
    merged.parent.mkdir()
    merged.write_text(unit.read_text() + "\n" + dropin)
    on = _security_score(merged)
    print(f"systemd-analyze security --offline: keepsakes off {off}, on {on}")
    assert off <= on <= 4.9
    text = unit.read_text()
    assert (
        "\nRestrictAddressFamilies=AF_UNIX\n" in text and "\nIPAddressDeny=any\n" in text
    )  # off: no network


@pytest.mark.slow
def test_install_writes_the_dropin_from_the_config_and_removes_it_when_off(
    source_tree: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    stage = tmp_path / "stage"
    _install(source_tree, "--root", str(stage))
    dropin = stage / "etc/systemd/system/faceswap-kiosk.service.d/keepsake.conf"
    assert not dropin.exists()
    kiosk = stage / "opt/faceswap-kiosk/.venv/bin/kiosk"  # the installed kiosk, here this checkout's
    kiosk.parent.mkdir(parents=True)
    kiosk.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m kiosk "$@"\n')
    kiosk.chmod(0o755)
    assert "keepsake.conf" not in _install(source_tree, "--root", str(stage))  # keepsakes off: nothing
    cfg = stage / "etc/faceswap-kiosk/kiosk.yaml"
    booth = cfg.read_text()
    cfg.write_text(booth + '\nkeepsake: {enabled: true, listen: "0.0.0.0:8090", allow: [192.168.77.0/24]}\n')
    out = _install(source_tree, "--root", str(stage))
    assert "keepsake.conf" in out
    text = dropin.read_text()
    assert "IPAddressAllow=localhost 192.168.77.0/24\n" in text and "SocketBindAllow=ipv4:tcp:8090\n" in text
    assert oct(dropin.stat().st_mode & 0o777) == "0o644"
    assert "0 change(s)" in _install(source_tree, "--root", str(stage))
    cfg.write_text(booth)
    assert "remove" in _install(source_tree, "--root", str(stage))
    assert not dropin.exists()


def test_kiosk_keepsake_network_writes_and_removes(tmp_path: Path) -> None:
    cfg = tmp_path / "k.yaml"
    out = tmp_path / "d" / "keepsake.conf"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kiosk", "keepsake", "network", "--config", str(cfg), *args],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip

    cfg.write_text("keepsake: {enabled: true}\n")
    assert run().stdout == unit_dropin(KeepsakeConfig(enabled=True), str(cfg))
    assert run("--output", str(out)).returncode == 0 and out.read_text().startswith("# Generated")
    cfg.write_text("keepsake: {enabled: false}\n")
    r = run("--output", str(out))
    assert r.returncode == 0 and not out.exists() and "removed" in r.stdout
    cfg.write_text("keepsake: {listen: 8088}\n")
    r = run()
    assert r.returncode == 2 and "keepsake.listen: must be address:port" in r.stderr


def test_the_unit_lets_the_keepsake_server_lower_its_priority() -> None:
    """``~@privileged @resources`` denies setpriority (in @resources): os.nice(10) in the server's
    process failed with EPERM under the shipped unit; a later allow line gives it back."""
    unit = (Path(__file__).parent.parent / "deploy" / "system" / "faceswap-kiosk.service").read_text()
    filters = [ln.split("=", 1)[1].split() for ln in unit.splitlines() if ln.startswith("SystemCallFilter=")]
    allowed = False
    for names in filters:
        deny = names[0].startswith("~")
        names = [n.lstrip("~") for n in names]
        if "@resources" in names or "setpriority" in names:
            allowed = not deny
    assert allowed
