"""What ``--screenshot-every`` costs the render loop: render fps with screenshots / without.

Runs ``kiosk run --headless --seconds S`` as subprocesses, alternating ``--screenshot-every 0``
(no screenshots) and each given interval, ``--rounds`` times side by side, and prints the median
render fps (``fps.render`` of ``--stats-json``) per interval and its ratio to the run without.
``--source photo`` shows the NASA photo (from ../shared/media or --photo), whose PNG is costly to
compress, like a camera picture; ``--source demo`` is the demo's synthetic pattern (compresses well).

    PYTHONPATH=TREE .venv/bin/python benchmarks/screenshot_cost.py [--source photo|demo]
        [--seconds 10] [--rounds 3] [--every 1.0 0.2] [--max-fps 60]

(``PYTHONPATH`` picks the kiosk measured, e.g. an older commit unpacked with ``git archive``.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHOTO = ROOT.parent / "shared" / "media" / "astronaut_eileen_collins_nasa.png"


def _config(folder: Path, source: str, photo: Path, max_fps: float) -> list[str]:
    if source == "demo":
        return ["--demo"]
    cfg = folder / "photo.yaml"
    cfg.write_text(
        "source: {kind: image, path: " + json.dumps(str(photo)) + ", image_fps: 30, mirror: false}\n"
        f"display: {{fullscreen: false, width: 1280, height: 720, fit: fit, max_fps: {max_fps:g}}}\n"
        "overlay: {debug: true}\nprocessing: {enabled: false}\n"
    )
    return ["--config", str(cfg)]


def _fps(args: list[str], folder: Path, every: float, seconds: float) -> float:
    stats = folder / "stats.json"
    cmd = [sys.executable, "-m", "kiosk", "run", *args, "--headless", "--seconds", str(seconds)]
    cmd += ["--stats-json", str(stats)]
    if every:
        cmd += ["--screenshot", str(folder / "shot.png"), "--screenshot-every", str(every)]
    # cwd: the temporary folder, so that ``-m kiosk`` imports the tree PYTHONPATH names, not the cwd's
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
    return float(json.loads(stats.read_text())["fps"]["render"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", choices=("photo", "demo"), default="photo")
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-fps", type=float, default=60.0, help="photo: display.max_fps (0: no cap)")
    ap.add_argument("--every", type=float, nargs="+", default=[1.0, 0.2])
    args = ap.parse_args()
    if args.source == "photo" and not args.photo.exists():
        sys.exit(f"{args.photo}: no such photo; pass --photo FILE or --source demo")
    intervals = [0.0, *args.every]
    fps: dict[float, list[float]] = {e: [] for e in intervals}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run_args = _config(folder, args.source, args.photo, args.max_fps)
        for r in range(args.rounds):
            for e in intervals:
                fps[e].append(_fps(run_args, folder, e, args.seconds))
            print(
                f"round {r + 1}: " + ", ".join(f"every {e:g}: {fps[e][-1]:.1f}" for e in intervals),
                flush=True,
            )
    base = statistics.median(fps[0.0])
    print(f"median render fps without screenshots: {base:.1f}")
    for e in args.every:
        m = statistics.median(fps[e])
        print(f"--screenshot-every {e:g}: median {m:.1f} fps, ratio {m / base:.2f}")


if __name__ == "__main__":
    main()
