"""processing.assign: per_visitor: each visitor's own library face (offsets, the stage, the carousel)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import make_cfg

from kiosk.booth.controls import ControlState
from kiosk.booth.faces import FaceEntry, LibrarySnapshot
from kiosk.processing.assign import VisitorFaces
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.swap_stage import SwapProcessor
from kiosk.processing.thread import new_swap_result
from kiosk.processing.tracking import TrackingOptions
from kiosk.types import Face


def face_at(x: float) -> Face:
    return Face(np.array([x, 10, x + 50, 60], np.float32), 0.9, np.zeros((5, 2), np.float32))


def test_visitors_get_faces_in_the_order_they_appear_and_keep_them() -> None:
    v = VisitorFaces()
    faces = [face_at(x) for x in (300, 100, 200)]
    assert v.offsets([7, 3, 5], faces, 3) == [2, 0, 1]  # ids 3, 5, 7 appeared in that order
    # one leaves: the others keep theirs; a newcomer takes the free one
    assert v.offsets([3, 7], faces[:2], 3) == [0, 2]
    assert v.offsets([3, 7, 9], faces, 3) == [0, 2, 1]
    # more visitors than faces: shared as evenly as possible, lowest offset first
    six = [face_at(60 * k) for k in range(6)]
    assert v.offsets([3, 7, 9, 10, 11, 12], six, 3) == [0, 2, 1, 0, 1, 2]
    # the library shrinks: offsets wrap
    assert v.offsets([3, 7, 9], faces, 2) == [0, 0, 1]


def test_without_tracking_faces_are_numbered_left_to_right() -> None:
    v = VisitorFaces()
    faces = [face_at(x) for x in (300, 100, 200, 400)]
    assert v.offsets([None] * 4, faces, 3) == [2, 0, 1, 0]
    assert v.offsets([], [], 3) == []
    assert v.offsets([None], faces[:1], 0) == [0]


class Library:
    """The face library as the stage sees it: a fixed snapshot of three faces."""

    folder = "faces"

    def __init__(self, latents: list[np.ndarray]) -> None:
        thumb = np.zeros((8, 8, 3), np.uint8)
        entries = tuple(
            FaceEntry(f"k{i}", f"face {i}", Path(f"{i}.jpg"), lat, thumb) for i, lat in enumerate(latents)
        )
        self.snapshot = LibrarySnapshot(serial=1, version=1, entries=entries)

    def claim(self) -> None:
        pass

    def refresh(self, *args: Any) -> None:
        pass


def _latents(pipe: SwapPipeline, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    out = []
    for _ in range(n):
        e = rng.standard_normal(512).astype(np.float32)
        out.append(pipe.swapper.latent(e / np.linalg.norm(e)))
    return out


@pytest.mark.parametrize("assign", ["selected", "per_visitor"])
def test_the_stage_swaps_each_visitor_with_their_own_face(standin_dir: Path, assign: str) -> None:
    cfg = make_cfg(standin_dir)
    pipe = SwapPipeline.from_config(cfg)
    pipe.set_tracking(TrackingOptions(detect_every=3, roi_det_size=192))
    library = Library(_latents(pipe, 3))
    controls = ControlState(selected_key="k1")
    proc = SwapProcessor(pipe, library=library, controls=controls, assign=assign)
    # five white squares on the stand-in detector's 64 px grid: five visitors
    squares = [(64 + 128 * k, 64, 64) for k in range(4)] + [(128, 256, 64)]
    frame = standins.white_square_frame(360, 640, squares)
    out = new_swap_result()
    out.frame_bgr = np.zeros_like(frame)
    keys = []  # per frame: the key each visitor (a square, by its place) wears
    for _ in range(8):  # new tracks are confirmed over the first frames
        proc.process(frame, out)
        keys.append({_place(sf.face): k for sf, k in zip(out.faces, out.face_keys, strict=True)})
    assert len(out.faces) == 5
    if assign == "selected":
        assert list(keys[-1].values()) == ["k1"] * 5
        return
    # the first visitor wears the selected face, the next ones the faces after it, then round again
    assert sorted(keys[-1].values()) == ["k0", "k1", "k1", "k2", "k2"]
    assert all(k == keys[-1] for k in keys[-4:])  # stable while the tracks live
    # the swapped crops differ by face: the stand-in swapper tints each source its own way
    tints = {
        k: sf.crop_bgr.reshape(-1, 3).mean(axis=0) for k, sf in zip(out.face_keys, out.faces, strict=True)
    }
    assert len({tuple(np.round(t)) for t in tints.values()}) == 3
    # next face: every visitor's face moves by one
    controls.apply("next_face", allow_quit=False, snapshots_enabled=False, keys=library.snapshot.keys)
    proc.process(frame, out)
    shift = {"k0": "k1", "k1": "k2", "k2": "k0"}
    after = {_place(sf.face): k for sf, k in zip(out.faces, out.face_keys, strict=True)}
    assert after == {p: shift[k] for p, k in keys[-1].items()}


def _place(face: Face) -> tuple[int, int]:
    return round(float(face.box_xyxy[0]) / 32), round(float(face.box_xyxy[1]) / 32)
