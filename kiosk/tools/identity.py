"""Identity transfer, measured by a face recognizer that is not part of the swap path.

``kiosk bench --identity`` (and ``benchmarks/classic_identity.py``) swap faces on real photos and
ask an independent recognizer how much each swapped face looks like the **source** face (the one
swapped in) and like the **visitor** (the face that was there): cosine similarities of L2-normalised
embeddings, per face. A swap transfers identity when ``sim(swapped, source) > sim(swapped,
visitor)``; the margin is the number a booth can compare swappers by.

The recognizer is MobileFaceNet (foamliu/MobileFaceNet, Apache-2.0; ``mobilefacenet_128_foamliu.onnx``
in ``../shared/models``): an ArcFace-aligned 112 crop (the same five-point template, similarity
fit), RGB, ``(x - 127.5) / 128``, 128-d output, L2-normalised. It never sees what the swapper sees:
it embeds the composited output frame at the visitor's keypoints.

Cases (:func:`photo_cases`): every face of insightface's ``t1.jpg`` (six people) with the NASA
astronaut photo swapped in, and the NASA face with each of the six swapped in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.types import Face, FrameBGR

#: The recognizer file and where the repository's shared test models live.
RECOGNIZER = "mobilefacenet_128_foamliu.onnx"
#: The bundled face mesh (the classic swap v2).
MESH = "package:data/models/face_mesh_468.onnx"
SHARED = Path(__file__).resolve().parents[2].parent / "shared"


@dataclass(frozen=True)
class IdentityRow:
    """One swapped face: similarity to the source and to the visitor it replaced."""

    photo: str
    face: int
    source: str
    to_source: float
    to_visitor: float
    #: The same two before the swap (``visitor`` vs ``source``: how alike the two people are).
    source_vs_visitor: float

    @property
    def margin(self) -> float:
        return self.to_source - self.to_visitor


class Recognizer:
    """MobileFaceNet on an ArcFace-aligned 112 crop: ``embed(image, kps)`` → unit 128-d vector."""

    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def embed(self, image_bgr: FrameBGR, kps: NDArray[np.floating]) -> NDArray[np.float32]:
        from kiosk.inference.align import align_matrix

        m = align_matrix(np.asarray(kps, np.float32), "arcface_112", 112)
        crop = cv2.warpAffine(image_bgr, m, (112, 112), borderValue=0.0)
        rgb = crop[:, :, ::-1].astype(np.float32)
        blob = ((rgb - 127.5) / 128.0).transpose(2, 0, 1)[None]
        out = np.asarray(self.session.run(None, {self.input: np.ascontiguousarray(blob)})[0], np.float32)
        v = out.reshape(-1)
        return v / max(float(np.linalg.norm(v)), 1e-12)


def insightface_t1() -> Path | None:
    """insightface's six-face test photo (``insightface/data/images/t1.jpg``), when installed."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("insightface")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(next(iter(spec.submodule_search_locations))) / "data" / "images" / "t1.jpg"
    return p if p.is_file() else None


def nasa_photo() -> Path:
    """The NASA astronaut portrait (the demo visitor shipped in the package)."""
    from kiosk.capture.demo_visitor import visitor_photo_path

    return visitor_photo_path()


def _read(path: Path) -> FrameBGR:
    from kiosk.processing.models import read_image

    return read_image(path)


def measure(
    pipe: Any,
    recognizer: Recognizer,
    target: FrameBGR,
    target_name: str,
    sources: Sequence[tuple[str, FrameBGR, Face]],
    faces: Sequence[Face],
) -> list[IdentityRow]:
    """Swap each of ``sources`` onto every face of ``target`` (``faces``: its detected faces, the
    ones the pipeline will find) and measure each swapped face against the source and the visitor."""
    rows: list[IdentityRow] = []
    visitors = [recognizer.embed(target, f.kps) for f in faces]
    for name, image, src_face in sources:
        src_emb = recognizer.embed(image, src_face.kps)
        pipe.use_latent(pipe.source_latent(image, src_face), f"identity:{name}")
        pipe.reset_tracking()
        out = pipe.process(target)
        for i, f in enumerate(faces):
            if name.startswith(f"{target_name}#{i}"):
                continue  # a face swapped onto itself says nothing
            swapped = recognizer.embed(out, f.kps)
            rows.append(
                IdentityRow(
                    photo=target_name,
                    face=i,
                    source=name,
                    to_source=round(float(swapped @ src_emb), 4),
                    to_visitor=round(float(swapped @ visitors[i]), 4),
                    source_vs_visitor=round(float(src_emb @ visitors[i]), 4),
                )
            )
    return rows


def photo_cases(pipe: Any, recognizer: Recognizer, t1_path: Path, nasa_path: Path) -> list[IdentityRow]:
    """t1's six faces with the NASA face swapped in; the NASA face with each of t1's swapped in."""
    t1, nasa = _read(t1_path), _read(nasa_path)
    t1_faces, _ = pipe.find_source_faces(t1)
    t1_faces.sort(key=lambda f: float(f.box_xyxy[0]))  # left to right: stable face numbers
    nasa_faces, _ = pipe.find_source_faces(nasa)
    if len(t1_faces) < 6 or not nasa_faces:
        raise RuntimeError(
            f"expected 6 faces in {t1_path} and 1 in {nasa_path}: found {len(t1_faces)}, {len(nasa_faces)}"
        )
    rows = measure(pipe, recognizer, t1, "t1", [("nasa", nasa, nasa_faces[0])], t1_faces)
    sources = [(f"t1#{i}", t1, f) for i, f in enumerate(t1_faces)]
    rows += measure(pipe, recognizer, nasa, "nasa", sources, nasa_faces[:1])
    return rows


def classic_pipeline(
    fit: str = "similarity", *, mask_shape: str = "face", color: str = "mean_std", mesh: bool = True
) -> Any:
    """A classic-swap pipeline with the bundled YuNet on the CPU, every face swapped; ``mesh``: v2,
    with the bundled face mesh (the default), else the 5-point swap."""
    from kiosk.config import parse_config
    from kiosk.inference.classic import ClassicSwapper
    from kiosk.processing.pipeline import SwapPipeline

    cfg = parse_config(
        f"models: {{swapper: classic, mesh: {MESH if mesh else 'null'}, providers: {{order: [cpu], warmup: false}}}}\n"
        f"processing: {{max_faces: 8, color_correction: {color}}}\n"
        f"mask: {{shape: {mask_shape}}}\n",
        "<identity>",
        env=False,
    )
    pipe = SwapPipeline.from_config(cfg)
    opened = pipe.swapper
    assert isinstance(opened, ClassicSwapper)
    pipe.swapper = ClassicSwapper(fit=fit, mesh=opened.mesh)  # type: ignore[arg-type]
    return pipe


def summary(rows: Sequence[IdentityRow]) -> dict[str, Any]:
    wins = sum(r.to_source > r.to_visitor for r in rows)
    return {
        "faces": len(rows),
        "source_above_visitor": wins,
        "mean_to_source": round(float(np.mean([r.to_source for r in rows])), 4) if rows else None,
        "mean_to_visitor": round(float(np.mean([r.to_visitor for r in rows])), 4) if rows else None,
        "min_margin": round(min(r.margin for r in rows), 4) if rows else None,
    }


def print_table(title: str, rows: Sequence[IdentityRow], out: Any = sys.stdout) -> None:
    print(f"{title}", file=out)
    print(
        f"  {'photo':6s} {'face':>4s}  {'source':8s} {'→source':>8s} {'→visitor':>9s} {'margin':>7s}  {'src~vis':>7s}",
        file=out,
    )
    for r in rows:
        print(
            f"  {r.photo:6s} {r.face:4d}  {r.source:8s} {r.to_source:8.3f} {r.to_visitor:9.3f} "
            f"{r.margin:7.3f}  {r.source_vs_visitor:7.3f}",
            file=out,
        )
    s = summary(rows)
    print(
        f"  → source above visitor on {s['source_above_visitor']}/{s['faces']} faces; mean →source "
        f"{s['mean_to_source']}, →visitor {s['mean_to_visitor']}, smallest margin {s['min_margin']}",
        file=out,
    )


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shared", type=Path, default=SHARED, help="folder with models/ (default ../shared)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also compare the 5-point swap, the affine and auto fits and the box mask with the default",
    )
    args = parser.parse_args(argv)
    rec_path = args.shared / "models" / RECOGNIZER
    t1 = insightface_t1()
    if not rec_path.is_file():
        print(
            f"kiosk bench --identity: error: {rec_path} not found (the independent recognizer)",
            file=sys.stderr,
        )
        return 1
    if t1 is None:
        print(
            "kiosk bench --identity: error: insightface's t1.jpg not found (pip install --no-deps insightface)",
            file=sys.stderr,
        )
        return 1
    recognizer = Recognizer(rec_path)
    variants = [
        (
            "classic swap v2 (face mesh, similarity fit, face mask, mean_std colour: the default)",
            "similarity",
            "face",
            True,
        )
    ]
    if args.variants:
        variants += [
            (
                "classic swap, 5-point (models.mesh: null; similarity fit, face mask)",
                "similarity",
                "face",
                False,
            ),
            ("classic swap, 5-point, affine fit", "affine", "face", False),
            ("classic swap, 5-point, auto fit", "auto", "face", False),
            ("classic swap v2, box mask", "similarity", "box", True),
        ]
    results = {}
    for title, fit, shape, mesh in variants:
        pipe = classic_pipeline(fit, mask_shape=shape, mesh=mesh)
        rows = photo_cases(pipe, recognizer, t1, nasa_photo())
        results[title] = rows
        if not args.json:
            print_table(title, rows)
    if args.json:
        print(
            json.dumps(
                {k: {"rows": [asdict(r) for r in v], **summary(v)} for k, v in results.items()}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
