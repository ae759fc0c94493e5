"""The inference thread's collaborators on their own: the error ladder's rules
(kiosk.processing.ladder) and the stage loader (kiosk.processing.loader); no inference thread runs."""

from __future__ import annotations

import os
import threading
import time

from kiosk.processing.ladder import ERROR_WINDOW, HEALTHY_S, Backoff, FailureWindow
from kiosk.processing.loader import WATCH_INTERVAL_S, StageLoader
from kiosk.processing.stage import PassThrough, Processor


def test_failure_window_rebuilds_after_failures_in_a_row_or_half_the_window():
    w = FailureWindow()
    assert w.failed() and not w.failed()  # only the first failure of a burst is logged
    assert not w.exceeded(3)
    w.failed()
    assert w.exceeded(3) and w.consecutive == 3
    w.clear()
    assert not w.exceeded(3) and not w.failed()  # a rebuild does not start a new burst...
    w.succeeded()
    assert w.failed()  # ... a success does
    w = FailureWindow()
    for i in range(ERROR_WINDOW):  # alternating: never 2 in a row, but half of the window
        if i % 2:
            w.failed()
        else:
            w.succeeded()
    assert w.consecutive == 1 and w.exceeded(5)


def test_backoff_doubles_to_its_cap_and_resets_after_a_healthy_run():
    b = Backoff(1.0, 5.0)
    assert [b.next() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    b.installed(100.0)
    b.ran(100.0 + HEALTHY_S / 2)
    assert b.next() == 5.0
    b.ran(100.0 + HEALTHY_S + 1)
    assert b.next() == 1.0
    b.next()
    b.reset()
    assert b.next() == 1.0


def _wait(loader: StageLoader, timeout_s: float = 3.0) -> Processor | BaseException:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        got = loader.poll(time.perf_counter(), 60.0)
        if got is not None:
            return got
        time.sleep(0.01)
    raise AssertionError("no build ended")


def test_loader_builds_hands_over_the_newest_request_and_drops_a_stale_build():
    release = threading.Event()

    def slow() -> Processor:
        release.wait(3)
        return PassThrough("slow")

    loader = StageLoader(slow)
    loader.start()
    loader.request(lambda: PassThrough("newest"))
    assert loader.take_requests() == (True, None)  # the running build is stale now
    release.set()
    got = _wait(loader)
    assert isinstance(got, PassThrough) and got.notice == "newest"
    assert loader.join(2) and not loader.alive()


def test_loader_reports_a_failed_build_and_retries_when_a_watched_file_changes(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"corrupt")
    calls: list[int] = []

    def build() -> Processor:
        calls.append(1)
        if model.read_bytes() == b"corrupt":
            raise RuntimeError("bad model")
        return PassThrough("healed")

    loader = StageLoader(build)
    loader.start()
    got = _wait(loader)
    assert isinstance(got, RuntimeError)
    loader.retry_in(600.0, (str(model),))  # a long back-off: only the file change can start it
    time.sleep(2 * WATCH_INTERVAL_S)
    assert loader.poll(time.perf_counter(), 60.0) is None and len(calls) == 1
    model.write_bytes(b"the right file")
    os.utime(model, ns=(time.time_ns(), time.time_ns() + 10**9))
    got = _wait(loader)
    assert isinstance(got, PassThrough) and got.notice == "healed" and len(calls) == 2
