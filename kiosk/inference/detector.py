"""Face detectors: SCRFD (insightface ``det_10g``/``det_2.5g``/``det_500m``), YuNet and RetinaFace.

All letterbox the frame at the top-left of a square ``det_size`` input (resize into a reused
buffer, then one fused pass to normalised planar float), run the session once (IOBinding into
preallocated outputs), decode only the candidates above the threshold with cached anchor grids or
prior boxes, apply NMS and keep at most ``max_faces``. Results are :class:`~kiosk.types.Face`
records in frame pixels. The SCRFD path reproduces insightface 2.1's ``SCRFD.detect`` (same
letterbox, decode, NMS, order); the RetinaFace path decodes biubug6/Pytorch_Retinaface's priors
and variances.

A model exported with a fixed input size (YuNet 2023mar, RetinaFace mnet0.25 at 640x640) runs at
that size. Asked for a smaller ``det_size`` for tracking regions (:meth:`FaceDetector.resized`), it
letterboxes each region at ``det_size`` scale into its fixed input, so a face is seen at the same
scale and on the same anchor grid as in the full-frame detection; :meth:`FaceDetector.detect_many`
puts several regions side by side in that input (nine 192 px tiles in 640) and runs once for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.errors import ImageError, ModelSignatureError
from kiosk.inference.kernels import (
    hwc_to_planar,
    nms_sorted,
    planar_lut,
    resize_factor,
    resize_planar,
    scrfd_decode,
)
from kiosk.inference.sessions import SessionRunner
from kiosk.inference.specs import ModelSpec, check_signature
from kiosk.types import Face, FrameBGR

STRIDES = (8, 16, 32)


def nms(boxes: NDArray[np.float32], scores: NDArray[np.float32], iou: float) -> list[int]:
    """Greedy NMS as insightface's SCRFD (inclusive-pixel areas, keep IoU <= ``iou``)."""
    order = np.argsort(-scores, kind="stable")
    return nms_sorted(boxes, order, iou)


class FaceDetector:
    """Shared letterbox / NMS / max-faces logic. Subclasses implement :meth:`_decode`."""

    def __init__(
        self,
        session: Any,
        spec: ModelSpec,
        path: str | Path,
        provider: str,
        det_size: int = 640,
        threshold: float = 0.5,
        max_faces: int = 0,
        nms_iou: float = 0.4,
        *,
        iobinding: bool = True,
        device_id: int = 0,
        fit_in_fixed: bool = False,
    ) -> None:
        check_signature(spec, session, path)
        self.session = session
        self.spec = spec
        self.path = Path(path)
        self.provider = provider
        self.threshold = float(threshold)
        self.max_faces = int(max_faces)
        self.nms_iou = float(nms_iou)
        inp = session.get_inputs()[0]
        self.input_name = inp.name
        fixed = [d for d in inp.shape[2:4] if isinstance(d, int)]
        self.fixed_size = len(fixed) == 2
        input_size = int(det_size)
        if len(fixed) == 2 and (fixed[0] != det_size or fixed[1] != det_size):
            if fixed[0] != fixed[1]:
                raise ImageError(f"{path}: detectors with a non-square fixed input are not supported")
            input_size = int(fixed[0])
            # A fixed-size export decides its own input size; a smaller region size is letterboxed
            # into it (``fit_in_fixed``), a larger one cannot be.
            if not fit_in_fixed or det_size > input_size:
                det_size = input_size
        #: The scale the frame is resized to (its longer side, in input pixels).
        self.det_size = int(det_size)
        #: The model's input (square): ``det_size``, or a fixed export's own size.
        self.input_size = input_size
        self.fit_in_fixed = bool(fit_in_fixed)
        self.output_names = [o.name for o in session.get_outputs()]
        self.runner = SessionRunner(
            session, provider, iobinding=iobinding, device_id=device_id, output_names=self.output_names
        )
        self._mean = spec.channel_mean if spec.channel_mean is not None else spec.mean
        #: (3, 256) normalised value of each byte per input plane, for the fused letterbox.
        self._lut = planar_lut(self._mean, spec.std)
        self._blob = np.zeros((1, 3, self.input_size, self.input_size), np.float32)
        self._fill_padding(self._blob[0])
        self._resize_buf = np.zeros(self.det_size * self.det_size * 3, np.uint8)
        self._resized = self._resize_buf[:3].reshape(1, 1, 3)
        self._letterbox_key: tuple[int, int] | None = None
        # Region tiles (fixed-size export, smaller det_size): side by side on the anchor grid with
        # a black gap (a multiple of the largest stride) between them when there is room for one.
        n = max(self.input_size // self.det_size, 1) if fit_in_fixed else 1
        gap = ((self.input_size - n * self.det_size) // (n - 1)) // 32 * 32 if n > 1 else 0
        self._tiles_side = n
        self._tile_pitch = self.det_size + gap
        self._tile_origins = [
            (r * self._tile_pitch, c * self._tile_pitch) for r in range(n) for c in range(n)
        ]
        self._tiles_dirty: set[int] = set()
        self._anchor_cache: dict[tuple[int, int, int], NDArray[np.float32]] = {}

    def resized(self, det_size: int) -> FaceDetector:
        """The same model (same session) at another input size, returning every face it finds (no
        ``max_faces``): what tracking runs on the small region around a face. A fixed-size export
        keeps its input and letterboxes the region at ``det_size`` scale into it."""
        return type(self)(
            self.session,
            self.spec,
            self.path,
            self.provider,
            det_size=det_size,
            threshold=self.threshold,
            max_faces=0,
            nms_iou=self.nms_iou,
            iobinding=self.runner.iobinding,
            device_id=self.runner.device_id,
            fit_in_fixed=True,
        )

    # -- preprocessing ---------------------------------------------------------------------------
    def _letterbox(self, frame_bgr: FrameBGR) -> float:
        """Resize ``frame_bgr`` into the top-left of the reused input blob; return the scale used.

        A frame that is an odd multiple of the input (1920x1080 at 640: 3x) goes in
        one pass (:func:`~kiosk.inference.kernels.resize_planar`: the pixels ``cv2.resize`` would
        sample, straight into normalised planar float, the same floats); any other size is resized
        into a reused buffer, then converted in one fused pass
        (:func:`~kiosk.inference.kernels.hwc_to_planar`). The padding is the normalised value of
        black, written once per frame size (the image never overwrites it)."""
        if frame_bgr is None or frame_bgr.ndim != 3 or frame_bgr.shape[2] != 3 or frame_bgr.size == 0:
            shape = None if frame_bgr is None else frame_bgr.shape
            raise ImageError(f"expected a BGR image of shape (H, W, 3), got {shape}")
        h, w = frame_bgr.shape[:2]
        size = self.det_size
        im_ratio = h / w
        if im_ratio > 1.0:
            new_h, new_w = size, int(size / im_ratio)
        else:
            new_w, new_h = size, int(size * im_ratio)
        new_w, new_h = max(new_w, 1), max(new_h, 1)
        spec = self.spec
        if self._letterbox_key != (h, w):
            # A new frame size (camera change, a region cut by the frame edge, a source photo):
            # a contiguous view of the one resize buffer, and the padding written again.
            self._letterbox_key = (h, w)
            self._resized = self._resize_buf[: new_h * new_w * 3].reshape(new_h, new_w, 3)
            self._fill_padding(self._blob[0])
        if (new_h, new_w) == (h, w):
            resized = frame_bgr  # already the input size (a region crop): no resize, no copy
        else:
            k = resize_factor(h, w, new_h, new_w)
            if k:
                resize_planar(frame_bgr, self._blob[0], k, rgb=spec.colour == "RGB", lut=self._lut)
                return new_h / h
            resized = self._resized
            cv2.resize(frame_bgr, (new_w, new_h), dst=resized)
        hwc_to_planar(resized, self._blob[0], rgb=spec.colour == "RGB", mean=self._mean, std=spec.std)
        return new_h / h

    def _anchors(self, rows: int, cols: int, stride: int, per_cell: int) -> NDArray[np.float32]:
        key = (rows, cols, stride * 10 + per_cell)
        grid = self._anchor_cache.get(key)
        if grid is None:
            ys, xs = np.mgrid[:rows, :cols]
            grid = np.stack([xs, ys], axis=-1).astype(np.float32).reshape(-1, 2)
            grid = np.repeat(grid, per_cell, axis=0)
            self._anchor_cache[key] = grid
        return grid

    # -- main entry ------------------------------------------------------------------------------
    def detect(self, frame_bgr: FrameBGR) -> list[Face]:
        """Faces in ``frame_bgr`` (frame pixels), best first."""
        if self._tiles_dirty:
            self._letterbox_key = None  # the blob holds region tiles: write the padding again
            self._tiles_dirty = set()
        scale = self._letterbox(frame_bgr)
        outs = self.runner.run({self.input_name: self._blob})
        scores, boxes, kps = self._decode(outs)
        return self._faces(scores, boxes, kps, scale, frame_bgr.shape, self.max_faces)

    @property
    def tiles_per_run(self) -> int:
        """How many regions one session run detects in (:meth:`detect_many`): more than one for a
        fixed-size export asked for a smaller ``det_size`` (regions side by side in its input)."""
        return len(self._tile_origins)

    def detect_many(self, crops: Sequence[FrameBGR]) -> list[list[Face]]:
        """The faces of each crop (crop pixels, best first), as :meth:`detect` on each of them.

        A fixed-size export with a smaller ``det_size`` letterboxes up to :attr:`tiles_per_run`
        crops at ``det_size`` scale side by side into its input (on the anchor grid, a black gap
        between them) and runs once for all of them; a face belongs to the tile its box centre is
        in. Any other detector runs once per crop."""
        if self.tiles_per_run == 1:
            return [self.detect(c) for c in crops]
        out: list[list[Face]] = []
        per = self.tiles_per_run
        for first in range(0, len(crops), per):
            out += self._detect_tiles(crops[first : first + per])
        return out

    def _detect_tiles(self, crops: Sequence[FrameBGR]) -> list[list[Face]]:
        size = self.det_size
        if self._letterbox_key is not None:  # the blob holds a whole letterboxed frame
            self._fill_padding(self._blob[0])
            self._letterbox_key = None
        scales: list[float] = []
        for k, crop in enumerate(crops):
            y0, x0 = self._tile_origins[k]
            scales.append(self._write_tile(crop, self._blob[0, :, y0 : y0 + size, x0 : x0 + size]))
        used = set(range(len(crops)))
        for k in self._tiles_dirty - used:  # last call's tiles that hold no crop now
            y0, x0 = self._tile_origins[k]
            self._fill_padding(self._blob[0, :, y0 : y0 + size, x0 : x0 + size])
        self._tiles_dirty = used
        outs = self.runner.run({self.input_name: self._blob})
        scores, boxes, kps = self._decode(outs)
        result: list[list[Face]] = [[] for _ in crops]
        if scores.size == 0:
            return result
        pitch = self._tile_pitch
        cx = (boxes[:, 0] + boxes[:, 2]) * np.float32(0.5)
        cy = (boxes[:, 1] + boxes[:, 3]) * np.float32(0.5)
        col = np.floor(cx / pitch).astype(np.int64)
        row = np.floor(cy / pitch).astype(np.int64)
        n = self._tiles_side
        inside = (
            (col >= 0)
            & (row >= 0)
            & (col < n)
            & (row < n)
            & (cx - col * pitch < size)
            & (cy - row * pitch < size)
        )
        tile = np.where(inside, row * n + col, -1)
        for k in range(len(crops)):
            sel = np.flatnonzero(tile == k)
            if sel.size == 0:
                continue
            y0, x0 = self._tile_origins[k]
            off = np.array([x0, y0], np.float32)
            result[k] = self._faces(
                scores[sel],
                boxes[sel] - np.tile(off, 2),
                kps[sel] - np.tile(off, 5),
                scales[k],
                crops[k].shape,
                0,
            )
        return result

    def _write_tile(self, crop: FrameBGR, dst: NDArray[np.float32]) -> float:
        """Letterbox ``crop`` at ``det_size`` scale into the tile view ``dst``; return the scale."""
        if crop is None or crop.ndim != 3 or crop.shape[2] != 3 or crop.size == 0:
            raise ImageError(f"expected a BGR image of shape (H, W, 3), got {getattr(crop, 'shape', None)}")
        h, w = crop.shape[:2]
        size = self.det_size
        if h > w:
            new_h, new_w = size, max(int(size * w / h), 1)
        else:
            new_w, new_h = size, max(int(size * h / w), 1)
        if (new_h, new_w) != (size, size):
            self._fill_padding(dst)  # a crop that does not fill the tile: the rest is padding
        if (new_h, new_w) == (h, w):
            resized = crop
        else:
            resized = self._resize_buf[: new_h * new_w * 3].reshape(new_h, new_w, 3)
            cv2.resize(crop, (new_w, new_h), dst=resized)
        spec = self.spec
        hwc_to_planar(resized, dst, rgb=spec.colour == "RGB", mean=self._mean, std=spec.std)
        return new_h / h

    def _fill_padding(self, planes: NDArray[np.float32]) -> None:
        """Write the normalised value of black into ``planes`` (3, h, w)."""
        means = self._mean if isinstance(self._mean, tuple) else (self._mean,) * 3
        for plane, m in zip(planes, means, strict=True):
            plane.fill(np.float32((0.0 - m) * np.float32(1.0 / self.spec.std)))

    def _faces(
        self,
        scores: NDArray[np.float32],
        boxes: NDArray[np.float32],
        kps: NDArray[np.float32],
        scale: float,
        frame_shape: tuple[int, ...],
        max_faces: int,
    ) -> list[Face]:
        """Candidates in input pixels → NMS'd faces in frame pixels (at most ``max_faces`` if > 0)."""
        if scores.size == 0:
            return []
        boxes = boxes / np.float32(scale)
        kps = kps / np.float32(scale)
        order = np.argsort(-scores, kind="stable")
        scores, boxes, kps = scores[order], boxes[order], kps[order]
        keep = nms(boxes, scores, self.nms_iou)
        scores, boxes, kps = scores[keep], boxes[keep], kps[keep]
        if max_faces > 0 and scores.shape[0] > max_faces:
            # insightface's choice: big faces near the centre first.
            area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
            cy, cx = frame_shape[0] // 2, frame_shape[1] // 2
            off = ((boxes[:, 0] + boxes[:, 2]) / 2 - cx) ** 2 + ((boxes[:, 1] + boxes[:, 3]) / 2 - cy) ** 2
            pick = np.argsort(area - off * 2.0)[::-1][:max_faces]
            scores, boxes, kps = scores[pick], boxes[pick], kps[pick]
        return [
            Face(
                box_xyxy=boxes[i].astype(np.float32),
                score=float(scores[i]),
                kps=kps[i].reshape(5, 2).astype(np.float32),
            )
            for i in range(scores.shape[0])
        ]

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        raise NotImplementedError


class ScrfdDetector(FaceDetector):
    """insightface SCRFD with keypoints: 9 outputs, 2 anchors per cell, distances × stride."""

    _cand: tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]] | None = None

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        size = self.input_size
        if self._cand is None:  # rows for every anchor: the most candidates one run can give
            n = sum(2 * (size // s) ** 2 for s in STRIDES)
            self._cand = (
                np.zeros(n, np.float32),
                np.zeros((n, 4), np.float32),
                np.zeros((n, 10), np.float32),
            )
        scores, boxes, kps = self._cand
        # One compiled loop over each stride's scores (the float32 operations of insightface's
        # numpy decode: anchors × stride, distances × stride).
        n = scrfd_decode(outs, size, STRIDES, self.threshold, scores, boxes, kps)
        return scores[:n], boxes[:n], kps[:n]


class YunetDetector(FaceDetector):
    """OpenCV Zoo YuNet: 12 named outputs (cls/obj/bbox/kps per stride), 1 anchor per cell, BGR 0..255."""

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        by_name = dict(zip(self.output_names, outs, strict=True))
        size = self.input_size
        all_scores, all_boxes, all_kps = [], [], []
        for stride in STRIDES:
            cls = np.clip(by_name[f"cls_{stride}"].reshape(-1), 0.0, 1.0)
            obj = np.clip(by_name[f"obj_{stride}"].reshape(-1), 0.0, 1.0)
            scores = np.sqrt(cls * obj)
            pos = np.nonzero(scores >= self.threshold)[0]
            if pos.size == 0:
                continue
            cells = self._anchors(size // stride, size // stride, stride, 1)[pos]
            s = np.float32(stride)
            b = by_name[f"bbox_{stride}"].reshape(-1, 4)[pos]
            centre = (cells + b[:, :2]) * s
            wh = np.exp(b[:, 2:]) * s
            boxes = np.concatenate([centre - wh / 2, centre + wh / 2], axis=1)
            kps = (by_name[f"kps_{stride}"].reshape(-1, 10)[pos] + np.tile(cells, 5)) * s
            all_scores.append(scores[pos].astype(np.float32))
            all_boxes.append(boxes.astype(np.float32))
            all_kps.append(kps.astype(np.float32))
        if not all_scores:
            empty = np.zeros((0,), np.float32)
            return empty, np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32)
        return np.concatenate(all_scores), np.concatenate(all_boxes), np.concatenate(all_kps)


@lru_cache(maxsize=16)
def retinaface_priors(
    height: int,
    width: int,
    steps: tuple[int, ...] = (8, 16, 32),
    min_sizes: tuple[tuple[int, ...], ...] = ((16, 32), (64, 128), (256, 512)),
) -> NDArray[np.float32]:
    """RetinaFace's prior boxes for an input of ``height`` x ``width``, as (N, 4) centre x, centre y,
    width, height in input pixels (biubug6/Pytorch_Retinaface ``PriorBox``: per step, row-major
    cells of ``ceil(size / step)``, each cell's ``min_sizes`` in order, centre at cell + 0.5).
    Computed once per input size (cached, read-only)."""
    parts = []
    for step, sizes in zip(steps, min_sizes, strict=True):
        rows, cols = -(-height // step), -(-width // step)
        ys, xs = np.mgrid[:rows, :cols]
        centres = (np.stack([xs, ys], axis=-1).reshape(-1, 1, 2) + 0.5) * step
        wh = np.asarray(sizes, np.float64).reshape(1, -1, 1).repeat(2, axis=2)
        cells = np.concatenate(
            [
                np.broadcast_to(centres, (rows * cols, len(sizes), 2)),
                np.broadcast_to(wh, (rows * cols, len(sizes), 2)),
            ],
            axis=2,
        )
        parts.append(cells.reshape(-1, 4))
    priors = np.ascontiguousarray(np.concatenate(parts).astype(np.float32))
    priors.setflags(write=False)
    return priors


class RetinaFaceDetector(FaceDetector):
    """biubug6/Pytorch_Retinaface exports (MobileNet-0.25, ResNet-50): three outputs (locations
    [1,N,4], softmaxed confidences [1,N,2] with column 1 the face, landmarks [1,N,10]) over prior
    boxes, decoded with the variances (0.1, 0.2). BGR minus the means (104, 117, 123), no scaling.

    Box: centre = prior centre + loc[:2] * 0.1 * prior size, size = prior size * exp(loc[2:] * 0.2);
    keypoint k = prior centre + landmarks[2k:2k+2] * 0.1 * prior size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        extra = self.spec.extra
        self.variances = tuple(float(v) for v in extra.get("variances", (0.1, 0.2)))
        steps = tuple(int(s) for s in extra.get("steps", STRIDES))
        min_sizes = tuple(
            tuple(int(m) for m in ms) for ms in extra.get("min_sizes", ((16, 32), (64, 128), (256, 512)))
        )
        self.priors = retinaface_priors(self.input_size, self.input_size, steps, min_sizes)
        self._mask = np.zeros(self.priors.shape[0], np.bool_)

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        loc, conf, landms = outs[0], outs[1], outs[2]
        n = self.priors.shape[0]
        if conf.size != 2 * n or loc.size != 4 * n or landms.size != 10 * n:
            raise ModelSignatureError(
                f"{self.path}: RetinaFace outputs hold {conf.size // 2} candidates but a "
                f"{self.input_size}x{self.input_size} input has {n} prior boxes — is models.detector "
                "a RetinaFace export with steps 8/16/32 and min sizes 16,32/64,128/256,512?"
            )
        scores = conf.reshape(n, 2)[:, 1]
        np.greater_equal(scores, np.float32(self.threshold), out=self._mask)
        pos = np.flatnonzero(self._mask)
        if pos.size == 0:
            empty = np.zeros((0,), np.float32)
            return empty, np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32)
        v0, v1 = np.float32(self.variances[0]), np.float32(self.variances[1])
        p = self.priors[pos]
        centre, size = p[:, :2], p[:, 2:]
        d = loc.reshape(n, 4)[pos]
        c = centre + d[:, :2] * v0 * size
        half = size * np.exp(d[:, 2:] * v1) * np.float32(0.5)
        boxes = np.concatenate([c - half, c + half], axis=1)
        lm = landms.reshape(n, 5, 2)[pos]
        kps = (centre[:, None, :] + lm * v0 * size[:, None, :]).reshape(-1, 10)
        return scores[pos].astype(np.float32), boxes.astype(np.float32), kps.astype(np.float32)


_DETECTORS: dict[str, type[FaceDetector]] = {
    "scrfd": ScrfdDetector,
    "yunet": YunetDetector,
    "retinaface": RetinaFaceDetector,
}


def make_detector(
    session: Any,
    spec: ModelSpec,
    path: str | Path,
    provider: str,
    det_size: int = 640,
    threshold: float = 0.5,
    max_faces: int = 0,
    *,
    iobinding: bool = True,
    device_id: int = 0,
) -> FaceDetector:
    """The detector class for ``spec.family``."""
    cls = _DETECTORS.get(spec.family, ScrfdDetector)
    return cls(
        session,
        spec,
        path,
        provider,
        det_size=det_size,
        threshold=threshold,
        max_faces=max_faces,
        iobinding=iobinding,
        device_id=device_id,
    )
