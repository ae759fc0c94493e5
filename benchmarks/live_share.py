"""How much of the time the visitor sees the swap: processing rate x display mode, before and after.

    .venv/bin/python benchmarks/live_share.py [--rates 1 2 5 15] [--modes synced live auto]
        [--before /path/to/old/checkout] [--only after|before] [--seconds 10]

Each cell is one ``kiosk bench --standins --cpu --json`` run (a subprocess, so every run gets a
fresh process) on the alignment benchmark's real three-face clip (insightface's t1.jpg moved by the
sine motion, written by ``benchmarks/live_alignment.py --write-video``) played as a video source at
30 fps, the real det_500m, stand-in embedder and swapper, each swapper call made to last
``--swap-ms`` (the model, then a sleep: ``time.sleep`` releases the GIL as ONNX Runtime does). The
rate column is the swapper delay's target (results a second with three faces); the ``swap/s``
column is what the swapping stage really did on this machine. Figures per run:

  swap %     face x rendered frame shown swapped (fresh or carried), the kiosk's own count
             (``display.screen`` of the stats); before: the live tracker's carried share (the old
             code counted nothing in synced mode, where every result's faces are shown: "(all)")
  latency    capture -> display p50 / p95 (ms)
  carry p95  carried keypoints against the next result's detection on its frame (px)
  mode       the mode on screen at the end (auto resolved)

``--before`` names a checkout of the older code (``git worktree add /tmp/old 119d615``); its rows
run the same command with that tree first on PYTHONPATH, one after the other with the new rows.
Needs ../shared/models/det_500m.onnx and insightface; says so and exits 2 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Detection, alignment and the rest of a result on this CPU at 640x480 (ms), from kiosk bench.
OVERHEAD_MS = 110.0
FACES = 3


def swap_ms_for(rate: float) -> float:
    """Swapper delay per face for about ``rate`` results a second with three faces."""
    return max((1000.0 / rate - OVERHEAD_MS) / FACES, 0.0)


def run_bench(tree: Path, video: Path, mode: str, rate: float, seconds: float) -> dict[str, Any] | str:
    frames = max(int(rate * seconds), 6)
    cmd = [
        sys.executable,
        "-m",
        "kiosk",
        "bench",
        "--standins",
        "--cpu",
        "--json",
        "--size",
        "640x480",
        "--max-faces",
        "3",
        "--video",
        str(video),
        "--display",
        mode,
        "--swap-ms",
        f"{swap_ms_for(rate):.0f}",
        "--frames",
        str(frames),
        "--skip-frames",
        "1",
        "--alloc-frames",
        "0",
    ]
    env = dict(os.environ, PYTHONPATH=str(tree))
    try:
        done = subprocess.run(
            cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=seconds * 4 + 90
        )
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        return f"failed: {tail[0][:80]}"
    out = json.loads(done.stdout)
    return out[0] if isinstance(out, list) else out


def share_text(r: dict[str, Any]) -> str:
    rt = r["runtime"]
    screen = rt.get("screen")
    if screen is not None:
        return f"{screen['swapped_pct']}" if screen.get("swapped_pct") is not None else "-"
    live = rt.get("live")
    if live:  # the old code: the live tracker's own count, per captured frame
        total = live["faces_carried_frames"] + live["faces_real_frames"]
        return f"{100.0 * live['faces_carried_frames'] / total:.1f}" if total else "-"
    return "(all)"


def row(label: str, rate: float, mode: str, r: dict[str, Any] | str) -> str:
    if isinstance(r, str):
        return f"| {label} | {rate:g} | {mode} | {r} | | | | |"
    rt = r["runtime"]
    lat = rt["latency_ms"]
    live = rt.get("live") or {}
    fps = rt["fps"]
    swap_fps = fps.get("swap_results", fps["processing"])
    return (
        f"| {label} | {rate:g} ({swap_fps:.2f}) | {mode} | {share_text(r)} | "
        f"{lat['capture_to_display_p50']} / {lat['capture_to_display_p95']} | "
        f"{live.get('carry_error_px_p95', '-')} | {rt.get('active_mode', mode)} | "
        f"{live.get('faces_dropped_to_real', {}).get('total', '-')} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[1, 2, 5, 15])
    ap.add_argument("--modes", nargs="+", default=["synced", "live", "auto"])
    ap.add_argument("--before", type=Path, help="checkout of the older code for the 'before' rows")
    ap.add_argument("--only", choices=("after", "before"), help="run one side only")
    ap.add_argument("--seconds", type=float, default=8.0, help="about this long measured per run")
    ap.add_argument("--video", type=Path, help="the clip (default: written to a temporary folder)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="live-share-") as tmp:
        video = args.video
        if video is None:
            video = Path(tmp) / "group_sine.mp4"
            made = subprocess.run(
                [sys.executable, str(ROOT / "benchmarks" / "live_alignment.py"), "--write-video", str(video)],
                capture_output=True,
                text=True,
            )
            if made.returncode != 0:
                print(f"live_share: {made.stdout.strip() or made.stderr.strip()}")
                return 2
        trees: list[tuple[str, Path]] = []
        if args.only != "before":
            trees.append(("after", ROOT))
        if args.before is not None and args.only != "after":
            trees.append(("before", args.before.resolve()))
        print(
            f"load average {os.getloadavg()[0]:.1f}; {FACES} faces; rate = target results/s (measured swap/s)"
        )
        print("| code | rate | mode | swap % | latency p50 / p95 ms | carry p95 px | on screen | drops |")
        print("|---|---|---|---|---|---|---|---|")
        for rate in args.rates:
            for mode in args.modes:
                for label, tree in trees:
                    if label == "before" and mode == "auto":
                        continue  # no auto mode in the older code
                    print(
                        row(label, rate, mode, run_bench(tree, video, mode, rate, args.seconds)), flush=True
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
