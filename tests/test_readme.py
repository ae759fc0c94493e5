"""README promises that must stay true: the config table is the code's, the commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from kiosk.cli import build_parser
from kiosk.config import config_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_config_table_matches_the_code():
    table = README.split("<!-- config-table:start -->")[1].split("<!-- config-table:end -->")[0].strip()
    assert table == config_table(), "README's config table is stale: paste the output of `kiosk config doc`"


def test_two_commands_are_there_and_ci_runs_the_test_command():
    assert "bash scripts/setup.sh && .venv/bin/kiosk run --demo" in README
    assert ".venv/bin/python -m pytest -q" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest -q" in ci.splitlines()[-1]
    assert "\nbash scripts/check_wheel.sh\n" in ci  # the installed wheel, outside the checkout


def test_documented_subcommands_exist():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[attr-defined]
    for name in re.findall(r"^kiosk (\w+)", README, flags=re.M):
        assert name in commands, f"README documents `kiosk {name}`, which does not exist"


def test_readme_images_exist():
    for path in re.findall(r"\]\((docs/img/[\w.-]+)\)", README):
        assert (ROOT / path).is_file(), path
