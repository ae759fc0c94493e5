"""The keepsake section of the config: defaults (off), and one clear line per bad value."""

from __future__ import annotations

import pytest

from kiosk.config import ConfigError, KioskConfig, parse_config


def test_keepsakes_are_off_by_default_with_the_issue_defaults() -> None:
    k = KioskConfig().keepsake
    assert k.enabled is False and k.confirm is False and k.keep_on_disk is False
    assert (k.countdown_s, k.ttl_s, k.listen, k.print_command, k.url_base) == (
        3,
        900,
        "0.0.0.0:8088",
        None,
        None,
    )
    assert k.listen_host_port() == ("0.0.0.0", 8088)
    assert "192.168.0.0/16" in k.allow


@pytest.mark.parametrize(
    ("yaml_line", "expect"),
    [
        ("listen: 8088", "keepsake.listen: must be address:port"),
        ("listen: booth.local:8088", "booth.local is not an IP address"),
        ("listen: 0.0.0.0:70000", "keepsake.listen: must be address:port"),
        ("url_base: 192.168.1.10", "keepsake.url_base: must be http(s)://host[:port]"),
        ("url_base: http://x/p/../y", "keepsake.url_base: must be http(s)://host[:port]"),
        ("allow: [192.168.1.0/33]", "192.168.1.0/33 is not a network"),
        ("allow: []", "keepsake.allow: is empty"),
        ("print_command: lp -d booth", "keepsake.print_command: must contain {file}"),
        ("print_command: 'lp \"{file}'", "keepsake.print_command: cannot be split into words"),
        ("ttl_s: 1", "keepsake.ttl_s: input should be greater than or equal to 30"),
        ("enabled: true\n  tls_cert: booth.pem", "keepsake: tls_key is missing"),
        ("colour: red", "keepsake.colour: unknown key"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_file_line_and_key(yaml_line: str, expect: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"keepsake:\n  {yaml_line}\n", "booth.yaml")
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith("booth.yaml:"), problems
    assert expect in problems[0], problems
    assert "\n" not in problems[0]


def test_url_base_loses_a_trailing_slash() -> None:
    cfg = parse_config("keepsake:\n  url_base: https://192.168.1.10:8443/\n")
    assert cfg.keepsake.url_base == "https://192.168.1.10:8443"
