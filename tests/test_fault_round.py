"""The pure helpers of ``scripts/fault_round.py`` (the round itself runs against the installed wheel,
minutes long: not in the suite)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kiosk.config import parse_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fr() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fault_round", ROOT / "scripts" / "fault_round.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fault_round"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_booth_config_is_valid_with_keepsakes_over_https_and_loopback_phones(fr: ModuleType) -> None:
    cfg = parse_config(fr.booth_config(18555), "<fault round>")
    ks = cfg.keepsake
    assert ks.enabled and ks.listen == "127.0.0.1:18555" and ks.url_base == "https://127.0.0.1:18555"
    assert (ks.tls_cert, ks.tls_key) == ("booth.crt", "booth.key")
    # the attackers' 127.0.0.x addresses must count as phones, else the server closes them at once
    assert ks.allow == ["127.0.0.0/8"]
    assert (ks.countdown_s, ks.cooldown_s, ks.takes_per_visitor) == (0, fr.COOLDOWN_S, 0)
    assert cfg.logging.file == "kiosk.log" and cfg.monitoring.textfile == "metrics.prom"
    two = parse_config(fr.booth_config(18556, "k2.log", "m2.prom"), "<second kiosk>")
    assert (two.logging.file, two.monitoring.textfile, two.keepsake.listen) == (
        "k2.log",
        "m2.prom",
        "127.0.0.1:18556",
    )


def test_tokens_are_found_in_any_file_but_photos_are_not_searched(fr: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "kiosk.log").write_text("INFO served /p/AbCdEf123456 to a phone\n")
    (tmp_path / "stats.json").write_text('{"keepsakes": {"taken": 2}}')
    (tmp_path / "keepsakes").mkdir()
    (tmp_path / "keepsakes" / "AbCdEf123456.jpg").write_bytes(b"\xff\xd8AbCdEf123456")
    files = fr.files_to_grep(tmp_path)
    assert tmp_path / "keepsakes" / "AbCdEf123456.jpg" not in files and tmp_path / "stats.json" in files
    found = fr.tokens_in_files(files, {"AbCdEf123456", "ZzZzZz999999", ""})
    assert found == {str(tmp_path / "logs" / "kiosk.log"): ["AbCdEf123456"]}


def test_token_of_reads_only_the_booths_own_addresses(fr: ModuleType) -> None:
    base = "https://127.0.0.1:8443"
    assert fr.token_of(f"{base}/p/Tk_-0123456789", base) == "Tk_-0123456789"
    assert fr.token_of("https://evil.example/p/Tk_-0123456789", base) is None
    assert fr.token_of(f"{base}/p/short", base) is None
    assert fr.token_of("", base) is None


def test_verdict_lines(fr: ModuleType) -> None:
    assert fr.verdict_line("slowloris", [], "6 addresses") == "PASS slowloris: 6 addresses"
    assert (
        fr.verdict_line("server_kill", ["not restarted"], "pid 3") == "FAIL server_kill: not restarted; pid 3"
    )
    assert fr.verdict_line("sigusr1", []) == "PASS sigusr1"


def test_it_refuses_to_run_the_checkouts_kiosk(fr: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the test suite ``kiosk`` imports from the checkout: the round must not pass for the wheel."""
    assert fr.main(["--attacks", "sigusr1"]) == 2
    assert "run the installed wheel's python" in capsys.readouterr().out
