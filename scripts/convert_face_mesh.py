"""Convert MediaPipe's Face Mesh (``face_landmark.tflite``, 468 points) to the ONNX the kiosk ships.

    python3 -m venv /tmp/meshconv
    /tmp/meshconv/bin/pip install "numpy<2" tflite==2.18.0 tflite-runtime==2.14.0 onnx onnxruntime \
        opencv-python-headless
    pip download --no-deps mediapipe==0.10.14 -d /tmp/pipdl
    /tmp/meshconv/bin/python scripts/convert_face_mesh.py /tmp/pipdl/mediapipe-0.10.14-*.whl \
        --faces kiosk/data/demo/*.jpg --out kiosk/data/models/face_mesh_468.onnx

Run once, in a throwaway virtualenv (never the kiosk's: the converter and the TFLite interpreter pin
old numpy). The kiosk itself needs neither mediapipe nor TFLite at run time.

The model is read from the wheel (``mediapipe/modules/face_landmark/face_landmark.tflite``) and its
flatbuffer is translated op by op (CONV_2D, DEPTHWISE_CONV_2D, PRELU, ADD, MAX_POOL_2D, PAD; the
float16 weights behind DEQUANTIZE are widened to float32) into an ONNX graph in NCHW:

* input ``input`` float32 [1, 3, 192, 192]: the RGB crop in [0, 1];
* output ``landmarks`` float32 [1, 1404]: 468 x (x, y, z), x and y in pixels of the 192 crop;
* output ``face_flag`` float32 [1, 1]: the face-presence logit (sigmoid → probability).

The triangulation (``face_mesh_triangles.npy``, int16 [T, 3]) is rebuilt from the wheel's
``FACEMESH_TESSELATION`` edge list (``mediapipe/python/solutions/face_mesh_connections.py``): every
3-clique of the edges (whose three edges are all in the list), less the two cliques that are
gaps between faces, not faces: 852 triangles. The eyes and the inside of the mouth are holes of the
mesh (no triangle covers them).

Then both models run on real faces (``--faces``: each photo's face crops, plus shifted and rotated
variants) and the largest absolute difference of the landmarks is printed; the provenance lines
(SHA-256 of the wheel, of the tflite, of the ONNX, the diff) are printed for ``PROVENANCE.md``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TFLITE = "mediapipe/modules/face_landmark/face_landmark.tflite"
CONNECTIONS = "mediapipe/python/solutions/face_mesh_connections.py"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Converter:
    """The tflite subgraph as ONNX nodes; activations are NCHW throughout."""

    def __init__(self, buf: bytes) -> None:
        import tflite

        self.tfl = tflite
        self.model = tflite.Model.GetRootAsModel(buf, 0)
        self.g = self.model.Subgraphs(0)
        self.names = {v: k for k, v in tflite.BuiltinOperator.__dict__.items() if not k.startswith("_")}
        self.consts: dict[int, np.ndarray] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def tensor(self, i: int):
        return self.g.Tensors(i)

    def buffer(self, i: int) -> np.ndarray | None:
        t = self.tensor(i)
        data = self.model.Buffers(t.Buffer()).DataAsNumpy()
        if isinstance(data, int) or data.size == 0:
            return None
        dtype = {0: np.float32, 1: np.float16, 2: np.int32}[t.Type()]
        return np.frombuffer(data.tobytes(), dtype).reshape(t.ShapeAsNumpy())

    def const(self, i: int) -> np.ndarray:
        if i in self.consts:
            return self.consts[i]
        b = self.buffer(i)
        if b is None:
            raise ValueError(f"tensor {i} is not constant")
        return b

    def name(self, i: int) -> str:
        return f"t{i}"

    def init(self, value: np.ndarray, hint: str) -> str:
        self.count += 1
        name = f"{hint}_{self.count}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def activation(self, out: str, fused: int) -> str:
        if fused == 0:
            return out
        if fused == 1:  # RELU
            self.nodes.append(helper.make_node("Relu", [out + "_pre"], [out]))
            return out + "_pre"
        raise NotImplementedError(f"fused activation {fused}")

    def convert(self) -> onnx.ModelProto:
        tfl = self.tfl
        g = self.g
        for k in range(g.OperatorsLength()):
            op = g.Operators(k)
            oc = self.model.OperatorCodes(op.OpcodeIndex())
            kind = self.names[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]
            ins = [int(x) for x in op.InputsAsNumpy()]
            outs = [int(x) for x in op.OutputsAsNumpy()]
            out = self.name(outs[0])
            if kind == "DEQUANTIZE":
                self.consts[outs[0]] = self.const(ins[0]).astype(np.float32)
                continue
            if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                depthwise = kind == "DEPTHWISE_CONV_2D"
                o = (tfl.DepthwiseConv2DOptions if depthwise else tfl.Conv2DOptions)()
                t = op.BuiltinOptions()
                o.Init(t.Bytes, t.Pos)
                w = self.const(ins[1]).astype(np.float32)  # conv: OHWI; depthwise: 1HW(C*m)
                if depthwise:
                    w = w.transpose(3, 0, 1, 2)  # (C*m, 1, H, W)
                    group = int(self.tensor(ins[0]).ShapeAsNumpy()[3])
                else:
                    w = w.transpose(0, 3, 1, 2)
                    group = 1
                bias = self.const(ins[2]).astype(np.float32) if len(ins) > 2 and ins[2] >= 0 else None
                names = [self.name(ins[0]), self.init(w, "w")]
                if bias is not None:
                    names.append(self.init(bias, "b"))
                pad = "SAME_UPPER" if o.Padding() == tfl.Padding.SAME else "VALID"
                target = self.activation(out, o.FusedActivationFunction())
                self.nodes.append(
                    helper.make_node(
                        "Conv",
                        names,
                        [target],
                        kernel_shape=list(w.shape[2:]),
                        strides=[o.StrideH(), o.StrideW()],
                        dilations=[o.DilationHFactor(), o.DilationWFactor()],
                        auto_pad=pad,
                        group=group,
                    )
                )
            elif kind == "PRELU":
                alpha = self.const(ins[1]).astype(np.float32).reshape(-1)  # per channel (HWC broadcast)
                slope = self.init(alpha.reshape(-1, 1, 1), "alpha")
                self.nodes.append(helper.make_node("PRelu", [self.name(ins[0]), slope], [out]))
            elif kind == "ADD":
                o = tfl.AddOptions()
                t = op.BuiltinOptions()
                o.Init(t.Bytes, t.Pos)
                target = self.activation(out, o.FusedActivationFunction())
                self.nodes.append(helper.make_node("Add", [self.name(ins[0]), self.name(ins[1])], [target]))
            elif kind == "MAX_POOL_2D":
                o = tfl.Pool2DOptions()
                t = op.BuiltinOptions()
                o.Init(t.Bytes, t.Pos)
                pad = "SAME_UPPER" if o.Padding() == tfl.Padding.SAME else "VALID"
                target = self.activation(out, o.FusedActivationFunction())
                self.nodes.append(
                    helper.make_node(
                        "MaxPool",
                        [self.name(ins[0])],
                        [target],
                        kernel_shape=[o.FilterHeight(), o.FilterWidth()],
                        strides=[o.StrideH(), o.StrideW()],
                        auto_pad=pad,
                    )
                )
            elif kind == "PAD":
                p = self.const(ins[1]).astype(np.int64)  # NHWC (4, 2)
                order = [0, 3, 1, 2]
                pads = [int(p[a, 0]) for a in order] + [int(p[a, 1]) for a in order]
                self.nodes.append(
                    helper.make_node(
                        "Pad", [self.name(ins[0]), self.init(np.array(pads, np.int64), "pads")], [out]
                    )
                )
            else:
                raise NotImplementedError(kind)
        inp = int(g.Inputs(0))
        outputs = [int(g.Outputs(i)) for i in range(g.OutputsLength())]
        by_name = {self.tensor(i).Name().decode(): i for i in outputs}
        self.nodes.insert(0, helper.make_node("Identity", ["input"], [self.name(inp)]))
        for src, dst, width in (("conv2d_21", "landmarks", 1404), ("conv2d_31", "face_flag", 1)):
            shape = self.init(np.array([1, width], np.int64), "shape")
            self.nodes.append(helper.make_node("Reshape", [self.name(by_name[src]), shape], [dst]))
        graph = helper.make_graph(
            self.nodes,
            "face_mesh_468",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 192, 192])],
            [
                helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, [1, 1404]),
                helper.make_tensor_value_info("face_flag", TensorProto.FLOAT, [1, 1]),
            ],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiosk")
        model.ir_version = 8
        model.doc_string = (
            "MediaPipe Face Mesh (face_landmark.tflite, mediapipe 0.10.14 wheel, Apache-2.0) converted by "
            "faceswap-kiosk scripts/convert_face_mesh.py. Input: RGB 192x192 in [0,1], NCHW."
        )
        onnx.checker.check_model(model)
        return model


def triangles_from_edges(edges: set[tuple[int, int]]) -> np.ndarray:
    """The faces of a triangle mesh from its undirected edge list, as sorted (a, b, c) rows."""
    adj: dict[int, set[int]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    tris = set()
    for a, b in edges:
        for c in adj[a] & adj[b]:
            tris.add(tuple(sorted((a, b, c))))
    # A clique whose three edges all belong to three cliques is no face of the mesh but the gap
    # between three faces (two on each side of the nose): left out, 852 faces remain.
    uses: dict[tuple[int, int], int] = {}
    for t in tris:
        for e in ((t[0], t[1]), (t[1], t[2]), (t[0], t[2])):
            uses[e] = uses.get(e, 0) + 1
    faces = [t for t in sorted(tris) if min(uses[(t[0], t[1])], uses[(t[1], t[2])], uses[(t[0], t[2])]) < 3]
    return np.array(faces, np.int16)


def tesselation(wheel: zipfile.ZipFile) -> set[tuple[int, int]]:
    tree = ast.parse(wheel.read(CONNECTIONS).decode())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FACEMESH_TESSELATION":
            value = ast.literal_eval(node.value.args[0])  # frozenset([...])
            return {(int(a), int(b)) for a, b in value}
    raise ValueError("FACEMESH_TESSELATION not found")


def face_crops(paths: list[str]) -> list[np.ndarray]:
    """192x192 RGB float crops of the faces in each photo (YuNet from the kiosk's package data),
    with shifted, scaled and rotated variants."""
    import cv2

    yunet = Path(__file__).resolve().parents[1] / "kiosk/data/models/face_detection_yunet_2023mar.onnx"
    crops = []
    for p in paths:
        img = cv2.imread(p)
        h, w = img.shape[:2]
        det = (
            cv2.FaceDetectorYN.create(str(yunet), "", (w, h), 0.6) if hasattr(cv2, "FaceDetectorYN") else None
        )
        faces = det.detect(img)[1] if det is not None else None
        boxes = [] if faces is None else [f[:4] for f in faces]
        if not boxes:
            s = min(h, w)
            boxes = [np.array([(w - s) / 2, (h - s) / 2, s, s], np.float32)]
        for x, y, bw, bh in boxes:
            cx, cy, side = x + bw / 2, y + bh / 2, max(bw, bh) * 1.5
            for dx, dy, ds, rot in ((0, 0, 1, 0), (0.05, -0.04, 1.1, 8), (-0.06, 0.03, 0.92, -12)):
                m = cv2.getRotationMatrix2D((cx + dx * side, cy + dy * side), rot, 192 / (side * ds))
                m[:, 2] += 96 - np.array([cx + dx * side, cy + dy * side])
                crop = cv2.warpAffine(img, m, (192, 192), borderMode=cv2.BORDER_REPLICATE)
                crops.append(cv2.cvtColor(crop, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0)
    return crops


def verify(tflite_bytes: bytes, onnx_bytes: bytes, crops: list[np.ndarray]) -> tuple[float, float]:
    """Largest |landmark diff| (px of the 192 crop) and |logit diff| of ONNX vs the TFLite interpreter."""
    import onnxruntime as ort
    from tflite_runtime.interpreter import Interpreter

    interp = Interpreter(model_content=tflite_bytes)
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]["index"]
    outs = {d["name"]: d["index"] for d in interp.get_output_details()}
    sess = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    worst_lm = worst_flag = 0.0
    for crop in crops:
        interp.set_tensor(inp, crop[None])
        interp.invoke()
        ref_lm = interp.get_tensor(outs["conv2d_21"]).reshape(1, 1404)
        ref_flag = interp.get_tensor(outs["conv2d_31"]).reshape(1, 1)
        lm, flag = sess.run(None, {"input": crop.transpose(2, 0, 1)[None].copy()})
        worst_lm = max(worst_lm, float(np.abs(lm - ref_lm).max()))
        worst_flag = max(worst_flag, float(np.abs(flag - ref_flag).max()))
    return worst_lm, worst_flag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", help="mediapipe-0.10.14 wheel")
    ap.add_argument("--out", default="kiosk/data/models/face_mesh_468.onnx")
    ap.add_argument("--triangles", default="kiosk/data/models/face_mesh_triangles.npy")
    ap.add_argument("--faces", nargs="*", default=[], help="photos for the verification")
    args = ap.parse_args(argv)
    wheel_bytes = Path(args.wheel).read_bytes()
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as wheel:
        tfl = wheel.read(TFLITE)
        tris = triangles_from_edges(tesselation(wheel))
    model = Converter(tfl).convert()
    onnx_bytes = model.SerializeToString()
    Path(args.out).write_bytes(onnx_bytes)
    buf = io.BytesIO()
    np.save(buf, tris, allow_pickle=False)
    Path(args.triangles).write_bytes(buf.getvalue())
    print(f"wheel     {Path(args.wheel).name}  sha256 {sha256(wheel_bytes)}")
    print(f"tflite    {TFLITE}  {len(tfl)} bytes  sha256 {sha256(tfl)}")
    print(f"onnx      {args.out}  {len(onnx_bytes)} bytes  sha256 {sha256(onnx_bytes)}")
    print(f"triangles {args.triangles}  {len(tris)} triangles  sha256 {sha256(buf.getvalue())}")
    if args.faces:
        crops = face_crops(args.faces)
        lm, flag = verify(tfl, onnx_bytes, crops)
        print(
            f"verified  {len(crops)} crops: max |landmark diff| {lm:.2e} px, max |face_flag diff| {flag:.2e}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
