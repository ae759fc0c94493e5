"""``kiosk doctor``: the appliance's sub-command."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_doctor(args: argparse.Namespace) -> int:
    from kiosk.appliance.doctor import make_context, print_report, run_checks
    from kiosk.config import default_config_path

    path = Path(args.config) if args.config else default_config_path()
    ctx = make_context(path, headless=args.headless, camera_seconds=args.camera_seconds)
    report = run_checks(ctx)
    print_report(report, args.json)
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check that this machine can run the kiosk, and say how to fix what is missing",
        description=(
            "Checks Python packages, ONNX Runtime providers (a tiny session on each), the display, the camera "
            "(real size and fps), models, config, the face image, free disk and writable caches. "
            "Exit status 0 when the kiosk can run, 1 otherwise."
        ),
    )
    doctor.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="YAML config (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, the bundled default.yaml)",
    )
    doctor.add_argument("--json", action="store_true", help="print the results as one JSON object")
    doctor.add_argument(
        "--headless",
        action="store_true",
        help="a missing display is only a warning when offscreen (EGL) rendering works (CI, soak runs)",
    )
    doctor.add_argument(
        "--camera-seconds", type=float, default=1.0, metavar="S", help="how long to measure the camera's fps"
    )
    doctor.set_defaults(func=cmd_doctor)
