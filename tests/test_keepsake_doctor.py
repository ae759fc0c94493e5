"""`kiosk doctor` with keepsakes on: the port (free, taken, a running kiosk), the address the QR code
encodes (this machine's? reachable by phones?), the printer, TLS and the unit's network rules."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from net_helpers import free_port

from kiosk.appliance.doctor import CHECKS, make_context, run_checks
from kiosk.appliance.doctor.keepsake import check_address, check_dropin, check_port, check_printer
from kiosk.config import KeepsakeConfig
from kiosk.keepsake.network import unit_dropin
from kiosk.keepsake.server import KeepsakeServer
from kiosk.keepsake.store import KeepsakeStore, StoreLimits


def test_the_port_free_taken_or_served_by_a_kiosk(tmp_path: Path) -> None:
    port = free_port()
    k = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{port}")
    assert check_port(k).ok
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        r = check_port(k)
        assert not r.ok and "taken by another program" in r.detail and "ss -ltnp" in r.fix
    store = KeepsakeStore(tmp_path / "k", StoreLimits(900, 5, 10)).open()
    srv = KeepsakeServer(store, k).start()
    try:
        r = check_port(k)
        assert r.ok and "a running kiosk" in r.detail
    finally:
        srv.stop()
    r = check_port(KeepsakeConfig(enabled=True, listen="203.0.113.9:8088"))
    assert not r.ok and "not an address of this machine" in r.detail


def test_the_qr_address_must_be_this_machine_and_reachable() -> None:
    r = check_address(KeepsakeConfig(enabled=True, url_base="http://127.0.0.1:8088"))
    assert not r[0].ok and "loopback" in r[0].detail and r[0].severity == "error"
    r = check_address(
        KeepsakeConfig(enabled=True, url_base="http://203.0.113.7:8088", allow=["203.0.113.0/24"])
    )
    assert not r[0].ok and "not an address of this machine" in r[0].detail and r[0].severity == "warning"
    assert len(r) == 1
    r = check_address(KeepsakeConfig(enabled=True, url_base="http://no-such-host.invalid:8088"))
    assert not r[0].ok and "does not resolve" in r[0].detail
    # a discovered wildcard address with no route into keepsake.allow falls back to loopback: an error
    r = check_address(KeepsakeConfig(enabled=True, listen="0.0.0.0:8088", allow=["198.51.100.0/24"]))
    assert not r[0].ok


def test_an_address_outside_keepsake_allow_is_flagged() -> None:
    me = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            me = s.getsockname()[0]
        except OSError:
            pass
    if not me or me.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address")
    r = check_address(KeepsakeConfig(enabled=True, url_base=f"http://{me}:8088", allow=["198.51.100.0/24"]))
    assert r[0].ok, r
    assert [x.name for x in r if not x.ok] == ["keepsake-allow"]


def test_the_printer_command_must_be_found() -> None:
    r = check_printer(KeepsakeConfig(enabled=True, print_command="no-such-lp-xyz -d booth {file}"))
    assert not r.ok and r.severity == "warning" and "no-such-lp-xyz not found" in r.detail
    r = check_printer(KeepsakeConfig(enabled=True, print_command="lp -d booth {file}"))
    assert r.ok or "cups-client" in r.detail
    assert check_printer(KeepsakeConfig(enabled=True, print_command=f"{sys.executable} {{file}}")).ok
    assert check_printer(KeepsakeConfig(enabled=True)).ok


def test_the_units_network_rules_must_match_the_config(tmp_path: Path) -> None:
    unit = tmp_path / "faceswap-kiosk.service"
    unit.write_text("[Service]\n")
    on = KeepsakeConfig(enabled=True)
    r = check_dropin(on, unit)
    assert not r[0].ok and "no network" in r[0].detail and "kiosk keepsake network --output" in r[0].fix
    dropin = tmp_path / "faceswap-kiosk.service.d" / "keepsake.conf"
    dropin.parent.mkdir()
    dropin.write_text(unit_dropin(on))
    assert check_dropin(on, unit)[0].ok
    assert not check_dropin(on.model_copy(update={"listen": "0.0.0.0:9000"}), unit)[0].ok
    assert not check_dropin(KeepsakeConfig(), unit)[0].ok  # off, but the port is still open
    assert check_dropin(on, tmp_path / "not-installed.service") == []


def test_doctor_runs_the_keepsake_checks_only_when_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "k.yaml"
    cfg.write_text("keepsake: {enabled: false}\n")
    checks = [c for c in CHECKS if c[0] == "keepsake"]
    assert len(checks) == 1, "kiosk doctor runs the keepsake checks"
    names = [c.name for c in run_checks(make_context(cfg), checks).checks]
    assert names[0] == "keepsake" and set(names) <= {"keepsake", "keepsake-network"}
    port = free_port()
    cfg.write_text(
        f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}", url_base: "http://127.0.0.1:{port}"}}\n'
    )
    monkeypatch.setenv("KIOSK_KEEPSAKE_DIR", str(tmp_path / "photos"))
    report = run_checks(make_context(cfg), checks)
    by = {c.name: c for c in report.checks}
    assert by["keepsake-port"].ok and by["keepsake-folder"].ok
    assert str(tmp_path / "photos") in by["keepsake-folder"].detail
    assert "keepsake-address" in [c.name for c in report.errors]  # loopback: no phone reaches it


def test_doctor_says_in_one_line_when_clip_is_on_but_pyav_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from kiosk.appliance.doctor.keepsake import check_clip

    assert check_clip(KeepsakeConfig(enabled=True)) == []  # clip off: nothing to say
    monkeypatch.setitem(sys.modules, "av", None)  # PyAV not installed: `import av` fails
    [missing] = check_clip(KeepsakeConfig(enabled=True, clip=True))
    assert missing.name == "keepsake-clip" and not missing.ok and missing.severity == "warning"
    assert "PyAV" in missing.detail and "\n" not in missing.detail
    assert "faceswap-kiosk[clip]" in missing.fix
