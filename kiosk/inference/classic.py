"""The classic swapper (``models.swapper: classic``): the library photo's own face, aligned onto the
visitor's by the five keypoints. No neural weights, no embedder; licence: the kiosk's own (MIT).

It plays the swapper's part in :class:`~kiosk.pipeline.SwapPipeline` exactly as InSwapper does,
so everything after the swap is shared: per-face colour correction, the mask (face shape, mouth
restore, occlusion), feather, the GPU composite and live carrying.

* Once per source photo (:meth:`ClassicSwapper.source_latent`): the photo's face is aligned with the
  swapper's own template (the ArcFace 128 template, as InSwapper's input) into a
  :data:`SOURCE_PX` square, and kept with its five keypoints in that crop. That is the "latent" the
  face library caches (:func:`pack_source`: one float32 vector, see there).
* Per face and frame (:meth:`align` + :meth:`infer`): the visitor's face is aligned into the swap
  crop exactly as for InSwapper (the same similarity fit of the keypoints to the template, the same
  frame→crop matrix, so the mask and the composite see the same crop), and the source crop is warped
  into it by a least-squares fit of the source's five crop keypoints onto the visitor's:
  ``similarity`` (four parameters: rotation, uniform scale, shift; the source keeps its own
  proportions), ``affine`` (six: the source is also stretched and sheared onto the visitor's
  proportions, e.g. a head turned a little, whose eyes come closer together than the mouth is
  wide) or ``auto`` (the similarity unless it leaves the keypoints more than
  :data:`AUTO_RESIDUAL_PX` off, then the affine). Measured by ``benchmarks/classic_identity.py``
  (docs/classic-swap.md): the affine halves the keypoint residual (2.0 vs 3.4 px in a 128 crop on
  t1.jpg) but the independent recognizer finds less of the source in it on every face (mean 0.58
  vs 0.67); the similarity is the default.

One ``cv2.warpAffine`` of a 128 crop per face: tens of microseconds, far below the detector.

**v2, with the dense face mesh** (``models.mesh``, :mod:`kiosk.inference.face_mesh`; the default):
the photo's 468 mesh points (with their depth) are kept with its crop, the visitor's are found on
every frame on the detector's box. The photo's mesh is moved onto the visitor's face by the 5-point
fit above, then the visitor's mouth gap and lid openings are applied to it
(:func:`~kiosk.inference.mesh_expression.expression_target`: the photo keeps its own face shape),
and the source crop is warped triangle by triangle onto that target
(:class:`~kiosk.inference.mesh_warp.MeshWarp`), so the mouth opens and closes and the eyes blink
with the visitor; the eyes and the inside of the mouth are the visitor's own, moved into the
photo's face (pasted after the colour correction, :meth:`ClassicSwapper.paste_visitor_parts`), and
the face's alpha (:attr:`ClassicSwapper.face_alpha`) follows the photo's outline, so
``mask.shape: box`` pastes a face, not a square. The 5-point fit alone stays as the fallback: no
mesh model (``models.mesh: null``, or its file unusable: one line in the log), a photo whose mesh
was not found, or a visitor frame where the mesh's face presence is below
:data:`~kiosk.inference.face_mesh.MIN_PRESENCE`.
"""

from __future__ import annotations

import time
from typing import Literal

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.face_mesh import MESH_POINTS, MIN_PRESENCE, FaceMesh
from kiosk.inference.mask import crop_keypoints
from kiosk.inference.mesh_expression import expression_target
from kiosk.inference.mesh_warp import MeshWarp
from kiosk.inference.specs import CLASSIC_SWAPPER, ModelSpec
from kiosk.types import Affine2x3, Face, FrameBGR, Landmarks5

__all__ = [
    "CLASSIC",
    "SOURCE_PX",
    "ClassicSwapper",
    "Fit",
    "fit_keypoints",
    "pack_source",
    "unpack_source",
]

#: The reserved ``models.swapper`` value: no file.
CLASSIC = "classic"
#: Side of the aligned source crop kept per library face (a 512 swap resolution upsamples it).
SOURCE_PX = 256
#: Layout version of a packed source; changes the face cache key (stale entries are recomputed).
SOURCE_VERSION = 3
#: [version, side, 10 keypoint coordinates, has mesh (0/1), 468 x (x, y, z) mesh points in the crop]
_HEADER = 13 + 3 * MESH_POINTS

Fit = Literal["auto", "affine", "similarity"]
#: ``auto``: the similarity, unless it leaves the five keypoints this far (mean, in px of a 128 crop)
#: from the visitor's: a face turned or tilted away, whose features the similarity cannot reach.
AUTO_RESIDUAL_PX = 4.0


def pack_source(
    crop_bgr: FrameBGR, kps_crop: NDArray[np.floating], mesh_crop: NDArray[np.floating] | None = None
) -> NDArray[np.float32]:
    """One float32 vector holding an aligned source crop, its keypoints and (when found) its mesh
    (what the face library caches as the entry's latent): ``[version, side, x0, y0, ... x4, y4,
    has_mesh, mesh (468, 3), pixels (side, side, 3) BGR]``. ``mesh_crop``: (468, 3) points in the
    crop's pixels with the depth in the same scale; (468, 2) is stored with a depth of 0."""
    side = int(crop_bgr.shape[0])
    if crop_bgr.shape != (side, side, 3):
        raise ValueError(f"source crop must be (S, S, 3), got {crop_bgr.shape}")
    out = np.zeros(_HEADER + side * side * 3, np.float32)
    out[0], out[1] = SOURCE_VERSION, side
    out[2:12] = np.asarray(kps_crop, np.float32).reshape(10)
    if mesh_crop is not None:
        out[12] = 1.0
        pts = np.zeros((MESH_POINTS, 3), np.float32)
        given = np.asarray(mesh_crop, np.float32).reshape(MESH_POINTS, -1)
        pts[:, : min(given.shape[1], 3)] = given[:, :3]
        out[13:_HEADER] = pts.reshape(-1)
    out[_HEADER:] = crop_bgr.reshape(-1)
    return out


def unpack_source(
    latent: NDArray[np.floating],
) -> tuple[FrameBGR, NDArray[np.float32], NDArray[np.float32] | None]:
    """(aligned source crop uint8, its five keypoints, its mesh (468, 3) or None) from
    :func:`pack_source`'s vector; a ``ValueError`` for anything else (e.g. an InSwapper latent of 512 values, or a
    version 1 entry: the face library recomputes it)."""
    v = np.asarray(latent).reshape(-1)
    side = int(v[1]) if v.size > _HEADER else 0
    if v.size <= _HEADER or int(v[0]) != SOURCE_VERSION or v.size != _HEADER + side * side * 3:
        raise ValueError(f"not a classic source face ({v.size} values); the face library recomputes it")
    crop = np.clip(np.rint(v[_HEADER:]), 0, 255).astype(np.uint8).reshape(side, side, 3)
    kps = np.asarray(v[2:12], np.float32).reshape(5, 2)
    mesh = np.asarray(v[13:_HEADER], np.float32).reshape(MESH_POINTS, 3) if v[12] > 0.5 else None
    return crop, kps, mesh


def box_of_kps(kps: Landmarks5) -> NDArray[np.float32]:
    """A face box for five keypoints alone (a caller with no detector box): centred between the eyes
    and the mouth, 2.2 eye-to-mouth distances on a side (about what the detectors return)."""
    k = np.asarray(kps, np.float64).reshape(5, 2)
    eyes, mouth = (k[0] + k[1]) / 2, (k[3] + k[4]) / 2
    c = (eyes + mouth) / 2
    half = 1.1 * max(float(np.hypot(*(mouth - eyes))), 1.0)
    return np.array([c[0] - half, c[1] - half, c[0] + half, c[1] + half], np.float32)


def residual_px(m: Affine2x3, src: NDArray[np.floating], dst: NDArray[np.floating]) -> float:
    """Mean distance between ``m`` applied to ``src`` and ``dst`` (pixels)."""
    s = np.asarray(src, np.float64).reshape(-1, 2)
    d = np.asarray(dst, np.float64).reshape(-1, 2)
    return float(np.mean(np.hypot(*(s @ m[:, :2].T + m[:, 2] - d).T)))


def fit_keypoints(
    src: NDArray[np.floating], dst: NDArray[np.floating], fit: Fit, size_px: int = 128
) -> Affine2x3:
    """2x3 matrix mapping the five ``src`` points onto ``dst`` in the least-squares sense:
    a full affine (six parameters), a similarity (rotation, uniform scale, translation), or
    ``auto``: the similarity unless its residual exceeds :data:`AUTO_RESIDUAL_PX` (scaled to a
    ``size_px`` crop), then the affine."""
    from kiosk.inference.align import estimate_similarity

    s = np.asarray(src, np.float64).reshape(-1, 2)
    d = np.asarray(dst, np.float64).reshape(-1, 2)
    if fit != "affine":
        sim = estimate_similarity(s, d)
        if fit == "similarity" or residual_px(sim, s, d) <= AUTO_RESIDUAL_PX * size_px / 128.0:
            return sim
    a = np.hstack([s, np.ones((s.shape[0], 1))])
    sol, _, rank, _ = np.linalg.lstsq(a, d, rcond=None)
    if rank < 3:  # collinear points: an affine is not determined; the similarity still is
        return estimate_similarity(s, d)
    return np.ascontiguousarray(sol.T, dtype=np.float64)


class ClassicSwapper:
    """The swapper role without a swap model: ``align`` the visitor, ``infer`` the source crop onto
    it (v2: through both faces' meshes when ``mesh`` is given, else by the five keypoints).

    The same interface as :class:`~kiosk.inference.swapper.InSwapper` where the pipeline uses it
    (``size_px``, ``spec``, ``provider``, ``align`` / ``infer`` / ``to_bgr``, ``align_tiles`` /
    ``infer_tiles`` for 256/512 crops, ``aligned_crop`` / ``tiles_crop``, ``warm_up``), plus
    :meth:`align_face` (the detector's whole face: the mesh runs on its box) and
    :attr:`face_alpha`. Not thread-safe: reused buffers, one instance per pipeline."""

    size_px = 128
    template = "arcface_128"

    def __init__(
        self, fit: Fit = "similarity", spec: ModelSpec = CLASSIC_SWAPPER, mesh: FaceMesh | None = None
    ) -> None:
        if fit not in ("auto", "affine", "similarity"):
            raise ValueError(f"fit must be auto, affine or similarity, got {fit!r}")
        self.fit: Fit = fit
        self.spec = spec
        #: The dense face mesh (None: the 5-point swap).
        self.mesh = mesh
        #: No swap model: the warp runs on the CPU of the inference thread (the mesh on its provider).
        self.provider = "CPU (no model)"
        self.runner = None if mesh is None else mesh.runner
        self._warp = MeshWarp() if mesh is not None else None
        self._crops: dict[int, FrameBGR] = {}
        self._out: dict[int, FrameBGR] = {}
        self._visitor_kps = np.zeros((5, 2), np.float32)
        self._visitor_mesh: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None
        self._size = self.size_px
        self._source_of: NDArray[np.float32] | None = None
        self._source: tuple[FrameBGR, NDArray[np.float32], NDArray[np.float32] | None] | None = None
        self.last_fit: Affine2x3 = np.eye(2, 3)
        #: The last mesh swap's target mesh (468 x (x, y, z) in the crop), for tests and benchmarks.
        self.last_target: NDArray[np.float32] | None = None
        #: The last swapped face's alpha from the mesh (crop-sized uint8; the pipeline multiplies it
        #: into the configured mask), or None when the last face was swapped by the five keypoints.
        self.face_alpha: NDArray[np.uint8] | None = None

    # -- the source face, once per photo ------------------------------------------------------------
    def source_latent(
        self, image_bgr: FrameBGR, kps: Landmarks5, face: Face | None = None
    ) -> NDArray[np.float32]:
        """The photo's face aligned into a :data:`SOURCE_PX` crop (the swap template), packed
        with its crop keypoints and, with a mesh model, its mesh in the crop (:func:`pack_source`).
        ``face``: the detector's face (its box places the mesh), else a box from ``kps``."""
        m = align_matrix(kps, self.template, SOURCE_PX)
        crop = cv2.warpAffine(
            image_bgr, m, (SOURCE_PX, SOURCE_PX), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE
        )
        mesh_crop = None
        if self.mesh is not None:
            if face is None:
                face = Face(box_of_kps(kps), 1.0, np.asarray(kps, np.float32))
            found = self.mesh.points(image_bgr, face)
            if found.presence >= MIN_PRESENCE:
                xy = found.xy @ m[:, :2].T.astype(np.float32) + m[:, 2].astype(np.float32)
                z = found.z * np.float32(np.hypot(m[0, 0], m[1, 0]))
                mesh_crop = np.column_stack([xy, z])
        return pack_source(np.asarray(crop, np.uint8), crop_keypoints(kps, m), mesh_crop)

    def _source_crop(
        self, latent: NDArray[np.float32]
    ) -> tuple[FrameBGR, NDArray[np.float32], NDArray[np.float32] | None]:
        if latent is not self._source_of or self._source is None:  # a new face: unpack it once
            self._source = unpack_source(latent)
            self._source_of = latent
        return self._source

    # -- per face and frame ---------------------------------------------------------------------------
    def _buffer(self, pool: dict[int, FrameBGR], size_px: int) -> FrameBGR:
        buf = pool.get(size_px)
        if buf is None:
            buf = pool[size_px] = np.zeros((size_px, size_px, 3), np.uint8)
        return buf

    def align_face(self, frame_bgr: FrameBGR, face: Face, size_px: int) -> Affine2x3:
        """:meth:`align_tiles` for the detector's ``face``, and (with a mesh model) the visitor's
        mesh on its box, mapped into the crop."""
        m = self.align_tiles(frame_bgr, face.kps, size_px)
        if self.mesh is not None:
            found = self.mesh.points(frame_bgr, face)
            if found.presence >= MIN_PRESENCE:
                a = m[:, :2].astype(np.float32)
                scale = float(np.hypot(m[0, 0], m[1, 0]))
                xy = found.xy @ a.T + m[:, 2].astype(np.float32)
                self._visitor_mesh = (xy, found.z * np.float32(scale))
        return m

    def align_tiles(self, frame_bgr: FrameBGR, kps: Landmarks5, size_px: int) -> Affine2x3:
        """Align the visitor's face into the reused ``size_px`` crop (the colour correction's
        reference); the frame→crop matrix (the same as InSwapper's for that size). Forgets the
        last visitor mesh (:meth:`align_face` finds this face's)."""
        if size_px % self.size_px or size_px < self.size_px:
            raise ValueError(f"swap resolution must be a multiple of {self.size_px}, got {size_px}")
        m = align_matrix(kps, self.template, size_px)
        warp_crop(frame_bgr, m, size_px, out=self._buffer(self._crops, size_px))
        self._visitor_kps = crop_keypoints(kps, m)
        self._visitor_mesh = None
        self._size = size_px
        return m

    def align(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Affine2x3:
        """:meth:`align_tiles` at 128."""
        return self.align_tiles(frame_bgr, kps, self.size_px)

    def infer_tiles(
        self, latent: NDArray[np.float32], out_bgr: FrameBGR | None = None, *, defer_parts: bool = False
    ) -> FrameBGR:
        """The source face warped onto the last aligned visitor crop (into ``out_bgr`` when given):
        through the meshes when both faces have one, else by the five keypoints.

        ``defer_parts``: the visitor's own eyes and mouth inside (v2) are left for
        :meth:`paste_visitor_parts`, so a colour correction of the photo's face between the two does
        not recolour the visitor's pixels (the pipeline's order)."""
        size = self._size
        src, src_kps, src_mesh = self._source_crop(latent)
        if out_bgr is None or out_bgr.shape != (size, size, 3):
            out_bgr = np.empty((size, size, 3), np.uint8)
        visitor = self._visitor_mesh
        m = fit_keypoints(src_kps, self._visitor_kps, self.fit, size)
        self.last_fit = m
        cv2.warpAffine(
            src, m, (size, size), dst=out_bgr, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        self.face_alpha = None
        self.last_target = None
        if self._warp is not None and src_mesh is not None and visitor is not None:
            # v2: the same fit moves the photo's mesh onto the visitor's face; the visitor's mouth
            # and eyes move it from there (mesh_expression), the triangles warp the photo after them
            posed = np.empty((MESH_POINTS, 3), np.float32)
            posed[:, :2] = src_mesh[:, :2] @ m[:, :2].T.astype(np.float32) + m[:, 2].astype(np.float32)
            posed[:, 2] = src_mesh[:, 2] * np.float32(np.sqrt(abs(np.linalg.det(m[:, :2]))))
            target = expression_target(posed, visitor[0])
            self.last_target = target
            self._warp.warp(src, src_mesh[:, :2], self.tiles_crop, target[:, :2], target[:, 2], out_bgr,
                            visitor_xy=visitor[0])  # fmt: skip
            self.face_alpha = self._warp.alpha
            if not defer_parts:
                self._warp.paste_parts(out_bgr)
        return out_bgr

    def paste_visitor_parts(self, crop_bgr: FrameBGR) -> None:
        """Blend the last v2 swap's visitor parts (eyes, the inside of the mouth) into ``crop_bgr``
        (that swap's crop, after :meth:`infer_tiles` with ``defer_parts``); nothing otherwise."""
        if self._warp is not None:
            self._warp.paste_parts(crop_bgr)

    def infer(self, latent: NDArray[np.float32]) -> FrameBGR:
        """:meth:`infer_tiles` into the swapper's own reused crop (valid until the next call)."""
        return self.infer_tiles(latent, self._buffer(self._out, self._size))

    @staticmethod
    def to_bgr(pred: FrameBGR, out: FrameBGR | None = None) -> FrameBGR:
        """The crop of :meth:`infer` copied into ``out`` (InSwapper converts its model output here)."""
        if out is None:
            return pred.copy()
        np.copyto(out, pred)
        return out

    @property
    def aligned_crop(self) -> FrameBGR:
        """The visitor's last 128 aligned crop."""
        return self._buffer(self._crops, self.size_px)

    @property
    def tiles_crop(self) -> FrameBGR:
        """The visitor's last aligned crop at the swap resolution."""
        return self._buffer(self._crops, self._size)

    def swap(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32], face: Face | None = None
    ) -> tuple[FrameBGR, Affine2x3]:
        """Swapped face as a new 128 crop and its frame→crop matrix (``face``: the detector's, for
        the mesh; else a box from ``kps``)."""
        if face is None:
            face = Face(box_of_kps(kps), 1.0, np.asarray(kps, np.float32))
        m = self.align_face(frame_bgr, face, self.size_px)
        return self.infer(latent).copy(), m

    def warm_up(self) -> float:
        """One swap on zeros (allocates the buffers, runs the mesh, compiles the warp); the
        milliseconds it took."""
        t0 = time.perf_counter()
        kps = np.array([[48.0, 52.0], [80.0, 52.0], [64.0, 72.0], [50.0, 92.0], [78.0, 92.0]], np.float32)
        zeros = np.zeros((160, 160, 3), np.uint8)
        latent = self.source_latent(zeros, kps)
        self.align(zeros, kps)
        self.infer(latent)
        if self._warp is not None:  # the mesh on zeros finds no face: compile the warp on a real one
            pts = np.zeros((MESH_POINTS, 2), np.float32)
            pts[:] = 64.0
            pts[::3] += 20.0
            pts[1::3, 1] -= 20.0
            self._warp.warp(
                zeros[:128, :128], pts, zeros[:128, :128], pts, pts[:, 0], zeros[:128, :128].copy()
            )
        self._source_of, self._source = None, None
        self.face_alpha = None
        return (time.perf_counter() - t0) * 1e3
