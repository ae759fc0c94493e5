"""The render loop driven by a fake clock (no real time, no GL, no worker threads): frame pacing at
display.max_fps (also after a live change), the stats interval, the supervision and STATUS
cadence, the watchdog fed only while processing is healthy and exit status 3 after recovery_s,
and one counters snapshot per frame behind the overlay, STATUS and the stats file."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.app.loop import RenderLoop
from kiosk.config import KioskConfig


class FakeClock:
    """perf_counter-like: advances only when the loop sleeps."""

    def __init__(self, t0: float = 1000.0) -> None:
        self.t = t0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


class FakeSurface:
    def __init__(self, clock: FakeClock, on_frame: Any = None) -> None:
        self.clock = clock
        self.frames: list[float] = []  # clock at each present
        self.on_frame = on_frame
        self.closed = False

    def poll_events(self) -> list[str]:
        if self.on_frame is not None:
            self.on_frame(len(self.frames))
        return []

    def should_close(self) -> bool:
        return False

    def begin_frame(self) -> tuple[int, int]:
        return 320, 180

    def end_frame(self) -> None:
        self.frames.append(self.clock())

    def read_rgb(self) -> Any:
        raise AssertionError("no screenshot asked for")

    def close(self) -> None:
        self.closed = True


class FakeRenderer:
    def __init__(self) -> None:
        self.overlays: list[Any] = []

    def set_frame(self, *args: Any) -> None:
        pass

    def draw(self, size: Any, overlay: Any, booth: Any = None, now: float = 0.0) -> None:
        self.overlays.append(overlay)

    def release(self) -> None:
        pass


class FakeNotifier:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.watchdogs: list[float] = []
        self.statuses: list[tuple[float, str]] = []
        self.ready_at: float | None = None

    def ready(self, status: str = "") -> None:
        self.ready_at = self.clock()

    def watchdog(self) -> None:
        self.watchdogs.append(self.clock())

    def status(self, text: str) -> None:
        self.statuses.append((self.clock(), text))

    def stopping(self) -> None:
        pass

    def close(self) -> None:
        pass


def _app(
    opts: RunOptions, max_fps: float = 20.0, on_frame: Any = None, processing: dict[str, Any] | None = None
) -> tuple[KioskApp, FakeClock, FakeSurface, FakeNotifier, list[float]]:
    cfg = KioskConfig.model_validate(
        {
            "source": {"kind": "synthetic"},
            "display": {"max_fps": max_fps},
            "processing": {"enabled": False, **(processing or {})},
            "overlay": {"debug": True},
        }
    )
    clock = FakeClock()
    notifier = FakeNotifier(clock)
    app = KioskApp(cfg, opts, clock=clock, sleep=clock.sleep, notifier=notifier)  # type: ignore[arg-type]
    surface = FakeSurface(clock, on_frame)
    opened: list[float] = []

    def open_display(_display: Any) -> tuple[Any, Any]:
        opened.append(clock())
        return surface, FakeRenderer()

    app.display.open_display = open_display  # type: ignore[method-assign]
    app._start_workers = lambda: None  # type: ignore[method-assign]
    supervised: list[float] = []
    app.supervise = lambda: supervised.append(clock())  # type: ignore[method-assign]
    app.supervised = supervised  # type: ignore[attr-defined]
    app.opened = opened  # type: ignore[attr-defined]
    return app, clock, surface, notifier, supervised


def test_frames_are_paced_at_max_fps_by_the_injected_clock() -> None:
    app, clock, surface, notifier, _ = _app(RunOptions(headless=True, frames=40), max_fps=20.0)
    assert app.run() == 0
    assert len(surface.frames) == 40
    gaps = [b - a for a, b in zip(surface.frames, surface.frames[1:], strict=False)]
    assert gaps == pytest.approx([0.05] * 39)
    assert notifier.ready_at == surface.frames[0]
    assert app.stats()["frames"]["rendered"] == 40


def test_a_live_change_of_max_fps_repaces_the_loop_without_reopening_the_window() -> None:
    def on_frame(n: int) -> None:
        if n == 20:
            cfg = app.cfg
            app.apply_config(
                cfg.model_copy(update={"display": cfg.display.model_copy(update={"max_fps": 10.0})})
            )

    app, clock, surface, _, _ = _app(RunOptions(headless=True, frames=40), max_fps=20.0, on_frame=on_frame)
    assert app.run() == 0
    gaps = [b - a for a, b in zip(surface.frames, surface.frames[1:], strict=False)]
    assert gaps[:19] == pytest.approx([0.05] * 19)
    assert gaps[21:] == pytest.approx([0.1] * 18)
    assert app.opened == [1000.0]  # type: ignore[attr-defined]


def test_stats_interval_supervision_and_status_cadence(tmp_path: Path) -> None:
    stats = tmp_path / "s.json"
    app, clock, surface, notifier, supervised = _app(
        RunOptions(headless=True, seconds=11.0, stats_json=stats, stats_interval_s=2.0), max_fps=10.0
    )
    written: list[tuple[float, Any]] = []
    real_write = app.write_stats
    app.write_stats = lambda counters=None: (written.append((clock(), counters)), real_write(counters))[1]  # type: ignore[method-assign]
    assert app.run() == 0
    t0 = 1000.0
    in_loop = [round(t - t0, 3) for t, c in written if c is not None]
    assert in_loop == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert written[-1][1] is None  # the final one, a fresh snapshot after the workers stopped
    assert [round(t - t0, 3) for t in supervised] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert [round(t - t0, 3) for t, _ in notifier.statuses] == [5.0, 10.0]
    assert all("process" in text and "render" in text for _, text in notifier.statuses)
    assert stats.exists()


def test_watchdog_is_fed_only_while_healthy_and_the_run_exits_3_after_recovery_s() -> None:
    app, clock, surface, notifier, _ = _app(
        RunOptions(headless=True, seconds=60.0),
        max_fps=10.0,
        processing={"stall_s": 0.5, "recovery_s": 2.0},
    )
    t_hang = 1001.0
    app.check_pipeline = lambda now: max(0.0, now - t_hang)  # type: ignore[method-assign]
    assert app.run() == 3
    assert notifier.watchdogs and max(notifier.watchdogs) <= t_hang + 0.5 + 1e-9
    assert min(t for t in surface.frames if t > t_hang + 0.5) not in notifier.watchdogs
    last = surface.frames[-1]
    assert t_hang + 2.0 < last <= t_hang + 2.0 + 0.1 + 1e-9  # the first frame past recovery_s ends it


def test_one_snapshot_per_frame_feeds_overlay_status_and_stats(tmp_path: Path) -> None:
    app, clock, surface, notifier, _ = _app(
        RunOptions(headless=True, seconds=6.0, stats_json=tmp_path / "s.json", stats_interval_s=5.0),
        max_fps=10.0,
    )
    taken: list[Any] = []
    real_counters = app.counters
    app.counters = lambda now=None, detailed=True: (taken.append(real_counters(now, detailed)), taken[-1])[1]  # type: ignore[method-assign]
    used: dict[str, list[Any]] = {"overlay": [], "status": [], "stats": []}
    real_overlay, real_status, real_stats = app.overlay_texts, app.status_text, app.stats
    app.overlay_texts = lambda now, c=None: (used["overlay"].append(c), real_overlay(now, c))[1]  # type: ignore[method-assign]
    app.status_text = lambda c=None: (used["status"].append(c), real_status(c))[1]  # type: ignore[method-assign]
    app.stats = lambda c=None: (used["stats"].append(c), real_stats(c))[1]  # type: ignore[method-assign]
    assert app.run() == 0
    frames = len(surface.frames)
    in_loop = taken[:frames]
    assert used["overlay"] == in_loop  # one snapshot per frame, and the overlay drew from it
    assert [c.t for c in in_loop] == pytest.approx([1000.0 + 0.1 * k for k in range(frames)])
    at_5s = in_loop[50]  # t = 5.0 s: STATUS and the stats file are due, from that frame's snapshot
    assert used["status"][0] is at_5s and used["stats"][0] is at_5s
    assert used["stats"][-1] is None  # the final stats after shutdown: a fresh snapshot


def test_the_loop_body_reads_no_config() -> None:
    for name in ("_frame", "_after_frame", "_pace", "_draw", "_reports_due", "draw_final_screenshot"):
        src = inspect.getsource(getattr(RenderLoop, name))
        assert "cfg" not in src, f"RenderLoop.{name} reads the config; use its LoopOptions"


def test_percentiles_are_taken_only_for_frames_that_report_them(tmp_path: Path) -> None:
    """Without the debug overlay, only the frames that write stats sort the latency rings."""
    app, clock, surface, notifier, _ = _app(
        RunOptions(headless=True, seconds=3.0, stats_json=tmp_path / "s.json", stats_interval_s=1.0),
        max_fps=10.0,
    )
    app.controls.debug = False
    taken: list[Any] = []
    real_counters = app.counters
    app.counters = lambda now=None, detailed=True: (taken.append(real_counters(now, detailed)), taken[-1])[1]  # type: ignore[method-assign]
    app.screen.latency_ms.add(12.0)
    assert app.run() == 0
    detailed = [round(c.t - 1000.0, 3) for c in taken[: len(surface.frames)] if c.detailed]
    assert detailed == [1.0, 2.0, 3.0]  # stats due at 1, 2 and 3 s (the run ends at 3 s)
    assert all(c.render.latency_p50 is None for c in taken[: len(surface.frames)] if not c.detailed)
    with pytest.raises(ValueError, match="detailed"):
        app.stats(taken[0])


def test_the_loop_hands_the_heap_back_every_trim_every_s(monkeypatch: pytest.MonkeyPatch) -> None:
    from kiosk.util import memory

    app, clock, surface, _, _ = _app(RunOptions(headless=True, seconds=95.0), max_fps=10.0)
    trims: list[float] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda pad: trims.append(clock()) or 1)
    assert app.run() == 0
    assert [round(t - 1000.0) for t in trims] == [30, 60, 90]


def test_trim_every_s_0_never_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from kiosk.util import memory

    app, clock, surface, _, _ = _app(RunOptions(headless=True, seconds=95.0), max_fps=10.0)
    app.loop.options = dataclasses.replace(app.loop.options, trim_every_s=0.0)
    trims: list[float] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda pad: trims.append(clock()) or 1)
    assert app.run() == 0
    assert trims == []
