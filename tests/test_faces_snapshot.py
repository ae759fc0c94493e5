"""The face library's one-writer rule: a frozen snapshot published whole, refreshed by one thread;
a refresh from another thread is refused, and a writer that was abandoned (a fresh inference
thread claimed the library) never publishes again, not even the refresh it was in the middle of.

A fake analyzer (one face in the middle of every photo) keeps these tests free of models."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403

from kiosk.booth.faces import FaceLibrary, LibrarySnapshot, LibraryWriterError
from kiosk.types import Face


class FakeAnalyzer:
    """One face in the middle of every photo; ``gate`` (when set) blocks each call until released,
    like a model call that hangs."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls = 0
        self.gate = gate
        self.entered = threading.Event()

    def find_source_faces(self, image):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30), "the test never released the hung call"
        h, w = image.shape[:2]
        box = np.array([w * 0.25, h * 0.25, w * 0.75, h * 0.75], np.float32)
        return [Face(box_xyxy=box, score=0.9, kps=np.zeros((5, 2), np.float32))], image

    def source_latent(self, image, face):  # type: ignore[no-untyped-def]
        return np.full(8, float(image.mean()), np.float32)


def _photo(folder: Path, name: str, shade: int) -> Path:
    path = folder / f"{name}.png"
    assert cv2.imwrite(str(path), np.full((64, 64, 3), shade, np.uint8))
    return path


def _library(tmp_path: Path, names: tuple[str, ...] = ("ann", "ben")) -> FaceLibrary:
    folder = tmp_path / "faces"
    folder.mkdir()
    for i, name in enumerate(names):
        _photo(folder, name, 40 + 30 * i)
    return FaceLibrary(folder, tmp_path / "cache", thumb_px=16)


def _in_thread(fn):  # type: ignore[no-untyped-def]
    """Run ``fn`` on a new thread; return what it returned or raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run, name="other-thread")
    t.start()
    t.join(30)
    return out[0]


def test_snapshot_is_frozen_and_replaced_whole(tmp_path):
    lib = _library(tmp_path)
    empty = lib.snapshot
    assert empty == LibrarySnapshot(lib.serial) and empty.version == 0 and lib.writer is None
    assert lib.refresh(FakeAnalyzer(), "m")
    first = lib.snapshot
    assert first is not empty and empty.entries == ()  # the old snapshot was not changed
    assert [e.name for e in first.entries] == ["ann", "ben"] and first.version == 1
    assert first.stamp == (lib.serial, 1) and first.keys == tuple(e.key for e in first.entries)
    assert first.index_of(first.keys[1]) == 1 and first.entry(first.keys[1]) is first.entries[1]
    assert first.index_of("gone") is None and first.entry("gone") is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.entries = ()  # type: ignore[misc]
    _photo(lib.folder, "cat", 200)  # type: ignore[arg-type]
    (lib.folder / "ann.png").unlink()  # type: ignore[operator]
    assert lib.refresh(FakeAnalyzer(), "m")
    second = lib.snapshot
    assert [e.name for e in second.entries] == ["ben", "cat"] and second.version == 2
    assert [e.name for e in first.entries] == ["ann", "ben"]  # a reader's snapshot stays as it was
    assert not lib.refresh(FakeAnalyzer(), "m") and lib.snapshot is second  # nothing changed


def test_a_refresh_from_a_second_thread_is_refused(tmp_path):
    """The pattern that landed: the loader thread refreshed first, then the inference thread."""
    lib = _library(tmp_path)
    assert _in_thread(lambda: lib.refresh(FakeAnalyzer(), "m")) is True  # "the loader"
    loaded = lib.snapshot
    assert lib.writer is not None and lib.writer.name == "other-thread"
    _photo(lib.folder, "cat", 200)  # type: ignore[arg-type]
    analyzer = FakeAnalyzer()
    with pytest.raises(LibraryWriterError, match="one writer per library"):
        lib.refresh(analyzer, "m")  # "the inference thread": refused before any work
    assert analyzer.calls == 0 and lib.snapshot is loaded


def test_the_owner_refreshes_and_others_are_refused(tmp_path):
    lib = _library(tmp_path)
    assert lib.refresh(FakeAnalyzer(), "m")
    assert lib.writer is threading.current_thread()
    _photo(lib.folder, "cat", 200)  # type: ignore[arg-type]
    refused = _in_thread(lambda: lib.refresh(FakeAnalyzer(), "m"))
    assert isinstance(refused, LibraryWriterError) and len(lib.snapshot.entries) == 2
    assert lib.refresh(FakeAnalyzer(), "m") and len(lib.snapshot.entries) == 3


def test_an_abandoned_writer_never_publishes_again(tmp_path):
    """The writer hangs inside a refresh (a model call that never returns); a fresh thread claims
    the library and publishes; when the hung call returns, its refresh is refused, and so is any
    later one. Nothing of its scan leaks into the library's state."""
    lib = _library(tmp_path)
    gate = threading.Event()
    hung = FakeAnalyzer(gate)
    outcome: list[object] = []

    def abandoned_writer() -> None:
        lib.refresh(FakeAnalyzer(), "m")  # the first refresh: this thread is the writer
        _photo(lib.folder, "cat", 200)  # type: ignore[arg-type]
        for _ in range(2):  # the hung refresh, then one more after it returned
            try:
                outcome.append(lib.refresh(hung, "m"))
            except LibraryWriterError as exc:
                outcome.append(exc)

    t = threading.Thread(target=abandoned_writer, name="inference-1")
    t.start()
    assert hung.entered.wait(30), "the writer never got to the hung call"
    # the supervisor gives up on it; a fresh inference thread (here: this one) takes over
    (lib.folder / "ben.png").unlink()  # type: ignore[operator]
    lib.claim()
    assert lib.writer is threading.current_thread()
    fresh = FakeAnalyzer()
    assert lib.refresh(fresh, "m")
    published = lib.snapshot
    assert [e.name for e in published.entries] == ["ann", "cat"]
    gate.set()  # the hung call returns
    t.join(30)
    assert not t.is_alive()
    assert len(outcome) == 2 and all(isinstance(o, LibraryWriterError) for o in outcome), outcome
    assert lib.snapshot is published  # the abandoned scan (which still saw ben) was never published
    again = FakeAnalyzer()
    assert not lib.refresh(again, "m") and again.calls == 0  # the fresh writer's scan state is intact


def test_claim_by_the_writer_itself_changes_nothing(tmp_path):
    lib = _library(tmp_path)
    lib.claim()
    lib.claim()
    assert lib.refresh(FakeAnalyzer(), "m") and lib.writer is threading.current_thread()


def test_the_booth_stage_loads_faces_on_the_inference_thread_not_the_loader(
    tmp_path, standin_dir, det_500m, t1_bgr
):
    """The booth's processing stage is built on the loader thread and runs on the inference thread:
    the build refreshes nothing; the stage's first frame loads the faces and makes its thread the
    library's writer; a fresh stage on a fresh thread (after an abandon) takes over."""
    from inference_fixtures import make_cfg

    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import make_library
    from kiosk.processing.booth_stage import build_booth_processor
    from kiosk.processing.swap_stage import SwapProcessor
    from kiosk.processing.thread import new_swap_result

    folder = tmp_path / "faces"
    folder.mkdir()
    assert cv2.imwrite(str(folder / "ann.jpg"), np.ascontiguousarray(t1_bgr[150:650, 0:300]))
    base = make_cfg(standin_dir, detector=str(det_500m))
    cfg = base.model_copy(
        update={"faces": base.faces.model_copy(update={"dir": str(folder), "cache_dir": str(tmp_path / "c")})}
    )
    lib, controls = make_library(cfg), ControlState()
    first = _in_thread(lambda: build_booth_processor(cfg, lib, controls))  # "the loader"
    assert isinstance(first, SwapProcessor)
    assert lib.snapshot.version == 0 and lib.writer is None  # the loader refreshed nothing

    frame = np.ascontiguousarray(t1_bgr[:480, :640])

    def one_frame(proc: SwapProcessor) -> object:
        out = new_swap_result()
        out.frame_bgr = np.empty_like(frame)
        proc.process(frame, out)
        return out

    one_frame(first)  # "the inference thread": its first frame loads the faces
    assert [e.name for e in lib.snapshot.entries] == ["ann"] and lib.writer is threading.current_thread()
    second = build_booth_processor(cfg, lib, controls)
    assert isinstance(second, SwapProcessor)
    assert not isinstance(_in_thread(lambda: one_frame(second)), BaseException)  # the fresh thread
    assert lib.writer is not None and lib.writer.name == "other-thread"
    with pytest.raises(LibraryWriterError):
        first.refresh_library()  # the abandoned stage can never publish again
    first.close()
    second.close()


def test_a_revoked_writer_is_refused_before_anyone_claims(tmp_path):
    """The supervisor revokes the hung thread at once; the fresh inference thread may need seconds to
    load its models before it claims the library. A hung refresh that returns in between is refused
    too, and the next thread to refresh becomes the writer."""
    lib = _library(tmp_path)
    gate = threading.Event()
    hung = FakeAnalyzer(gate)
    outcome: list[object] = []

    def writer() -> None:
        lib.refresh(FakeAnalyzer(), "m")
        _photo(lib.folder, "cat", 200)  # type: ignore[arg-type]
        for analyzer in (hung, FakeAnalyzer()):
            try:
                outcome.append(lib.refresh(analyzer, "m"))
            except LibraryWriterError as exc:
                outcome.append(exc)
        try:
            lib.claim()
        except LibraryWriterError as exc:
            outcome.append(exc)

    t = threading.Thread(target=writer, name="inference-1")
    t.start()
    assert hung.entered.wait(30)
    before = lib.snapshot
    lib.revoke(t)
    assert lib.writer is None
    gate.set()
    t.join(30)
    assert len(outcome) == 3 and all(isinstance(o, LibraryWriterError) for o in outcome), outcome
    assert "abandoned" in str(outcome[0])
    assert lib.snapshot is before and lib.writer is None  # nothing published, nobody writes
    assert _in_thread(lambda: lib.refresh(FakeAnalyzer(), "m")) is True  # the fresh thread
    assert [e.name for e in lib.snapshot.entries] == ["ann", "ben", "cat"]


class SlowAnalyzer(FakeAnalyzer):
    """Each photo costs ``seconds`` of the library's clock (a detector and an embedder run on a
    CPU booth), on a fake clock: no real time, no timing in the test."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def find_source_faces(self, image):  # type: ignore[no-untyped-def]
        self.now += self.seconds
        return super().find_source_faces(image)


def test_a_folder_of_new_photos_is_scanned_within_the_budget_over_several_refreshes(tmp_path):
    names = tuple(f"p{i}" for i in range(6))
    lib = _library(tmp_path, names)
    slow = SlowAnalyzer(0.1)
    lib.clock = slow.clock
    lib.read_wait_s = 60.0  # the photo reader's thread is waited for: the fake clock alone decides
    rounds = []
    while not rounds or lib.snapshot.pending:
        lib.refresh(slow, "m", budget_s=0.15)
        snap = lib.snapshot
        rounds.append((len(snap.entries), snap.pending))
        assert len(rounds) < 10
    # No new scan starts past the budget: two photos (0.1 s each) per refresh, the rest pending.
    assert rounds == [(2, 4), (4, 2), (6, 0)], rounds
    assert slow.calls == 6  # every photo scanned once: the pending ones are not redone
    assert [e.name for e in lib.snapshot.entries] == list(names)
    # A photo changed while others are pending keeps its previous entry until it is rescanned.
    old_keys = dict(zip([e.path.name for e in lib.snapshot.entries], lib.snapshot.keys, strict=True))
    for name, shade in (("p0", 200), ("p1", 210), ("p2", 220)):
        path = _photo(tmp_path / "faces", name, shade)
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # a later write
    lib.refresh(slow, "m", budget_s=0.05)  # one rescan, then the budget is spent
    snap = lib.snapshot
    assert snap.pending == 2 and len(snap.entries) == 6
    changed = ("p0.png", "p1.png", "p2.png")

    def renewed() -> list[bool]:
        keys = dict(zip([e.path.name for e in lib.snapshot.entries], lib.snapshot.keys, strict=True))
        return [keys[n] != old_keys[n] for n in changed]  # new photo bytes: a new key

    assert sorted(renewed()) == [False, False, True]  # one rescanned, two keep their old entries
    lib.refresh(slow, "m", budget_s=0.05)
    lib.refresh(slow, "m", budget_s=0.05)
    assert lib.snapshot.pending == 0 and slow.calls == 9 and renewed() == [True, True, True]


def test_without_a_budget_one_refresh_scans_everything(tmp_path):
    lib = _library(tmp_path, tuple(f"p{i}" for i in range(4)))
    slow = SlowAnalyzer(10.0)
    lib.clock = slow.clock
    lib.refresh(slow, "m")
    assert len(lib.snapshot.entries) == 4 and lib.snapshot.pending == 0


def test_the_booth_stage_scans_a_folder_of_new_photos_over_several_frames(
    tmp_path, standin_dir, det_500m, t1_bgr
):
    """Each photo scan costs a detector and an embedder run (seconds on a CPU booth): the stage
    scans new photos between frames, at most min(1 s, stall_s / 4) a frame, so a folder of them
    never holds a frame long enough for the stall supervisor to abandon the thread; the next
    frame goes on with the rest. The library's clock is a fake one that moves a whole second per
    reading, so every refresh scans exactly one photo."""
    from inference_fixtures import make_cfg

    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import make_library
    from kiosk.processing.booth_stage import build_booth_processor
    from kiosk.processing.swap_stage import SwapProcessor
    from kiosk.processing.thread import new_swap_result

    folder = tmp_path / "faces"
    folder.mkdir()
    for i, x in enumerate((0, 300, 600)):
        assert cv2.imwrite(str(folder / f"p{i}.jpg"), np.ascontiguousarray(t1_bgr[150:650, x : x + 300]))
    base = make_cfg(standin_dir, detector=str(det_500m))
    cfg = base.model_copy(
        update={
            "faces": base.faces.model_copy(update={"dir": str(folder), "cache_dir": str(tmp_path / "c")}),
            "processing": base.processing.model_copy(update={"stall_s": 2.0}),
        }
    )
    lib, controls = make_library(cfg), ControlState()
    ticks = iter(range(10_000))
    lib.clock = lambda: float(next(ticks))
    lib.read_wait_s = 60.0  # the photo reader's thread is waited for: the fake clock alone decides
    proc = build_booth_processor(cfg, lib, controls)
    assert isinstance(proc, SwapProcessor) and proc.scan_budget_s == 0.5
    frame = np.ascontiguousarray(t1_bgr[:480, :640])
    seen = []
    for _ in range(4):
        out = new_swap_result()
        out.frame_bgr = np.empty_like(frame)
        proc.process(frame, out)
        seen.append((len(lib.snapshot.entries) + len(lib.snapshot.problems), lib.snapshot.pending))
    assert seen == [(1, 2), (2, 1), (3, 0), (3, 0)], seen  # then back to one rescan every rescan_s
    proc.close()


def test_a_refresh_waits_for_slow_photo_reads_while_its_budget_lasts(tmp_path, monkeypatch):
    """Issue 27: on a busy machine a photo's decode takes longer than ``read_wait_s`` (50 ms).
    Before, the refresh gave up on the reader after the first such read and scanned at most the
    two photos decoded ahead per frame (1,000 photos: 460 s at load 15 on 2 cores); now it waits
    for the reader while its budget lasts."""
    import time

    import kiosk.booth.photo_files as photo_files

    real = photo_files.decode_photo

    def slow(data: bytes):  # type: ignore[no-untyped-def]
        time.sleep(0.08)
        return real(data)

    monkeypatch.setattr(photo_files, "decode_photo", slow)
    lib = _library(tmp_path, tuple(f"p{i}" for i in range(8)))
    assert lib.read_wait_s == 0.05
    t0 = time.monotonic()
    lib.refresh(FakeAnalyzer(), "m", budget_s=1.0)
    took = time.monotonic() - t0
    assert len(lib.snapshot.entries) >= 6, (len(lib.snapshot.entries), lib.snapshot.pending)
    assert took < 1.5  # the budget (and one read past it at most)
