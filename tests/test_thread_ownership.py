"""Each cross-thread field has one writer: other threads ask (a queue) or read a frozen snapshot.

- The inference thread's input and anchor buffers are its own: another thread cannot assign them
  (they are read-only properties) and asks for new ones with :meth:`InferenceThread.rewire`, which
  the inference thread applies itself.
- Its provider facts are published whole when it installs a stage; nobody reads the stage.
- The live tracker is the capture thread's: the render loop reads its figures only from the
  snapshot :attr:`LiveFeed.figures` the capture thread publishes, never from the tracker itself
  (whose dictionaries the capture thread is changing meanwhile).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from test_runtime import Inverting, _feed, _next

from kiosk.capture.live import AnchorSlot, LiveTracker, new_live_frame
from kiosk.capture.live_feed import LiveFeed, LiveFigures
from kiosk.capture.thread import new_captured_frame
from kiosk.processing.thread import InferenceThread, new_swap_result
from kiosk.sync import TripleBuffer


def test_another_thread_cannot_assign_the_inference_threads_buffers_and_rewire_is_applied_by_it():
    inp_a = TripleBuffer(new_captured_frame)
    inp_b = TripleBuffer(new_captured_frame)
    out = TripleBuffer(new_swap_result)
    stop = threading.Event()
    seen: list[str] = []
    inf = InferenceThread(Inverting, inp_a, out, stop)
    take = inf._take_wiring

    def recording_take() -> None:
        before = inf.inp
        take()
        if inf.inp is not before:
            seen.append(threading.current_thread().name)

    inf._take_wiring = recording_take  # type: ignore[method-assign]
    with pytest.raises(AttributeError):
        inf.inp = inp_b  # type: ignore[misc]
    with pytest.raises(AttributeError):
        inf.anchors = TripleBuffer(AnchorSlot)  # type: ignore[misc]
    inf.start()
    try:
        _feed(inp_a, 10)
        assert int(_next(out).frame_bgr[0, 0, 0]) == 245
        inf.rewire(inp_b, None)  # a fresh capture thread's buffer
        deadline = time.time() + 5
        while inf.inp is not inp_b and time.time() < deadline:
            time.sleep(0.01)
        assert inf.inp is inp_b and seen == ["inference"], seen
        _feed(inp_b, 20)
        assert int(_next(out).frame_bgr[0, 0, 0]) == 235
    finally:
        stop.set()
        inf.join(2)


def test_provider_facts_are_published_when_a_stage_is_installed():
    class WithPipe(Inverting):
        class pipe:  # noqa: N801 - the attribute the stage protocol exposes
            provider = "CPUExecutionProvider"
            gpu_requested = "CUDAExecutionProvider"
            gpu_fallback = True

    inp, out = TripleBuffer(new_captured_frame), TripleBuffer(new_swap_result)
    stop = threading.Event()
    inf = InferenceThread(WithPipe, inp, out, stop)
    assert inf.provider_info() == ("", None, False)
    inf.start()
    try:
        _feed(inp, 1)
        _next(out)
        assert inf.provider_info() == ("CPUExecutionProvider", "CUDAExecutionProvider", True)
    finally:
        stop.set()
        inf.join(2)


def test_the_live_feeds_figures_are_a_snapshot_and_its_tracker_is_not_assignable():
    feed = LiveFeed(TripleBuffer(AnchorSlot), TripleBuffer(new_live_frame))
    assert isinstance(feed.figures, LiveFigures)
    with pytest.raises(AttributeError):
        feed.tracker = LiveTracker()  # type: ignore[misc]
    first = feed.figures
    frame = np.zeros((48, 64, 3), np.uint8)
    for seq in range(3):
        feed.on_frame(frame, seq, time.perf_counter())
        time.sleep(0.15)
    assert feed.figures is not first  # replaced whole by the capturing thread, never mutated
    assert feed.figures.stats == feed.tracker.stats()


def test_the_kiosks_counters_never_call_into_the_capture_threads_tracker(monkeypatch):
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import KioskConfig

    cfg = KioskConfig.model_validate(
        {"source": {"kind": "synthetic"}, "processing": {"enabled": False}, "display": {"mode": "live"}}
    )
    app = KioskApp(cfg, RunOptions(headless=True))
    assert app.live_feed is not None
    tracker = app.live_feed.tracker

    def not_from_this_thread(*_a: object, **_k: object) -> dict[str, object]:
        raise AssertionError("the render loop read the capture thread's tracker")

    monkeypatch.setattr(tracker, "stats", not_from_this_thread)
    counters = app.counters(detailed=True)
    assert counters.live == app.live_feed.figures.stats
