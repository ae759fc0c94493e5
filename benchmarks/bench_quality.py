"""What the quality options cost per face: the occlusion parser, swap_resolution 256/512 and the
GPEN enhancers, measured on this machine with stand-ins.

- Parser: ``FaceParser.face_mask`` on a stand-in with the real contract, split into time inside
  ``session.run`` and the pipeline's own work (warp, normalise, class max, distance ramp, scale),
  and a compute-matched BiSeNet: the same layers as yakhyo's ResNet-18/34 BiSeNet (the file
  FaceFusion ships), random weights, so ``session.run`` costs what the real file costs on this CPU.
- Swap resolution: ``InSwapper.swap_at`` at 128/256/512 on the contract stand-in swapper: session
  runs per face, time inside ``session.run`` and the work outside it (the real swapper's run time
  multiplies by the number of runs: x4 at 256, x16 at 512).

Timings on a shared machine are noisy: every figure is the median of ``--repeat`` runs, measured
side by side in one process. Run: ``python benchmarks/bench_quality.py [--repeat 15]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from kiosk.config import ProvidersConfig
from kiosk.inference.parser import FaceParser
from kiosk.inference.sessions import create_session
from kiosk.inference.specs import spec_for_file
from kiosk.inference.swapper import InSwapper
from kiosk.tools import standins
from kiosk.types import Face

KPS = np.array([[281.3, 201.7], [359.2, 197.9], [322.4, 251.1], [291.8, 302.6], [349.5, 299.4]], np.float32)


class _Net:
    """A tiny ONNX graph builder that counts multiply-accumulates of its convolutions."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.macs = 0
        self.rng = np.random.default_rng(seed)
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def conv(
        self, x: str, cin: int, cout: int, k: int, hw_out: int, stride: int = 1, relu: bool = True
    ) -> str:
        w = (self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)) * 0.7).astype(
            np.float32
        )
        b = np.zeros(cout, np.float32)
        wn, bn, out = self.name("w"), self.name("b"), self.name("c")
        self.inits += [numpy_helper.from_array(w, wn), numpy_helper.from_array(b, bn)]
        pad = k // 2
        self.nodes.append(
            helper.make_node("Conv", [x, wn, bn], [out], strides=[stride, stride], pads=[pad] * 4)
        )
        self.macs += hw_out * hw_out * cout * cin * k * k
        return self.op("Relu", out) if relu else out

    def op(self, kind: str, *inputs: str, **attrs: object) -> str:
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def const(self, arr: np.ndarray) -> str:
        n = self.name("k")
        self.inits.append(numpy_helper.from_array(arr, n))
        return n

    def resize(self, x: str, size: int, channels: int, linear: bool = False) -> str:
        sizes = self.const(np.array([1, channels, size, size], np.int64))
        if linear:
            return self.op(
                "Resize", x, "", "", sizes, mode="linear", coordinate_transformation_mode="align_corners"
            )
        return self.op("Resize", x, "", "", sizes, mode="nearest")

    def attention(self, feat: str, c: int) -> str:
        pool = self.op("GlobalAveragePool", feat)
        att = self.op("Sigmoid", self.conv(pool, c, c, 1, 1, relu=False))
        return self.op("Mul", feat, att)


def make_bisenet_cost(path: Path, depth: int = 34) -> tuple[Path, int]:
    """BiSeNet (yakhyo/face-parsing) with a ResNet-18/34 backbone at 512x512: the real layers and
    shapes, random weights (BatchNorm folded into the convolutions). Returns the file and its MACs."""
    blocks = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}[depth]
    net = _Net(depth)
    x = net.conv("input", 3, 64, 7, 256, stride=2)
    x = net.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw, feats = 64, 128, []
    for li, (cout, n) in enumerate(zip((64, 128, 256, 512), blocks, strict=True)):
        for bi in range(n):
            stride = 2 if (li > 0 and bi == 0) else 1
            hw_out = hw // stride
            y = net.conv(x, cin, cout, 3, hw_out, stride)
            y = net.conv(y, cout, cout, 3, hw_out, relu=False)
            short = (
                net.conv(x, cin, cout, 1, hw_out, stride, relu=False) if (stride != 1 or cin != cout) else x
            )
            x = net.op("Relu", net.op("Add", y, short))
            cin, hw = cout, hw_out
        feats.append(x)
    feat8, feat16, feat32 = feats[1], feats[2], feats[3]  # 128@64, 256@32, 512@16
    avg = net.conv(net.op("GlobalAveragePool", feat32), 512, 128, 1, 1)
    avg_up = net.resize(avg, 16, 128)
    f32 = net.op("Add", net.attention(net.conv(feat32, 512, 128, 3, 16), 128), avg_up)
    f32_up = net.conv(net.resize(f32, 32, 128), 128, 128, 3, 32)
    f16 = net.op("Add", net.attention(net.conv(feat16, 256, 128, 3, 32), 128), f32_up)
    f16_up = net.conv(net.resize(f16, 64, 128), 128, 128, 3, 64)
    fuse = net.conv(net.op("Concat", feat8, f16_up, axis=1), 256, 256, 1, 64)
    att = net.conv(net.op("GlobalAveragePool", fuse), 256, 64, 1, 1)
    att = net.op("Sigmoid", net.conv(att, 64, 256, 1, 1, relu=False))
    fuse = net.op("Add", net.op("Mul", fuse, att), fuse)
    heads = [
        net.conv(net.conv(fuse, 256, 256, 3, 64), 256, 19, 1, 64, relu=False),
        net.conv(net.conv(f16_up, 128, 64, 3, 64), 64, 19, 1, 64, relu=False),
        net.conv(net.conv(f32_up, 128, 64, 3, 32), 64, 19, 1, 32, relu=False),
    ]
    outs = []
    for name, h in zip(("output", "0", "1"), heads, strict=True):
        up = net.resize(h, 512, 19, linear=True)
        net.nodes.append(helper.make_node("Identity", [up], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 19, 512, 512]))
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 512, 512])
    graph = helper.make_graph(net.nodes, f"bisenet_r{depth}_cost", [inp], outs, net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path, net.macs


def _median_ms(fn, runner, repeat: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Medians over ``repeat`` calls of: the call, the time inside ``session.run``, and the
    difference (the work outside the model), each taken per call. On a busy machine the minimum
    is printed too (``min``): the closest to the uncontended cost."""
    total, inside, outside = [], [], []
    for _ in range(repeat):
        r0 = runner.run_ms
        t = time.perf_counter()
        fn()
        dt = (time.perf_counter() - t) * 1e3
        run = runner.run_ms - r0
        total.append(dt)
        inside.append(run)
        outside.append(dt - run)
    _MINS[:] = [min(total), min(inside), min(outside)]
    return statistics.median(total), statistics.median(inside), statistics.median(outside)


_MINS: list[float] = [0.0, 0.0, 0.0]


def _mins() -> str:
    t, i, o = _MINS
    return f" [min: total {t:.1f}, inside {i:.1f}, outside {o:.1f}]"


def bench_parser(folder: Path, cpu: ProvidersConfig, repeat: int) -> None:
    frame = np.random.default_rng(0).integers(0, 256, (720, 1280, 3)).astype(np.uint8)
    face = Face(np.array([240, 140, 400, 340], np.float32), 0.9, KPS)
    print("occlusion parser, per face (median ms):")
    (folder / "contract").mkdir()
    models = [
        ("contract stand-in (1x1 conv)", standins.make_parser(folder / "contract" / "my_parser.onnx"), 0)
    ]
    for depth in (18, 34):
        p, macs = make_bisenet_cost(folder / f"bisenet_resnet_{depth}.onnx", depth)
        models.append((f"compute-matched BiSeNet ResNet-{depth}", p, macs))
    for label, path, macs in models:
        session, used = create_session(path, cpu)
        parser = FaceParser(session, spec_for_file("parser", path), path, used, iobinding=cpu.iobinding)
        for size in (128,) if macs else (128, 256, 512):
            parser.face_mask(frame, face, size)  # warm up
            call = lambda s=size, p=parser: p.face_mask(frame, face, s)  # noqa: E731
            total, run, outside = _median_ms(call, parser.runner, repeat)
            gmacs = f", {macs / 1e9:.1f} GMACs" if macs else ""
            print(
                f"  {label}{gmacs}: mask {size}px total {total:.1f} ms, "
                f"session.run {run:.1f} ms, outside the model {outside:.1f} ms" + _mins()
            )


def bench_resolution(folder: Path, cpu: ProvidersConfig, repeat: int) -> None:
    frame = np.random.default_rng(0).integers(0, 256, (720, 1280, 3)).astype(np.uint8)
    path = standins.make_swapper(folder / "inswapper_128.onnx")
    session, used = create_session(path, cpu, cuda_graph=True)
    sw = InSwapper(session, spec_for_file("swapper", path), path, used, iobinding=cpu.iobinding)
    latent = sw.latent(np.full(512, 1 / np.sqrt(512), np.float32))
    print("swap resolution, per face (median ms, contract stand-in swapper, fixed batch 1):")
    base = None
    for size in (128, 256, 512):
        sw.swap_at(frame, KPS, latent, size)
        n0 = sw.runner.runs
        total, run, outside = _median_ms(lambda s=size: sw.swap_at(frame, KPS, latent, s), sw.runner, repeat)
        runs = (sw.runner.runs - n0) / repeat
        base = base or run
        print(
            f"  {size}px: {runs:.0f} session.run per face, inside {run:.2f} ms ({run / base:.1f}x the 128 "
            f"run), outside the model {outside:.2f} ms, total {total:.2f} ms" + _mins()
        )


def write_picture(out: Path, cpu: ProvidersConfig) -> None:
    """README picture: the NASA portrait scaled 4x (a big face), swapped by a stand-in swapper whose
    output is its input, pasted from a 128 crop (left) and from a 512 crop (right): what each crop
    size can carry to the screen. Needs ../shared (det_500m and the photo)."""
    import cv2

    from kiosk.inference.detector import make_detector
    from kiosk.inference.paste import PasteBack

    shared = Path(__file__).resolve().parents[1].parent / "shared"
    img = cv2.imread(str(shared / "media" / "astronaut_eileen_collins_nasa.png"))
    det_path = shared / "models" / "det_500m.onnx"
    session, used = create_session(det_path, cpu)
    face = make_detector(session, spec_for_file("detector", det_path), det_path, used, 640, 0.5, 1).detect(
        img
    )[0]
    big = cv2.resize(img, None, fx=4, fy=4, interpolation=cv2.INTER_LANCZOS4)
    kps, box = (face.kps * 4).astype(np.float32), (face.box_xyxy * 4).astype(int)
    with tempfile.TemporaryDirectory() as tmp:
        path = standins.make_identity_swapper(Path(tmp) / "inswapper_128.onnx")
        session, used = create_session(path, cpu)
        sw = InSwapper(session, spec_for_file("swapper", path), path, used)
        latent = sw.latent(np.full(512, 1 / np.sqrt(512), np.float32))
        panels = []
        for size in (128, 512):
            crop, m = sw.swap_at(big, kps, latent, size)
            frame = big.copy()
            PasteBack().paste(frame, crop, m)
            x0, y0, x1, y1 = box
            panel = frame[y0:y1, x0:x1]
            panels.append(cv2.resize(panel, (400, round(400 * panel.shape[0] / panel.shape[1]))))
    cv2.imwrite(str(out), np.hstack(panels), [cv2.IMWRITE_JPEG_QUALITY, 90])
    print(f"{out}: 128 px crop (left) vs 512 px crop (right)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    ap.add_argument("--picture", type=Path, help="only write the 128-vs-512 README picture (JPEG) here")
    args = ap.parse_args()
    cpu = ProvidersConfig.model_validate({"order": ["cpu"], "intra_op_threads": args.threads})
    if args.picture:
        write_picture(args.picture, cpu)
        return
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.threads} intra-op thread(s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bench_resolution(folder, cpu, args.repeat)
        bench_parser(folder, cpu, args.repeat)


if __name__ == "__main__":
    main()
