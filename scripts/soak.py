#!/usr/bin/env python3
"""Soak test: run the kiosk headless for a long time and watch memory and frame rate.

A booth runs 10+ hours, so resident memory must be flat after warm-up. This starts
``kiosk run --headless --seconds S --stats-json P --stats-interval I`` as a subprocess, samples its
RSS, thread count and open file descriptors from ``/proc/<pid>`` every ``--every`` seconds, reads the
fps the kiosk writes to the stats file, prints a table as it goes and a summary at the end:
RSS at start, after warm-up and at the end, the RSS slope after warm-up (MB/h, least squares),
and fps min/mean/max. Exit status 1 when the slope exceeds ``--max-slope-mb-h``, the fps drops
below ``--min-fps``, or the kiosk dies early.

    .venv/bin/python scripts/soak.py --config configs/demo.yaml --minutes 20
    .venv/bin/python scripts/soak.py --config my.yaml --minutes 600 --every 60 --csv soak.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Sample:
    t_s: float
    rss_mb: float
    threads: int
    fds: int
    fps_render: float | None
    fps_capture: float | None
    fps_processing: float | None
    frames_rendered: int | None
    source_reconnects: int | None
    processing_restarts: int | None


def read_proc(pid: int) -> tuple[float, int, int] | None:
    """(RSS MiB, threads, open fds) of ``pid``; None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
    return rss_kb / 1024, int(fields.get("Threads", "0").strip()), fds


def read_stats(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}  # not written yet, or caught mid-rewrite


def _num(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) in value per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 3600


def summarise(samples: list[Sample], warmup_s: float) -> dict[str, Any]:
    after = [s for s in samples if s.t_s >= warmup_s] or samples[-1:]
    fps = [s.fps_render for s in after if s.fps_render is not None]
    return {
        "duration_s": round(samples[-1].t_s, 1) if samples else 0.0,
        "samples": len(samples),
        "rss_start_mb": round(samples[0].rss_mb, 1) if samples else None,
        "rss_after_warmup_mb": round(after[0].rss_mb, 1) if after else None,
        "rss_end_mb": round(samples[-1].rss_mb, 1) if samples else None,
        "rss_max_mb": round(max(s.rss_mb for s in samples), 1) if samples else None,
        "rss_slope_mb_per_h": round(slope_per_hour([(s.t_s, s.rss_mb) for s in after]), 2),
        "threads_start_end": (after[0].threads, samples[-1].threads) if samples else None,
        "fds_start_end": (after[0].fds, samples[-1].fds) if samples else None,
        "fps_render_min": round(min(fps), 2) if fps else None,
        "fps_render_mean": round(sum(fps) / len(fps), 2) if fps else None,
        "fps_render_max": round(max(fps), 2) if fps else None,
    }


def _fmt(v: float | None, spec: str = "6.1f") -> str:
    return format(v, spec) if v is not None else "     -"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="kiosk YAML config (synthetic or video source)")
    ap.add_argument("--minutes", type=float, default=20.0, help="how long to run")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--warmup", type=float, default=120.0, help="seconds before RSS must be flat")
    ap.add_argument(
        "--max-slope-mb-h", type=float, default=10.0, help="fail above this RSS growth after warm-up"
    )
    ap.add_argument("--min-fps", type=float, default=0.0, help="fail if the render fps drops below this")
    ap.add_argument("--csv", metavar="PATH", help="also write every sample as CSV")
    ap.add_argument("--json", metavar="PATH", help="also write samples and summary as JSON")
    ap.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="run this instead of `python -m kiosk run ...` ({stats} and {seconds} are substituted)",
    )
    args = ap.parse_args(argv)

    seconds = args.minutes * 60
    tmp = Path(tempfile.mkdtemp(prefix="kiosk-soak-"))
    stats_path = tmp / "stats.json"
    stats_every = max(1.0, min(args.every / 2, 10.0))
    if args.command:
        cmd = [
            c.replace("{stats}", str(stats_path)).replace("{seconds}", f"{seconds:g}") for c in args.command
        ]
    else:
        cmd = [
            sys.executable, "-m", "kiosk", "run", "--config", args.config, "--headless",
            "--seconds", f"{seconds:g}", "--stats-json", str(stats_path), "--stats-interval", f"{stats_every:g}",
        ]  # fmt: skip
    log_path = tmp / "kiosk.log"
    print(f"soak: {' '.join(cmd)}\nsoak: kiosk log {log_path}", flush=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    samples: list[Sample] = []
    t0 = time.monotonic()
    print(f"{'t_min':>6} {'rss_MB':>7} {'thr':>4} {'fds':>4} {'fps_rnd':>7} {'fps_cap':>7} {'fps_prc':>7} "
          f"{'frames':>8} {'recon':>5} {'restart':>7}", flush=True)  # fmt: skip
    next_t = t0
    try:
        while proc.poll() is None:
            next_t += args.every if samples else 2.0  # first sample right after start-up
            while proc.poll() is None and time.monotonic() < next_t:
                time.sleep(min(0.5, max(0.0, next_t - time.monotonic())))
            proc_info = read_proc(proc.pid)
            if proc_info is None or proc.poll() is not None:
                break
            st = read_stats(stats_path)
            s = Sample(
                t_s=time.monotonic() - t0,
                rss_mb=proc_info[0],
                threads=proc_info[1],
                fds=proc_info[2],
                fps_render=_num(st, "fps", "render"),
                fps_capture=_num(st, "fps", "capture"),
                fps_processing=_num(st, "fps", "processing"),
                frames_rendered=_num(st, "frames", "rendered"),
                source_reconnects=_num(st, "source", "reconnects"),
                processing_restarts=_num(st, "processing", "restarts"),
            )
            samples.append(s)
            print(
                f"{s.t_s / 60:6.1f} {s.rss_mb:7.1f} {s.threads:4d} {s.fds:4d} {_fmt(s.fps_render, '7.1f')} "
                f"{_fmt(s.fps_capture, '7.1f')} {_fmt(s.fps_processing, '7.1f')} "
                f"{s.frames_rendered if s.frames_rendered is not None else '-':>8} "
                f"{s.source_reconnects if s.source_reconnects is not None else '-':>5} "
                f"{s.processing_restarts if s.processing_restarts is not None else '-':>7}",
                flush=True,
            )
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
    elapsed = time.monotonic() - t0
    summary = summarise(samples, args.warmup)
    final = read_stats(stats_path)
    summary["kiosk_exit_code"] = rc
    summary["kiosk_final_stats"] = final
    print("soak summary:")
    for k, v in summary.items():
        if k != "kiosk_final_stats":
            print(f"  {k}: {v}")
    if final.get("fps"):
        print(f"  final fps (whole run, from the kiosk): {final['fps']}")

    failures = []
    if rc != 0:
        failures.append(f"kiosk exited with {rc} (log {log_path})")
    if elapsed < seconds * 0.95 and not args.command:
        failures.append(f"kiosk stopped after {elapsed:.0f} s of {seconds:.0f} s")
    if summary["rss_slope_mb_per_h"] > args.max_slope_mb_h:
        failures.append(
            f"RSS grows {summary['rss_slope_mb_per_h']} MB/h after warm-up (> {args.max_slope_mb_h})"
        )
    if args.min_fps and (summary["fps_render_min"] or 0) < args.min_fps:
        failures.append(f"render fps fell to {summary['fps_render_min']} (< {args.min_fps})")
    if args.csv and samples:
        with open(args.csv, "w", newline="") as out:
            w = csv.DictWriter(out, fieldnames=list(asdict(samples[0])))
            w.writeheader()
            w.writerows(asdict(s) for s in samples)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"samples": [asdict(s) for s in samples], "summary": summary}, indent=2)
        )
    for failure in failures:
        print(f"soak FAILED: {failure}")
    if not failures:
        print("soak OK")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
