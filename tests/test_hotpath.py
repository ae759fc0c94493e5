"""The lean hot path: no per-frame allocation in steady state, fused kernels equal to the numpy they
replace, IOBinding equal to plain runs, provider options per configuration, paste=False, warm-up."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import SHARED_MODELS, make_cfg

from kiosk.config import KioskConfig, ProvidersConfig
from kiosk.inference import kernels
from kiosk.inference.align import estimate_similarity
from kiosk.inference.paste import PasteBack
from kiosk.inference.sessions import (
    CPU,
    ProviderOptions,
    SessionRunner,
    _requested,
    create_session,
    provider_options,
)
from kiosk.processing.pipeline import SwapPipeline
from kiosk.types import SwappedFace

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SOURCE = standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),))
FRAME_720 = standins.white_square_frame(h=720, w=1280, squares=((200, 150, 128), (800, 300, 128)))


def _pipe(cfg: KioskConfig, **processing: object) -> SwapPipeline:
    proc = cfg.processing.model_copy(update=processing)
    pipe = SwapPipeline.from_config(cfg.model_copy(update={"processing": proc}))
    pipe.set_source(SOURCE)
    return pipe


def _bytes_per_frame(
    pipe: SwapPipeline, frame: np.ndarray, paste: bool, frames: int = 100
) -> tuple[int, float]:
    """(largest transient allocation within one frame, net growth per frame), tracemalloc bytes."""
    out = np.empty_like(frame)
    for i in range(20):  # warm-up: buffers, bindings, compiled kernels, tracks
        pipe.process_into(frame, out, paste=paste, t=i / 30.0)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        peak = 0
        for i in range(20, 20 + frames):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            faces = pipe.process_into(frame, out, paste=paste, t=i / 30.0)
            peak = max(peak, tracemalloc.get_traced_memory()[1] - before)
            del faces
        net = (tracemalloc.get_traced_memory()[0] - start) / frames
    finally:
        tracemalloc.stop()
    return peak, net


# -- allocation --------------------------------------------------------------------------------------
@pytest.mark.parametrize("paste", [True, False])
def test_steady_state_allocates_far_less_than_a_frame(standin_cfg: KioskConfig, paste: bool) -> None:
    pipe = _pipe(standin_cfg)
    peak, net = _bytes_per_frame(pipe, FRAME_720, paste)
    assert pipe.times.faces == 2
    frame_bytes = FRAME_720.nbytes  # 2.7 MB
    assert peak < 64 * 1024, f"{peak} B allocated within one frame (a 720p frame is {frame_bytes} B)"
    assert net < 4 * 1024, f"{net:.0f} B/frame retained"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["det_500m.onnx", "retinaface_mnet025_640.onnx"])
def test_steady_state_allocation_with_tracking_and_a_real_detector(standin_dir: Path, name: str) -> None:
    det = SHARED_MODELS / name
    if not det.is_file():
        pytest.skip(f"{det} not present")
    cfg = make_cfg(standin_dir, detector=str(det))
    pipe = SwapPipeline.from_config(
        cfg.model_copy(update={"processing": cfg.processing.model_copy(update={"tracking": True})})
    )
    face = np.zeros((720, 1280, 3), np.uint8)
    face[:] = _portrait(720, 1280)
    pipe.set_source(face)
    peak, net = _bytes_per_frame(pipe, face, paste=False)
    assert pipe.times.faces >= 1
    assert peak < 64 * 1024 and net < 4 * 1024, (peak, net)


def _portrait(h: int, w: int) -> np.ndarray:
    from inference_fixtures import insightface_image

    from kiosk.processing.models import read_image

    photo = read_image(insightface_image("t1.jpg"))
    import cv2

    s = h / photo.shape[0]
    big = cv2.resize(photo, (int(photo.shape[1] * s), h))
    frame = np.zeros((h, w, 3), np.uint8)
    x0 = (w - big.shape[1]) // 2
    frame[:, x0 : x0 + big.shape[1]] = big
    return frame


# -- kernels ---------------------------------------------------------------------------------------------
def test_hwc_to_planar_equals_numpy() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (37, 53, 3), np.uint8)
    for rgb, mean, std in ((True, 127.5, 128.0), (False, 0.0, 1.0), (True, 0.0, 255.0)):
        ref = np.zeros((3, 40, 60), np.float32)
        chw = img.transpose(2, 0, 1)
        np.copyto(ref[:, :37, :53], chw[::-1] if rgb else chw, casting="unsafe")
        ref[:, :37, :53] -= np.float32(mean)
        ref[:, :37, :53] *= np.float32(1.0 / std)
        got = np.zeros((3, 40, 60), np.float32)
        kernels.hwc_to_planar(img, got, rgb=rgb, mean=mean, std=std)
        np.testing.assert_array_equal(got, ref)
    view = img[5:20, 7:30]  # a non-contiguous crop, as region detection passes
    got = np.zeros((3, 15, 23), np.float32)
    kernels.hwc_to_planar(view, got, rgb=True)
    np.testing.assert_array_equal(got, view.transpose(2, 0, 1)[::-1].astype(np.float32))


def test_planar_to_bgr_equals_numpy() -> None:
    rng = np.random.default_rng(1)
    pred = (rng.random((3, 64, 64), dtype=np.float32) * 1.4 - 0.2).astype(np.float32)
    out = np.zeros((64, 64, 3), np.uint8)
    kernels.planar_to_bgr(pred, out)  # swapper: clip and truncate
    ref = np.clip(255.0 * pred.transpose(1, 2, 0), 0, 255).astype(np.uint8)[:, :, ::-1]
    np.testing.assert_array_equal(out, ref)
    g = pred * 2 - 1  # enhancer: [-1, 1], rounded
    kernels.planar_to_bgr(g, out, add=1.0, mul=127.5, rounding=True)
    ref = np.rint(np.clip((g.transpose(1, 2, 0) + 1.0) * 127.5, 0, 255)[:, :, ::-1]).astype(np.uint8)
    np.testing.assert_array_equal(out, ref)


def test_blend_equals_numpy() -> None:
    rng = np.random.default_rng(2)
    frame = rng.integers(0, 256, (100, 120, 3), np.uint8)
    rgba = rng.integers(0, 256, (40, 50, 4), np.uint8)
    rgba[:10, :, 3] = 0
    rgba[10:20, :, 3] = 255  # the opaque fast path
    roi = frame[20:60, 30:80].astype(np.float32)
    a = rgba[:, :, 3:4].astype(np.float32) * np.float32(1.0 / 255.0)
    ref = np.rint(roi + (rgba[:, :, :3].astype(np.float32) - roi) * a).astype(np.uint8)
    kernels.blend_rgba(frame[20:60, 30:80], rgba)
    np.testing.assert_array_equal(frame[20:60, 30:80], ref)


def _umeyama_svd(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The SVD route (scikit-image / insightface) the closed form replaces."""
    n = src.shape[0]
    sm, dm = src.mean(0), dst.mean(0)
    sc, dc = src - sm, dst - dm
    cov = dc.T @ sc / n
    d = np.ones(2)
    if np.linalg.det(cov) < 0:
        d[1] = -1
    u, s, vt = np.linalg.svd(cov)
    r = u @ np.diag(d) @ vt
    scale = (s @ d) / sc.var(0).sum()
    return np.hstack([scale * r, (dm - scale * r @ sm)[:, None]])


def test_closed_form_similarity_equals_svd_umeyama() -> None:
    rng = np.random.default_rng(3)
    for i in range(300):
        src = rng.normal(0, 40, (5, 2)) + 300
        if i % 3 == 0:
            src[:, 0] *= -1  # mirrored faces: the best proper similarity, no reflection
        dst = rng.normal(0, 30, (5, 2)) + 60
        np.testing.assert_allclose(estimate_similarity(src, dst), _umeyama_svd(src, dst), atol=1e-9)


# -- sessions ----------------------------------------------------------------------------------------------
def test_iobinding_gives_the_plain_run_outputs(standin_dir: Path) -> None:
    cpu = ProviderOptions.of(ProvidersConfig.model_validate({"order": ["cpu"]}))
    rng = np.random.default_rng(4)
    # (model, input size for dynamic dims, whether outputs can be preallocated)
    cases = [
        (standin_dir / "inswapper_128.onnx", 128, True),
        (standin_dir / "w600k_r50.onnx", 112, True),
        (standin_dir / "det_10g.onnx", 160, True),
    ]
    det = SHARED_MODELS / "det_500m.onnx"
    if det.is_file():
        # det_500m declares its outputs for a 640 input: other sizes fall back to plain runs.
        cases += [(det, 640, True), (det, 192, False)]
    for path, size, bindable in cases:
        session, used = create_session(path, cpu)
        plain, bound = SessionRunner(session, used), SessionRunner(session, used, iobinding=True)
        feeds = {}
        for inp in session.get_inputs():
            dims = (1, 3, size, size)[: len(inp.shape)]
            shape = [d if isinstance(d, int) else s for d, s in zip(inp.shape, dims, strict=True)]
            feeds[inp.name] = np.zeros(shape, np.float32)
        for _ in range(4):  # the same input arrays refilled in place, as the models do
            for arr in feeds.values():
                arr[...] = rng.random(arr.shape, dtype=np.float32)
            want = plain.run(feeds)
            got = bound.run(feeds)
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g, w)
        assert (bound._bound is not None) == bindable, path.name
        assert bound.runs == 4 and bound.run_ms > 0


def test_provider_options_for_each_configuration(tmp_path: Path) -> None:
    base = ProviderOptions.of(ProvidersConfig.model_validate({}))
    assert provider_options("cpu", base) == {}
    assert provider_options("cuda", base) == {"device_id": 0, "cudnn_conv_algo_search": "HEURISTIC"}
    assert provider_options("cuda", base, cuda_graph=True) == provider_options("cuda", base)  # off in config
    graph = ProviderOptions.of(ProvidersConfig.model_validate({"cuda_graph": True, "device_id": 1}))
    assert provider_options("cuda", graph, cuda_graph=True)["enable_cuda_graph"] == "1"
    assert "enable_cuda_graph" not in provider_options("cuda", graph)  # only fixed-shape sessions
    no_bind = ProviderOptions.of(ProvidersConfig.model_validate({"cuda_graph": True, "iobinding": False}))
    assert "enable_cuda_graph" not in provider_options("cuda", no_bind, cuda_graph=True)
    trt = provider_options("tensorrt", graph, base_dir=tmp_path, cuda_graph=True)
    assert trt == {
        "device_id": 1,
        "trt_engine_cache_enable": True,
        "trt_engine_cache_path": str(tmp_path / "models/trt_cache"),
        "trt_timing_cache_enable": True,
        "trt_timing_cache_path": str(tmp_path / "models/trt_cache"),
        "trt_fp16_enable": True,
        "trt_cuda_graph_enable": True,
    }
    fp32 = ProviderOptions.of(ProvidersConfig.model_validate({"trt_fp16": False}))
    assert provider_options("tensorrt", fp32)["trt_fp16_enable"] is False
    order = ProviderOptions.of(
        ProvidersConfig.model_validate({"order": ["tensorrt", "cuda", "cpu"], "cuda_graph": True})
    )
    requested = _requested(order, tmp_path, cuda_graph=True)
    assert requested[-1] == (CPU, {})
    for name, opts in requested[:-1]:
        assert opts.get("enable_cuda_graph") == "1" or opts.get("trt_cuda_graph_enable") is True, name


def test_gpu_configuration_runs_on_the_cpu_with_identical_output(standin_dir: Path) -> None:
    frame = standins.white_square_frame(h=360, w=640, squares=((64, 64, 64), (384, 160, 64)))
    outs = []
    for providers in (
        {"order": ["cpu"], "iobinding": False, "warmup": False},
        {"order": ["cuda", "cpu"], "iobinding": True, "cuda_graph": True, "warmup": True},
    ):
        cfg = make_cfg(standin_dir)
        models = cfg.models.model_copy(update={"providers": ProvidersConfig.model_validate(providers)})
        pipe = SwapPipeline.from_config(cfg.model_copy(update={"models": models}))
        pipe.set_source(SOURCE)
        assert pipe.provider == CPU
        outs.append([pipe.process(frame) for _ in range(3)][-1])
    np.testing.assert_array_equal(outs[0], outs[1])


# -- pipeline -----------------------------------------------------------------------------------------------
def test_paste_false_touches_nothing_and_composites_the_same(standin_cfg: KioskConfig) -> None:
    pipe = _pipe(standin_cfg)
    frame = standins.white_square_frame(h=360, w=640, squares=((64, 64, 64), (384, 160, 64)))
    want = np.empty_like(frame)
    want_faces = pipe.process_into(frame, want)
    sentinel = np.full_like(frame, 7)
    faces = pipe.process_into(frame, sentinel, paste=False)
    assert (sentinel == 7).all()
    assert pipe.process_into(frame, None, paste=False) and pipe.times.paste_ms == 0.0
    assert len(faces) == len(want_faces) == 2
    composite = frame.copy()
    paster = PasteBack()
    for sf, wf in zip(faces, want_faces, strict=True):
        np.testing.assert_array_equal(sf.affine, wf.affine)
        paster.paste(composite, sf.crop_bgr, sf.affine)
    np.testing.assert_array_equal(composite, want)
    with pytest.raises(ValueError, match="out has shape"):
        pipe.process_into(frame, None)


def test_returned_crops_survive_the_triple_buffer(standin_cfg: KioskConfig) -> None:
    pipe = _pipe(standin_cfg)
    frames = [standins.white_square_frame(h=360, w=640, squares=((64 + 8 * i, 64, 64),)) for i in range(4)]
    results = [pipe.process_into(f, None, paste=False) for f in frames[:3]]
    copies = [[sf.crop_bgr.copy() for sf in r] for r in results]
    pipe.process_into(frames[3], None, paste=False)
    for r, c in zip(results, copies, strict=True):  # three results in flight are not overwritten
        for sf, crop in zip(r, c, strict=True):
            np.testing.assert_array_equal(sf.crop_bgr, crop)
    slot: list[SwappedFace] = results[0]
    arrays = [sf.crop_bgr for sf in slot]
    again = pipe.process_into(frames[0], None, paste=False, reuse=slot)
    assert [sf.crop_bgr is a for sf, a in zip(again, arrays, strict=True)] == [True] * len(arrays)


def test_warm_up_runs_every_model_and_logs(
    standin_cfg: KioskConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="kiosk.processing.pipeline")
    pipe = SwapPipeline.from_config(standin_cfg, enhance=True)
    assert "models warmed up in" in caplog.text
    for runner in pipe.runners:
        assert runner.runs >= 1
    times = pipe.warm_up()
    assert {"kernels", "detector", "embedder", "swapper", "enhancer", "paste"} <= set(times)


def test_session_time_is_accounted(standin_cfg: KioskConfig) -> None:
    pipe = _pipe(standin_cfg)
    frame = standins.white_square_frame(h=360, w=640, squares=((64, 64, 64), (384, 160, 64)))
    pipe.process_into(frame, None, paste=False)
    t = pipe.times
    assert 0 < t.session_ms < t.total_ms
    assert t.detect_ms + t.align_ms + t.swap_ms <= t.total_ms + 1e-6


def test_set_rgb_keeps_alpha() -> None:
    rng = np.random.default_rng(5)
    rgba = rng.integers(0, 256, (9, 7, 4), np.uint8)
    bgr = rng.integers(0, 256, (9, 7, 3), np.uint8)
    ref = rgba.copy()
    ref[:, :, :3] = bgr
    kernels.set_rgb(rgba, bgr)
    np.testing.assert_array_equal(rgba, ref)
    with pytest.raises(ValueError):
        kernels.set_rgb(rgba, bgr[:4])


def _similarity_numpy(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The numpy closed form the compiled kernel replaced."""
    src = np.asarray(src, np.float64)
    dst = np.asarray(dst, np.float64)
    sm, dm = src.mean(axis=0), dst.mean(axis=0)
    p, q = src - sm, dst - dm
    norm = float(np.einsum("ij,ij->", p, p))
    a = float(np.einsum("ij,ij->", p, q)) / norm
    b = float(p[:, 0] @ q[:, 1] - p[:, 1] @ q[:, 0]) / norm
    return np.array([[a, -b, dm[0] - (a * sm[0] - b * sm[1])], [b, a, dm[1] - (b * sm[0] + a * sm[1])]])


def test_compiled_similarity_equals_the_numpy_formula() -> None:
    from kiosk.inference.align import align_matrix, template_for

    rng = np.random.default_rng(7)
    dst = template_for("arcface_128", 128)
    for _ in range(200):
        kps = (dst * rng.uniform(0.3, 4.0) + rng.uniform(-50, 1500, 2) + rng.normal(0, 3, (5, 2))).astype(
            np.float32
        )
        ref = _similarity_numpy(kps, dst)
        np.testing.assert_allclose(align_matrix(kps, "arcface_128", 128), ref, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(
            estimate_similarity(kps.astype(np.float64), dst), ref, rtol=1e-12, atol=1e-9
        )
    with pytest.raises(ValueError, match="degenerate"):
        estimate_similarity(np.ones((5, 2), np.float32), dst)


def _nms_numpy(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """The numpy greedy NMS the compiled loop replaced (insightface's)."""
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size > 0:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        order = rest[inter / (areas[i] + areas[rest] - inter) <= iou]
    return keep


def test_compiled_nms_equals_the_numpy_loop() -> None:
    from kiosk.inference.detector import nms

    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 7, 40, 200):
        xy = rng.uniform(0, 600, (n, 2)).astype(np.float32)
        wh = rng.uniform(5, 120, (n, 2)).astype(np.float32)
        boxes = np.concatenate([xy, xy + wh], axis=1)
        if n > 4:
            boxes[3] = boxes[2]  # an exact duplicate, and tied scores
        scores = rng.uniform(0.5, 1.0, n).astype(np.float32).round(2)
        for iou in (0.0, 0.4, 0.7):
            assert nms(boxes, scores, iou) == _nms_numpy(boxes, scores, iou)


# -- the last milliseconds: fused letterbox, compiled decode, paste geometry --------------------------------
@pytest.mark.parametrize(("h", "w", "k"), [(1080, 1920, 3), (1800, 3200, 5), (21, 33, 3)])
def test_fused_letterbox_equals_cv2_resize_then_planar(h: int, w: int, k: int) -> None:
    import cv2

    rng = np.random.default_rng(12)
    img = rng.integers(0, 256, (h, w, 3), np.uint8)
    assert kernels.resize_factor(h, w, h // k, w // k) == k
    for rgb, mean, std in ((True, 127.5, 128.0), (False, (104.0, 117.0, 123.0), 1.0), (False, 0.0, 1.0)):
        want = np.full((3, w // k + 3, w // k + 3), -7.0, np.float32)
        got = want.copy()
        small = cv2.resize(img, (w // k, h // k))  # what the letterbox did before
        kernels.hwc_to_planar(small, want, rgb=rgb, mean=mean, std=std)
        kernels.resize_planar(img, got, k, rgb=rgb, lut=kernels.planar_lut(mean, std))
        np.testing.assert_array_equal(got, want)  # the same floats, padding untouched
        # and against a float64 reference: OpenCV's bilinear points at an odd factor are pixels
        o = (k - 1) // 2
        means = np.broadcast_to(np.asarray(mean, np.float64), (3,))[:, None, None]
        src = img[o::k, o::k].astype(np.float64).transpose(2, 0, 1)
        ref = ((src[::-1] if rgb else src) - means) / std
        np.testing.assert_allclose(got[:, : h // k, : w // k], ref, rtol=1e-6, atol=1e-6)


def test_resize_factor_only_takes_exact_odd_multiples() -> None:
    assert kernels.resize_factor(1080, 1920, 360, 640) == 3
    assert kernels.resize_factor(720, 1280, 360, 640) == 0  # 2x: OpenCV averages, its own path
    assert kernels.resize_factor(1080, 1921, 360, 640) == 0
    assert kernels.resize_factor(1000, 1920, 333, 640) == 0
    with pytest.raises(ValueError, match="exact"):
        kernels.resize_planar(
            np.zeros((8, 8, 3), np.uint8),
            np.zeros((3, 4, 4), np.float32),
            2,
            rgb=True,
            lut=kernels.planar_lut(0.0, 1.0),
        )


def test_detector_letterbox_of_a_1080p_frame_is_unchanged(standin_dir: Path) -> None:
    import cv2

    from kiosk.inference.detector import make_detector
    from kiosk.inference.specs import spec_for_file

    path = standin_dir / "det_10g.onnx"
    session, used = create_session(
        path, ProviderOptions.of(ProvidersConfig.model_validate({"order": ["cpu"]}))
    )
    det = make_detector(session, spec_for_file("detector", path), path, used, det_size=640)
    frame = np.random.default_rng(13).integers(0, 256, (1080, 1920, 3), np.uint8)
    assert det._letterbox(frame) == 360 / 1080
    want = np.zeros((3, 640, 640), np.float32)
    det._fill_padding(want)
    kernels.hwc_to_planar(
        cv2.resize(frame, (640, 360)), want, rgb=det.spec.colour == "RGB", mean=det._mean, std=det.spec.std
    )
    np.testing.assert_array_equal(det._blob[0], want)


def _scrfd_decode_numpy(outs: list[np.ndarray], size: int, threshold: float):  # type: ignore[no-untyped-def]
    """The numpy decode the compiled loop replaced (insightface's)."""
    all_scores, all_boxes, all_kps = [], [], []
    for i, stride in enumerate((8, 16, 32)):
        scores = outs[i].reshape(-1)
        pos = np.nonzero(scores >= threshold)[0]
        if pos.size == 0:
            continue
        n = size // stride
        ys, xs = np.mgrid[:n, :n]
        grid = np.repeat(np.stack([xs, ys], axis=-1).astype(np.float32).reshape(-1, 2), 2, axis=0)
        anchors = grid[pos] * np.float32(stride)
        dist = outs[i + 3].reshape(-1, 4)[pos] * np.float32(stride)
        kdist = outs[i + 6].reshape(-1, 10)[pos] * np.float32(stride)
        all_scores.append(scores[pos])
        all_boxes.append(np.concatenate([anchors - dist[:, :2], anchors + dist[:, 2:]], axis=1))
        all_kps.append(kdist + np.tile(anchors, 5))
    if not all_scores:
        return np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32)
    return np.concatenate(all_scores), np.concatenate(all_boxes), np.concatenate(all_kps)


@pytest.mark.parametrize("threshold", [0.5, 0.97, 2.0])
def test_compiled_scrfd_decode_equals_numpy(threshold: float) -> None:
    rng = np.random.default_rng(14)
    size = 160
    counts = [2 * (size // s) ** 2 for s in (8, 16, 32)]
    outs = [rng.random((c, 1), dtype=np.float32) for c in counts]
    outs += [rng.normal(0, 3, (c, 4)).astype(np.float32) for c in counts]
    outs += [rng.normal(0, 3, (c, 10)).astype(np.float32) for c in counts]
    total = sum(counts)
    scores, boxes, kps = (
        np.zeros(total, np.float32),
        np.zeros((total, 4), np.float32),
        np.zeros((total, 10), np.float32),
    )
    n = kernels.scrfd_decode(outs, size, (8, 16, 32), threshold, scores, boxes, kps)
    want = _scrfd_decode_numpy(outs, size, threshold)
    assert n == want[0].shape[0]
    for got, ref in zip((scores[:n], boxes[:n], kps[:n]), want, strict=True):
        np.testing.assert_array_equal(got, ref)


def test_paste_geometry_equals_face_region_and_cv2_inverse() -> None:
    import cv2

    from kiosk.inference.paste import face_region

    rng = np.random.default_rng(15)
    box, inv = np.zeros(4, np.int64), np.zeros((2, 3), np.float64)
    hits = 0
    for _ in range(300):
        ang, s = rng.uniform(-3, 3), rng.uniform(0.2, 1.5)
        m = np.array([[s * np.cos(ang), -s * np.sin(ang), 0.0], [s * np.sin(ang), s * np.cos(ang), 0.0]])
        m[:, 2] = 64 - m[:, :2] @ np.array([rng.uniform(-200, 2100), rng.uniform(-200, 1300)])
        want = face_region(m, 128, (1080, 1920))
        assert kernels.paste_geometry(m, 128, (1080, 1920), box, inv) == want
        if want is not None:
            hits += 1
            ref = cv2.invertAffineTransform(m)
            ref[0, 2] -= want[0]
            ref[1, 2] -= want[1]
            np.testing.assert_array_equal(inv, ref)
    assert hits > 100


def test_zero_rings_counts_the_all_zero_edge() -> None:
    a = np.zeros((16, 16), np.uint8)
    assert kernels.zero_rings(a) == 8
    a[3, 7] = 1
    assert kernels.zero_rings(a) == 3
    a[15, 0] = 9
    assert kernels.zero_rings(a) == 0
    from kiosk.inference.mask import MaskBuilder

    assert kernels.zero_rings(np.ascontiguousarray(MaskBuilder().static_alpha(128))) == 3  # the 2 % margin


def _paste_float64(frame: np.ndarray, crop: np.ndarray, alpha: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The paste-back in float64: each frame pixel samples crop and alpha bilinearly at its crop
    coordinate (black, alpha 0 outside), both rounded as the uint8 warp stores them, then blended."""
    h, w = frame.shape[:2]
    s = crop.shape[0]
    ys, xs = np.mgrid[:h, :w].astype(np.float64)
    u = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    v = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    iu, iv = np.floor(u).astype(int), np.floor(v).astype(int)
    fu, fv = u - iu, v - iv
    img = np.concatenate([crop.astype(np.float64), alpha[:, :, None].astype(np.float64)], axis=2)
    padded = np.zeros((s + 2, s + 2, 4))
    padded[1:-1, 1:-1] = img

    def at(dy: int, dx: int) -> np.ndarray:
        yy, xx = np.clip(iv + dy + 1, 0, s + 1), np.clip(iu + dx + 1, 0, s + 1)
        return padded[yy, xx]

    top = at(0, 0) * (1 - fu)[..., None] + at(0, 1) * fu[..., None]
    bottom = at(1, 0) * (1 - fu)[..., None] + at(1, 1) * fu[..., None]
    sample = np.rint(top * (1 - fv)[..., None] + bottom * fv[..., None])
    a = sample[..., 3:4] / 255.0
    f = frame.astype(np.float64)
    return np.rint(f + (sample[..., :3] - f) * a).astype(np.uint8)


def test_paste_back_agrees_with_a_float64_reference_to_one_level() -> None:
    from kiosk.inference.mask import MaskBuilder, MaskOptions, build_alpha

    rng = np.random.default_rng(16)
    frame = rng.integers(0, 256, (300, 360, 3), np.uint8)
    crop = rng.integers(0, 256, (128, 128, 3), np.uint8)
    kps = np.array([[45, 52], [83, 52], [64, 72], [49, 92], [79, 92]], np.float32)
    alphas = [None, build_alpha(128, MaskOptions(shape="face", mouth=0.5), kps)]
    paster = PasteBack()
    for ang, scale, cx, cy in ((0.1, 0.6, 180, 150), (-0.7, 0.45, 170, 140), (2.0, 0.8, 40, 260)):
        m = np.array(
            [[scale * np.cos(ang), -scale * np.sin(ang), 0], [scale * np.sin(ang), scale * np.cos(ang), 0]]
        )
        m[:, 2] = 64 - m[:, :2] @ np.array([cx, cy])
        for alpha in alphas:
            got = frame.copy()
            paster.paste(got, crop, m, alpha)
            ref = _paste_float64(frame, crop, MaskBuilder().static_alpha(128) if alpha is None else alpha, m)
            diff = np.abs(got.astype(int) - ref)
            assert diff.max() <= 1, diff.max()
            assert (diff > 0).mean() < 0.01
