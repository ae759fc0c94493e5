"""What building a moving keepsake (``keepsake.clip``) costs the render loop of a real kiosk.

Runs the kiosk in this process, headless (EGL), on the synthetic camera at 1280x720 (``--source
demo``: the bundled visitor, whose face is swapped, at the same size), processing on (the default
classic swap) unless ``--no-processing``, keepsakes on in both runs (the web server on 127.0.0.1 at
a free port, photos in a temporary folder, countdown_s 1, show_s 2, no cooldown), the keepsake key
pressed every ``--every`` seconds whenever the flow is idle (a scripted key on the surface's events,
as a window delivers them). Each frame is finished by the GL, as a window's buffer swap does.
A B A B, ``--rounds`` times: A with ``keepsake.clip: false``, B with ``keepsake.clip: true``.

What counts is the render rate *while a clip is built*: in B the frames between a clip's start on
the clip thread and its end (each clip's own interval), in A the frames in the same phase after
each kept photo (from the photo kept, as long as B's median build took). Also printed: the rate
over the whole window (live, countdown and QR code alike) and the clips' build times. Issue 30 asks
the first ratio B / A to be at least 0.95.

    PYTHONPATH=TREE .venv/bin/python benchmarks/clip_cost.py [--rounds 3] [--window 24] \
        [--max-fps 60|0] [--source synthetic|demo] [--no-processing]
"""

from __future__ import annotations

import argparse
import bisect
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 5.0  # the kiosk's first frames, the server's start, numba's and libx264's first use
KEY = "ENTER"  # the keepsake key, as the window reports it


@dataclass
class Run:
    """One kiosk run: when each frame was finished, and each kept photo's (kept, clip built) times."""

    frames: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)  # the photo stored (A and B)
    builds: list[tuple[float, float]] = field(default_factory=list)  # a clip's (start, end) (B: kept)
    t_start: float = 0.0
    t_end: float = 0.0

    def frames_in(self, a: float, b: float) -> int:
        return bisect.bisect_left(self.frames, b) - bisect.bisect_left(self.frames, a)

    def rate_in(self, spans: list[tuple[float, float]]) -> float:
        """Frames a second over ``spans`` (inside the measured window)."""
        spans = [(max(a, self.t_start), min(b, self.t_end)) for a, b in spans]
        spans = [(a, b) for a, b in spans if b > a]
        seconds = sum(b - a for a, b in spans)
        return sum(self.frames_in(a, b) for a, b in spans) / seconds if seconds else float("nan")

    @property
    def whole_rate(self) -> float:
        return self.rate_in([(self.t_start, self.t_end)])


class _Scripted:
    """The headless surface: each frame finished by the GL and timed; the keepsake key pressed
    every ``every_s`` while the flow is idle; the kept photos and clip builds timed."""

    def __init__(self, surface: Any, app: Any, run: Run, every_s: float) -> None:
        self._surface, self._app, self._run, self._every = surface, app, run, every_s
        self._next_press = run.t_start
        self._hooked: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._surface, name)

    def end_frame(self) -> None:
        self._surface.end_frame()
        self._surface.ctx.finish()
        self._run.frames.append(time.monotonic())

    def poll_events(self) -> list[str]:
        keys = list(self._surface.poll_events())
        host = self._app.keepsake
        self._hook(host)
        now = time.monotonic()
        flow = host.flow
        if (
            flow is not None
            and flow.phase.value == "idle"
            and now >= self._next_press
            and now < self._run.t_end
        ):
            keys.append(KEY)
            self._next_press = now + self._every
        return keys

    def _hook(self, host: Any) -> None:
        """Time the service's keep (the photo stored) and the clip maker's jobs, once each."""
        run = self._run
        service, clips = host.service, host.clips
        if service is not None and id(service) not in self._hooked:
            self._hooked.add(id(service))
            keep = service.keep

            def timed_keep(jpeg: bytes) -> Any:
                kept = keep(jpeg)
                run.kept.append(time.monotonic())
                return kept

            service.keep = timed_keep
        if clips is not None and id(clips) not in self._hooked:
            self._hooked.add(id(clips))
            make = clips.make

            def timed_make(*args: Any) -> Any:
                started = time.monotonic()  # the clip thread is idle: a clip takes far less than --every
                job = make(*args)
                job.add_done_callback(
                    lambda j: run.builds.append((started, time.monotonic())) if j.result() else None
                )
                return job

            clips.make = timed_make


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(clip: bool, args: argparse.Namespace, tmp: Path) -> Run:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import KioskConfig

    port = _free_port()
    os.environ["KIOSK_KEEPSAKE_DIR"] = str(tmp / f"keepsakes-{port}")
    cfg = KioskConfig.model_validate(
        {
            "source": {
                "kind": args.source,
                "synthetic": {"width": 1280, "height": 720, "fps": 30},
                "mirror": False,
            },
            "display": {"width": 1280, "height": 720, "max_fps": args.max_fps},
            "processing": {"enabled": not args.no_processing},
            "ui": {"attract_after_s": 0},
            "overlay": {"status_line": False},
            "keepsake": {
                "enabled": True,
                "clip": clip,
                "countdown_s": 1,
                "show_s": 2,
                "cooldown_s": 0,
                "takes_per_visitor": 0,
                "listen": f"127.0.0.1:{port}",
                "url_base": f"http://127.0.0.1:{port}",
            },
            "base_dir": tmp,
        }
    )
    app = KioskApp(cfg, RunOptions(headless=True, seconds=SETTLE_S + args.window + 3))
    t0 = time.monotonic()
    run = Run(t_start=t0 + SETTLE_S, t_end=t0 + SETTLE_S + args.window)
    opened = app.display.open_display

    def open_display(d: Any) -> tuple[Any, Any]:
        surface, renderer = opened(d)
        return _Scripted(surface, app, run, args.every), renderer

    app.display.open_display = open_display  # type: ignore[method-assign]
    app.run()
    run.frames.sort()
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=24.0, help="seconds measured per run")
    ap.add_argument("--every", type=float, default=4.0, help="a keepsake every this many seconds")
    ap.add_argument("--max-fps", type=float, default=60.0, help="display.max_fps (0: uncapped)")
    ap.add_argument("--source", choices=("synthetic", "demo"), default="synthetic")
    ap.add_argument("--no-processing", action="store_true", help="processing.enabled false")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    tmp = Path(tempfile.mkdtemp(prefix="clip-bench-"))
    load0 = os.getloadavg()
    runs: dict[str, list[Run]] = {"A": [], "B": []}
    for _ in range(args.rounds):
        runs["A"].append(run_once(False, args, tmp))
        runs["B"].append(run_once(True, args, tmp))
    build_s = [e - s for r in runs["B"] for s, e in r.builds if s >= r.t_start and e <= r.t_end]
    if not build_s:
        print("no clip was built in the measured windows (see the log)", file=sys.stderr)
        return 1
    d = statistics.median(build_s)
    building = {
        "A": [r.rate_in([(k, k + d) for k in r.kept]) for r in runs["A"]],
        "B": [r.rate_in(r.builds) for r in runs["B"]],
    }
    whole = {k: [r.whole_rate for r in v] for k, v in runs.items()}
    kept = {k: sum(len([t for t in r.kept if r.t_start <= t <= r.t_end]) for r in v) for k, v in runs.items()}
    processing = "off" if args.no_processing else "on (classic swap)"
    print(
        f"render fps, {args.source} 1280x720 headless, each frame finished by the GL, processing {processing}, "
        f"max_fps {args.max_fps:g} (0: uncapped), a keepsake every {args.every:g} s, "
        f"{args.rounds} rounds of {args.window:g} s, A (clip off) B (clip on) A B:"
    )
    print(
        f"  clips built: {len(build_s)}, build time median {1000 * d:.0f} ms "
        f"(min {1000 * min(build_s):.0f}, max {1000 * max(build_s):.0f}); photos kept A {kept['A']}, B {kept['B']}"
    )
    for name, rates in (("while a clip is built", building), ("whole window", whole)):
        a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
        print(f"  {name}:")
        print(f"    A clip off median {a:6.1f}   ({', '.join(f'{v:.1f}' for v in rates['A'])})")
        print(f"    B clip on  median {b:6.1f}   ({', '.join(f'{v:.1f}' for v in rates['B'])})")
        print(f"    B / A: {b / a:.3f}" + ("  (issue 30 asks >= 0.95)" if name.startswith("while") else ""))
    print(f"load average at start {load0[0]:.2f}, at end {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
