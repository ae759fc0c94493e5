"""``kiosk bench``: argument parsing only; the work is in :mod:`kiosk.tools.bench` (imported when run)."""

from __future__ import annotations

import argparse


def _run(args: argparse.Namespace) -> int:
    import sys

    from kiosk.config import ConfigError

    if args.identity:  # identity transfer on real photos, not the threaded runtime
        from kiosk.tools.identity import main as identity_main

        return identity_main(["--json"] if args.json else [])

    from kiosk.tools.bench import cmd_bench

    try:
        return cmd_bench(args)
    except ConfigError as exc:
        print(f"kiosk bench: error: {'; '.join(exc.problems)}", file=sys.stderr)
        return 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bench",
        help="run the threaded runtime headless and print per-stage timings, fps, latency, allocations",
        description="Runs the capture, inference and (headless) render threads on a synthetic frame with "
        "faces and prints per-stage ms (p50/p95), thread rates, capture-to-display latency, dropped "
        "frames, allocations per frame and the share of time inside session.run.",
    )
    p.add_argument(
        "--config",
        "-c",
        help="YAML config (models, providers, processing); default: the kiosk's default config",
    )
    p.add_argument(
        "--frames",
        type=int,
        default=None,
        help="processed frames to measure (default 200; 3 with --cost-matched)",
    )
    p.add_argument(
        "--skip-frames",
        type=int,
        default=None,
        help="processed frames run before measuring (default 5; 1 with --cost-matched)",
    )
    p.add_argument(
        "--alloc-frames",
        type=int,
        default=None,
        help="frames measured under tracemalloc after the run (default 100; 2 with --cost-matched; 0 skips)",
    )
    p.add_argument(
        "--timeout", type=float, default=0.0, help="seconds before the run is stopped (default: auto)"
    )
    p.add_argument("--size", default="1280x720", help="frame size WxH (default 1280x720)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--identity",
        action="store_true",
        help="instead: how much each swapped face looks like the source vs the visitor, by an independent "
        "recognizer (MobileFaceNet from ../shared/models) on real photos (insightface's t1.jpg, the NASA photo)",
    )
    p.add_argument(
        "--standins",
        action="store_true",
        help="generate stand-in models into a temporary folder (real det_500m from ../shared/models if present)",
    )
    p.add_argument(
        "--cost-matched",
        action="store_true",
        help="use cost-matched stand-ins (the real models' contracts and compute, random weights), "
        "generated once into the cache: what a booth would see",
    )
    p.add_argument(
        "--cost-matched-dir",
        help="folder for the cost-matched models (default $XDG_CACHE_HOME/faceswap-kiosk/cost-matched)",
    )
    p.add_argument(
        "--enhance", dest="enhance", action="store_true", default=None, help="force the enhancer on"
    )
    p.add_argument("--no-enhance", dest="enhance", action="store_false", help="force the enhancer off")
    p.add_argument(
        "--mode",
        choices=("synced", "live", "auto"),
        help="set display.mode in the config (one run; --display runs several side by side)",
    )
    p.add_argument(
        "--composite",
        nargs="+",
        choices=("gpu", "cpu"),
        default=["gpu"],
        help="gpu: crops + affines for the shader (paste=False); cpu: paste-back on the CPU; both: one run each",
    )
    p.add_argument(
        "--tracking",
        dest="tracking",
        action="store_true",
        default=None,
        help="force tracking on (default: the config's; off with --cost-matched)",
    )
    p.add_argument("--no-tracking", dest="tracking", action="store_false", help="force tracking off")
    p.add_argument("--max-faces", type=int, default=None, help="override processing.max_faces")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set mask.shape=face --set processing.color_correction=mean_std",
    )
    p.add_argument(
        "--photo", help="photo the synthetic camera shows (default: insightface's t1.jpg, six faces)"
    )
    p.add_argument(
        "--display",
        nargs="+",
        choices=("synced", "live", "auto"),
        default=None,
        help="display.mode to run (default: the config's; synced live: one run each, side by side at the end)",
    )
    p.add_argument(
        "--motion",
        choices=("none", "sway"),
        default="none",
        help="sway: the frame moves at walking speed (known sine), as a visitor does; default: still",
    )
    p.add_argument(
        "--video", help="play this video file (looped, at its own rate) instead of the still frame"
    )
    p.add_argument(
        "--swap-ms",
        type=float,
        default=0.0,
        help="make each swapper call take at least this long (runs the model, sleeps the rest): a slow swapper",
    )
    p.add_argument(
        "--screenshot",
        help="save the last rendered picture of each run as PNG (NAME-<display>-<composite>.png)",
    )
    p.add_argument("--camera-fps", type=float, default=30.0, help="rate of the synthetic camera (default 30)")
    p.add_argument("--cpu", action="store_true", help="run the models on the CPU provider only")
    p.add_argument(
        "--compare-insightface",
        action="store_true",
        help="also time insightface's reference (detect + INSwapper paste-back) on the same frame and models",
    )
    p.add_argument("--insightface-reps", type=int, default=10, help="frames for the insightface comparison")
    p.set_defaults(func=_run)
