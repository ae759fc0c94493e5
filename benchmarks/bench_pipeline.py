"""Benchmark of the face-swap pipeline on a 1920x1080 frame with six faces (not a timed test).

Prints, in one run: our per-stage milliseconds (detect, align, swap, enhance, paste-back) and our
paste-back cost per face next to insightface 2.1's ``INSwapper.get(paste_back=True)`` on the same
frame, faces and models (its paste-back cost = get(paste_back=True) − get(paste_back=False)).

    .venv/bin/python benchmarks/bench_pipeline.py [--models-dir DIR] [--detector PATH] [--reps N]

Without ``--models-dir`` the embedder, swapper and enhancer are the test suite's stand-ins (same
contract as the real files, tiny weights), so the swap/enhance numbers measure only the plumbing;
detection uses the real ``det_500m`` from ../shared/models. The paste-back comparison does not
depend on the weights at all.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kiosk.config import KioskConfig, ModelsConfig, ProcessingConfig, ProvidersConfig  # noqa: E402
from kiosk.inference.paste import PasteBack  # noqa: E402
from kiosk.processing.models import read_image  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402


def _insightface_data(name: str) -> Path:
    import insightface

    return Path(insightface.__file__).parent / "data" / "images" / name


def make_frame() -> np.ndarray:
    """insightface's t1.jpg (six faces) scaled to 1080 px high, centred in a 1920x1080 frame."""
    photo = read_image(_insightface_data("t1.jpg"))
    scale = 1080 / photo.shape[0]
    big = cv2.resize(photo, (int(photo.shape[1] * scale), 1080), interpolation=cv2.INTER_LINEAR)
    frame = np.zeros((1080, 1920, 3), np.uint8)
    x0 = (1920 - big.shape[1]) // 2
    frame[:, x0 : x0 + big.shape[1]] = big
    return frame


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", help="folder with real w600k_r50/inswapper_128/GFPGANv1.4 files")
    ap.add_argument("--detector", default=str(ROOT.parent / "shared" / "models" / "det_500m.onnx"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads per session (0: ORT default)")
    args = ap.parse_args()

    if args.models_dir:
        models_dir = Path(args.models_dir)
        kind = "real"
    else:
        from kiosk.tools import standins

        models_dir = Path(tempfile.mkdtemp(prefix="bench_models_"))
        standins.make_all(models_dir)
        kind = "stand-in"
    providers = ProvidersConfig.model_validate({"order": ["cpu"], "intra_op_threads": args.threads})
    cfg = KioskConfig.model_validate(
        {
            "models": ModelsConfig.model_validate(
                {
                    "dir": str(models_dir),
                    "detector": args.detector,
                    "swapper": "inswapper_128.onnx",  # the neural swap, its licence accepted
                    "accept_noncommercial_licence": True,
                    "providers": providers,
                }
            ),
            "processing": ProcessingConfig.model_validate({"max_faces": 8, "enhance": True}),
            "base_dir": models_dir,
        }
    )
    frame = make_frame()
    pipe = SwapPipeline.from_config(cfg)
    pipe.set_source(read_image(_insightface_data("Tom_Hanks_54745.png")))

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, provider {pipe.provider}"
    )
    print(f"frame 1920x1080, detector {Path(args.detector).name}, embedder/swapper/enhancer: {kind}")

    # -- our pipeline, per stage ------------------------------------------------------------------
    out = np.empty_like(frame)
    for enhance in (False, True):
        pipe.enhance = enhance
        pipe.process(frame, out)  # warm-up
        rows = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            pipe.process(frame, out)
            total = (time.perf_counter() - t0) * 1e3
            t = pipe.times
            rows.append((t.detect_ms, t.align_ms, t.swap_ms, t.enhance_ms, t.paste_ms, total))
        med = np.median(np.array(rows), axis=0)
        n = pipe.times.faces
        label = "with enhancer" if enhance else "no enhancer"
        print(f"\nours, {label} ({n} faces, median of {args.reps} frames, ms per frame):")
        print(
            f"  detect {med[0]:7.2f} | align {med[1]:6.2f} | swap {med[2]:7.2f} | enhance {med[3]:7.2f} | "
            f"paste-back {med[4]:6.2f} | total {med[5]:7.2f}"
        )
        print(
            f"  per face: align {med[1] / n:.2f}, swap {med[2] / n:.2f}, enhance {med[3] / n:.2f}, paste {med[4] / n:.2f}"
        )

    # -- paste-back: ours vs insightface on the same faces ---------------------------------------------
    pipe.enhance = False
    faces = pipe.detect(frame)
    latent = pipe.sources.latent
    assert latent is not None
    crops = [pipe.swapper.swap(frame, f.kps, latent) for f in faces]
    paster = PasteBack()
    work = frame.copy()
    paster.paste(work, *crops[0])
    ours = []
    for _ in range(args.reps):
        for crop, m in crops:
            t0 = time.perf_counter()
            paster.paste(work, crop, m)
            ours.append((time.perf_counter() - t0) * 1e3)
    ours_ms = float(np.median(ours))

    try:
        from insightface.app.common import Face as IFace
        from insightface.model_zoo.inswapper import INSwapper
    except ImportError:
        print("\ninsightface is not installed: no reference paste-back figures")
        return 0
    # Give insightface a session with the same options as ours (no thread spinning), so that its
    # paste-back is not slowed down by idle ONNX Runtime threads: a fair comparison.
    from kiosk.inference.sessions import ProviderOptions, create_session

    ref_session, _ = create_session(models_dir / "inswapper_128.onnx", ProviderOptions.of(providers))
    ref = INSwapper(model_file=str(models_dir / "inswapper_128.onnx"), session=ref_session)
    emb = np.ones(512, np.float32)
    src = IFace(embedding=emb)
    with_paste, without = [], []
    reps = max(2, args.reps // 3)
    for f in faces:
        target = IFace(kps=f.kps)
        ref.get(frame, target, src, paste_back=True)  # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            ref.get(frame, target, src, paste_back=False)
            t1 = time.perf_counter()
            ref.get(frame, target, src, paste_back=True)
            t2 = time.perf_counter()
            without.append((t1 - t0) * 1e3)
            with_paste.append((t2 - t1) * 1e3)
    ref_ms = float(np.median(with_paste) - np.median(without))
    print(f"\npaste-back per face at 1920x1080 (median over {len(faces)} faces):")
    print(f"  ours (ROI warp + blend in place)            {ours_ms:7.2f} ms")
    print(f"  insightface INSwapper.get(paste_back=True)  {ref_ms:7.2f} ms")
    print(f"  ratio ours / insightface                    {ours_ms / ref_ms:7.3f}  (goal <= 0.1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
