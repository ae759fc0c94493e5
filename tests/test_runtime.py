"""The inference thread: pass-through while loading, errors → pass-through + stage restart."""

from __future__ import annotations

import threading
import time

import numpy as np

from kiosk.capture.thread import new_captured_frame
from kiosk.processing.stage import PassThrough
from kiosk.processing.thread import InferenceThread, new_swap_result
from kiosk.sync import TripleBuffer
from kiosk.types import SwapResult


class Inverting:
    name = "invert"

    def __init__(self, fail_on: set[int] | None = None) -> None:
        self.fail_on = fail_on or set()
        self.calls = 0

    def process(self, frame_bgr, out: SwapResult) -> None:
        self.calls += 1
        if int(frame_bgr[0, 0, 0]) in self.fail_on:
            raise RuntimeError("provider error")
        np.subtract(255, frame_bgr, out=out.frame_bgr)
        out.notice = ""


def _feed(buf, value: int) -> None:
    slot = buf.write_slot()
    if slot.frame_bgr.shape != (4, 4, 3):
        slot.frame_bgr = np.zeros((4, 4, 3), np.uint8)
    slot.frame_bgr[:] = value
    slot.seq = value
    slot.t_capture = time.perf_counter()
    buf.publish()


def _next(out_buf, timeout=3.0) -> SwapResult:
    deadline = time.time() + timeout
    while time.time() < deadline:
        out_buf.wait(0.05)
        r = out_buf.read()
        if r is not None:
            return r
    raise AssertionError("no result")


def _start(build, **kw):
    inp = TripleBuffer(new_captured_frame)
    out = TripleBuffer(new_swap_result)
    stop = threading.Event()
    t = InferenceThread(build, inp, out, stop, **kw)
    t.start()
    return t, inp, out, stop


def test_frames_pass_through_with_a_notice_while_the_stage_loads():
    gate = threading.Event()

    def slow_build():
        gate.wait(5)
        return Inverting()

    t, inp, out, stop = _start(slow_build)
    try:
        _feed(inp, 10)
        r = _next(out)
        assert r.frame_bgr[0, 0, 0] == 10 and "loading" in r.notice
        gate.set()
        deadline = time.time() + 3
        while t.processor_name != "invert" and time.time() < deadline:
            time.sleep(0.01)
        _feed(inp, 10)
        r = _next(out)
        assert r.frame_bgr[0, 0, 0] == 245 and r.seq == 10
    finally:
        stop.set()
        t.join(2)


def test_one_failed_call_costs_only_its_frame():
    built: list[Inverting] = []

    def build():
        p = Inverting(fail_on={66})
        built.append(p)
        return p

    t, inp, out, stop = _start(build, restart_initial_s=0.05)
    try:
        deadline = time.time() + 3
        while t.ok_calls == 0 and time.time() < deadline:
            _feed(inp, 5)
            _next(out)
        gen = out.generation
        _feed(inp, 66)  # this frame makes the stage raise: nothing is published for it
        deadline = time.time() + 2
        while t.meters.errors == 0 and time.time() < deadline:
            time.sleep(0.01)
        assert t.meters.errors == 1 and "provider error" in t.last_error
        assert out.generation == gen  # the screen keeps the last good result
        _feed(inp, 5)
        assert _next(out).frame_bgr[0, 0, 0] == 250  # the same stage swaps the next frame
        assert len(built) == 1 and t.meters.restarts == 0
    finally:
        stop.set()
        t.join(2)


def test_repeated_failures_rebuild_the_stage_with_backoff():
    built: list[float] = []

    def build():
        built.append(time.perf_counter())
        return Inverting(fail_on={66})

    t, inp, out, stop = _start(build, restart_initial_s=0.05)
    try:
        deadline = time.time() + 2.5
        while time.time() < deadline:
            _feed(inp, 66)  # every call fails
            time.sleep(0.005)
        assert t.meters.restarts >= 2
        assert t.meters.errors >= 5 * t.meters.restarts  # five failures in a row before each rebuild
        gaps = np.diff(built)
        assert len(built) <= 7  # 0.05, 0.1, 0.2, 0.4, 0.8 s: doubling, not a rebuild per error
        assert gaps[-1] > gaps[0] * 3
        r = _next(out)
        assert "repeated errors" in r.notice and r.frame_bgr[0, 0, 0] == 66  # pass-through, says why
    finally:
        stop.set()
        t.join(2)


def test_a_stage_that_fails_to_build_is_retried_with_backoff():
    attempts = []

    def build():
        attempts.append(time.perf_counter())
        if len(attempts) < 3:
            raise OSError("model file corrupt")
        return PassThrough("ok")

    t, inp, out, stop = _start(build, restart_initial_s=0.05)
    try:
        _feed(inp, 1)
        r = _next(out)
        assert r.frame_bgr[0, 0, 0] == 1
        deadline = time.time() + 3
        while len(attempts) < 3 and time.time() < deadline:
            time.sleep(0.01)
        assert len(attempts) == 3
        assert attempts[2] - attempts[1] >= attempts[1] - attempts[0]  # back-off grows
        _feed(inp, 2)
        deadline = time.time() + 2
        notice = ""
        while time.time() < deadline and notice != "ok":
            _feed(inp, 2)
            notice = _next(out).notice
        assert notice == "ok"
    finally:
        stop.set()
        t.join(2)


class Delayed:
    """A stage that shows the previous frame (as a pipelined one does): ``result_lag`` 1."""

    name = "delayed"

    def __init__(self) -> None:
        self.prev: np.ndarray | None = None
        self.result_lag = 0

    def process(self, frame_bgr, out: SwapResult) -> None:
        shown = frame_bgr if self.prev is None else self.prev
        self.result_lag = 0 if self.prev is None else 1
        np.copyto(out.frame_bgr, shown)
        self.prev = frame_bgr.copy()


def test_a_lagging_stage_result_carries_the_seq_of_the_frame_it_shows():
    t, inp, out, stop = _start(Delayed)
    try:
        deadline = time.time() + 3
        while t.processor_name != "delayed" and time.time() < deadline:
            time.sleep(0.01)
        seen = []
        for value in (20, 21, 22):
            _feed(inp, value)
            r = _next(out)
            seen.append((int(r.frame_bgr[0, 0, 0]), r.seq))
        assert seen == [(20, 20), (20, 20), (21, 21)]
    finally:
        stop.set()
        t.join(2)


def test_an_abandoned_thread_never_publishes_again():
    gate, entered = threading.Event(), threading.Event()

    class Hanging(Inverting):
        def process(self, frame_bgr, out: SwapResult) -> None:
            if int(frame_bgr[0, 0, 0]) == 99:
                entered.set()
                gate.wait(5)  # a model call that does not return (until the test lets it)
                out.frame_bgr[:] = 1
                return
            super().process(frame_bgr, out)

    from kiosk.processing.thread import ErrorPolicy

    t, inp, out, stop = _start(Hanging, policy=ErrorPolicy(stall_s=0.2, load_stall_s=0.2))
    try:
        deadline = time.time() + 3
        while t.ok_calls < 4 and time.time() < deadline:
            _feed(inp, 5)
            _next(out)
        _feed(inp, 99)
        assert entered.wait(3)
        time.sleep(0.3)
        assert t.hung_for(time.perf_counter()) > 0.2  # the supervisor's cue
        gen = out.generation
        t.abandon()
        gate.set()
        t.join(2)
        assert not t.is_alive()
        assert out.generation == gen  # the late result of the abandoned call was never published
    finally:
        stop.set()
        gate.set()
        t.join(2)


def test_a_failed_rebuild_keeps_the_working_stage_and_retries_when_the_file_changes(tmp_path):
    from kiosk.processing.stage import StageUnavailable

    model = tmp_path / "swapper.onnx"
    model.write_bytes(b"broken")
    attempts: list[float] = []

    def broken_build():
        attempts.append(time.perf_counter())
        if model.read_bytes() == b"broken":
            raise StageUnavailable(f"{model}: not a loadable ONNX model", (str(model),))
        return PassThrough("new stage")

    t, inp, out, stop = _start(Inverting, restart_initial_s=30.0)
    try:
        deadline = time.time() + 3
        while t.ok_calls == 0 and time.time() < deadline:
            _feed(inp, 5)
            _next(out)
        t.reconfigure(broken_build)
        deadline = time.time() + 3
        while not attempts and time.time() < deadline:
            _feed(inp, 5)
            _next(out)
        time.sleep(0.2)
        _feed(inp, 5)
        r = _next(out)
        assert r.frame_bgr[0, 0, 0] == 250  # the last working stage still swaps
        assert "keeping the previous face swap" in r.notice and "swapper.onnx" in r.notice
        model.write_bytes(b"repaired")  # the back-off is 30 s: only the file watch can retry now
        t_fixed = time.perf_counter()
        deadline = time.time() + 3
        while t.processor_name != "passthrough" and time.time() < deadline:
            _feed(inp, 5)
            _next(out)
        assert len(attempts) == 2 and attempts[1] - t_fixed < 1.0
        _feed(inp, 5)
        assert _next(out).notice == "new stage"
    finally:
        stop.set()
        t.join(2)
