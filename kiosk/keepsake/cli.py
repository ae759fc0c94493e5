"""``kiosk keepsake network``: the systemd drop-in of the kiosk's network rules, from the config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_network(args: argparse.Namespace) -> int:
    from kiosk.config import ConfigError, default_config_path, load_config
    from kiosk.keepsake.network import unit_dropin
    from kiosk.util.atomic import atomic_write

    path = Path(args.config) if args.config else default_config_path()
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 2
    text = unit_dropin(cfg.keepsake, str(path), cfg.console)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    try:
        if text:
            atomic_write(out, text, mode=0o644)
            print(
                f"wrote {out}; apply it: sudo systemctl daemon-reload && sudo systemctl restart faceswap-kiosk"
            )
        elif out.exists():
            out.unlink()
            print(
                f"removed {out} (keepsakes and console off: no network); apply it: sudo systemctl daemon-reload"
            )
    except OSError as exc:
        print(f"{out}: {exc.strerror or exc} (run it with sudo)", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    keepsake = sub.add_parser(
        "keepsake", help="visitors' keepsake photos: network (the unit's network rules; docs/keepsakes.md)"
    )
    ksub = keepsake.add_subparsers(dest="keepsake_command", metavar="COMMAND", required=True)
    net = ksub.add_parser(
        "network",
        help="print (or write) the systemd drop-in that opens the keepsake and console ports to the booth LAN",
        description=(
            "With keepsake.enabled or console.enabled: a drop-in for faceswap-kiosk.service allowing Internet "
            "sockets, the keepsake.allow and console.allow networks and localhost, and bind() on the listen "
            "ports only. Both off: nothing (the unit as shipped has no network); with --output the file is "
            "removed."
        ),
    )
    net.add_argument("--config", "-c", metavar="FILE", help="YAML config (default: $KIOSK_CONFIG, ...)")
    net.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write it here (e.g. /etc/systemd/system/faceswap-kiosk.service.d/keepsake.conf)",
    )
    net.set_defaults(func=cmd_network)
