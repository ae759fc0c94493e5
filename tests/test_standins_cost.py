"""Cost-matched stand-ins: the MAC counter's formula, full-size counts against the published
figures (counted on weightless skeleton graphs: nothing big is materialised), small-width copies
that run with the real contracts, the cache, and ``kiosk bench --cost-matched`` on small copies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from kiosk.inference.specs import DET_10G, GFPGAN_1_4, INSWAPPER_128, W600K_R50, check_signature
from kiosk.tools import cost_graphs as cg
from kiosk.tools import standins_cost as sc
from kiosk.tools.standins import white_square_frame

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SMALL = 1 / 16


def _tiny_graph() -> onnx.ModelProto:
    """One node of each counted kind, with shapes chosen so that every term of the formula matters."""
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 10, 12]),
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 5, 7]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4]),
    ]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z", "g")]
    inits = [
        numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "wc"),  # group 2: Cin/group = 3
        numpy_helper.from_array(np.zeros((8, 4, 2, 2), np.float32), "wt"),  # ConvTranspose 8 -> 4
        numpy_helper.from_array(np.zeros((7, 9), np.float32), "wm"),
        numpy_helper.from_array(np.zeros((11, 4), np.float32), "wg"),  # transB: N=11, K=4
    ]
    nodes = [
        helper.make_node("Conv", ["x", "wc"], ["c"], group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c", "wt"], ["y"], strides=[2, 2]),
        helper.make_node("MatMul", ["a", "wm"], ["z"]),
        helper.make_node("Gemm", ["b", "wg"], ["g"], transB=1),
    ]
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_count_macs_formula_per_op() -> None:
    m = _tiny_graph()
    conv = 2 * 8 * 5 * 6 * 3 * 3 * 3  # N·Cout·Hout·Wout·(Cin/group)·kh·kw, out 5x6 at stride 2
    convt = 2 * 8 * 5 * 6 * 4 * 2 * 2  # N·Cin·Hin·Win·(Cout/group)·kh·kw
    matmul = 3 * 5 * 9 * 7  # batch·M·N·K
    gemm = 3 * 11 * 4  # M·N·K
    assert cg.count_macs(m) == conv + convt + matmul + gemm


def test_count_macs_refuses_unknown_shapes() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])
    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    m = helper.make_model(
        helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"])],
            "g",
            [x],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [w],
        )
    )
    with pytest.raises(ValueError, match="shapes not inferred"):
        cg.count_macs(m)
    assert cg.count_macs(m, {"x": [1, 3, 10, 10]}) == 4 * 8 * 8 * 27


def _inswapper_macs(c128: int, c256: int, c512: int, c1024: int) -> int:
    """InSwapper's layer list (the builder's documented layout), summed by hand."""
    enc = (3 * 49 * c128 + c128 * c256 * 9) * 128**2 + c256 * c512 * 9 * 64**2 + c512 * c1024 * 9 * 32**2
    style = 12 * c1024 * c1024 * 9 * 32**2 + 24 * 512 * c1024
    dec = c1024 * c512 * 9 * 64**2 + (c512 * c256 * 9 + c256 * c128 * 9 + c128 * 3 * 49) * 128**2
    return enc + style + dec


@pytest.mark.parametrize("width", [1.0, 0.25])
def test_swapper_macs_match_its_layer_list(width: float) -> None:
    m = cg.build_swapper(None, width)
    chans = [max(2, round(c * width)) for c in (128, 256, 512, 1024)]
    assert cg.count_macs(m) == _inswapper_macs(*chans)


def test_full_size_counts_within_ten_percent_of_published() -> None:
    counts = sc.skeleton_counts()
    assert set(counts) == {"detector", "embedder", "swapper", "enhancer"}
    for role, (params, macs) in counts.items():
        pub = sc.PUBLISHED[role]
        assert abs(params / 1e6 / pub.params_m - 1) < 0.10, (role, params)
        assert abs(macs / 1e9 / pub.gmacs - 1) < 0.10, (role, macs)
        # the file a full build writes is about the real file's size (4 bytes a weight)
        assert abs(4 * params / pub.size_bytes - 1) < 0.10, role
    table = sc.figures_table(counts)
    assert "inswapper_128.onnx" in table and "174.70" in table


def test_count_params_counts_skeleton_inputs_as_weights() -> None:
    full = cg.build_embedder(np.random.default_rng(0), SMALL)
    skel = cg.build_embedder(None, SMALL)
    assert cg.count_params(full) == cg.count_params(skel) > 0
    assert cg.count_macs(full, {"input.1": [1, 3, 112, 112]}) == cg.count_macs(
        skel, {"input.1": [1, 3, 112, 112]}
    )


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_small_copies_keep_the_real_contracts() -> None:
    rng = np.random.default_rng
    for builder, spec, seed in (
        (cg.build_detector, DET_10G, 11),
        (cg.build_embedder, W600K_R50, 12),
        (cg.build_swapper, INSWAPPER_128, 13),
        (cg.build_enhancer, GFPGAN_1_4, 14),
    ):
        model = builder(rng(seed), SMALL)
        onnx.checker.check_model(model)
        check_signature(spec, _session(model), Path(spec.file))
    swap = cg.build_swapper(rng(13), SMALL)
    last = swap.graph.initializer[-1]
    assert last.name == "emap" and list(last.dims) == [512, 512]
    out = _session(swap).run(
        None,
        {
            "target": np.random.default_rng(0).random((1, 3, 128, 128), np.float32),
            "source": np.ones((1, 512), np.float32) / 512**0.5,
        },
    )[0]
    assert (
        out.shape == (1, 3, 128, 128)
        and np.isfinite(out).all()
        and out.min() > -1e-3
        and out.max() < 1 + 1e-3
    )
    enh = _session(cg.build_enhancer(rng(14), SMALL)).run(
        None, {"input": np.zeros((1, 3, 512, 512), np.float32)}
    )[0]
    assert enh.shape == (1, 3, 512, 512) and np.isfinite(enh).all() and np.abs(enh).max() <= 1.0


def test_small_detector_finds_white_squares_like_the_small_standin(tmp_path: Path) -> None:
    from kiosk.config import KioskConfig
    from kiosk.processing.models import open_detector
    from kiosk.tools.standins import make_detector

    def detector(folder: Path):  # type: ignore[no-untyped-def]
        cfg = KioskConfig.model_validate(
            {
                "models": {
                    "dir": str(folder),
                    "swapper": "inswapper_128.onnx",
                    "accept_noncommercial_licence": True,
                    "providers": {"order": ["cpu"]},
                },
                "processing": {"max_faces": 8},
            }
        )
        return open_detector(cfg)

    (tmp_path / "cost").mkdir()
    onnx.save(cg.build_detector(np.random.default_rng(11), SMALL), str(tmp_path / "cost" / "det_10g.onnx"))
    make_detector(tmp_path / "small" / "det_10g.onnx")
    frame = white_square_frame(360, 640, ((64, 64, 96), (400, 160, 96)))
    ours, small = detector(tmp_path / "cost").detect(frame), detector(tmp_path / "small").detect(frame)
    assert len(ours) == len(small) >= 2
    for a, b in zip(ours, small, strict=True):
        assert np.abs(a.box_xyxy - b.box_xyxy).max() < 1.0 and np.abs(a.kps - b.kps).max() < 1.0
    assert detector(tmp_path / "cost").detect(white_square_frame(360, 640, ())) == []


def test_generate_writes_once_and_reuses(tmp_path: Path) -> None:
    gen = sc.generate(tmp_path, roles=("detector", "embedder"), width=SMALL)
    assert not gen["detector"].reused and gen["detector"].path.is_file()
    man = json.loads((tmp_path / sc.MANIFEST).read_text())["files"]
    assert man["det_10g.onnx"]["size"] == gen["detector"].path.stat().st_size
    assert man["w600k_r50.onnx"]["params"] == gen["embedder"].params
    again = sc.generate(tmp_path, roles=("detector", "embedder"), width=SMALL, verify=True)
    assert again["detector"].reused and again["embedder"].reused
    # a damaged file (other size) or another width is rebuilt, not reused
    with gen["detector"].path.open("ab") as f:
        f.write(b"x")
    assert not sc.cached(tmp_path, "detector", width=SMALL)
    assert not sc.cached(tmp_path, "embedder", width=1.0)
    assert not sc.generate(tmp_path, roles=("detector",), width=SMALL)["detector"].reused
    assert sc.cached(tmp_path, "detector", width=SMALL, verify=True)


def test_default_dir_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert sc.default_dir() == tmp_path / "faceswap-kiosk" / "cost-matched"


def test_cli_count_only_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert sc.main(["--count-only", "--only", "swapper"]) == 0
    out = capsys.readouterr().out
    assert "| inswapper_128.onnx" in out and "138.56" in out and "det_10g" not in out.split("\n- ")[0]


@pytest.mark.slow
@pytest.mark.gl
def test_bench_cost_matched_on_small_copies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The whole ``--cost-matched`` path (cache, config, white-square frame, enhancer on), with
    the builders at 1/16 width so that it runs in seconds."""
    from kiosk.tools import bench

    generate = sc.generate
    monkeypatch.setattr(sc, "generate", lambda *a, **k: generate(*a, **{**k, "width": SMALL}))
    cfg, standin_detector = bench.bench_config(
        None, None, 640, 360, tracking=False, max_faces=2, cost_matched_dir=tmp_path, enhance=True
    )
    assert standin_detector and cfg.models.dir == str(tmp_path) and cfg.processing.enhance
    prov = cfg.models.providers.model_copy(update={"order": ["cpu"]})
    cfg = cfg.model_copy(update={"models": cfg.models.model_copy(update={"providers": prov})})
    frame = bench.faces_frame(640, 360, white_squares=True)
    r = bench.run_bench(cfg, frame, frames=2, skip_frames=1, alloc_frames=0, models_label="cost-matched")
    assert sc.folder_width(tmp_path) == SMALL
    assert r.setup["models"] == "cost-matched" and r.setup["enhance"] is True
    assert r.overhead["faces_mean"] == 2 and r.stages_ms["enhance"]["p50"] > 0
    assert r.allocation["frames"] == 0 and "allocation" not in bench.format_report(r)
    assert r.runtime["cpu_s_per_frame_p50"] > 0 and "process CPU" in bench.format_report(r)


def test_bench_mode_sets_display_mode() -> None:
    from kiosk.tools import bench

    cfg, _ = bench.bench_config(None, None, 640, 360, None, None, mode="live")
    assert cfg.display.mode == "live"
    cfg, _ = bench.bench_config(None, None, 640, 360, None, None)
    assert cfg.display.mode == "synced"


def test_bench_cli_cost_matched_arguments() -> None:
    from kiosk.cli import build_parser

    args = build_parser().parse_args(["bench", "--cost-matched", "--mode", "live", "--enhance"])
    assert args.cost_matched and args.mode == "live" and args.enhance is True and args.frames is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "--mode", "later"])
