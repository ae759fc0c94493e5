"""processing.swap_resolution 256/512: the swapper runs on k×k sub-pixel shifted 128 samplings of a
face aligned at 128·k and the outputs are interleaved back. With a stand-in swapper whose output is
its input the interleaved crop must be exactly the aligned 128·k crop; each tile must be the 128
crop shifted by (j/k, i/k) px; a batchable graph is run once per face, the fixed-batch one k² times;
and the pipeline pastes the big crop where the 128 one goes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from inference_fixtures import *  # noqa: F403
from inference_fixtures import cpu_only, make_cfg

from kiosk.config import ProcessingConfig
from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import spec_for_file
from kiosk.inference.swapper import InSwapper
from kiosk.processing.pipeline import SwapPipeline
from kiosk.tools import standins

KPS = np.array([[281.3, 201.7], [359.2, 197.9], [322.4, 251.1], [291.8, 302.6], [349.5, 299.4]], np.float32)


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (480, 640, 3)).astype(np.uint8)


def _identity(tmp: Path, batch: bool) -> InSwapper:
    path = standins.make_identity_swapper(tmp / f"inswapper_128{'_batch' if batch else ''}.onnx", batch=batch)
    session, used = create_session(path, cpu_only)
    return InSwapper(session, spec_for_file("swapper", path), path, used)


@pytest.fixture(scope="module", params=[False, True], ids=["batch1", "batched"])
def identity(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> InSwapper:
    return _identity(tmp_path_factory.mktemp("identity"), request.param)


@pytest.mark.parametrize("size_px", [256, 512])
def test_identity_swapper_gives_back_the_aligned_crop_exactly(
    identity: InSwapper, frame: np.ndarray, size_px: int
) -> None:
    latent = identity.latent(np.full(512, 1 / np.sqrt(512), np.float32))
    crop, m = identity.swap_at(frame, KPS, latent, size_px)
    want_m = align_matrix(KPS, "arcface_128", size_px)
    np.testing.assert_allclose(m, want_m)
    assert crop.shape == (size_px, size_px, 3) and crop.dtype == np.uint8
    assert np.array_equal(crop, warp_crop(frame, want_m, size_px))


def test_the_big_crop_is_the_128_crop_scaled(frame: np.ndarray) -> None:
    # The 256/512 alignment is the 128 template scaled: the matrix is k times the 128 one.
    m128 = align_matrix(KPS, "arcface_128", 128)
    for k in (2, 4):
        np.testing.assert_allclose(align_matrix(KPS, "arcface_128", 128 * k), k * m128, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("k", [2, 4])
def test_tiles_are_sub_pixel_shifted_128_crops(identity: InSwapper, frame: np.ndarray, k: int) -> None:
    identity.align_tiles(frame, KPS, 128 * k)
    tiles = identity._tiles
    assert tiles is not None and tiles.tiles.shape == (k * k, 3, 128, 128)
    m128 = align_matrix(KPS, "arcface_128", 128)
    for i in range(k):
        for j in range(k):
            shifted = m128.copy()
            shifted[:, 2] -= (j / k, i / k)  # crop pixel (x, y) samples 128-crop point (x + j/k, y + i/k)
            want = warp_crop(frame, shifted, 128)[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255
            got = tiles.tiles[i * k + j]
            # cv2 quantises sample positions to 1/32 px, so two matrices for the same points may
            # round a sample one grey level apart.
            assert np.abs(got - want).max() <= 1.01 / 255
            assert np.abs(got - want).mean() < 0.05 / 255
    plain = warp_crop(frame, m128, 128)[:, :, ::-1].transpose(2, 0, 1)
    assert np.array_equal(np.rint(tiles.tiles[0] * 255), plain)  # tile (0, 0) is exactly the 128 crop


def test_batched_graph_runs_once_fixed_batch_runs_k2_times(tmp_path: Path, frame: np.ndarray) -> None:
    latent = np.full((1, 512), 1 / np.sqrt(512), np.float32)
    for batch, runs_per_face in ((True, {256: 1, 512: 1}), (False, {256: 4, 512: 16})):
        sw = _identity(tmp_path, batch)
        assert sw.batchable is batch
        for size_px, want in runs_per_face.items():
            before = sw.runner.runs
            sw.swap_at(frame, KPS, latent, size_px)
            assert sw.runner.runs - before == want


def test_a_real_swapper_stand_in_differs_per_tile_but_interleaves_in_place(
    standin_dir: Path, frame: np.ndarray
) -> None:
    """The contract stand-in (a 3x3 convolution + source term): each interleaved sample is the
    model's output for the tile it came from."""
    path = standin_dir / "inswapper_128.onnx"
    session, used = create_session(path, cpu_only)
    sw = InSwapper(session, spec_for_file("swapper", path), path, used)
    latent = sw.latent(np.full(512, 1 / np.sqrt(512), np.float32))
    crop, _ = sw.swap_at(frame, KPS, latent, 256)
    tiles = sw._tiles
    assert tiles is not None
    for i in range(2):
        for j in range(2):
            np.copyto(sw._blob[0], tiles.tiles[i * 2 + j])  # run that one tile on its own
            ref = sw.to_bgr(np.array(sw.infer(latent)))
            assert np.array_equal(crop[i::2, j::2], ref)
    assert not np.array_equal(crop[0::2, 0::2], crop[1::2, 1::2])
    plain, _ = sw.swap(frame, KPS, latent)
    assert np.array_equal(crop[0::2, 0::2], plain)


@pytest.mark.parametrize("size_px", [128, 256, 512])
def test_pipeline_swaps_and_pastes_at_the_resolution(standin_dir: Path, size_px: int) -> None:
    cfg = make_cfg(standin_dir, enhancer=None)
    proc = ProcessingConfig.model_validate({"det_size": 640, "max_faces": 8, "swap_resolution": size_px})
    cfg = cfg.model_copy(update={"processing": proc})
    pipe = SwapPipeline.from_config(cfg)
    assert pipe.swap_resolution == size_px
    pipe.set_source(standins.white_square_frame(squares=((200, 120, 96),)))
    frame = standins.white_square_frame(squares=((64, 64, 96), (384, 160, 96)))
    out = np.empty_like(frame)
    faces = pipe.process_into(frame, out)
    assert len(faces) >= 2
    for f in faces:
        assert f.crop_bgr.shape == (size_px, size_px, 3)
        np.testing.assert_allclose(f.affine, align_matrix(f.face.kps, "arcface_128", size_px))
    assert not np.array_equal(out, frame)
    assert pipe.times.swap_ms > 0
