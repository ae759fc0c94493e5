"""``kiosk run`` and ``kiosk config check|show``."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import logging.handlers
import os
import sys
from pathlib import Path

from kiosk.config import ConfigError, KioskConfig, config_table, default_config_path, dump_config, load_config

log = logging.getLogger("kiosk")


def setup_logging(cfg: KioskConfig) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if cfg.logging.file:
        path = cfg.resolve(cfg.logging.file)
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.handlers.RotatingFileHandler(path, maxBytes=10_000_000, backupCount=5))
    logging.basicConfig(
        level=cfg.logging.level,
        format="%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def _load_or_report(path: str) -> KioskConfig | None:
    try:
        return load_config(path)
    except ConfigError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return None


def cmd_run(args: argparse.Namespace) -> int:
    from kiosk.app import KioskApp, RunOptions
    from kiosk.signals import install_early

    signals = install_early()  # already done by kiosk.cli.main for `kiosk run`
    config_path = args.config or str(default_config_path())
    cfg = _load_or_report(config_path)
    if cfg is None:
        return 2
    setup_logging(cfg)
    faulthandler.enable()
    if signals.stop.is_set():
        return 0
    opts = RunOptions(
        headless=args.headless,
        frames=args.frames,
        seconds=args.seconds,
        screenshot=Path(args.screenshot) if args.screenshot else None,
        stats_json=Path(args.stats_json) if args.stats_json else None,
        stats_interval_s=args.stats_interval,
    )
    from kiosk.render.window import DisplayError

    app: KioskApp | None = None
    signals.exit_at_once = False  # from here on threads run: a signal stops them and joins them
    try:
        app = KioskApp(cfg, opts, config_path=Path(config_path), signals=signals)
        rc = app.run()
    except DisplayError as exc:
        if signals.stop.is_set():  # the window was being opened as the signal came: not an error
            rc = 0
        else:
            print(f"kiosk: {exc}", file=sys.stderr)
            rc = 3
        if app is not None:
            app.shutdown()
    if app is not None and not app.clean_exit_possible:
        # A model loader is still inside ONNX Runtime (it cannot be interrupted): a normal
        # interpreter exit would destroy its C++ threads and abort (exit 134). Leave at once.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


def cmd_config_check(args: argparse.Namespace) -> int:
    cfg = _load_or_report(args.file)
    if cfg is None:
        return 1
    print(f"{args.file}: OK")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    cfg = _load_or_report(args.file)
    if cfg is None:
        return 1
    sys.stdout.write(dump_config(cfg))
    return 0


def cmd_config_doc(args: argparse.Namespace) -> int:
    print(config_table())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run the kiosk (window, fullscreen or headless)")
    run.add_argument(
        "--config",
        "-c",
        default=None,
        help="YAML config (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, configs/default.yaml)",
    )
    run.add_argument("--headless", action="store_true", help="render offscreen (EGL), no window")
    run.add_argument("--frames", type=int, default=0, help="exit after N rendered frames")
    run.add_argument("--seconds", type=float, default=0.0, help="exit after S seconds")
    run.add_argument("--screenshot", metavar="PATH", help="write the last composed frame as PNG at exit")
    run.add_argument("--stats-json", metavar="PATH", help="write run statistics as JSON at exit")
    run.add_argument(
        "--stats-interval",
        type=float,
        default=0.0,
        metavar="SEC",
        help="also rewrite --stats-json every SEC seconds while running",
    )
    run.set_defaults(func=cmd_run)

    config = sub.add_parser("config", help="check or show a config file")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION")
    check = config_sub.add_parser("check", help="validate FILE; one line per problem")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(func=cmd_config_check)
    show = config_sub.add_parser("show", help="print the effective config with defaults filled in")
    show.add_argument("file", metavar="FILE")
    show.set_defaults(func=cmd_config_show)
    doc = config_sub.add_parser("doc", help="print the Markdown table of every key (as in README.md)")
    doc.set_defaults(func=cmd_config_doc)
