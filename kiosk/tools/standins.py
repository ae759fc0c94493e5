"""Stand-in ONNX models with the real files' contracts, generated with ``onnx.helper``.

They have exactly the names, shapes and dtypes of the real models (as far as we know them), cheap
deterministic weights, and for the swapper ``emap`` (512x512) as the last initializer. They are for
plumbing, agreement tests and ``kiosk bench --standins``, not for pretty pictures:

- ``det_10g.onnx``: SCRFD contract (input ``input.1`` [1,3,?,?], 9 outputs [N,1]/[N,4]/[N,10], named
  as insightface's det_10g). It "detects" bright squares: a stride-32 cell whose patch is near
  white scores high, with a fixed box and five keypoints around it.
- ``retinaface_mnet025_640.onnx`` (:func:`make_retinaface`): RetinaFace contract (input ``input0``
  [1,3,640,640] fixed, outputs ``output0`` [1,N,4] loc, ``572`` [1,N,2] softmaxed conf, ``571``
  [1,N,10] landmarks over biubug6's prior boxes). It finds bright squares like the SCRFD stand-in
  (stride-32 cells), or, given ``constants``, returns exactly those output tensors.
- ``w600k_r50.onnx``: ``input.1`` [N,3,112,112] → ``683`` [N,512] (8x8 average pool + a fixed projection).
- ``inswapper_128.onnx``: ``target`` [1,3,128,128], ``source`` [1,512] → ``output`` [1,3,128,128] in [0,1].
- ``GFPGANv1.4.onnx``: ``input`` [1,3,512,512] → ``output`` [1,3,512,512] in [-1,1].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SCRFD_OUTPUT_NAMES = ("448", "471", "494", "451", "474", "497", "454", "477", "500")
STANDIN_FILES = ("det_10g.onnx", "w600k_r50.onnx", "inswapper_128.onnx", "GFPGANv1.4.onnx")


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiosk-standin"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)


def make_detector(
    path: Path, output_names: tuple[str, ...] = SCRFD_OUTPUT_NAMES, batched: bool = False
) -> Path:
    inp = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, "height", "width"])
    nodes, inits, outputs = [], [], []
    # Keypoint offsets in stride units around the cell's anchor: eyes, nose, mouth corners.
    kps_off = np.array([-0.9, -0.7, 0.9, -0.7, 0.0, 0.2, -0.7, 1.1, 0.7, 1.1], np.float32)
    for kind_i, (kind, k) in enumerate((("score", 1), ("bbox", 4), ("kps", 10))):
        for si, s in enumerate((8, 16, 32)):
            name = output_names[kind_i * 3 + si]
            w = np.zeros((2 * k, 3, s, s), np.float32)
            b = np.zeros((2 * k,), np.float32)
            if kind == "score":
                if s == 32:
                    gain = 60.0
                    w[:] = gain / (3 * s * s)
                    b[:] = -gain * 0.9
                else:
                    b[:] = -30.0
            elif kind == "bbox":
                b[:] = 2.5
            else:
                b[:] = np.tile(kps_off, 2)
            inits += [_init(f"{name}_w", w), _init(f"{name}_b", b)]
            nodes.append(
                helper.make_node("Conv", ["input.1", f"{name}_w", f"{name}_b"], [f"{name}_c"], strides=[s, s])
            )
            nodes.append(helper.make_node("Transpose", [f"{name}_c"], [f"{name}_t"], perm=[0, 2, 3, 1]))
            shape = np.array([1, -1, k] if batched else [-1, k], np.int64)
            inits.append(_init(f"{name}_shape", shape))
            raw = f"{name}_r" if kind == "score" else name
            nodes.append(helper.make_node("Reshape", [f"{name}_t", f"{name}_shape"], [raw]))
            if kind == "score":
                nodes.append(helper.make_node("Sigmoid", [raw], [name]))
            dims: list[int | str] = [1, "n", k] if batched else ["n", k]
            outputs.append((kind_i * 3 + si, helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)))
    outputs.sort(key=lambda t: t[0])
    graph = helper.make_graph(nodes, "scrfd_standin", [inp], [o for _, o in outputs], inits)
    return _save(graph, path)


RETINAFACE_OUTPUT_NAMES = ("output0", "572", "571")


def make_retinaface(
    path: Path,
    size: int | None = 640,
    output_names: tuple[str, ...] = RETINAFACE_OUTPUT_NAMES,
    constants: tuple[np.ndarray, ...] | None = None,
    widths: tuple[int, int, int] = (4, 2, 10),
) -> Path:
    """A RetinaFace-contract model; ``size=None`` gives a dynamic input. ``constants``: the three
    outputs as arrays (each [1, N, k]), returned whatever the input (for decoder tests; ``size``
    must then be fixed). ``widths``: the outputs' last dims (another layout, for signature tests).

    Without ``constants``: each stride-32 cell scores ``sigmoid(0.5 * (mean(x - bgr_mean) - 120))``
    (near 1 on a white cell, near 0 on the grey texture of :func:`white_square_frame`), with a 144 px
    box centred on the cell and five keypoints around its centre; strides 8 and 16 never fire."""
    dims: list[int | str] = [1, 3, size, size] if size else [1, 3, "height", "width"]
    inp = helper.make_tensor_value_info("input0", TensorProto.FLOAT, dims)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    outputs = []
    if constants is not None:
        # out = const + 0 * mean(input): the outputs depend on the input only in name.
        inits += [_init("zero", np.array(0.0, np.float32))]
        nodes += [
            helper.make_node("ReduceMean", ["input0"], ["m"], keepdims=0),
            helper.make_node("Mul", ["m", "zero"], ["m0"]),
        ]
        for name, arr in zip(output_names, constants, strict=True):
            inits.append(_init(f"{name}_const", np.asarray(arr, np.float32)))
            nodes.append(helper.make_node("Add", [f"{name}_const", "m0"], [name]))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape)))
        graph = helper.make_graph(nodes, "retinaface_const", [inp], outputs, inits)
        return _save(graph, path)
    kps_px = np.array([-28.8, -22.4, 28.8, -22.4, 0.0, 6.4, -22.4, 35.2, 22.4, 35.2], np.float32)
    min_sizes = ((16, 32), (64, 128), (256, 512))
    heads = []
    for kind, k in zip(("loc", "conf", "landms"), widths, strict=True):
        parts = []
        for step, sizes in zip((8, 16, 32), min_sizes, strict=True):
            name = f"{kind}{step}"
            w = np.zeros((2 * k, 3, step, step), np.float32)
            b = np.zeros((2 * k,), np.float32)
            if kind == "conf" and k == 2:
                b[:] = (30.0, -30.0) * 2  # background, face
                if step == 32:
                    w[1::2] = 0.5 / (3 * step * step)
                    b[1::2] = -0.5 * 120.0
                    b[0::2] = 0.0
            elif kind == "loc" and step == 32:
                for a, m in enumerate(sizes):
                    b[a * k + 2 : a * k + 4] = np.log(144.0 / m) / 0.2
            elif kind == "landms" and step == 32:
                for a, m in enumerate(sizes):
                    b[a * k : (a + 1) * k] = kps_px[:k] / (0.1 * m)
            inits += [_init(f"{name}_w", w), _init(f"{name}_b", b)]
            inits.append(_init(f"{name}_shape", np.array([1, -1, k], np.int64)))
            nodes += [
                helper.make_node(
                    "Conv", ["input0", f"{name}_w", f"{name}_b"], [f"{name}_c"], strides=[step, step]
                ),
                helper.make_node("Transpose", [f"{name}_c"], [f"{name}_t"], perm=[0, 2, 3, 1]),
                helper.make_node("Reshape", [f"{name}_t", f"{name}_shape"], [f"{name}_r"]),
            ]
            parts.append(f"{name}_r")
        heads.append((kind, k, parts))
    for (kind, k, parts), name in zip(heads, output_names, strict=True):
        if kind == "conf":
            nodes.append(helper.make_node("Concat", parts, [f"{name}_cat"], axis=1))
            nodes.append(helper.make_node("Softmax", [f"{name}_cat"], [name], axis=2))
        else:
            nodes.append(helper.make_node("Concat", parts, [name], axis=1))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, "n", k]))
    graph = helper.make_graph(nodes, "retinaface_standin", [inp], outputs, inits)
    return _save(graph, path)


def make_embedder(path: Path, seed: int = 1, input_name: str = "input.1", output_name: str = "683") -> Path:
    rng = np.random.default_rng(seed)
    inp = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["N", 3, 112, 112])
    out = helper.make_tensor_value_info(output_name, TensorProto.FLOAT, ["N", 512])
    proj = (rng.standard_normal((3 * 14 * 14, 512)) / np.sqrt(588)).astype(np.float32)
    nodes = [
        helper.make_node("AveragePool", [input_name], ["pooled"], kernel_shape=[8, 8], strides=[8, 8]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "proj"], [output_name]),
    ]
    graph = helper.make_graph(nodes, "arcface_standin", [inp], [out], [_init("proj", proj)])
    return _save(graph, path)


def make_swapper(path: Path, seed: int = 2, target_name: str = "target", emap_last: bool = True) -> Path:
    rng = np.random.default_rng(seed)
    target = helper.make_tensor_value_info(target_name, TensorProto.FLOAT, [1, 3, 128, 128])
    source = helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])
    conv_w = np.zeros((3, 3, 3, 3), np.float32)
    for c in range(3):
        conv_w[c, c, 1, 1] = 0.5
    conv_w += rng.normal(0, 0.02, conv_w.shape).astype(np.float32)
    inits = [
        _init("conv_w", conv_w),
        _init("src_proj", (rng.standard_normal((512, 3)) * 0.2).astype(np.float32)),
        _init("src_shape", np.array([1, 3, 1, 1], np.int64)),
        _init("half", np.array(0.5, np.float32)),
        _init("quarter", np.array(0.25, np.float32)),
        _init("lo", np.array(0.0, np.float32)),
        _init("hi", np.array(1.0, np.float32)),
    ]
    emap = _init("emap", (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32))
    inits = inits + [emap] if emap_last else [emap, *inits]
    nodes = [
        helper.make_node("Conv", [target_name, "conv_w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("MatMul", ["source", "src_proj"], ["p"]),
        helper.make_node("Tanh", ["p"], ["pt"]),
        helper.make_node("Reshape", ["pt", "src_shape"], ["p4"]),
        helper.make_node("Mul", ["p4", "half"], ["p5"]),
        helper.make_node("Add", ["c", "p5"], ["s"]),
        helper.make_node("Add", ["s", "quarter"], ["s6"]),
        helper.make_node("Clip", ["s6", "lo", "hi"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "inswapper_standin", [target, source], [out], inits)
    return _save(graph, path)


def _restorer(path: Path, size_px: int, seed: int, name: str) -> Path:
    """A face-restorer contract (``input`` [1,3,S,S] in [-1,1] → ``output`` [1,3,S,S] in [-1,1]):
    a near-identity 3x3 convolution and tanh."""
    rng = np.random.default_rng(seed)
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size_px, size_px])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size_px, size_px])
    w = np.zeros((3, 3, 3, 3), np.float32)
    for c in range(3):
        w[c, c, 1, 1] = 1.0
    w += rng.normal(0, 0.01, w.shape).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Tanh", ["c"], ["output"]),
    ]
    graph = helper.make_graph(nodes, name, [inp], [out], [_init("w", w)])
    return _save(graph, path)


def make_enhancer(path: Path, seed: int = 3) -> Path:
    """GFPGAN v1.4 contract at 512 px."""
    return _restorer(path, 512, seed, "gfpgan_standin")


def make_all(folder: Path) -> dict[str, Path]:
    """Write the four stand-ins under their real file names into ``folder``."""
    folder = Path(folder)
    return {
        "detector": make_detector(folder / "det_10g.onnx"),
        "embedder": make_embedder(folder / "w600k_r50.onnx"),
        "swapper": make_swapper(folder / "inswapper_128.onnx"),
        "enhancer": make_enhancer(folder / "GFPGANv1.4.onnx"),
    }


def white_square_frame(
    h: int = 360, w: int = 640, squares: tuple[tuple[int, int, int], ...] = ((200, 120, 96),)
) -> np.ndarray:
    """A grey textured frame with white squares (x, y, side) the stand-in detector finds."""
    rng = np.random.default_rng(7)
    frame = (rng.integers(40, 110, (h, w, 3))).astype(np.uint8)
    for x, y, side in squares:
        frame[y : y + side, x : x + side] = 255
    return frame


# -- stand-ins for the optional models (face parser, GPEN) and for the swap-resolution tests ------
#: CelebAMask-HQ class → a flat colour (RGB) the stand-in parser labels as that class: the nearest
#: colour wins. 0 (background) is the green of a synthetic "hand" held in front of the face.
PARSER_PALETTE_RGB: dict[int, tuple[int, int, int]] = {
    0: (40, 200, 60),  # background / occluder ("hand")
    1: (225, 170, 140),  # skin
    4: (250, 250, 250),  # left eye
    10: (200, 140, 110),  # nose
    12: (170, 50, 60),  # upper lip
    16: (30, 60, 200),  # cloth
    17: (40, 25, 15),  # hair
}


def make_parser(
    path: Path,
    palette_rgb: dict[int, tuple[int, int, int]] | None = None,
    *,
    input_name: str = "input",
    n_classes: int = 19,
    aux_outputs: bool = True,
) -> Path:
    """BiSeNet face-parser contract: ``input`` [batch,3,512,512] (ImageNet-normalised RGB) →
    ``output``, ``0``, ``1`` [batch,19,512,512] logits. Each pixel's logits are a 1x1 convolution
    ``2 p_k·x − |p_k|²`` (the negative squared distance to the class's palette colour ``p_k``,
    less the ``|x|²`` common to all classes), so the argmax is the class of the nearest palette
    colour; classes without a colour get a very low logit."""
    palette = PARSER_PALETTE_RGB if palette_rgb is None else palette_rgb
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    w = np.zeros((n_classes, 3, 1, 1), np.float32)
    b = np.full((n_classes,), -1e4, np.float32)
    for k, rgb in palette.items():
        p = (np.asarray(rgb, np.float32) / 255.0 - mean) / std
        w[k, :, 0, 0] = 2.0 * p
        b[k] = -float(p @ p)
    dims: list[int | str] = ["batch_size", 3, 512, 512]
    inp = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, dims)
    out_dims: list[int | str] = ["batch_size", n_classes, 512, 512]
    names = ["output", "0", "1"] if aux_outputs else ["output"]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, out_dims) for n in names]
    nodes = [helper.make_node("Conv", [input_name, "w", "b"], ["output"])]
    nodes += [helper.make_node("Identity", ["output"], [n]) for n in names[1:]]
    graph = helper.make_graph(nodes, "bisenet_standin", [inp], outs, [_init("w", w), _init("b", b)])
    return _save(graph, path)


def make_identity_swapper(path: Path, seed: int = 2, batch: bool = False) -> Path:
    """InSwapper contract (``target`` [1,3,128,128], ``source`` [1,512] → ``output`` [1,3,128,128],
    ``emap`` last) whose output is its ``target`` input (+ 0 × source): the swapped crop is the
    aligned crop. ``batch``: a dynamic batch axis on every tensor (``N``)."""
    rng = np.random.default_rng(seed)
    n: int | str = "N" if batch else 1
    target = helper.make_tensor_value_info("target", TensorProto.FLOAT, [n, 3, 128, 128])
    source = helper.make_tensor_value_info("source", TensorProto.FLOAT, [n, 512])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [n, 3, 128, 128])
    inits = [
        _init("src_shape", np.array([-1, 1, 1, 1], np.int64)),
        _init("src_sum_axes", np.array([1], np.int64)),
        _init("zero", np.array(0.0, np.float32)),
        _init("emap", (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("ReduceSum", ["source", "src_sum_axes"], ["s1"], keepdims=1),
        helper.make_node("Mul", ["s1", "zero"], ["s0"]),
        helper.make_node("Reshape", ["s0", "src_shape"], ["s4"]),
        helper.make_node("Add", ["target", "s4"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "inswapper_identity_standin", [target, source], [out], inits)
    return _save(graph, path)


def make_gpen(path: Path, size_px: int = 256, seed: int = 4) -> Path:
    """GPEN-BFR contract: ``input`` [1,3,S,S] RGB in [-1,1] → ``output`` [1,3,S,S] in [-1,1]
    (a near-identity 3x3 convolution and tanh, like the GFPGAN stand-in)."""
    return _restorer(path, size_px, seed, "gpen_standin")
