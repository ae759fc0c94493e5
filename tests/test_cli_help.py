"""`kiosk --help` tells the truth: a command with actions names every one of them."""

from __future__ import annotations

import argparse

from kiosk.cli import build_parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(action.choices) if action is not None else {}


def test_top_level_help_names_every_action_of_a_command():
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in top._choices_actions}
    checked = 0
    for name, sub in _subcommands(parser).items():
        actions = _subcommands(sub)
        if not actions:
            continue
        missing = [a for a in actions if a not in helps[name]]
        assert not missing, f"`kiosk --help` describes {name} as {helps[name]!r}: it does not name {missing}"
        checked += 1
    assert checked >= 2  # config and models at least
