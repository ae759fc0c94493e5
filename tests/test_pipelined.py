"""processing.pipelined: detection of frame N+1 on a worker while frame N is swapped."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import make_cfg

from kiosk.config import KioskConfig
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.pipelined import PipelinedDetection
from kiosk.processing.swap_stage import SwapProcessor
from kiosk.processing.thread import new_swap_result
from kiosk.processing.tracking import TrackingOptions

LATENT = np.full((1, 512), 512**-0.5, np.float32)


def _clip(n: int = 8) -> list[np.ndarray]:
    """Two white squares (the stand-in detector's faces) moving a few pixels a frame."""
    return [
        standins.white_square_frame(360, 640, ((120 + 6 * i, 100 + 2 * i, 96), (400 - 4 * i, 150, 96)))
        for i in range(n)
    ]


def _pipe(cfg: KioskConfig, tracking: bool) -> SwapPipeline:
    pipe = SwapPipeline.from_config(cfg)
    pipe.use_latent(LATENT, "test")
    if tracking:
        pipe.set_tracking(TrackingOptions(detect_every=3, roi_det_size=192))
    return pipe


def _boxes(faces: list) -> list[list[float]]:  # type: ignore[type-arg]
    return [sf.face.box_xyxy.tolist() for sf in faces]


@pytest.mark.parametrize("tracking", [False, True])
def test_pipelined_detection_gives_the_sequential_faces_in_order(standin_dir: Path, tracking: bool) -> None:
    cfg = make_cfg(standin_dir)
    clip = _clip()
    ref_pipe = _pipe(cfg, tracking)
    ref = []
    for i, frame in enumerate(clip):
        out = np.empty_like(frame)
        faces = ref_pipe.process_into(frame, out, t=i / 30.0)
        ref.append((out, _boxes(faces), [sf.crop_bgr.copy() for sf in faces]))
    assert sum(len(r[1]) for r in ref) >= len(clip)  # faces to compare (tracking confirms from frame 1)

    pipe = _pipe(cfg, tracking)
    stage = PipelinedDetection.from_config(cfg, pipe)
    try:
        assert stage.finder.detector.session is not pipe.detector.session  # its own session
        assert (stage.finder.tracker is not None) == tracking == (pipe.tracker is not None)
        got = []
        for i, frame in enumerate(clip):
            job = stage.next(frame, t=i / 30.0)
            assert stage.result_lag == (0 if i == 0 else 1)
            out = np.empty_like(frame)
            faces = pipe.process_into(job.frame_bgr, out, detected=job.wait())
            got.append((out, _boxes(faces), [sf.crop_bgr.copy() for sf in faces]))
        last = stage.drain()
        assert last is not None
        out = np.empty_like(clip[-1])
        faces = pipe.process_into(last.frame_bgr, out, detected=last.wait())
        got.append((out, _boxes(faces), [sf.crop_bgr.copy() for sf in faces]))
    finally:
        stage.close()
    # Frame 0 is shown twice while the pipeline fills, then every frame once, in order.
    expected = [ref[0]] + ref
    assert len(got) == len(expected)
    for (out, boxes, crops), (r_out, r_boxes, r_crops) in zip(got, expected, strict=True):
        assert boxes == r_boxes
        for c, rc in zip(crops, r_crops, strict=True):
            np.testing.assert_array_equal(c, rc)
        np.testing.assert_array_equal(out, r_out)


def test_pipelined_processor_composites_the_previous_frame(standin_dir: Path) -> None:
    cfg = make_cfg(standin_dir)
    clip = _clip(4)
    ref_pipe = _pipe(cfg, tracking=False)
    refs = [ref_pipe.process(f) for f in clip]
    pipe = _pipe(cfg, tracking=False)
    proc = SwapProcessor(pipe, pipelined=PipelinedDetection.from_config(cfg, pipe))
    try:
        shown = []
        for frame in clip:
            out = new_swap_result()
            out.frame_bgr = np.empty_like(frame)
            proc.process(frame, out)
            assert out.notice == proc.notice and len(out.faces) >= 2
            shown.append((proc.result_lag, out.frame_bgr.copy()))
    finally:
        proc.close()
    assert [lag for lag, _ in shown] == [0, 1, 1, 1]
    for (_, img), ref in zip(shown, [refs[0], refs[0], refs[1], refs[2]], strict=True):
        np.testing.assert_array_equal(img, ref)


def test_worker_stops_on_close_and_when_dropped(standin_dir: Path) -> None:
    cfg = make_cfg(standin_dir)
    pipe = _pipe(cfg, tracking=False)
    stage = PipelinedDetection.from_config(cfg, pipe)
    thread = stage._thread
    stage.next(_clip(1)[0]).wait()
    stage.close()
    thread.join(5)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="stopped"):
        stage.next(_clip(1)[0])

    proc = SwapProcessor(pipe, pipelined=PipelinedDetection.from_config(cfg, pipe))
    assert proc.pipelined is not None
    thread = proc.pipelined._thread
    del proc
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_a_failing_detection_is_an_error_of_its_frame_not_a_hang(standin_dir: Path) -> None:
    cfg = make_cfg(standin_dir)
    clip = _clip(5)
    pipe = _pipe(cfg, tracking=False)
    stage = PipelinedDetection.from_config(cfg, pipe)
    proc = SwapProcessor(pipe, pipelined=stage)
    finder_detect = stage.finder.detector.detect

    def detect(frame: np.ndarray) -> list:  # type: ignore[type-arg]
        # The worker sees its own copy: recognise frame 2 by its pixels.
        if np.array_equal(frame, clip[2]):
            raise RuntimeError("detector exploded")
        return finder_detect(frame)

    stage.finder.detector.detect = detect  # type: ignore[method-assign]
    errors: dict[int, str] = {}
    shown = []
    try:
        for i, frame in enumerate(clip):
            out = new_swap_result()
            out.frame_bgr = np.empty_like(frame)
            try:
                proc.process(frame, out)
            except RuntimeError as exc:  # the inference thread's error policy takes it from here
                errors[i] = str(exc)
                continue
            shown.append(out.frame_bgr.copy())
    finally:
        proc.close()
    # Call 3 swaps frame 2 (lag 1): its detection's error is that call's error; the others swap.
    assert errors == {3: "detector exploded"}
    assert len(shown) == 4 and not np.array_equal(shown[-1], clip[3])


def test_a_worker_that_never_answers_times_out(standin_dir: Path) -> None:
    cfg = make_cfg(standin_dir)
    pipe = _pipe(cfg, tracking=False)
    stage = PipelinedDetection.from_config(cfg, pipe)
    stage.timeout_s = 0.2
    release = threading.Event()
    stage.finder.detector.detect = lambda frame: release.wait(5) and []  # type: ignore[method-assign,assignment,return-value]
    try:
        job = stage.next(_clip(1)[0])
        with pytest.raises(TimeoutError, match="no answer"):
            job.wait(stage.timeout_s)
    finally:
        release.set()
        stage.close()


@pytest.mark.parametrize("composite", ["cpu", "gpu"])
def test_booth_processor_pipelined_shows_the_sequential_frames(
    tmp_path: Path, standin_dir: Path, det_500m: Path, t1_bgr: np.ndarray, composite: str
) -> None:
    import cv2

    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import make_library
    from kiosk.processing.booth_stage import build_booth_processor

    folder = tmp_path / "faces"
    folder.mkdir()
    assert cv2.imwrite(str(folder / "alice.jpg"), np.ascontiguousarray(t1_bgr[150:650, 0:300]))
    base = make_cfg(standin_dir, detector=str(det_500m))
    clip = [np.ascontiguousarray(np.roll(t1_bgr, 3 * i, axis=1)) for i in range(4)]
    shown: dict[bool, list[tuple[np.ndarray, list[list[float]]]]] = {}
    for pipelined in (False, True):
        cfg = base.model_copy(
            update={
                "processing": base.processing.model_copy(update={"pipelined": pipelined}),
                "faces": base.faces.model_copy(
                    update={"dir": str(folder), "cache_dir": str(tmp_path / "cache")}
                ),
                "display": base.display.model_copy(update={"composite": composite}),
            }
        )
        proc = build_booth_processor(cfg, make_library(cfg), ControlState())
        assert isinstance(proc, SwapProcessor) and (proc.pipelined is not None) == pipelined
        got = []
        try:
            for frame in clip:
                out = new_swap_result()
                out.frame_bgr = np.empty_like(frame)
                proc.process(frame, out)
                assert out.faces and out.faces_pasted == (composite == "cpu")
                got.append((out.frame_bgr.copy(), _boxes(out.faces)))
            assert proc.result_lag == (1 if pipelined else 0)
        finally:
            proc.close()
        shown[pipelined] = got
    ref = shown[False]
    for (img, boxes), (r_img, r_boxes) in zip(shown[True], [ref[0], ref[0], ref[1], ref[2]], strict=True):
        assert boxes == r_boxes
        np.testing.assert_array_equal(img, r_img)


def test_a_frame_left_in_flight_too_long_is_not_shown(
    standin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kiosk.processing.pipelined as pl

    cfg = make_cfg(standin_dir)
    stage = PipelinedDetection.from_config(cfg, _pipe(cfg, tracking=False))
    a, b, c = _clip(3)
    try:
        stage.next(a).wait()
        assert stage.next(b).frame_bgr is not None and stage.result_lag == 1
        monkeypatch.setattr(pl, "STALE_S", 0.05)
        time.sleep(0.1)  # swapping was paused (staff bypass): frame b is old now
        job = stage.next(c)
        assert stage.result_lag == 0
        np.testing.assert_array_equal(job.frame_bgr, c)
        job.wait()
    finally:
        stage.close()
