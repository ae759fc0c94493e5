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
from kiosk.inference.mesh_warp import OUTER_FEATHER, OUTER_GROW
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
    """The photo's face opens its mouth as far as the visitor's (its own lips, moved), and what
    shows inside is the visitor's painted mouth interior; at rest it shows none of it."""
    img, xy = visitor
    opened, gap = open_mouth(img, xy, OPENING_PX)
    hull = np.zeros(img.shape[:2], np.uint8)
    cv2.fillPoly(hull, [np.rint(xy[list(FACE_OVAL)]).astype(np.int32)], 255)
    # where a mouth can be: between the nose's base and below the chin, a mouth's width either side
    mouth = np.zeros(img.shape[:2], bool)
    width = float(xy[291, 0] - xy[61, 0])
    x0, x1 = int(xy[61, 0] - 0.5 * width), int(xy[291, 0] + 0.5 * width)
    mouth[int(xy[2, 1]) : int(xy[152, 1] + OPENING_PX), x0:x1] = True
    cheeks = (cv2.erode(hull, np.ones((25, 25), np.uint8)) > 0) & ~cv2.dilate(gap.astype(np.uint8), np.ones((61, 61), np.uint8)).astype(bool)  # fmt: skip
    got = {}
    for mesh in (True, False):
        pipe = swap[(mesh, "face")]
        shown = {}
        for name, frame in (("open", opened), ("rest", img)):
            out = pipe.process(frame)
            assert pipe.times.faces == 1
            dark = np.all(np.abs(out.astype(int) - INTERIOR_BGR) < 40, axis=2) & mouth
            shown[name] = float(dark.sum() / gap.sum())
            if name == "open":
                shown["swapped"] = float(np.abs(_grey(out) - _grey(frame))[cheeks].mean())
        got[mesh] = shown
    # v2: the visitor's open mouth (its painted inside) shows in the photo's face, the rest of the
    # face is the photo's
    # (the share: of the painted gap's area, the mouth's dark pixels the open mouth adds)
    assert got[True]["open"] - got[True]["rest"] > 0.25 and got[True]["swapped"] > 15.0, got
    # the 5-point path pastes the photo's closed mouth over it
    assert got[False]["open"] - got[False]["rest"] < 0.05, got


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
    """``mask.shape: box`` with v2: outside the swapped face's outline (the photo's face outline
    where the swap put it, the visitor's own outline, and the alpha's grown, feathered edge) the
    frame is unchanged; the 5-point path pastes the photo's square there."""
    img, xy = visitor
    changed = {}
    for mesh in (True, False):
        pipe = swap[(mesh, "box")]
        out = np.empty_like(img)
        faces = pipe.process_into(img, out)
        assert pipe.times.faces == 1
        if mesh:
            target = pipe.models.swapper.last_target
            assert target is not None
            inv = cv2.invertAffineTransform(faces[0].affine)
            outline = target[list(FACE_OVAL), :2] @ inv[:, :2].T + inv[:, 2]
            crop_px = float(np.hypot(inv[0, 0], inv[1, 0]))  # frame pixels per crop pixel
            size = faces[0].crop_bgr.shape[0]
            edge = int(np.ceil((OUTER_GROW * size + 1.5 * OUTER_FEATHER * size) * crop_px)) + 2
        hull = np.zeros(img.shape[:2], np.uint8)
        cv2.fillPoly(hull, [np.rint(xy[list(FACE_OVAL)]).astype(np.int32)], 255)
        cv2.fillPoly(hull, [np.rint(outline).astype(np.int32)], 255)
        outside = (
            cv2.dilate(hull, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * edge + 1, 2 * edge + 1))) == 0
        )
        diff = np.abs(out.astype(int) - img).max(axis=2)
        changed[mesh] = (int((diff[outside] > 2).sum()), int(diff[outside].max()))
        if mesh:
            assert (diff[hull > 0] > 10).mean() > 0.5  # the face itself is swapped
    assert changed[True][0] < 100 and changed[True][1] <= 8, changed
    assert changed[False][0] > 10_000, changed
