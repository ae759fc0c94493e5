"""Does the classic swap's face follow the visitor's mouth and eyes? Judged by a second model.

    python benchmarks/classic_expression.py --clip PATH [--source PHOTO] [--mesh none,bundled]
        [--frames N] [--start N] [--scale 4] [--out-dir DIR] [--judge-python /tmp/judge/bin/python]
    python benchmarks/classic_expression.py --pool DIR [DIR ...]

Every frame of ``--clip`` (upscaled ``--scale`` times, cubic) goes through the kiosk's own classic
swap (``SwapPipeline.from_config``: bundled YuNet, tracking, face mask, mean_std colour, the CPU
paste-back, i.e. what ``kiosk swap`` does) once per ``--mesh`` variant (``none``: the 5-point swap,
``bundled``: ``models.mesh: package:data/models/face_mesh_468.onnx``). An independent judge, dlib's
68-point shape predictor (not the MediaPipe mesh the swap uses; ``benchmarks/expression_judge.py``,
run in its own venv), places points on the input and each output inside the input's face box.
Mouth opening = inner-lip gap / inter-ocular distance; eye opening = eye aspect ratio (mean of
both eyes). Prints, per variant, Pearson r of mouth and eye opening (input vs output), the mean
per-face swap time, the frames with a face, and the judge against itself (input vs input, and
input vs the input shifted 2 px and JPEG-coded: the judge's own noise) as sanity lines; writes ``expression.jpg`` (visitor / 5-point / mesh crops of a few frames) and
``expression.json`` to ``--out-dir``. How to get the clip and the judge: docs/classic-swap.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's kiosk

from kiosk.capture.demo_visitor import source_face_path  # noqa: E402
from kiosk.config import parse_config  # noqa: E402
from kiosk.processing.models import read_image  # noqa: E402
from kiosk.processing.pipeline import SwapPipeline  # noqa: E402
from kiosk.tools.identity import Recognizer  # noqa: E402

MESHES = {"none": "null", "bundled": "package:data/models/face_mesh_468.onnx"}
RECOGNIZER = Path(__file__).resolve().parents[2] / "shared" / "models" / "mobilefacenet_128_foamliu.onnx"
JUDGE = Path(__file__).resolve().with_name("expression_judge.py")
DEFAULT_JUDGE_PYTHON = os.environ.get("KIOSK_JUDGE_PYTHON", "/tmp/judge/bin/python")

# dlib / iBUG 68-point indices
RIGHT_EYE = slice(36, 42)
LEFT_EYE = slice(42, 48)
INNER_LIP_PAIRS = ((61, 67), (62, 66), (63, 65))


def _dist(a: NDArray[np.floating], b: NDArray[np.floating]) -> NDArray[np.floating]:
    return np.asarray(np.linalg.norm(a - b, axis=-1))


def inter_ocular(points: NDArray[np.floating]) -> NDArray[np.floating]:
    """Distance between the eye centres of (..., 68, 2) points: the face's scale."""
    return _dist(points[..., RIGHT_EYE, :].mean(axis=-2), points[..., LEFT_EYE, :].mean(axis=-2))


def mouth_opening(points: NDArray[np.floating]) -> NDArray[np.floating]:
    """Inner-lip gap (mean of the three vertical pairs) / inter-ocular distance, per face."""
    gap = np.mean([_dist(points[..., a, :], points[..., b, :]) for a, b in INNER_LIP_PAIRS], axis=0)
    return np.asarray(gap / inter_ocular(points))


def eye_aspect_ratio(eye: NDArray[np.floating]) -> NDArray[np.floating]:
    """(|p1-p5| + |p2-p4|) / (2 |p0-p3|) of (..., 6, 2) eye points (Soukupova and Cech 2016)."""
    vertical = _dist(eye[..., 1, :], eye[..., 5, :]) + _dist(eye[..., 2, :], eye[..., 4, :])
    return np.asarray(vertical / (2.0 * _dist(eye[..., 0, :], eye[..., 3, :])))


def eye_opening(points: NDArray[np.floating]) -> NDArray[np.floating]:
    """Mean eye aspect ratio of both eyes, per face."""
    both = eye_aspect_ratio(points[..., RIGHT_EYE, :]) + eye_aspect_ratio(points[..., LEFT_EYE, :])
    return np.asarray(both / 2.0)


def pearson(a: NDArray[np.floating], b: NDArray[np.floating]) -> float:
    """Pearson r over the entries finite in both; NaN with under 3 of them or no spread."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    x, y = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    den = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / den) if den > 0 else float("nan")


def _floats(values: NDArray[np.floating]) -> list[float | None]:
    return [float(x) if np.isfinite(x) else None for x in np.asarray(values, np.float64)]


def read_clip(path: Path, frames: int, scale: float, start: int = 0) -> list[NDArray[np.uint8]]:
    """Frames ``start`` .. ``start + frames - 1`` of the clip (decoded from the first: a seek in an
    mp4 lands on a key frame, not on the frame asked for), upscaled ``scale`` times."""
    cap = cv2.VideoCapture(str(path))
    for _ in range(start):
        if not cap.grab():
            break
    out: list[NDArray[np.uint8]] = []
    while len(out) < frames:
        ok, frame = cap.read()
        if not ok:
            break
        if scale != 1:
            frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
        out.append(np.ascontiguousarray(frame))
    cap.release()
    if not out:
        raise SystemExit(f"ERROR: no frames could be read from {path} (from frame {start})")
    return out


def pipeline(mesh: str) -> SwapPipeline:
    cfg = parse_config(
        f"models: {{swapper: classic, enhancer: null, mesh: {MESHES[mesh]}, "
        "providers: {order: [cpu], intra_op_threads: 1}}\n"
        "processing: {color_correction: mean_std, max_faces: 1}\n"
        "mask: {shape: face}\n",
        "<bench>",
        env=False,
    )
    return SwapPipeline.from_config(cfg)


def swap_clip(
    mesh: str, clip: list[NDArray[np.uint8]], source: NDArray[np.uint8], fps: float
) -> tuple[list[NDArray[np.uint8]], NDArray[np.float32], list[float], NDArray[np.float32]]:
    """The swapped frames, the boxes and 5 keypoints of the swapped face (NaN where none) and
    the per-face ms."""
    pipe = pipeline(mesh)
    pipe.set_source(source)
    outs, boxes, ms = [], np.full((len(clip), 4), np.nan, np.float32), []
    kps = np.full((len(clip), 5, 2), np.nan, np.float32)
    for i, frame in enumerate(clip):
        out = np.empty_like(frame)
        faces = pipe.process_into(frame, out, paste=True, t=i / fps)
        t = pipe.times
        if faces:
            boxes[i] = faces[0].face.box_xyxy
            kps[i] = faces[0].face.kps
            ms.append((t.align_ms + t.swap_ms + t.mask_ms + t.color_ms + t.paste_ms) / t.faces)
        outs.append(out)
    return outs, boxes, ms, kps


def identity(
    recognizer: Recognizer, clip: list[NDArray[np.uint8]], outs: list[NDArray[np.uint8]],
    kps: NDArray[np.float32], source_emb: NDArray[np.float32],
) -> dict[str, float]:  # fmt: skip
    """MobileFaceNet cosine of each swapped face to the source photo and to the visitor it
    replaced (the same keypoints on both frames): medians and the share closer to the source."""
    to_src, to_vis = [], []
    for frame, out, k in zip(clip, outs, kps, strict=True):
        if np.all(np.isfinite(k)):
            swapped = recognizer.embed(out, k)
            to_src.append(float(swapped @ source_emb))
            to_vis.append(float(swapped @ recognizer.embed(frame, k)))
    a, b = np.array(to_src), np.array(to_vis)
    return {"to_source": float(np.median(a)), "to_visitor": float(np.median(b)),
            "closer_to_source": float(np.mean(a > b))}  # fmt: skip


def judge(frames: list[NDArray[np.uint8]], boxes: NDArray[np.float32], python: str) -> NDArray[np.float32]:
    """dlib's 68 points on each frame inside its box (NaN where no box), in the judge's venv."""
    if not Path(python).exists():
        raise SystemExit(
            f"ERROR: the judge's python {python} is missing: make its venv (docs/classic-swap.md, "
            "'Expression') or pass --judge-python"
        )
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "frames.npz", Path(tmp) / "points.npy"
        np.savez(src, frames=np.stack(frames), boxes=boxes)
        done = subprocess.run([python, str(JUDGE), str(src), str(dst)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"ERROR: the judge failed: {done.stderr.strip().splitlines()[-1:]}")
        return np.asarray(np.load(dst), np.float32)


def jittered(frame: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """The frame shifted 2 px right and JPEG-coded at quality 70: the same expression, other pixels."""
    ok, buf = cv2.imencode(".jpg", np.roll(frame, 2, axis=1), [cv2.IMWRITE_JPEG_QUALITY, 70])
    return np.asarray(cv2.imdecode(buf, cv2.IMREAD_COLOR), np.uint8)


def crop(frame: NDArray[np.uint8], box: NDArray[np.float32], side_px: int) -> NDArray[np.uint8]:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    half = 0.8 * max(box[2] - box[0], box[3] - box[1])
    k = side_px / (2 * float(half))
    m = np.array([[k, 0.0, side_px / 2 - float(cx) * k], [0.0, k, side_px / 2 - float(cy) * k]], np.float32)
    return np.asarray(
        cv2.warpAffine(frame, m, (side_px, side_px), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
    )


def strip(
    rows: list[list[NDArray[np.uint8]]], labels: list[str], boxes: NDArray[np.float32], picks: list[int]
) -> NDArray[np.uint8]:
    """One row per variant (visitor first), one column per picked frame, a label on each row."""
    lines = []
    for frames, label in zip(rows, labels, strict=True):
        row = np.hstack([crop(frames[i], boxes[i], 160) for i in picks])
        cv2.putText(row, label, (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(row, label, (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
        lines.append(row)
    return np.asarray(np.vstack(lines))


def _series(values: list[float | None]) -> NDArray[np.float64]:
    return np.array([np.nan if v is None else v for v in values], np.float64)


def pool(dirs: list[Path]) -> int:
    """Pearson r over all the frames of the parts' ``expression.json`` (``--start`` runs of one
    clip), per variant, and the share of frames closer to the source weighted by each part's
    frames: the whole clip's figures, which the parts' own r can hide (each part has its own
    range)."""
    reports = []
    for d in dirs:
        path = d / "expression.json"
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else f"not JSON ({exc})"
            raise SystemExit(f"ERROR: {path}: {why}; run the benchmark with --out-dir {d} first") from None
    mouth_in = np.concatenate([_series(r["input"]["mouth"]) for r in reports])
    eye_in = np.concatenate([_series(r["input"]["eye"]) for r in reports])
    starts = ", ".join(str(r.get("start", 0)) for r in reports)
    print(f"{len(reports)} parts (from frames {starts}), {len(mouth_in)} frames, "
          f"{int(np.isfinite(mouth_in).sum())} judged")  # fmt: skip
    for v in reports[0]["variants"]:
        if not all(v in r["variants"] for r in reports):
            raise SystemExit(f"ERROR: variant {v!r} is missing from some of the parts")
        parts = [r["variants"][v] for r in reports]
        mouth = np.concatenate([_series(g["series"]["mouth"]) for g in parts])
        eye = np.concatenate([_series(g["series"]["eye"]) for g in parts])
        line = f"--mesh {v:7s}: mouth r {pearson(mouth_in, mouth):.2f}, eye r {pearson(eye_in, eye):.2f}"
        if all("closer_to_source" in g for g in parts):
            share = sum(g["closer_to_source"] * r["frames"] for g, r in zip(parts, reports, strict=True))
            share /= sum(r["frames"] for r in reports)
            line += f", closer to the source on {100 * share:.0f}% of frames"
        print(line)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--clip", type=Path, help="a filmed talking face (docs/classic-swap.md)")
    ap.add_argument("--pool", type=Path, nargs="+", metavar="DIR",
                    help="run nothing: pool the expression.json of these --out-dir parts of one clip")  # fmt: skip
    ap.add_argument("--source", type=Path, default=source_face_path(), help="the library photo")
    ap.add_argument("--mesh", default="none,bundled", help="comma-separated variants: none, bundled")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--start", type=int, default=0, help="skip this many frames first (a long clip in parts)")
    ap.add_argument("--scale", type=float, default=4.0, help="upscale the clip (carphone is 176x144)")
    ap.add_argument("--out-dir", type=Path, default=Path("."))
    ap.add_argument("--judge-python", default=DEFAULT_JUDGE_PYTHON)
    ap.add_argument("--recognizer", type=Path, default=RECOGNIZER, help="MobileFaceNet for identity")
    args = ap.parse_args()
    if args.pool:
        return pool(args.pool)
    if args.clip is None:
        ap.error("--clip PATH (or --pool DIR ...) is required")
    variants = [v.strip() for v in args.mesh.split(",") if v.strip()]
    if bad := [v for v in variants if v not in MESHES]:
        raise SystemExit(f"ERROR: unknown --mesh {bad}; choose from {sorted(MESHES)}")
    fps = cv2.VideoCapture(str(args.clip)).get(cv2.CAP_PROP_FPS) or 30.0
    clip = read_clip(args.clip, args.frames, args.scale, args.start)
    source = read_image(args.source)
    load0 = os.getloadavg()
    print(f"{args.clip.name}: {len(clip)} frames from {args.start}, {clip[0].shape[1]}x{clip[0].shape[0]} "
          f"(x{args.scale:g}), "
          f"{os.cpu_count()} CPUs, load average {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}")  # fmt: skip
    swapped = {v: swap_clip(v, clip, source, fps) for v in variants}
    # the judge looks inside the box where every variant swapped a face (the visitor's own box)
    boxes = np.stack([b for _, b, _, _ in swapped.values()])
    common = np.all(np.isfinite(boxes).all(axis=2), axis=0)
    box = np.where(common[:, None], swapped[variants[0]][1], np.nan).astype(np.float32)
    pts_in = judge(clip, box, args.judge_python)
    mouth_in, eye_in = mouth_opening(pts_in), eye_opening(pts_in)
    n = int(np.isfinite(mouth_in).sum())
    pts_jit = judge([jittered(f) for f in clip], box, args.judge_python)
    mouth_jit, eye_jit = mouth_opening(pts_jit), eye_opening(pts_jit)
    jit_mouth, jit_eye = pearson(mouth_in, mouth_jit), pearson(eye_in, eye_jit)
    print(
        f"judge vs the input shifted 2 px and JPEG q70 (its own noise): mouth r {jit_mouth:.2f}, eye r {jit_eye:.2f}"
    )
    print(f"judge: dlib 68-point; judge vs itself (input vs input): mouth r {pearson(mouth_in, mouth_in):.2f}, "
          f"eye r {pearson(eye_in, eye_in):.2f}; input mouth opening {np.nanmin(mouth_in):.2f}-"
          f"{np.nanmax(mouth_in):.2f}, eye {np.nanmin(eye_in):.2f}-{np.nanmax(eye_in):.2f}")  # fmt: skip
    report: dict[str, object] = {
        "clip": str(args.clip), "start": args.start, "frames": len(clip), "judged": n, "variants": {}
    }  # fmt: skip
    report["judge_noise"] = {"mouth_r": jit_mouth, "eye_r": jit_eye}
    report["input"] = {"mouth": _floats(mouth_in), "eye": _floats(eye_in)}  # per frame, null: not judged
    report["input_jittered"] = {"mouth": _floats(mouth_jit), "eye": _floats(eye_jit)}  # the judge's noise
    rows, labels = [clip], ["visitor"]
    recognizer, source_emb = None, np.zeros(0, np.float32)
    if args.recognizer.is_file():
        recognizer = Recognizer(args.recognizer)
        src_faces = pipeline("none").detect(source)
        if not src_faces:
            raise SystemExit(f"ERROR: no face found in the source photo {args.source}")
        source_emb = recognizer.embed(source, src_faces[0].kps)
    else:
        print(f"identity: skipped, no recognizer at {args.recognizer}")
    for v in variants:
        outs, _, ms, kps = swapped[v]
        pts = judge(outs, box, args.judge_python)
        mouth, eye = mouth_opening(pts), eye_opening(pts)
        got = {"mouth_r": pearson(mouth_in, mouth), "eye_r": pearson(eye_in, eye),
               "ms_per_face": float(np.mean(ms)) if ms else float("nan"),
               "frames_with_face": len(ms), "mouth_mae": float(np.nanmean(np.abs(mouth - mouth_in)))}  # fmt: skip
        ident = ""
        if recognizer is not None:
            got.update(identity(recognizer, clip, outs, kps, source_emb))
            ident = (f"; identity: to source {got['to_source']:.2f}, to visitor {got['to_visitor']:.2f} "
                     f"(medians), closer to the source on {100 * got['closer_to_source']:.0f}% of frames")  # fmt: skip
        got["series"] = {"mouth": _floats(mouth), "eye": _floats(eye)}
        report["variants"][v] = got  # type: ignore[index]
        print(f"--mesh {v:7s}: mouth r {got['mouth_r']:.2f}, eye r {got['eye_r']:.2f}, "
              f"{got['ms_per_face']:.2f} ms/face, {got['frames_with_face']}/{len(clip)} frames with a face "
              f"swapped, {n} judged{ident}")  # fmt: skip
        rows.append(outs)
        labels.append("5-point" if v == "none" else f"mesh ({v})")
    load1 = os.getloadavg()
    report["load_average"] = [load0[0], load1[0]]
    print(f"load average after {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    judged = np.flatnonzero(np.isfinite(mouth_in))
    if len(judged):
        order = judged[np.argsort(mouth_in[judged])]  # closed ... open mouth, 5 columns
        picks = sorted({int(order[round(k * (len(order) - 1) / 4)]) for k in range(5)})
        image = strip(rows, labels, box, picks)
        cv2.imwrite(str(args.out_dir / "expression.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 80])
    (args.out_dir / "expression.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
