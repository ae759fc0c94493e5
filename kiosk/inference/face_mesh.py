"""The dense face mesh (:class:`FaceMesh`): MediaPipe Face Mesh's 468 points on ONNX Runtime.

The model is ``kiosk/data/models/face_mesh_468.onnx`` (Apache-2.0), converted once from the
``face_landmark.tflite`` inside the mediapipe 0.10.14 wheel by ``scripts/convert_face_mesh.py``
(provenance, hashes and the conversion's check against the TFLite interpreter in
``kiosk/data/models/PROVENANCE.md``). The kiosk does not need the mediapipe runtime.

Contract (the model card's): a 192x192 RGB crop in [0, 1], the face centred, upright (rotated so
the eye line is level) and :data:`CROP_SCALE` times the detector's box; out come 468 x (x, y, z)
in pixels of that crop (z: depth, same scale, smaller is nearer) and a face-presence logit.

:meth:`FaceMesh.points` builds that crop from a detector :class:`~kiosk.types.Face` (box and five
keypoints) with one ``cv2.warpAffine``, runs the session through the kiosk's session layer
(:class:`~kiosk.inference.sessions.SessionRunner`, CPU or GPU providers alike) and returns the
points in frame pixels. The mesh's triangulation (852 triangles, the eyes and the inside of the
mouth are holes) is :func:`triangles`, from ``face_mesh_triangles.npy`` beside the model.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.errors import ModelCorruptError
from kiosk.inference.kernels import hwc_to_planar
from kiosk.inference.sessions import ProviderOptions, SessionRunner, create_session
from kiosk.inference.specs import FACE_MESH, check_signature
from kiosk.paths import package_file
from kiosk.types import Affine2x3, Face, FrameBGR
from kiosk.util.files import shown

__all__ = [
    "CROP_SCALE",
    "FACE_OVAL",
    "INPUT_PX",
    "LEFT_EYE",
    "LIPS_INNER",
    "MESH_POINTS",
    "RIGHT_EYE",
    "FaceMesh",
    "MeshPoints",
    "bundled_mesh_path",
    "open_face_mesh",
    "triangles",
]

#: Side of the model's input crop, and the number of points it returns.
INPUT_PX = 192
MESH_POINTS = 468
#: The crop is this many times the detector's box (MediaPipe's 25 % margin on each side).
CROP_SCALE = 1.5
#: Below this face-presence probability the mesh is not trusted (the 5-point swap is used).
MIN_PRESENCE = 0.5
#: Intra-op threads of the mesh session when ``models.providers.intra_op_threads`` is 0 (auto).
MESH_THREADS = 1

#: Index loops of the mesh (MediaPipe's ``FACEMESH_*`` connections, walked in order).
FACE_OVAL = (10, 109, 67, 103, 54, 21, 162, 127, 234, 93, 132, 58, 172, 136, 150, 149, 176, 148, 152,
             377, 400, 378, 379, 365, 397, 288, 361, 323, 454, 356, 389, 251, 284, 332, 297, 338)  # fmt: skip
LIPS_INNER = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191)
#: The eye openings (lid margins) on the image's left and right.
RIGHT_EYE = (33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163, 7)
LEFT_EYE = (263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390, 249)

_MODEL_FILE = "face_mesh_468.onnx"
_TRIANGLES_FILE = "face_mesh_triangles.npy"


def bundled_mesh_path() -> Path:
    """The face mesh shipped in the package."""
    return package_file("data", "models", _MODEL_FILE)


@functools.lru_cache(maxsize=1)
def triangles() -> NDArray[np.int32]:
    """The mesh's triangles, (852, 3) vertex indices (read once from the package)."""
    data = package_file("data", "models", _TRIANGLES_FILE).read_bytes()
    tris = np.load(io.BytesIO(data), allow_pickle=False).astype(np.int32)
    if tris.ndim != 2 or tris.shape[1] != 3 or tris.min() < 0 or tris.max() >= MESH_POINTS:
        raise ValueError(f"{_TRIANGLES_FILE}: not a triangulation of {MESH_POINTS} points")
    tris.setflags(write=False)
    return tris


@dataclass(frozen=True)
class MeshPoints:
    """One face's mesh: ``xy`` (468, 2) float32 in the image's pixels, ``z`` (468,) depth in the
    same scale (smaller is nearer the camera), ``presence`` the model's face probability."""

    xy: NDArray[np.float32]
    z: NDArray[np.float32]
    presence: float


def crop_matrix(face: Face) -> Affine2x3:
    """The frame→192 crop matrix of ``face``: centred on its box, :data:`CROP_SCALE` times the
    box's longer side, rotated so the eye line (keypoints 0 → 1) is level."""
    box = np.asarray(face.box_xyxy, np.float64)
    kps = np.asarray(face.kps, np.float64).reshape(5, 2)
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    side = max(box[2] - box[0], box[3] - box[1], 1.0) * CROP_SCALE
    dx, dy = kps[1] - kps[0]
    angle = math.atan2(dy, dx)
    s = INPUT_PX / side
    c, sn = math.cos(-angle) * s, math.sin(-angle) * s
    # x' = R(-angle) * s * (x - centre) + 96
    return np.array(
        [[c, -sn, INPUT_PX / 2 - (c * cx - sn * cy)], [sn, c, INPUT_PX / 2 - (sn * cx + c * cy)]], np.float64
    )


class FaceMesh:
    """``points(image_bgr, face)`` → :class:`MeshPoints`. Not thread-safe (reused buffers): one
    instance per pipeline (the classic swapper's)."""

    def __init__(self, session: Any, path: str | Path, provider: str, *, iobinding: bool = True) -> None:
        check_signature(FACE_MESH, session, path)
        self.spec = FACE_MESH
        self.path = Path(path)
        self.provider = provider
        self.runner = SessionRunner(
            session, provider, iobinding=iobinding, output_names=["landmarks", "face_flag"]
        )
        self._crop = np.zeros((INPUT_PX, INPUT_PX, 3), np.uint8)
        self._blob = np.zeros((1, 3, INPUT_PX, INPUT_PX), np.float32)

    def points(self, image_bgr: FrameBGR, face: Face) -> MeshPoints:
        """The 468 points of ``face`` (its detector box and keypoints) in ``image_bgr``'s pixels."""
        m = crop_matrix(face)
        cv2.warpAffine(
            image_bgr,
            m,
            (INPUT_PX, INPUT_PX),
            dst=self._crop,
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REPLICATE,
        )
        hwc_to_planar(self._crop, self._blob[0], rgb=True, mean=0.0, std=255.0)
        landmarks, flag = self.runner.run({"input": self._blob})
        pts = np.asarray(landmarks, np.float64).reshape(MESH_POINTS, 3)
        inv = cv2.invertAffineTransform(m)
        xy = pts[:, :2] @ inv[:, :2].T + inv[:, 2]
        scale = math.hypot(inv[0, 0], inv[1, 0])
        logit = float(np.asarray(flag).reshape(-1)[0])
        presence = 1.0 / (1.0 + math.exp(-max(min(logit, 60.0), -60.0)))
        return MeshPoints(xy.astype(np.float32), (pts[:, 2] * scale).astype(np.float32), presence)

    def warm_up(self) -> float:
        """One run on zeros; the milliseconds it took."""
        self._blob.fill(0)
        return self.runner.warm_up({"input": self._blob})


def _check_hash(path: Path) -> None:
    if FACE_MESH.sha256 is None:
        return
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ModelCorruptError(
            f"{shown(path)}: face mesh not readable ({exc.strerror}) — reinstall the kiosk"
        ) from None
    if digest != FACE_MESH.sha256:
        raise ModelCorruptError(
            f"{shown(path)}: not the face mesh the kiosk ships (SHA-256 {digest[:12]}…, expected "
            f"{FACE_MESH.sha256[:12]}…) — reinstall the kiosk, or set models.mesh: null for the 5-point swap"
        )


def open_face_mesh(
    path: str | Path, providers: ProviderOptions, base_dir: Path | None = None, *, check_hash: bool = True
) -> FaceMesh:
    """Open the face mesh at ``path`` through the session layer. Raises
    :class:`~kiosk.inference.errors.ModelError` with one line naming the file and the fix (missing,
    a file named like the bundled one but with other bytes, not loadable, wrong signature)."""
    p = Path(path)
    if check_hash and p.name == _MODEL_FILE and p.is_file():  # the bundled file, or a copy of it
        _check_hash(p)
    if providers.intra_op_threads == 0:
        # "ONNX Runtime decides" gives this small per-face model every core; one thread is faster
        # (docs/benchmarks.md: 3.9 vs 8.1 ms on 2 cores) and leaves the others to the detector,
        # the capture and the render loop
        providers = dataclasses.replace(providers, intra_op_threads=MESH_THREADS)
    session, used = create_session(p, providers, base_dir=base_dir)
    return FaceMesh(session, p, used, iobinding=providers.iobinding)
