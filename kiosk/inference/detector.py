"""Face detectors: SCRFD (insightface ``det_10g``/``det_2.5g``/``det_500m``) and YuNet.

Both letterbox the frame at the top-left of a square ``det_size`` input (resize into a reused
buffer, then one fused pass to normalised planar float), run the session once (IOBinding into
preallocated outputs), decode only the candidates above the threshold with cached anchor grids, apply
NMS and keep at most ``max_faces``. Results are :class:`~kiosk.types.Face` records in frame pixels.
The SCRFD path reproduces insightface 2.1's ``SCRFD.detect`` (same letterbox, decode, NMS, order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.errors import ImageError
from kiosk.inference.kernels import hwc_to_planar, nms_sorted
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
        if len(fixed) == 2 and (fixed[0] != det_size or fixed[1] != det_size):
            if fixed[0] != fixed[1]:
                raise ImageError(f"{path}: detectors with a non-square fixed input are not supported")
            det_size = fixed[0]  # a fixed-size export decides its own input size
        self.det_size = int(det_size)
        self.output_names = [o.name for o in session.get_outputs()]
        self.runner = SessionRunner(
            session, provider, iobinding=iobinding, device_id=device_id, output_names=self.output_names
        )
        self._blob = np.zeros((1, 3, self.det_size, self.det_size), np.float32)
        self._resize_buf = np.zeros(self.det_size * self.det_size * 3, np.uint8)
        self._resized = self._resize_buf[:3].reshape(1, 1, 3)
        self._letterbox_key: tuple[int, int] | None = None
        self._anchor_cache: dict[tuple[int, int, int], NDArray[np.float32]] = {}

    def resized(self, det_size: int) -> FaceDetector:
        """The same model (same session) at another input size, returning every face it finds (no
        ``max_faces``): what tracking runs on the small region around a face."""
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
        )

    # -- preprocessing ---------------------------------------------------------------------------
    def _letterbox(self, frame_bgr: FrameBGR) -> float:
        """Resize ``frame_bgr`` into the top-left of the reused input blob; return the scale used.

        The frame is resized into a reused buffer, then converted to normalised planar float in one
        fused pass (:func:`~kiosk.inference.kernels.hwc_to_planar`). The padding is the normalised
        value of black, written once per frame size (the image never overwrites it)."""
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
            self._blob.fill(np.float32((0.0 - spec.mean) * np.float32(1.0 / spec.std)))
        if (new_h, new_w) == (h, w):
            resized = frame_bgr  # already the input size (a region crop): no resize, no copy
        else:
            resized = self._resized
            cv2.resize(frame_bgr, (new_w, new_h), dst=resized)
        hwc_to_planar(resized, self._blob[0], rgb=spec.colour == "RGB", mean=spec.mean, std=spec.std)
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
        scale = self._letterbox(frame_bgr)
        outs = self.runner.run({self.input_name: self._blob})
        scores, boxes, kps = self._decode(outs)
        if scores.size == 0:
            return []
        boxes = boxes / np.float32(scale)
        kps = kps / np.float32(scale)
        order = np.argsort(-scores, kind="stable")
        scores, boxes, kps = scores[order], boxes[order], kps[order]
        keep = nms(boxes, scores, self.nms_iou)
        scores, boxes, kps = scores[keep], boxes[keep], kps[keep]
        if self.max_faces > 0 and scores.shape[0] > self.max_faces:
            # insightface's choice: big faces near the centre first.
            area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
            cy, cx = frame_bgr.shape[0] // 2, frame_bgr.shape[1] // 2
            off = ((boxes[:, 0] + boxes[:, 2]) / 2 - cx) ** 2 + ((boxes[:, 1] + boxes[:, 3]) / 2 - cy) ** 2
            pick = np.argsort(area - off * 2.0)[::-1][: self.max_faces]
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

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        size = self.det_size
        all_scores, all_boxes, all_kps = [], [], []
        for i, stride in enumerate(STRIDES):
            scores = outs[i].reshape(-1)
            pos = np.nonzero(scores >= self.threshold)[0]
            if pos.size == 0:
                continue
            anchors = self._anchors(size // stride, size // stride, stride, 2)[pos] * np.float32(stride)
            dist = outs[i + 3].reshape(-1, 4)[pos] * np.float32(stride)
            kdist = outs[i + 6].reshape(-1, 10)[pos] * np.float32(stride)
            boxes = np.concatenate([anchors - dist[:, :2], anchors + dist[:, 2:]], axis=1)
            kps = kdist + np.tile(anchors, 5)
            all_scores.append(scores[pos])
            all_boxes.append(boxes)
            all_kps.append(kps)
        if not all_scores:
            empty = np.zeros((0,), np.float32)
            return empty, np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32)
        return np.concatenate(all_scores), np.concatenate(all_boxes), np.concatenate(all_kps)


class YunetDetector(FaceDetector):
    """OpenCV Zoo YuNet: 12 named outputs (cls/obj/bbox/kps per stride), 1 anchor per cell, BGR 0..255."""

    def _decode(
        self, outs: list[NDArray[np.float32]]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
        by_name = dict(zip(self.output_names, outs, strict=True))
        size = self.det_size
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
    cls = YunetDetector if spec.family == "yunet" else ScrfdDetector
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
