"""Processing frame rate with ``processing.pipelined`` off vs on, side by side in one process.

Two processors (:class:`~kiosk.processing.swap_stage.SwapProcessor`, each with its own models) process
the same frame alternately, ``--rounds`` rounds of ``--frames`` calls each (so the load other jobs
put on the machine hits both alike); reported: the median and best ms per ``process`` call (what
the inference thread spends per frame) and the frames per second that gives.

    .venv/bin/python benchmarks/bench_pipelined.py [--swapper standin|heavy] [--size 1280x720]
        [--rounds 5] [--frames 20] [--threads 0]

Models: the stand-ins (:mod:`kiosk.tools.standins`) with the real ``det_500m`` from
../shared/models when present. ``--swapper heavy`` replaces the stand-in swapper (one 3x3 conv)
by a deeper conv net with the same contract (five 3x3 convs, 16 channels at 128x128), to see the
case where both stages cost about as much. Frame: insightface's t1.jpg (six faces).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def make_heavy_swapper(path: Path, channels: int = 16, depth: int = 3, seed: int = 4) -> Path:
    """An InSwapper-shaped model (target [1,3,128,128], source [1,512] → output, emap last) whose
    cost is a stack of ``depth + 2`` 3x3 convolutions at 128x128."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name: str, arr: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(np.ascontiguousarray(arr, np.float32), name)

    c = channels
    inits = [init("w_in", rng.normal(0, 0.2, (c, 3, 3, 3)))]
    nodes = [helper.make_node("Conv", ["target", "w_in"], ["h0"], pads=[1, 1, 1, 1])]
    x = "h0"
    for i in range(depth):
        inits.append(init(f"w{i}", rng.normal(0, 0.08, (c, c, 3, 3))))
        nodes += [
            helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"c{i}"], [f"h{i + 1}"]),
        ]
        x = f"h{i + 1}"
    inits += [
        init("w_out", rng.normal(0, 0.05, (3, c, 3, 3))),
        init("src_proj", rng.standard_normal((512, 3)) * 0.2),
        numpy_helper.from_array(np.array([1, 3, 1, 1], np.int64), "src_shape"),
        init("lo", np.array(0.0)),
        init("hi", np.array(1.0)),
        init("emap", rng.standard_normal((512, 512)) / np.sqrt(512)),
    ]
    nodes += [
        helper.make_node("Conv", [x, "w_out"], ["o"], pads=[1, 1, 1, 1]),
        helper.make_node("MatMul", ["source", "src_proj"], ["p"]),
        helper.make_node("Reshape", ["p", "src_shape"], ["p4"]),
        helper.make_node("Add", ["o", "p4"], ["s"]),
        helper.make_node("Add", ["s", "target"], ["s2"]),
        helper.make_node("Clip", ["s2", "lo", "hi"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "inswapper_heavy_standin",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--swapper", choices=("standin", "heavy"), default="standin")
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=20, help="calls per round and mode")
    ap.add_argument("--threads", type=int, default=0, help="models.providers.intra_op_threads")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kiosk.config import KioskConfig
    from kiosk.processing.pipeline import SwapPipeline
    from kiosk.processing.pipelined import PipelinedDetection
    from kiosk.processing.swap_stage import SwapProcessor
    from kiosk.processing.thread import new_swap_result
    from kiosk.tools.bench_frames import faces_frame, shared_file
    from kiosk.tools.standins import make_all

    w, h = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="bench_pipelined_") as tmp_name:
        models = Path(tmp_name)
        make_all(models)
        if args.swapper == "heavy":
            make_heavy_swapper(models / "inswapper_128.onnx")
        det = shared_file("models", "det_500m.onnx")
        frame = faces_frame(w, h, white_squares=det is None)
        cfg = KioskConfig.model_validate(
            {
                "models": {
                    "dir": str(models),
                    "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
                    "accept_noncommercial_licence": True,
                    "detector": str(det) if det is not None else "det_10g.onnx",
                    "providers": {"order": ["cpu"], "intra_op_threads": args.threads},
                },
                "processing": {"max_faces": 8},
                "base_dir": str(models),
            }
        )
        latent = np.full((1, 512), 512**-0.5, np.float32)
        procs = {}
        for mode in ("off", "on"):
            pipe = SwapPipeline.from_config(cfg)
            pipe.use_latent(latent, "bench")
            stage = PipelinedDetection.from_config(cfg, pipe) if mode == "on" else None
            procs[mode] = SwapProcessor(pipe, pipelined=stage)
        out = new_swap_result()
        out.frame_bgr = np.empty_like(frame)
        times: dict[str, list[float]] = {"off": [], "on": []}
        stages: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
        for proc in procs.values():
            for _ in range(3):
                proc.process(frame, out)
        for _ in range(args.rounds):
            for mode, proc in procs.items():
                for _ in range(args.frames):
                    t0 = time.perf_counter()
                    proc.process(frame, out)
                    times[mode].append((time.perf_counter() - t0) * 1e3)
                    st = proc.pipe.times
                    stages[mode].append((st.detect_ms, st.swap_ms + st.align_ms + st.paste_ms))
                    assert out.notice == proc.notice, out.notice
        faces = procs["off"].pipe.times.faces
        for proc in procs.values():
            proc.close()
    print(
        f"frame {w}x{h}, {faces} faces, swapper {args.swapper}, intra_op_threads {args.threads}, "
        f"{args.rounds} alternating rounds x {args.frames} frames, load {os.getloadavg()[0]:.1f}"
    )
    print("pipelined   ms/frame p50   best    fps(p50)   detect p50   swap+align+paste p50")
    med = {}
    for mode in ("off", "on"):
        t = np.array(times[mode])
        s = np.array(stages[mode])
        med[mode] = float(np.median(t))
        print(
            f"{mode:<10} {med[mode]:13.1f} {t.min():7.1f} {1e3 / med[mode]:9.1f} "
            f"{np.median(s[:, 0]):12.1f} {np.median(s[:, 1]):16.1f}"
        )
    print(f"speed-up on/off (fps): {med['off'] / med['on']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
