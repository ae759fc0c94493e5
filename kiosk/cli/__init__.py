"""Command line: ``kiosk run|config|detect|swap|models|doctor``. Parses arguments and hands over."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

from kiosk.paths import DIST_NAME

# Modules that add sub-commands; each has ``register(subparsers)`` and sets ``func`` on its parsers.
_COMMAND_MODULES = (
    "kiosk.cli.commands",
    "kiosk.cli.models",
    "kiosk.appliance.cli",
    "kiosk.keepsake.cli",
    "kiosk.tools.bench_cli",
)


def version() -> str:
    """The installed distribution's version (package metadata); the source's when not installed."""
    try:
        return importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        from kiosk import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kiosk", description="Real-time face-swap kiosk.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # the optional command module is not there yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    if words[:1] == ["run"]:
        from kiosk.signals import install_early

        install_early()  # before the slow imports below: SIGTERM during start-up exits with 0
        from kiosk.util.limits import RUN_ADDRESS_SPACE, check_headroom

        # Under a tight `ulimit -v` the imports below crash (SIGSEGV, silently): say it first.
        problem = check_headroom("kiosk run cannot start", memory=RUN_ADDRESS_SPACE)
        if problem:
            print(f"kiosk: {problem}", file=sys.stderr)
            return 3
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
