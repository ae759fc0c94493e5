"""The staff console's config section (issue 29, item 3): ``console.enabled``, ``console.listen``,
``console.pin`` / ``console.pin_file``, ``console.allow``."""

from __future__ import annotations

import pytest

from kiosk.config import ConfigError, KioskConfig, parse_config


def test_the_console_is_off_by_default_on_its_own_port() -> None:
    c = KioskConfig().console
    assert c.enabled is False
    assert c.listen_host_port() == ("0.0.0.0", 8089)
    assert c.pin is None and c.pin_file is None
    assert "192.168.0.0/16" in c.allow


def test_the_pin_is_never_in_the_config_repr() -> None:
    cfg = parse_config("console:\n  enabled: true\n  pin: '480213'\n  listen: 127.0.0.1:9000\n")
    assert cfg.console.pin == "480213"
    assert cfg.console.listen_host_port() == ("127.0.0.1", 9000)
    assert "480213" not in repr(cfg) and "480213" not in str(cfg.console)


@pytest.mark.parametrize(
    ("yaml_line", "expect"),
    [
        ("listen: 8089", "booth.yaml:2: console.listen: "),
        ("listen: nohost:8089", "nohost is not an IP address"),
        ("pin: '12'", "console.pin: "),
        ("allow: [192.168.1.0/33]", "not a network"),
        ("allow: []", "is empty"),
        ("pincode: 1234", "unknown key"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_file_line_and_key(yaml_line: str, expect: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(f"console:\n  {yaml_line}\n", "booth.yaml")
    assert len(err.value.problems) == 1
    assert expect in err.value.problems[0]
    assert "\n" not in err.value.problems[0]
    if yaml_line.startswith("pin:"):  # the PIN is never echoed
        assert "12" not in err.value.problems[0].split("console.pin:")[1]
