"""``kiosk run`` and ``kiosk config check|show|doc|init``."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import logging.handlers
import os
import sys
from pathlib import Path

from kiosk.appliance.exit import EXIT_ERROR, EXIT_LOCKED, EXIT_RECOVERY, leave
from kiosk.appliance.lock import BoothLock, BoothLocked
from kiosk.config import ConfigError, KioskConfig, config_table, default_config_path, dump_config, load_config
from kiosk.paths import bundled_config
from kiosk.util.logs import SafeFormatter, quiet_handlers, safe_file_handler

log = logging.getLogger("kiosk")


def setup_logging(cfg: KioskConfig) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if cfg.logging.file:
        path = cfg.resolve(cfg.logging.file)
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(safe_file_handler(path))  # UTF-8, never an encoding error
    quiet_handlers(handlers)  # a repeated line once, then a count
    formatter = SafeFormatter("%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s")
    for h in handlers:
        h.setFormatter(formatter)
    logging.basicConfig(level=cfg.logging.level, handlers=handlers, force=True)


_fault_file = None


def _enable_faulthandler() -> None:
    """Dump every thread's stack on a fatal signal (the watchdog's SIGABRT) to a copy of stderr,
    which stays the journal while ONNX Runtime's log is captured (:mod:`kiosk.inference.ortlog`)."""
    global _fault_file
    if _fault_file is None:
        try:
            _fault_file = os.fdopen(os.dup(2), "w")
        except OSError:
            faulthandler.enable(all_threads=True)
            return
    faulthandler.enable(file=_fault_file, all_threads=True)


def _load_or_report(path: str) -> KioskConfig | None:
    try:
        return load_config(path)
    except ConfigError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return None


def cmd_run(args: argparse.Namespace) -> int:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.signals import install_early

    signals = install_early()  # already done by kiosk.cli.main for `kiosk run`
    config_path = str(bundled_config("demo")) if args.demo else (args.config or str(default_config_path()))
    if args.camera and not args.demo:
        print("kiosk run: --camera goes with --demo (a config names its own source.kind)", file=sys.stderr)
        return 2
    cfg = _load_or_report(config_path)
    if cfg is None:
        return 2
    if args.camera:  # the demo with the person in front of the camera as its visitor (opt in)
        cfg = cfg.model_copy(
            update={"source": cfg.source.model_copy(update={"kind": "camera", "mirror": True})}
        )
    setup_logging(cfg)
    _enable_faulthandler()
    if signals.stop.is_set():
        return 0
    try:
        lock = BoothLock.acquire(cfg, Path(config_path))
    except BoothLocked as exc:
        print(f"kiosk: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    opts = RunOptions(
        headless=args.headless,
        frames=args.frames,
        seconds=args.seconds,
        screenshot=Path(args.screenshot) if args.screenshot else None,
        stats_json=Path(args.stats_json) if args.stats_json else None,
        stats_interval_s=args.stats_interval,
        screenshot_every_s=args.screenshot_every if args.screenshot else 0.0,
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
            rc = EXIT_RECOVERY
        if app is not None:
            app.shutdown()
    except Exception:  # never an interpreter teardown with threads in native code: see below
        log.exception("the kiosk stopped on an unexpected error")
        rc = EXIT_ERROR
        if app is not None:
            app.shutdown()
    finally:
        lock.release()
    if app is not None and not app.clean_exit_possible:
        # A thread is still inside native code (an abandoned hung model call, a model loader): a
        # normal interpreter exit would destroy ONNX Runtime's C++ threads under it and abort
        # (exit 134, a core dump). Logs, metrics and stats are written: leave at once.
        leave(rc)
    return rc


def cmd_config_check(args: argparse.Namespace) -> int:
    cfg = _load_or_report(args.file)
    if cfg is None:
        return 1
    from kiosk.processing.models import licence_problems

    problems = licence_problems(cfg)
    for line in problems:
        print(f"{args.file}: {line}", file=sys.stderr)
    if problems:
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


def cmd_config_init(args: argparse.Namespace) -> int:
    from kiosk.cli.config_init import write_config

    preset = "demo" if args.demo else "booth"
    path = Path(args.file)
    try:
        write_config(path, preset, force=args.force)
    except FileExistsError as exc:
        print(f"kiosk config init: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kiosk config init: {path}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"{path}: written ({preset}); check an edit with: kiosk config check {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run the kiosk (window, fullscreen or headless)")
    which = run.add_mutually_exclusive_group()
    which.add_argument(
        "--demo",
        action="store_true",
        help="run the bundled demo config: a moving public-domain visitor gets a face swapped in, in a "
        "window; no camera and no downloaded models needed",
    )
    which.add_argument(
        "--config",
        "-c",
        default=None,
        help="YAML config (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, the bundled default.yaml)",
    )
    run.add_argument(
        "--camera",
        action="store_true",
        help="with --demo: the visitor is the person in front of the camera (source.camera) instead of "
        "the bundled one",
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
    run.add_argument(
        "--screenshot-every",
        type=float,
        default=0.0,
        metavar="SEC",
        help="also rewrite --screenshot every SEC seconds while running (atomically)",
    )
    run.set_defaults(func=cmd_run)

    config = sub.add_parser(
        "config", help="check or show a config file, init writes one, doc lists every key"
    )
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION")
    check = config_sub.add_parser("check", help="validate FILE; one line per problem")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(func=cmd_config_check)
    show = config_sub.add_parser("show", help="print the effective config with defaults filled in")
    show.add_argument("file", metavar="FILE")
    show.set_defaults(func=cmd_config_show)
    doc = config_sub.add_parser(
        "doc", help="print the Markdown table of every key (as in docs/configuration.md)"
    )
    doc.set_defaults(func=cmd_config_doc)
    init = config_sub.add_parser(
        "init", help="write a commented YAML config (every key with description, default, bounds)"
    )
    init.add_argument("file", metavar="PATH")
    preset = init.add_mutually_exclusive_group()
    preset.add_argument("--booth", action="store_true", help="values of the bundled booth config (default)")
    preset.add_argument("--demo", action="store_true", help="values of the bundled demo config")
    init.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    init.set_defaults(func=cmd_config_init)
