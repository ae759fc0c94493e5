"""Each cross-thread field has one writer: other threads ask (a queue) or read a frozen snapshot.

- The inference thread's input and anchor buffers are its own: another thread cannot assign them
  (they are read-only properties) and asks for new ones with :meth:`InferenceThread.rewire`, which
  the inference thread applies itself.
- Its provider facts are published whole when it installs a stage; nobody reads the stage.
- The live tracker is the capture thread's: the render loop reads its figures only from the
  snapshot :attr:`LiveFeed.figures` the capture thread publishes, never from the tracker itself
  (whose dictionaries the capture thread is changing meanwhile).
- A worker kind's meters are shared by its threads one after the other (the supervisor's, handed
  in by the wiring): a thread abandoned inside a hung call writes them no more when the call
  returns, so the replacement is their one writer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import pytest
from test_runtime import Inverting, _feed, _next

from kiosk.capture.live import AnchorSlot, LiveTracker, new_live_frame
from kiosk.capture.live_feed import LiveFeed, LiveFigures
from kiosk.capture.thread import CaptureMeters, CaptureThread, new_captured_frame
from kiosk.config import SourceConfig
from kiosk.processing.thread import InferenceMeters, InferenceThread, new_swap_result
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult

T = TypeVar("T")


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


HUNG = 99  # the frame value the fake hung call hangs on


def _inference_figures(m: InferenceMeters) -> tuple[float, ...]:
    p = m.process_ms
    return (m.rate.count, m.swap_rate.count, p.count, p.total, m.errors, m.restarts, m.build_failures)


def _wait(cond, timeout_s: float = 5.0) -> None:
    deadline = time.time() + timeout_s
    while not cond() and time.time() < deadline:
        time.sleep(0.01)
    assert cond()


class _PublishHangs(TripleBuffer[T]):
    """An output buffer whose publish of the frame HUNG blocks: the thread's call returned and it
    passed its abandoned check, but has not counted the frame yet (the race of an abandon)."""

    def __init__(self, factory: Callable[[], T], inside: threading.Event, release: threading.Event) -> None:
        super().__init__(factory)
        self._inside, self._release = inside, release

    def publish(self) -> None:
        if self.write_slot().seq == HUNG:
            self._inside.set()
            self._release.wait(10)
        super().publish()


@contextlib.contextmanager
def _abandoned_mid_frame(
    first: InferenceThread,
    second: InferenceThread,
    inp: TripleBuffer[CapturedFrame],
    out: TripleBuffer[SwapResult],
    inside: threading.Event,
    release: threading.Event,
    stops: tuple[threading.Event, threading.Event],
) -> Iterator[None]:
    """``first`` runs a frame, then hangs on frame HUNG (its fake sets ``inside``) and is abandoned
        as the supervisor does; ``second``, its replacement, is started and ready when this yields.
        ``release`` (the hung call returning) is the test's to set; both threads are stopped (``stops``,
    their stop events) after."""
    first.start()
    try:
        _wait(lambda: first.processor_name == "invert")
        _feed(inp, 10)
        _next(out)
        _feed(inp, HUNG)
        assert inside.wait(5)
        first.abandon()  # what the supervisor does; the wiring then starts a fresh thread
        second.start()
        _wait(lambda: second.processor_name == "invert")
        yield
    finally:
        release.set()
        for stop, thread in zip(stops, (first, second), strict=True):
            stop.set()
            thread.join(2)


@pytest.mark.parametrize("where", ["stage call returns", "stage call raises", "before its counts"])
def test_an_abandoned_inference_thread_never_writes_the_shared_meters_when_its_call_returns(where):
    meters = InferenceMeters()
    inside, release = threading.Event(), threading.Event()

    class HangsOnce(Inverting):
        def process(self, frame_bgr, out: SwapResult) -> None:
            if int(frame_bgr[0, 0, 0]) == HUNG and where != "before its counts":
                inside.set()
                release.wait(10)  # a native call that returns after the replacement took over
                if where == "stage call raises":
                    raise RuntimeError("the hung call failed late")
            super().process(frame_bgr, out)

    inp = TripleBuffer(new_captured_frame)
    out: TripleBuffer[SwapResult] = TripleBuffer(new_swap_result)
    if where == "before its counts":
        out = _PublishHangs(new_swap_result, inside, release)
    first_stop, second_stop = threading.Event(), threading.Event()
    first = InferenceThread(HangsOnce, inp, out, first_stop, meters=meters)
    second = InferenceThread(Inverting, inp, TripleBuffer(new_swap_result), second_stop, meters=meters)
    with _abandoned_mid_frame(first, second, inp, out, inside, release, (first_stop, second_stop)):
        before = meters.rate.count
        _feed(inp, 20)
        _wait(lambda: meters.rate.count > before)  # the replacement took over the meters
        second_stop.set()
        second.join(2)
        took_over = _inference_figures(meters)
        release.set()  # the hung call returns now
        first.join(2)
        assert not first.is_alive()
        assert _inference_figures(meters) == took_over


def test_an_inference_thread_abandoned_after_its_check_publishes_no_live_anchor(monkeypatch):
    """The live anchor buffer is shared with the replacement thread. A thread whose call returned
    just as the supervisor gave up on it (past its abandoned check, about to publish its anchor)
    must not publish into it once abandon() has returned: that would be two producers on one
    buffer while the replacement runs (a torn slot, a stale face on the live picture)."""
    from kiosk.capture.live import LiveAnchor
    from kiosk.processing import thread as thread_mod

    inside, release = threading.Event(), threading.Event()
    real = LiveAnchor.from_result

    def from_result(result: SwapResult, swapping: bool = True) -> LiveAnchor:
        if result.seq == HUNG:  # the thread passed its abandoned check: the race of an abandon
            inside.set()
            release.wait(10)
        return real(result, swapping)

    monkeypatch.setattr(thread_mod.LiveAnchor, "from_result", staticmethod(from_result))
    meters = InferenceMeters()
    inp = TripleBuffer(new_captured_frame)
    anchors: TripleBuffer[AnchorSlot] = TripleBuffer(AnchorSlot)
    out: TripleBuffer[SwapResult] = TripleBuffer(new_swap_result)
    first_stop, second_stop = threading.Event(), threading.Event()
    first = InferenceThread(Inverting, inp, out, first_stop, anchors=anchors, meters=meters)
    second = InferenceThread(
        Inverting, inp, TripleBuffer(new_swap_result), second_stop, anchors=anchors, meters=meters
    )
    with _abandoned_mid_frame(first, second, inp, out, inside, release, (first_stop, second_stop)):
        _feed(inp, 20)
        seen: list[int] = []

        def anchor_of_20() -> bool:
            slot = anchors.read()
            if slot is not None and slot.anchor is not None:
                seen.append(slot.anchor.seq)
            return 20 in seen

        _wait(anchor_of_20)  # the replacement publishes into the shared buffer
        release.set()  # the abandoned thread goes on past its anchor
        first.join(2)
        assert not first.is_alive()
        late = anchors.read()
        assert late is None, f"the abandoned thread published the anchor of frame {late.anchor.seq}"
        assert anchors.producer_conflicts == 0 and HUNG not in seen


@pytest.mark.parametrize("where", ["source read returns", "before its counts"])
def test_an_abandoned_capture_thread_never_writes_the_shared_meters_when_its_read_returns(where):
    meters = CaptureMeters()
    inside, release = threading.Event(), threading.Event()

    class Frames:
        description = "frames"

        def __init__(self, hang_at: int | None) -> None:
            self.hang_at, self.n = hang_at, 0

        def open(self) -> None:
            pass

        def read(self, out=None):
            self.n += 1
            if self.n == self.hang_at and where != "before its counts":
                inside.set()
                release.wait(10)  # a driver call that returns after the replacement took over
            time.sleep(0.005)
            return np.zeros((8, 8, 3), np.uint8)

        def close(self) -> None:
            pass

    cfg = SourceConfig(kind="synthetic", mirror=False)
    first_stop, second_stop = threading.Event(), threading.Event()
    out: TripleBuffer[CapturedFrame] = TripleBuffer(new_captured_frame)
    if where == "before its counts":
        out = _PublishHangs(new_captured_frame, inside, release)
    first = CaptureThread(cfg, lambda: Frames(HUNG + 1), out, first_stop, meters=meters)
    second = CaptureThread(
        cfg, lambda: Frames(None), TripleBuffer(new_captured_frame), second_stop, meters=meters
    )
    first.start()
    try:
        assert inside.wait(5)
        assert meters.rate.count == HUNG  # frames 0 .. HUNG - 1
        first.abandon()  # stuck in a source call: the wiring starts a fresh one on fresh buffers
        second.start()
        _wait(lambda: meters.rate.count > HUNG + 10)  # the replacement counts on
        second_stop.set()
        second.join(2)
        took_over = (meters.rate.count, meters.reconnects, meters.live_errors)
        release.set()
        first.join(2)
        assert not first.is_alive()
        assert (meters.rate.count, meters.reconnects, meters.live_errors) == took_over
    finally:
        release.set()
        first_stop.set()
        second_stop.set()
        first.join(2)
        second.join(2)
