"""What a keepsake costs the render loop, and how long a visitor waits for the QR code.

Runs the kiosk in this process, headless (EGL), on a photo (the NASA photo from ../shared/media, or
--photo) with processing off, keepsakes on (the web server on 127.0.0.1:--port, photos in a
temporary folder), and presses the keepsake key itself (a scripted key on the surface's events,
as a window delivers them). Side by side, --rounds times:

* render fps over --window seconds without a keepsake, then during a countdown (countdown_s 30, so
  the whole window is countdown, then the key again cancels it), then with the QR code on screen;
* keepsake latency with countdown_s 0: key → QR code drawn (the still copied, composited at the
  camera's resolution, JPEG-encoded and stored on the flow's worker, the QR code made), from the
  flow's own clock.

Prints the medians and the ratios to the rate without a keepsake.

    PYTHONPATH=TREE .venv/bin/python benchmarks/keepsake_cost.py [--rounds 3] [--window 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PHOTO = ROOT.parent / "shared" / "media" / "astronaut_eileen_collins_nasa.png"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=3.0, help="seconds measured per condition")
    ap.add_argument("--port", type=int, default=18110)
    ap.add_argument("--max-fps", type=float, default=60.0)
    args = ap.parse_args(argv)
    if not args.photo.is_file():
        print(f"{args.photo} missing: pass --photo", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    tmp = Path(tempfile.mkdtemp(prefix="keepsake-bench-"))
    os.environ["KIOSK_KEEPSAKE_DIR"] = str(tmp / "keepsakes")

    from kiosk.app.kiosk_app import RunOptions
    from kiosk.config import KioskConfig

    cfg = KioskConfig.model_validate(
        {
            "source": {"kind": "image", "path": str(args.photo), "image_fps": 30, "mirror": False},
            "display": {"width": 1280, "height": 720, "max_fps": args.max_fps},
            "processing": {"enabled": False},
            "ui": {"attract_after_s": 0},
            "overlay": {"status_line": False},
            "keepsake": {
                "enabled": True,
                "countdown_s": 10,
                "show_s": 300,
                "listen": f"127.0.0.1:{args.port}",
                "url_base": f"http://127.0.0.1:{args.port}",
            },
            "base_dir": tmp,
        }
    )
    plan = Plan(args.window, args.rounds)
    app = ScriptedKiosk(cfg, RunOptions(headless=True, seconds=plan.total_s + 5), plan)
    rc = app.run()
    fps = plan.fps
    base = statistics.median(fps["live"])
    print(
        f"render fps (each frame finished by the GL), medians of {args.rounds} windows of {args.window:g} s (processing off, 1280x720):"
    )
    for name in ("live", "countdown", "qr"):
        m = statistics.median(fps[name])
        print(
            f"  {name:9s} {m:6.1f} fps   ratio to live {m / base:.2f}   ({', '.join(f'{v:.1f}' for v in fps[name])})"
        )
    lat = plan.latency_ms
    if lat:
        print(
            f"keepsake latency with countdown_s 0, key to QR code drawn: median {statistics.median(lat):.0f} ms "
            f"({', '.join(f'{v:.0f}' for v in lat)}); add countdown_s for a visitor"
        )
    return rc


class Plan:
    """The scripted presses and what is measured between them."""

    def __init__(self, window_s: float, rounds: int) -> None:
        self.window_s = window_s
        self.rounds = rounds
        self.fps: dict[str, list[float]] = {"live": [], "countdown": [], "qr": []}
        self.latency_ms: list[float] = []
        self.steps: list[tuple[str, str]] = []  # (condition measured next, key pressed before it)
        for _ in range(rounds):
            self.steps += [
                ("live", ""),
                ("countdown", "start"),
                ("qr", "cancel+instant"),
                ("live", "dismiss"),
            ]
        self.total_s = (len(self.steps) + 1) * (window_s + 1.5) + 10

    # key names as the window reports them
    KEY = "ENTER"


class ScriptedKiosk:
    """A :class:`KioskApp` whose surface reports the keepsake key on the plan's schedule."""

    def __new__(cls, cfg: Any, opts: Any, plan: Plan) -> Any:
        from kiosk.app.kiosk_app import KioskApp

        class _App(KioskApp):
            def _open_display(self) -> tuple[Any, Any]:
                surface, renderer = super()._open_display()
                return _Keys(surface, self, plan), renderer

        return _App(cfg, opts)


class _Keys:
    """The headless surface, plus scripted keys; measures the render rate per condition."""

    SETTLE_S = 1.0  # after each key, before its window starts

    def __init__(self, surface: Any, app: Any, plan: Plan) -> None:
        self._surface = surface
        self._app = app
        self._plan = plan
        self._step = -1
        self._t_first = time.monotonic() + 6.0  # the kiosk settles first (first frames, atlas builds)
        self._t_start = self._t_end = 0.0
        self._frames0: int | None = None
        self._pending: list[str] = []
        self._waiting_qr = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._surface, name)

    def end_frame(self) -> None:
        """Each frame finished by the GL, as a window's buffer swap does: the headless surface does
        not wait, and a frozen picture (no texture upload, no sync point) would let the loop queue
        seconds of frames in the software renderer and count them as rendered."""
        self._surface.end_frame()
        self._surface.ctx.finish()

    def poll_events(self) -> list[str]:
        keys = list(self._surface.poll_events())
        now = time.monotonic()
        app, plan = self._app, self._plan
        flow = app.keepsake.flow
        if self._pending:
            key = self._pending.pop(0)
            if key:
                keys.append(key)
        if self._waiting_qr and flow is not None and flow.phase.value == "show":
            plan.latency_ms.append(flow.counts.latency_ms)
            self._waiting_qr = False
        frames = app.render_rate.count
        if self._step < 0:
            if now >= self._t_first:
                self._begin(0, now, keys)
        elif self._frames0 is None:
            if now >= self._t_start:
                self._frames0 = frames
        elif now >= self._t_end:
            plan.fps[plan.steps[self._step][0]].append((frames - self._frames0) / (now - self._t_start))
            self._begin(self._step + 1, now, keys)
        return keys

    def _begin(self, step: int, now: float, keys: list[str]) -> None:
        plan, flow = self._plan, self._app.keepsake.flow
        self._step = step
        if step >= len(plan.steps):
            self._app.stop.set()
            return
        assert flow is not None, "keepsakes did not start (see the log)"
        action = plan.steps[step][1]
        if action == "start":  # a countdown longer than the window
            flow.options = _with(flow.options, countdown_s=30.0)
            keys.append(Plan.KEY)
        elif action == "cancel+instant":  # cancel the countdown, then a keepsake at once
            keys.append(Plan.KEY)
            self._pending.append("")  # one frame between the two presses
            self._pending.append(Plan.KEY)
            flow.options = _with(flow.options, countdown_s=0.0)
            self._waiting_qr = True
        elif action == "dismiss":
            flow.cancel()
        self._t_start = now + self.SETTLE_S
        self._t_end = self._t_start + plan.window_s
        self._frames0 = None


def _with(options: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(options, **changes)


if __name__ == "__main__":
    raise SystemExit(main())
