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
    test_command = README.split("Run the tests", 1)[1].split("```sh\n", 1)[1].split("\n", 1)[0]
    assert test_command.startswith(".venv/bin/python -m pytest -q"), test_command
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.strip().splitlines()[-1] == test_command, "CI must end with exactly the README's test command"
    assert "\n.venv/bin/python -m pytest -q -n 2 -m slow --reruns 2" in ci, "CI runs the slow tests too"
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
        return [ROOT / f for f in tracked if (ROOT / f).is_file()]  # not a file deleted but not yet staged
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


#: Top folders of the repository whose paths the docs cite (``scripts/soak.py``, ``kiosk/...``).
_REPO_DIRS = ("kiosk", "scripts", "deploy", "tests", "benchmarks", "docs", "configs", ".ci")
_REPO_PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(map(re.escape, _REPO_DIRS)) + r")/[\w./-]*)")


def _code_spans(text: str) -> list[str]:
    """The fenced code blocks and the inline ``code`` spans of a Markdown text."""
    fences = re.findall(r"```.*?```", text, flags=re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return fences + inline


def test_every_repository_path_in_code_exists():
    """A repository path the docs name in code (``scripts/soak.py``, ``kiosk/cli/models.py``,
    ``deploy/install.sh``), in a command or on its own, is in the repository."""
    problems = []
    for doc in _markdown_files():
        for span in _code_spans(doc.read_text(encoding="utf-8")):
            for path in _REPO_PATH.findall(span):
                path = path.rstrip(".,:;")
                if not (ROOT / path).exists():
                    problems.append(f"{doc.relative_to(ROOT)}: `{path}` (no such file in the repository)")
    assert not problems, "\n".join(sorted(set(problems)))


def _table_blocks(text: str) -> list[tuple[int, list[str]]]:
    """Runs of consecutive lines starting with ``|`` outside code blocks: (first line number, lines)."""
    blocks: list[tuple[int, list[str]]] = []
    fenced = False
    previous_was_row = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        row = not fenced and line.lstrip().startswith("|")
        if row and previous_was_row:
            blocks[-1][1].append(line)
        elif row:
            blocks.append((number, [line]))
        previous_was_row = row
    return blocks


def test_every_table_row_is_inside_a_table():
    """Each run of ``| ... |`` lines starts with a header and its ``|---|`` line: a row left after a
    blank line or a paragraph renders as plain text with pipes."""
    delimiter = re.compile(r"\|?(\s*:?-{3,}:?\s*\|)+\s*(:?-{3,}:?\s*)?")
    problems = [
        f"{doc.relative_to(ROOT)}:{number}: {lines[0][:60]}... (a row outside a table: no header above it)"
        for doc in _markdown_files()
        for number, lines in _table_blocks(doc.read_text(encoding="utf-8"))
        if len(lines) < 2 or not delimiter.fullmatch(lines[1].strip())
    ]
    assert not problems, "\n".join(problems)
