"""The heartbeat's bounds (:mod:`kiosk.util.heartbeat`): one model call is bounded by what that
model's recent calls took, the stage's own work by ``stall_s`` since its last beat."""

from __future__ import annotations

import pytest

from kiosk.util.heartbeat import Bounds, Heartbeat


def test_a_slow_model_call_is_bounded_by_what_its_calls_take() -> None:
    hb = Heartbeat(Bounds(stall_s=1.0, load_stall_s=30.0, factor=4.0, warm_units=2))
    t = 100.0
    hb.begin_frame(t, warm=False)
    for _ in range(6):  # six faces at 1.5 s a call: the frame takes 9 s
        t0 = hb.begin_unit("swapper", "swapper.onnx", now=t)
        assert hb.read(t + 1.4).hung_s == 0.0
        hb.end_unit("swapper", t0, now=t + 1.5)
        t += 1.5
    assert hb.read(t).frame_s == pytest.approx(9.0)
    assert hb.hung_for(t) == 0.0  # slow, never hung
    t0 = hb.begin_unit("swapper", "swapper.onnx", now=t)
    assert hb.unit_allowance("swapper") == pytest.approx(6.0)  # 4 x the slowest recent call
    assert hb.read(t + 5.9).hung_s == 0.0
    reading = hb.read(t + 6.5)  # a call that does not return is caught past its bound
    assert reading.hung_s == pytest.approx(6.5) and reading.unit == "swapper.onnx"


def test_first_calls_of_a_model_get_the_load_allowance_and_fast_models_stall_s() -> None:
    hb = Heartbeat(Bounds(stall_s=1.0, load_stall_s=30.0))
    hb.begin_frame(0.0, warm=False)
    assert hb.unit_allowance("trt") == 30.0  # an engine build on the first run
    for i in range(2):
        hb.end_unit("trt", hb.begin_unit("trt", now=float(i)), now=i + 0.01)
    assert hb.unit_allowance("trt") == 1.0  # fast model: stall_s
    assert hb.read(5.0).hung_s == pytest.approx(5.0 - 1.01)  # the stage's own work: no beat


def test_beats_keep_a_long_frame_of_python_work_alive() -> None:
    hb = Heartbeat(Bounds(stall_s=1.0))
    hb.begin_frame(0.0, warm=False)
    for i in range(1, 10):
        hb.beat(now=i * 0.8)
        assert hb.read(i * 0.8 + 0.5).hung_s == 0.0
    assert hb.read(7.2 + 1.5).hung_s > 0  # no beat for 1.5 s: hung


def test_warm_frames_get_load_stall_s_between_beats() -> None:
    hb = Heartbeat(Bounds(stall_s=1.0, load_stall_s=30.0))
    hb.warm(1)
    hb.begin_frame(0.0)
    assert hb.read(10.0).hung_s == 0.0
    hb.end_frame(10.0)
    hb.begin_frame(10.0)
    assert hb.read(12.0).hung_s == pytest.approx(2.0)
