"""README and docs/ promises that must stay true: the config table is the code's, the commands exist,
every relative link resolves, and the README stays a user's page."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from kiosk.cli import build_parser
from kiosk.config import config_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_config_table_matches_the_code():
    table = (
        CONFIGURATION.split("<!-- config-table:start -->")[1].split("<!-- config-table:end -->")[0].strip()
    )
    assert table == config_table(), (
        "docs/configuration.md's config table is stale: paste the output of `kiosk config doc`"
    )


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
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for name in re.findall(r"^kiosk (\w+)", doc.read_text(encoding="utf-8"), flags=re.M):
            assert name in commands, f"{doc.name} documents `kiosk {name}`, which does not exist"


def test_readme_is_a_users_page():
    assert len(README.splitlines()) <= 400, "README.md is for users: reference material goes to docs/"


def _markdown_files() -> list[Path]:
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if tracked:
        return [ROOT / f for f in tracked]
    skip = {".venv", ".git", "build", "dist"}  # not a git checkout (an unpacked sdist)
    return [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


def test_every_relative_markdown_link_resolves():
    """Every ``[text](target)`` in the repository's Markdown files that is not a web address points
    at a file inside the repository, and its ``#anchor``, if any, at a heading there."""
    problems = []
    for doc in _markdown_files():
        text = doc.read_text(encoding="utf-8")
        body = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code blocks are not links
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists() or ROOT.resolve() not in (dest, *dest.parents):
                problems.append(f"{doc.relative_to(ROOT)}: {target} (no such file in the repository)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not problems, "\n".join(problems)
