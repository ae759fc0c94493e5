"""The expression benchmark's independent judge: dlib's 68-point shape predictor (not MediaPipe).

    /tmp/judge/bin/python benchmarks/expression_judge.py FRAMES.npz POINTS.npy

Reads ``frames`` (N,H,W,3 uint8 BGR) and ``boxes`` (N,4 float xyxy; NaN = no face) from the .npz
and writes (N,68,2) float32 points (NaN where there is no box). Imports only numpy and dlib, so it
runs in its own venv; the model file comes from the ``face_recognition_models`` package (the
iBUG 300-W trained predictor: its training data is for research use only, fine for a benchmark
judge, never for the kiosk).
"""

from __future__ import annotations

import sys

import numpy as np


def landmarks(frames: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    import dlib  # type: ignore[import-not-found]
    import face_recognition_models  # type: ignore[import-not-found]

    predictor = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    out = np.full((len(frames), 68, 2), np.nan, np.float32)
    for i, (frame, box) in enumerate(zip(frames, boxes, strict=True)):
        if not np.all(np.isfinite(box)):
            continue
        rgb = np.ascontiguousarray(frame[:, :, ::-1])
        x0, y0, x1, y1 = (int(round(float(v))) for v in box)
        shape = predictor(rgb, dlib.rectangle(x0, y0, x1, y1))
        out[i] = [(p.x, p.y) for p in shape.parts()]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = np.load(argv[0])
    np.save(argv[1], landmarks(data["frames"], data["boxes"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
