"""The classic swap v2's pixels (issue 26 item 2): the source photo's face warped onto the visitor's
mesh follows the visitor's mouth and eyes, shows the visitor's own mouth inside, and never pastes a
box of the photo. The visitor is the bundled NASA portrait with a synthetic expression of known
amplitude (tests/expression_fixtures.py: the jaw dropped on a painted mouth inside, the lids
pulled down); each test also runs the 5-point path on the same frames and sees it fail the same
measure, so the measure can tell them apart."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from expression_fixtures import INTERIOR_BGR, blink, open_mouth
from inference_fixtures import cpu_only

from kiosk.config import parse_config
from kiosk.inference.face_mesh import FACE_OVAL, LEFT_EYE, RIGHT_EYE, bundled_mesh_path, open_face_mesh
from kiosk.paths import package_file
from kiosk.processing.models import open_detector, read_image
from kiosk.processing.pipeline import SwapPipeline

DEMO = package_file("data", "demo")
MESH = "package:data/models/face_mesh_468.onnx"
#: The jaw drop, in pixels of the 1024 px visitor (the face is about 180 px high).
OPENING_PX = 30.0


def _cfg(mesh: bool, shape: str = "face"):  # type: ignore[no-untyped-def]
    return parse_config(
        f"models: {{swapper: classic, enhancer: null, mesh: {MESH if mesh else 'null'}, "
        "providers: {order: [cpu], intra_op_threads: 1}}\n"
        f"mask: {{shape: {shape}}}\n",
        "<test>",
        env=False,
    )


@pytest.fixture(scope="module")
def visitor() -> tuple[np.ndarray, np.ndarray]:
    """The NASA portrait at 2x (a booth-sized face) and its mesh."""
    img = read_image(DEMO / "visitor_eileen_collins_nasa.jpg")
    img = cv2.resize(img, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC)
    face = open_detector(_cfg(False)).detect(img)[0]
    return img, open_face_mesh(bundled_mesh_path(), cpu_only).points(img, face).xy


@pytest.fixture(scope="module")
def swap() -> dict[tuple[bool, str], SwapPipeline]:
    """Swap pipelines keyed by (mesh on, mask shape), each with the bundled source photo."""
    src = read_image(DEMO / "source_face_fred_marshall_1961.jpg")
    pipes = {}
    for key in ((True, "face"), (False, "face"), (True, "box"), (False, "box")):
        pipes[key] = SwapPipeline.from_config(_cfg(*key))
        pipes[key].set_source(src)
    return pipes


def _grey(img: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(np.float32)


def test_the_mouth_opens_with_the_visitor_and_its_inside_is_the_visitors(
    visitor: tuple[np.ndarray, np.ndarray], swap: dict[tuple[bool, str], SwapPipeline]
) -> None:
    img, xy = visitor
    opened, gap = open_mouth(img, xy, OPENING_PX)
    inside = cv2.erode(gap.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    hull = np.zeros(img.shape[:2], np.uint8)
    cv2.fillPoly(hull, [np.rint(xy[list(FACE_OVAL)]).astype(np.int32)], 255)
    cheeks = (cv2.erode(hull, np.ones((25, 25), np.uint8)) > 0) & ~cv2.dilate(gap.astype(np.uint8), np.ones((41, 41), np.uint8)).astype(bool)  # fmt: skip
    got = {}
    for mesh in (True, False):
        pipe = swap[(mesh, "face")]
        out = pipe.process(opened)
        assert pipe.times.faces == 1
        interior = np.abs(out[inside].astype(int) - opened[inside]).mean()
        dark = np.all(np.abs(out.astype(int) - INTERIOR_BGR) < 40, axis=2)
        got[mesh] = (interior, dark[inside].mean(), np.abs(_grey(out) - _grey(opened))[cheeks].mean())
    interior, dark, swapped = got[True]
    # v2: the open mouth is the visitor's own (teeth, tongue), the rest of the face is the photo's
    assert interior < 12.0 and dark > 0.6 and swapped > 15.0, got
    # the 5-point path pastes the photo's closed mouth over it
    assert got[False][0] > 40.0 and got[False][1] < 0.1, got


def test_the_eyes_close_with_the_visitor(
    visitor: tuple[np.ndarray, np.ndarray], swap: dict[tuple[bool, str], SwapPipeline]
) -> None:
    img, xy = visitor
    shut = blink(img, xy, 1.0)
    eyes = np.zeros(img.shape[:2], np.uint8)
    for loop in (LEFT_EYE, RIGHT_EYE):
        cv2.fillPoly(eyes, [np.rint(xy[list(loop)]).astype(np.int32)], 255)
    region = eyes > 0
    visitor_change = _grey(shut)[region].mean() - _grey(img)[region].mean()  # the lids are lighter
    assert visitor_change > 20.0
    got = {}
    for mesh in (True, False):
        pipe = swap[(mesh, "face")]
        rest, closed = _grey(pipe.process(img))[region], _grey(pipe.process(shut))[region]
        got[mesh] = ((rest < 90).mean() - (closed < 90).mean(), closed.mean() - rest.mean())
    # v2: the dark of the open eyes goes when the visitor's lids close, the eye region brightens as
    # the visitor's does
    dark_gone, change = got[True]
    assert dark_gone > 0.2 and abs(change - visitor_change) < 0.3 * visitor_change, (got, visitor_change)
    # the 5-point path keeps the photo's open eyes
    assert got[False][0] < 0.05 and abs(got[False][1]) < 0.3 * visitor_change, got


def test_a_box_mask_pastes_no_square_of_the_photo(
    visitor: tuple[np.ndarray, np.ndarray], swap: dict[tuple[bool, str], SwapPipeline]
) -> None:
    """``mask.shape: box`` with v2: outside the visitor's face outline (the mesh's hull, 2 px
    margin) the frame is unchanged; the 5-point path pastes the photo's square there."""
    img, xy = visitor
    hull = np.zeros(img.shape[:2], np.uint8)
    cv2.fillPoly(hull, [np.rint(xy[list(FACE_OVAL)]).astype(np.int32)], 255)
    outside = cv2.dilate(hull, np.ones((5, 5), np.uint8)) == 0
    changed = {}
    for mesh in (True, False):
        pipe = swap[(mesh, "box")]
        out = pipe.process(img)
        assert pipe.times.faces == 1
        diff = np.abs(out.astype(int) - img).max(axis=2)[outside]
        changed[mesh] = (int((diff > 2).sum()), int(diff.max()))
        if mesh:
            inside = np.abs(out.astype(int) - img).max(axis=2)[hull > 0]
            assert (inside > 10).mean() > 0.5  # the face itself is swapped
    assert changed[True][0] < 100 and changed[True][1] <= 8, changed
    assert changed[False][0] > 10_000, changed
