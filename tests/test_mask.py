"""How the swapped face goes back: the mask module (box/face shape, padding, feather, mouth,
occlusion), the mean_std colour correction, and both through ``kiosk swap`` and the pipeline on a
real face (the NASA astronaut photo, real det_500m, stand-in swapper: a strong tint)."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from mask_fixtures import *  # noqa: F403
from mask_fixtures import ASTRONAUT, face_regions, mask_pipe

from kiosk.cli import main
from kiosk.config import ConfigError, parse_config
from kiosk.inference.align import arcface_template
from kiosk.inference.color import ColorCorrector, ColorOptions, face_stats
from kiosk.inference.mask import MaskBuilder, MaskOptions, build_alpha, crop_keypoints
from kiosk.inference.paste import PasteBack, feather_mask
from kiosk.processing.models import read_image
from kiosk.types import Face

KPS_128 = arcface_template(128)


# -- the mask module ---------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [112, 128, 512])
def test_default_mask_is_the_original_feathered_square_bit_for_bit(size: int) -> None:
    builder = MaskBuilder()
    alpha = builder.alpha(size, None)
    np.testing.assert_array_equal(alpha, np.rint(feather_mask(size) * 255.0).astype(np.uint8))
    assert alpha is builder.alpha(size, KPS_128) and not alpha.flags.writeable  # cached, shared
    assert not MaskOptions().per_face and MaskOptions(mouth=0.1).per_face


def test_paste_with_the_default_alpha_equals_the_old_paste_back() -> None:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 255, (200, 240, 3), dtype=np.uint8)
    crop = rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)
    m = np.array([[0.9, 0.1, -40.0], [-0.1, 0.9, -20.0]])
    a, b = frame.copy(), frame.copy()
    PasteBack().paste(a, crop, m)
    PasteBack().paste(b, crop, m, MaskBuilder().static_alpha(128))
    np.testing.assert_array_equal(a, b)


def test_face_shape_follows_the_keypoints() -> None:
    face = build_alpha(128, MaskOptions(shape="face"), KPS_128)
    eyes, nose, mouth = KPS_128[:2].mean(0), KPS_128[2], KPS_128[3:].mean(0)
    for x, y in (eyes, nose, mouth, (64, 30)):  # eyes, nose, mouth and the forehead are swapped
        assert face[int(y), int(x)] == 255, (x, y)
    for x, y in ((4, 4), (123, 4), (4, 123), (123, 123), (8, 64), (119, 64)):  # corners, beyond the cheeks
        assert face[y, x] == 0, (x, y)
    box = build_alpha(128, MaskOptions(), KPS_128)
    assert (face <= box).all() and face.sum() < 0.75 * box.sum()
    # moved keypoints move the region: the face shifted 20 px right
    shifted = build_alpha(128, MaskOptions(shape="face"), KPS_128 + np.float32([20, 0]))
    assert np.abs(shifted[16:112, 30:110].astype(int) - face[16:112, 10:90]).max() <= 1  # inside the box


def test_mouth_keeps_the_visitor_mouth_by_amount() -> None:
    mouth = KPS_128[3:].mean(0)
    full = build_alpha(128, MaskOptions(mouth=1.0), KPS_128)
    half = build_alpha(128, MaskOptions(mouth=0.5), KPS_128)
    mx, my = int(mouth[0]), int(mouth[1])
    assert full[my, mx] == 0 and full[my - 3 : my + 5, mx - 10 : mx + 10].max() == 0
    assert half[my, mx] == 128
    for x, y in (*KPS_128[:3],):  # eyes and nose stay swapped
        assert full[int(y), int(x)] == 255
    assert full[my, 30] == 255 and full[my, 98] == 255  # the mouth region is local


def test_padding_feather_and_the_zero_border() -> None:
    hard = build_alpha(64, MaskOptions(padding=(0, 0, 0, 0), feather=0.0))
    assert hard[1:-1, 1:-1].min() == 255
    assert hard[0].max() == hard[-1].max() == hard[:, 0].max() == hard[:, -1].max() == 0
    top = build_alpha(128, MaskOptions(padding=(0.25, 0.0, 0.0, 0.0), feather=0.0))
    assert top[:32].max() == 0 and top[33:-1, 1:-1].min() == 255
    left = build_alpha(128, MaskOptions(padding=(0.0, 0.0, 0.0, 0.25), feather=0.1))
    assert left[:, :32].max() == 0 and left[64, 32 + 13] == 255 and 0 < left[64, 38] < 255


def test_occlusion_multiplies_the_alpha() -> None:
    occ = np.ones((128, 128), np.float32)
    occ[:, :10] = 0.5
    occ[64:] = 0.0
    a = build_alpha(128, MaskOptions(), None, occ)
    base = MaskBuilder().static_alpha(128)
    assert a[64:].max() == 0
    np.testing.assert_array_equal(a[20:60, 20:100], base[20:60, 20:100])
    assert a[40, 5] == np.rint(base[40, 5] / 2) or abs(int(a[40, 5]) - base[40, 5] / 2) <= 1
    with pytest.raises(ValueError, match="occlusion mask must be"):
        build_alpha(128, MaskOptions(), None, np.ones((64, 64), np.float32))
    with pytest.raises(ValueError, match="keypoints"):
        build_alpha(128, MaskOptions(shape="face"))


def test_mask_config_errors_are_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("mask:\n  shape: round\n  padding: [0.1, 0.5, 0, 0]\n", "k.yaml")
    text = "\n".join(err.value.problems)
    assert "k.yaml:2: mask.shape: must be one of box, face" in text
    assert "k.yaml:3: mask.padding: each padding value" in text
    cfg = parse_config("mask: {shape: face, padding: [0.1, 0, 0.05, 0], mouth: 0.7, occlusion: true}")
    assert cfg.mask.padding == (0.1, 0.0, 0.05, 0.0) and cfg.mask.mouth == 0.7
    with pytest.raises(ValueError, match="mask shape"):
        MaskOptions(shape="round")  # type: ignore[arg-type]


# -- colour correction ---------------------------------------------------------------------------------
def _textured(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.normal(0, 60, (128, 128, 3)).astype(np.float32), (0, 0), 2.0)
    return np.clip(base + np.array([100, 120, 140]), 0, 255).astype(np.uint8)


def _means(img: np.ndarray, weight: np.ndarray) -> np.ndarray:
    w = weight.astype(np.float64)[..., None]
    return (img * w).sum((0, 1)) / w.sum()


def test_mean_std_moves_the_swap_onto_the_visitor_statistics() -> None:
    visitor = _textured(2)
    tinted = np.clip(visitor * 0.5 + np.array([90, 20, -30]), 0, 255).astype(np.uint8)
    weight = build_alpha(128, MaskOptions(shape="face"), KPS_128)
    out = tinted.copy()
    assert ColorCorrector(ColorOptions("mean_std")).correct(visitor, out, weight)
    np.testing.assert_allclose(_means(out, weight), _means(visitor, weight), atol=1.0)
    stats = face_stats(visitor, out, weight)
    assert stats is not None
    np.testing.assert_allclose(stats[3], stats[1], rtol=0.05)  # spread matched too
    assert np.abs(_means(tinted, weight) - _means(visitor, weight)).max() > 40
    half = tinted.copy()
    ColorCorrector(ColorOptions("mean_std", strength=0.5)).correct(visitor, half, weight)
    np.testing.assert_allclose(
        _means(half, weight), (_means(tinted, weight) + _means(visitor, weight)) / 2, atol=1.5
    )
    same = tinted.copy()
    assert not ColorCorrector(ColorOptions("none")).correct(visitor, same, weight)
    assert not ColorCorrector(ColorOptions("mean_std", strength=0.0)).correct(visitor, same, weight)
    np.testing.assert_array_equal(same, tinted)
    assert not ColorCorrector(ColorOptions("mean_std")).correct(visitor, same, np.zeros((128, 128), np.uint8))


def test_colour_is_smoothed_per_tracked_face() -> None:
    weight = MaskBuilder().static_alpha(128)
    visitor = _textured(3)
    brighter = np.clip(visitor.astype(np.int16) + 40, 0, 255).astype(np.uint8)
    swap = np.clip(visitor * 0.5 + 60, 0, 255).astype(np.uint8)
    cc = ColorCorrector(ColorOptions("mean_std", smoothing_s=0.25))
    for i in range(30):  # one second of a steady face 7
        out = swap.copy()
        cc.correct(visitor, out, weight, key=7, t=i / 30)
    steady = _means(out, weight)
    out = swap.copy()
    cc.correct(brighter, out, weight, key=7, t=30 / 30)  # the light changes: one frame later
    step = _means(out, weight) - steady
    w = 1.0 - math.exp(-(1 / 30) / 0.25)
    np.testing.assert_allclose(step, 40 * w, atol=1.5)  # a small step towards it, no jump
    for i in range(31, 90):  # two seconds later it has arrived
        out = swap.copy()
        cc.correct(brighter, out, weight, key=7, t=i / 30)
    np.testing.assert_allclose(_means(out, weight), _means(brighter, weight), atol=1.5)
    fresh = swap.copy()
    cc.correct(brighter, fresh, weight, key=8, t=3.0)  # another face has its own statistics
    np.testing.assert_allclose(_means(fresh, weight), _means(brighter, weight), atol=1.0)
    assert cc.tracked_keys == {7, 8}
    cc.forget_except({8})
    assert cc.tracked_keys == {8}


# -- through kiosk swap and the pipeline on a real face --------------------------------------------------
def _swap_cli(tmp_path: Path, standin_dir: Path, det: Path, yaml_extra: str) -> tuple[np.ndarray, Face]:
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(
        f"models: {{dir: {standin_dir}, detector: {det}, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, "
        "enhancer: null, providers: {order: [cpu]}}\n"
        f"processing: {{max_faces: 1}}\n{yaml_extra}",
        encoding="utf-8",
    )
    out = tmp_path / "out.png"
    args = ["swap", "--source", str(ASTRONAUT), "--input", str(ASTRONAUT), "--output", str(out)]
    assert main([*args, "--config", str(cfg)]) == 0
    from kiosk.config import load_config
    from kiosk.processing.models import open_detector

    face = open_detector(load_config(cfg)).detect(read_image(ASTRONAUT))[0]
    return read_image(out), face


def _region_mean_diff(a: np.ndarray, b: np.ndarray, region: tuple[slice, slice]) -> np.ndarray:
    return a[region].reshape(-1, 3).mean(0) - b[region].reshape(-1, 3).mean(0)


@pytest.mark.parametrize("shape", ["box", "face"])
def test_kiosk_swap_colour_correction_matches_the_visitor(
    tmp_path: Path, standin_dir: Path, det_500m: Path, astronaut: np.ndarray, shape: str
) -> None:
    none, face = _swap_cli(tmp_path, standin_dir, det_500m, f"mask: {{shape: {shape}}}\n")
    central = face_regions(face)["central"]
    assert np.abs(_region_mean_diff(none, astronaut, central)).max() > 20, "the stand-in's tint shows"
    fixed, _ = _swap_cli(
        tmp_path,
        standin_dir,
        det_500m,
        f"mask: {{shape: {shape}}}\nprocessing: {{color_correction: mean_std, max_faces: 1}}\n",
    )
    diff = _region_mean_diff(fixed, astronaut, central)
    assert np.abs(diff).max() <= 3.0, f"mean colour off by {diff} levels (B, G, R)"
    assert np.abs(fixed.astype(np.int16) - none)[central].mean() > 20  # the swap is still there


def test_kiosk_swap_mouth_keeps_the_visitors_mouth(
    tmp_path: Path, standin_dir: Path, det_500m: Path, astronaut: np.ndarray
) -> None:
    out, face = _swap_cli(tmp_path, standin_dir, det_500m, "mask: {shape: face, mouth: 1.0}\n")
    regions = face_regions(face)
    mouth = np.abs(out.astype(np.int16) - astronaut)[regions["mouth"]]
    assert mouth.mean() <= 1.0 and mouth.max() <= 3, (mouth.mean(), mouth.max())
    for part in ("left_eye", "right_eye", "nose"):
        assert np.abs(out.astype(np.int16) - astronaut)[regions[part]].mean() > 20, part
    swapped, _ = _swap_cli(tmp_path, standin_dir, det_500m, "mask: {shape: face, mouth: 0.0}\n")
    assert np.abs(swapped.astype(np.int16) - astronaut)[regions["mouth"]].mean() > 20


class LowerHalfParser:
    """A fake face parser: the lower half of the crop is covered (a hand)."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], Face, int]] = []

    def face_mask(self, frame_bgr: np.ndarray, face: Face, size_px: int) -> np.ndarray:
        self.calls.append((frame_bgr.shape, face, size_px))
        m = np.ones((size_px, size_px), np.float32)
        m[size_px // 2 :] = 0.0
        return m


@pytest.mark.parametrize("enhance", [False, True])
def test_occlusion_parser_keeps_the_visitors_pixels(
    standin_dir: Path, det_500m: Path, astronaut: np.ndarray, enhance: bool
) -> None:
    parser = LowerHalfParser()
    # from_config with mask.occlusion would load the real parser file (tests/test_face_parser.py
    # covers that); here the occlusion option and a fake parser are set on the pipeline directly.
    pipe = mask_pipe(standin_dir, det_500m, astronaut, {"enhance": enhance})
    assert pipe.enhance == enhance
    pipe.masks = MaskBuilder(MaskOptions(occlusion=True))
    pipe.face_parser = parser
    out = np.empty_like(astronaut)
    faces = pipe.process_into(astronaut, out)
    assert len(parser.calls) == 1 and parser.calls[0][0] == astronaut.shape and parser.calls[0][2] == 128
    # frame pixels by where they fall in the swapper's crop
    sf = faces[0]
    swap_affine = pipe.swapper.align(astronaut, sf.face.kps)
    h, w = astronaut.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    u = swap_affine[0, 0] * xx + swap_affine[0, 1] * yy + swap_affine[0, 2]
    v = swap_affine[1, 0] * xx + swap_affine[1, 1] * yy + swap_affine[1, 2]
    inside = (u > 16) & (u < 112)
    lower, upper = inside & (v > 66) & (v < 127), inside & (v > 20) & (v < 60)
    diff = np.abs(out.astype(np.int16) - astronaut).max(axis=2)
    assert lower.sum() > 500 and diff[lower].max() == 0, "the covered half is the visitor's"
    assert diff[upper].mean() > 20, "the rest is swapped"
    if enhance:
        assert sf.crop_bgr.shape == (512, 512, 3) and sf.alpha is not None and sf.alpha.shape == (512, 512)
    # occlusion off: the parser is not asked and the lower half is swapped
    pipe.masks = MaskBuilder(MaskOptions(occlusion=False))
    pipe.process_into(astronaut, out)
    assert len(parser.calls) == 1
    assert np.abs(out.astype(np.int16) - astronaut).max(axis=2)[lower].mean() > 20


def test_published_faces_carry_their_alpha_and_the_colour_is_keyed_by_track(
    standin_dir: Path, det_500m: Path, astronaut: np.ndarray
) -> None:
    pipe = mask_pipe(
        standin_dir,
        det_500m,
        astronaut,
        {"tracking": True, "color_correction": "mean_std"},
        shape="face",
        mouth=0.5,
    )
    for i in range(3):
        faces = pipe.process_into(astronaut, None, paste=False, t=i / 30)
    sf = faces[0]
    assert sf.alpha is not None and sf.alpha.shape == (128, 128) and sf.alpha.flags.writeable
    expected = build_alpha(128, MaskOptions(shape="face", mouth=0.5), crop_keypoints(sf.face.kps, sf.affine))
    np.testing.assert_array_equal(sf.alpha, expected)
    assert pipe.color.tracked_keys == set(pipe.finder._chosen_ids) and len(pipe.finder._chosen_ids) == 1
    again = pipe.process_into(astronaut, None, paste=False, t=0.2, reuse=faces)
    assert again[0].alpha is sf.alpha and again[0].crop_bgr is sf.crop_bgr  # slot buffers reused
    # the box default publishes the shared read-only alpha, no per-face buffer
    box = mask_pipe(standin_dir, det_500m, astronaut)
    assert box.process_into(astronaut, None, paste=False)[0].alpha is box.masks.static_alpha(128)


@pytest.mark.parametrize("name", ["configs/default.yaml", "configs/demo.yaml", "deploy/kiosk.yaml"])
def test_shipped_configs_correct_the_colour(name: str) -> None:
    from kiosk.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / name)
    assert cfg.processing.color_correction == "mean_std" and cfg.processing.color_strength > 0
    assert cfg.mask.shape in ("box", "face")


def test_a_mask_change_in_the_config_file_rebuilds_the_processing_stage() -> None:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import KioskConfig

    cfg = KioskConfig.model_validate({"source": {"kind": "synthetic"}, "processing": {"enabled": False}})
    app = KioskApp(cfg, RunOptions(headless=True))
    calls: list[object] = []
    app.inference.reconfigure = lambda build, *policy: calls.append(build)  # type: ignore[method-assign]
    app.apply_config(cfg.model_copy(update={"mask": cfg.mask.model_copy(update={"mouth": 1.0})}))
    assert len(calls) == 1
    app.apply_config(app.cfg)  # nothing changed: nothing rebuilt
    assert len(calls) == 1


@pytest.mark.slow
def test_mask_and_colour_allocate_nothing_per_frame(standin_cfg) -> None:  # type: ignore[no-untyped-def]
    from test_hotpath import FRAME_720, SOURCE, _bytes_per_frame

    from kiosk.processing.pipeline import SwapPipeline

    proc = standin_cfg.processing.model_copy(update={"color_correction": "mean_std"})
    mask = standin_cfg.mask.model_copy(update={"shape": "face", "mouth": 1.0})
    pipe = SwapPipeline.from_config(standin_cfg.model_copy(update={"processing": proc, "mask": mask}))
    pipe.set_source(SOURCE)
    for paste in (True, False):
        peak, net = _bytes_per_frame(pipe, FRAME_720, paste, frames=40)
        assert pipe.times.faces == 2 and pipe.times.mask_ms > 0 and pipe.times.color_ms > 0
        assert peak < 64 * 1024 and net < 4 * 1024, (paste, peak, net)
