"""The graphs of the cost-matched stand-ins (see :mod:`kiosk.tools.standins_cost`): a small ONNX
builder (:class:`Net`), one builder per model role, and the counters of parameters and
multiply-accumulates (Conv, ConvTranspose, Gemm and MatMul nodes, shapes from ONNX shape inference).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from kiosk.tools.standins import SCRFD_OUTPUT_NAMES

#: doc_string of a skeleton graph's weight inputs (counted as parameters).
WEIGHT_DOC = "weight"


# -- graph builder ----------------------------------------------------------------------------------
class Net:
    """A small ONNX graph builder. With ``rng`` the weights are seeded random initializers;
    without (``skeleton``) they are graph inputs of the same shapes, so that parameters and
    MACs of the full-size graph can be counted without materialising a byte of weights."""

    def __init__(self, name: str, rng: np.random.Generator | None, width: float = 1.0) -> None:
        self.name = name
        self.rng = rng
        self.width = width
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.weight_inputs: list[onnx.ValueInfoProto] = []
        self._n = 0

    def ch(self, c: int) -> int:
        """Channels scaled by ``width`` (tests build narrow copies), at least 2."""
        return max(2, int(round(c * self.width)))

    def uid(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def weight(self, prefix: str, shape: tuple[int, ...], std: float, mean: float = 0.0) -> str:
        name = self.uid(prefix)
        if self.rng is None:
            self.weight_inputs.append(
                helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape), doc_string=WEIGHT_DOC)
            )
            return name
        arr = self.rng.standard_normal(shape, dtype=np.float32)
        arr *= np.float32(std)
        if mean:
            arr += np.float32(mean)
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.raw_data = arr.tobytes()
        self.inits.append(t)
        return name

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> str:
        outs = [self.uid(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs[0]

    def node_multi(self, op: str, inputs: list[str], n_out: int, **attrs: Any) -> list[str]:
        outs = [self.uid(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs

    def scalar(self, v: float) -> str:
        return self.const(self.uid("k"), np.array(v, np.float32))

    # layers
    def conv(
        self, x: str, cin: int, cout: int, k: int, stride: int = 1, bias: bool = True, pad: int | None = None
    ) -> str:
        p = k // 2 if pad is None else pad
        w = self.weight("conv_w", (cout, cin, k, k), math.sqrt(2.0 / (cin * k * k)))
        ins = [x, w]
        if bias:
            ins.append(self.weight("conv_b", (cout,), 0.01))
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p])

    def bn(self, x: str, c: int, gain: float = 1.0) -> str:
        scale = self.weight("bn_g", (c,), 0.02 * gain, gain)
        bias = self.weight("bn_b", (c,), 0.02)
        mean = self.weight("bn_m", (c,), 0.02)
        var = self.weight("bn_v", (c,), 0.02, 1.0)
        if self.rng is not None:  # variances must be positive
            t = self.inits[-1]
            t.raw_data = np.abs(np.frombuffer(t.raw_data, np.float32)).tobytes()
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)

    def leaky(self, x: str, alpha: float = 0.2) -> str:
        return self.node("LeakyRelu", [x], alpha=alpha)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def prelu(self, x: str, c: int) -> str:
        slope = self.weight("prelu", (c, 1, 1), 0.01, 0.25)
        return self.node("PRelu", [x, slope])

    def add(self, a: str, b: str) -> str:
        return self.node("Add", [a, b])

    def mul(self, a: str, b: str) -> str:
        return self.node("Mul", [a, b])

    def resize(self, x: str, scale: float) -> str:
        scales = self.const(self.uid("scales"), np.array([1, 1, scale, scale], np.float32))
        return self.node(
            "Resize", [x, "", scales], mode="linear", coordinate_transformation_mode="half_pixel"
        )

    def reshape(self, x: str, shape: list[int]) -> str:
        return self.node("Reshape", [x, self.const(self.uid("shape"), np.array(shape, np.int64))])

    def gemm(self, x: str, k: int, n: int, bias_mean: float = 0.0, std: float | None = None) -> str:
        w = self.weight("fc_w", (k, n), std if std is not None else math.sqrt(1.0 / k))
        b = self.weight("fc_b", (n,), 0.01, bias_mean)
        return self.node("Gemm", [x, w, b])

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, inputs + self.weight_inputs, outputs, self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiosk-cost-matched"
        )
        model.ir_version = 8
        return model


def _vi(name: str, dims: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


# -- swapper: InSwapper layout ----------------------------------------------------------------------
def build_swapper(rng: np.random.Generator | None, width: float = 1.0) -> onnx.ModelProto:
    n = Net("inswapper_cost_matched", rng, width)
    c128, c256, c512, c1024 = n.ch(128), n.ch(256), n.ch(512), n.ch(1024)
    x = n.node(
        "Pad", ["target", n.const("pad7", np.array([0, 0, 3, 3, 0, 0, 3, 3], np.int64))], mode="reflect"
    )
    x = n.leaky(n.conv(x, 3, c128, 7, pad=0))
    x = n.leaky(n.conv(x, c128, c256, 3))
    x = n.leaky(n.conv(x, c256, c512, 3, stride=2))
    x = n.leaky(n.conv(x, c512, c1024, 3, stride=2))  # 32x32
    ones = n.const("in_scale", np.ones(c1024, np.float32))
    zeros = n.const("in_bias", np.zeros(c1024, np.float32))
    for _ in range(6):
        h = x
        for j in range(2):
            h = n.conv(h, c1024, c1024, 3)
            h = n.node("InstanceNormalization", [h, ones, zeros], epsilon=1e-6)
            gamma = n.reshape(n.gemm("source", 512, c1024, bias_mean=1.0, std=0.02), [1, c1024, 1, 1])
            beta = n.reshape(n.gemm("source", 512, c1024, std=0.02), [1, c1024, 1, 1])
            h = n.add(n.mul(h, gamma), beta)
            if j == 0:
                h = n.relu(h)
        x = n.add(h, x)
    x = n.leaky(n.conv(n.resize(x, 2.0), c1024, c512, 3))
    x = n.leaky(n.conv(n.resize(x, 2.0), c512, c256, 3))
    x = n.leaky(n.conv(x, c256, c128, 3))
    x = n.node("Pad", [x, "pad7"], mode="reflect")
    x = n.node("Tanh", [n.conv(x, c128, 3, 7, pad=0)])
    x = n.mul(n.add(x, n.scalar(1.0)), n.scalar(0.5))
    n.nodes.append(helper.make_node("Identity", [x], ["output"]))
    # The real file's last initializer is emap (512x512); the kiosk reads it from there.
    if rng is not None:
        n.const("emap", (rng.standard_normal((512, 512), dtype=np.float32) / np.float32(math.sqrt(512))))
    else:
        n.weight_inputs.append(
            helper.make_tensor_value_info("emap", TensorProto.FLOAT, [512, 512], doc_string=WEIGHT_DOC)
        )
    return n.model(
        [_vi("target", [1, 3, 128, 128]), _vi("source", [1, 512])], [_vi("output", [1, 3, 128, 128])]
    )


# -- embedder: iresnet-50 ----------------------------------------------------------------------------
def build_embedder(rng: np.random.Generator | None, width: float = 1.0) -> onnx.ModelProto:
    n = Net("iresnet50_cost_matched", rng, width)
    c64 = n.ch(64)
    x = n.prelu(n.bn(n.conv("input.1", 3, c64, 3, bias=False), c64), c64)
    inplanes = c64
    for planes, blocks in ((64, 3), (128, 4), (256, 14), (512, 3)):
        p = n.ch(planes)
        for b in range(blocks):
            stride = 2 if b == 0 else 1
            h = n.bn(x, inplanes)
            h = n.prelu(n.bn(n.conv(h, inplanes, p, 3, bias=False), p), p)
            # a small last gain keeps 24 residual sums (and fp16) in range with random weights
            h = n.bn(n.conv(h, p, p, 3, stride=stride, bias=False), p, gain=0.2)
            skip = x
            if b == 0:
                skip = n.bn(n.conv(x, inplanes, p, 1, stride=stride, bias=False, pad=0), p)
            x = n.add(h, skip)
            inplanes = p
    x = n.bn(x, inplanes)
    x = n.node("Flatten", [x], axis=1)
    x = n.gemm(x, inplanes * 7 * 7, 512)
    scale = n.weight("fbn_g", (512,), 0.02, 1.0)
    bias = n.weight("fbn_b", (512,), 0.02)
    x = n.add(n.mul(x, scale), bias)  # features BatchNorm1d, folded to scale/shift
    n.nodes.append(helper.make_node("Identity", [x], ["683"]))
    return n.model([_vi("input.1", ["N", 3, 112, 112])], [_vi("683", ["N", 512])])


# -- detector: SCRFD-10G sized ------------------------------------------------------------------------
def _standin_head(n: Net, name: str, kind: str, k: int, s: int) -> str:
    """The small stand-in detector's conv for one output (bright squares score at stride 32)."""
    w = np.zeros((2 * k, 3, s, s), np.float32)
    b = np.zeros((2 * k,), np.float32)
    if kind == "score":
        if s == 32:
            w[:] = 60.0 / (3 * s * s)
            b[:] = -60.0 * 0.9
        else:
            b[:] = -30.0
    elif kind == "bbox":
        b[:] = 2.5
    else:
        b[:] = np.tile(np.array([-0.9, -0.7, 0.9, -0.7, 0.0, 0.2, -0.7, 1.1, 0.7, 1.1], np.float32), 2)
    wn = n.const(f"{name}_sw", w)
    bn = n.const(f"{name}_sb", b)
    return n.node("Conv", ["input.1", wn, bn], kernel_shape=[s, s], strides=[s, s])


def build_detector(rng: np.random.Generator | None, width: float = 1.0) -> onnx.ModelProto:
    n = Net("scrfd10g_cost_matched", rng, width)
    base = n.ch(56)
    # ResNet-v1e deep stem (3 convs, BN folded into conv bias), max-pool: stride 4
    x = n.relu(n.conv("input.1", 3, base // 2, 3, stride=2))
    x = n.relu(n.conv(x, base // 2, base // 2, 3))
    x = n.relu(n.conv(x, base // 2, base, 3))
    x = n.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    feats: list[tuple[str, int]] = []
    inplanes = base
    for planes, blocks, stride in ((56, 3, 1), (88, 4, 2), (88, 2, 2), (224, 3, 2)):
        p = n.ch(planes)
        for b in range(blocks):
            st = stride if b == 0 else 1
            h = n.relu(n.conv(x, inplanes, p, 3, stride=st))
            h = n.conv(h, p, p, 3)
            skip = x
            if b == 0 and (st != 1 or inplanes != p):
                if st != 1:  # v1e avg-down shortcut
                    skip = n.node("AveragePool", [skip], kernel_shape=[st, st], strides=[st, st])
                skip = n.conv(skip, inplanes, p, 1, pad=0)
            x = n.relu(n.add(h, skip))
            inplanes = p
        feats.append((x, p))
    # PAFPN neck on strides 8, 16, 32: lateral 1x1, top-down, 3x3 fpn convs, bottom-up path
    neck = n.ch(56)
    lat = [n.conv(f, c, neck, 1, pad=0) for f, c in feats[1:]]
    for i in (2, 1):
        lat[i - 1] = n.add(
            lat[i - 1],
            n.node(
                "Resize",
                [lat[i], "", n.const(n.uid("sc"), np.array([1, 1, 2, 2], np.float32))],
                mode="nearest",
            ),
        )
    outs = [n.conv(v, neck, neck, 3) for v in lat]
    for i in (1, 2):
        outs[i] = n.add(outs[i], n.conv(outs[i - 1], neck, neck, 3, stride=2))
    outs = [outs[0]] + [n.conv(v, neck, neck, 3) for v in outs[1:]]
    # heads: per stride 3 stacked 3x3 convs, then score/bbox/kps convs (2 anchors each)
    feat_c = n.ch(80)
    small = n.scalar(1e-3)
    results: dict[str, str] = {}
    for si, (s, f) in enumerate(zip((8, 16, 32), outs, strict=True)):
        h, c = f, neck
        for _ in range(3):
            h = n.relu(n.conv(h, c, feat_c, 3))
            c = feat_c
        for kind_i, (kind, k) in enumerate((("score", 1), ("bbox", 4), ("kps", 10))):
            name = SCRFD_OUTPUT_NAMES[kind_i * 3 + si]
            heavy = n.node("Tanh", [n.conv(h, feat_c, 2 * k, 3)])
            both = n.add(_standin_head(n, name, kind, k, s), n.mul(heavy, small))
            t = n.node("Transpose", [both], perm=[0, 2, 3, 1])
            r = n.reshape(t, [-1, k])
            results[name] = n.node("Sigmoid", [r]) if kind == "score" else r
    outputs = []
    for kind_i, k in enumerate((1, 4, 10)):
        for si in range(3):
            name = SCRFD_OUTPUT_NAMES[kind_i * 3 + si]
            n.nodes.append(helper.make_node("Identity", [results[name]], [name]))
            outputs.append(_vi(name, ["n", k]))
    return n.model([_vi("input.1", [1, 3, "height", "width"])], outputs)


# -- enhancer: GFPGANv1Clean, v1.4 arguments ------------------------------------------------------------
def build_enhancer(rng: np.random.Generator | None, width: float = 1.0, size: int = 512) -> onnx.ModelProto:
    n = Net("gfpgan14_cost_matched", rng, width)
    unet_full = {4: 256, 8: 256, 16: 256, 32: 256, 64: 256, 128: 128, 256: 64, 512: 32}
    sg_full = {4: 512, 8: 512, 16: 512, 32: 512, 64: 512, 128: 256, 256: 128, 512: 64}
    unet = {r: n.ch(c) for r, c in unet_full.items()}
    sg = {r: n.ch(c) for r, c in sg_full.items()}
    style = n.ch(512)
    levels = int(math.log2(size))
    n_latent = levels * 2 - 2

    def resblock(x: str, cin: int, cout: int, scale: float) -> str:
        h = n.leaky(n.conv(x, cin, cin, 3))
        h = n.leaky(n.conv(n.resize(h, scale), cin, cout, 3))
        return n.add(h, n.conv(n.resize(x, scale), cin, cout, 1, bias=False, pad=0))

    x = n.leaky(n.conv("input", 3, unet[size], 1, pad=0))
    skips: list[str] = []
    res = size
    while res > 4:
        x = resblock(x, unet[res], unet[res // 2], 0.5)
        res //= 2
        skips.insert(0, x)
    x = n.leaky(n.conv(x, unet[4], unet[4], 3))
    code = n.gemm(n.node("Flatten", [x], axis=1), unet[4] * 16, n_latent * style)
    latents = n.node_multi(
        "Split", [code, n.const("split", np.full(n_latent, style, np.int64))], n_latent, axis=1
    )
    conditions: list[tuple[str, str]] = []
    res = 4
    for i in range(levels - 2):
        x = resblock(n.add(x, skips[i]), unet[res], unet[res * 2], 2.0)
        res *= 2
        c = unet[res]
        sc = n.conv(n.leaky(n.conv(x, c, c, 3)), c, c, 3)
        sh = n.conv(n.leaky(n.conv(x, c, c, 3)), c, c, 3)
        conditions.append((sc, sh))

    def modconv(x: str, lat: str, cin: int, cout: int, k: int, demod: bool) -> str:
        w = n.weight("mod_w", (1, cout, cin, k, k), 1.0)
        s = n.gemm(lat, style, cin, bias_mean=1.0, std=math.sqrt(1.0 / style))
        s = n.reshape(s, [1, 1, cin, 1, 1])
        wk = n.mul(n.mul(w, s), n.scalar(1.0 / math.sqrt(cin * k * k)))
        if demod:
            d = n.node("ReduceSumSquare", [wk], axes=[2, 3, 4], keepdims=1)
            wk = n.mul(wk, n.node("Reciprocal", [n.node("Sqrt", [n.add(d, n.scalar(1e-8))])]))
        wk = n.reshape(wk, [cout, cin, k, k])
        return n.node("Conv", [x, wk], kernel_shape=[k, k], pads=[k // 2] * 4)

    sqrt2 = n.scalar(math.sqrt(2.0))

    def styleconv(x: str, lat: str, cin: int, cout: int, res: int, up: bool) -> str:
        if up:
            x = n.resize(x, 2.0)
        h = modconv(x, lat, cin, cout, 3, demod=True)
        if n.rng is not None:
            noise = n.const(n.uid("noise"), n.rng.standard_normal((1, 1, res, res), dtype=np.float32))
        else:
            noise = n.weight("noise", (1, 1, res, res), 1.0)
        h = n.add(h, n.mul(noise, n.weight("noise_strength", (1,), 0.01)))
        h = n.add(h, n.weight("act_b", (1, cout, 1, 1), 0.01))
        return n.mul(n.leaky(h), sqrt2)

    def to_rgb(x: str, lat: str, cin: int, skip: str | None) -> str:
        rgb = n.add(modconv(x, lat, cin, 3, 1, demod=False), n.weight("rgb_b", (1, 3, 1, 1), 0.01))
        return rgb if skip is None else n.add(rgb, n.resize(skip, 2.0))

    const_in = n.weight("const_input", (1, sg[4], 4, 4), 1.0)
    out = styleconv(const_in, latents[0], sg[4], sg[4], 4, up=False)
    skip = to_rgb(out, latents[1], sg[4], None)
    res, li = 4, 1
    for level in range(levels - 2):
        cin, cout = sg[res], sg[res * 2]
        res *= 2
        out = styleconv(out, latents[li], cin, cout, res, up=True)
        half = cout // 2
        same, sft = n.node_multi(
            "Split", [out, n.const(n.uid("split"), np.array([half, cout - half], np.int64))], 2, axis=1
        )
        sc, sh = conditions[level]
        out = n.node("Concat", [same, n.add(n.mul(sft, sc), sh)], axis=1)
        out = styleconv(out, latents[li + 1], cout, cout, res, up=False)
        skip = to_rgb(out, latents[li + 2], cout, skip)
        li += 2
    y = n.node("Clip", [skip, n.scalar(-1.0), n.scalar(1.0)])
    n.nodes.append(helper.make_node("Identity", [y], ["output"]))
    return n.model([_vi("input", [1, 3, size, size])], [_vi("output", [1, 3, size, size])])


BUILDERS: dict[str, tuple[str, Callable[..., onnx.ModelProto], int]] = {
    "detector": ("det_10g.onnx", build_detector, 11),
    "embedder": ("w600k_r50.onnx", build_embedder, 12),
    "swapper": ("inswapper_128.onnx", build_swapper, 13),
    "enhancer": ("GFPGANv1.4.onnx", build_enhancer, 14),
}


# -- counting ---------------------------------------------------------------------------------------
def _shape_map(model: onnx.ModelProto, overrides: dict[str, list[int]] | None) -> dict[str, list[int]]:
    """Every tensor's inferred shape (-1 where unknown), on a copy of the graph whose float
    weights are shaped inputs: shape inference needs their shapes, not half a gigabyte of data."""
    m = onnx.ModelProto()
    m.ir_version = model.ir_version
    m.opset_import.extend(model.opset_import)
    g = m.graph
    g.node.extend(model.graph.node)
    g.output.extend(model.graph.output)
    for vi in model.graph.input:
        c = g.input.add()
        c.CopyFrom(vi)
        if overrides and vi.name in overrides:
            dims = c.type.tensor_type.shape.dim
            for d, v in zip(dims, overrides[vi.name], strict=True):
                d.Clear()
                d.dim_value = v
    for t in model.graph.initializer:
        if t.data_type == TensorProto.FLOAT and int(np.prod(t.dims)) > 64:  # small ones may be read
            g.input.append(helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)))
        else:
            g.initializer.append(t)
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=False)
    out: dict[str, list[int]] = {}
    ig = inferred.graph
    for vi in list(ig.input) + list(ig.value_info) + list(ig.output):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    for t in model.graph.initializer:
        out[t.name] = list(t.dims)
    return out


def count_params(model: onnx.ModelProto) -> int:
    """Float weights: float initializers (scalars and integer shape constants excluded) plus,
    for a skeleton, the weight inputs (marked with ``doc_string`` "weight")."""
    total = 0
    for t in model.graph.initializer:
        if t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16) and len(t.dims) > 0:
            total += int(np.prod(t.dims))
    for vi in model.graph.input:
        if vi.doc_string == WEIGHT_DOC:
            total += int(np.prod([d.dim_value for d in vi.type.tensor_type.shape.dim]))
    return total


def count_macs(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None) -> int:
    """Multiply-accumulates of the Conv, ConvTranspose, Gemm and MatMul nodes (shapes by ONNX
    shape inference; ``input_shapes`` fixes symbolic input dims, e.g. the detector's 640x640).
    Conv: N·Cout·Hout·Wout·(Cin/group)·kh·kw; ConvTranspose: N·Cin·Hin·Win·(Cout/group)·kh·kw;
    Gemm/MatMul: M·N·K (times the batch dims of MatMul)."""
    shapes = _shape_map(model, input_shapes)
    total = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        y = shapes.get(node.output[0])
        if not x or not w or not y or min(x + w + y) < 0:
            raise ValueError(f"{node.op_type} {node.output[0]}: shapes not inferred ({x}, {w}, {y})")
        if node.op_type == "Conv":  # weight [Cout, Cin/group, kh, kw]
            total += int(np.prod(y)) * int(np.prod(w[1:]))
        elif node.op_type == "ConvTranspose":  # weight [Cin, Cout/group, kh, kw]
            total += int(np.prod(x)) * int(np.prod(w[1:]))
        elif node.op_type == "Gemm":
            total += int(np.prod(y)) * (x[0] if attrs.get("transA", 0) else x[1])
        else:
            total += int(np.prod(y)) * x[-1]
    return total
