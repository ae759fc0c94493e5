"""InSwapper 128: the target face aligned to the 128 template + the source latent → the swapped crop.

``emap`` is read from the model's last initializer (as insightface does); a source's latent
``normalise(e @ emap)`` is computed once per source embedding and cached by the caller.

Swap resolution 256 or 512 (:meth:`InSwapper.align_tiles` + :meth:`InSwapper.infer_tiles`): the face is
aligned at S = 128·k with the 128 template scaled by k, and the S crop is split into k² sub-pixel
shifted samplings, tile (i, j) = ``crop[i::k, j::k]``: each is a 128 crop of the same face offset
by (j/k, i/k) px of the 128 crop (tile (0, 0) is exactly the plain 128 crop, because the S
crop's matrix is k times the 128 one). The swapper runs on each (one
``session.run`` with a batch of k² when the model has a dynamic batch axis; the published
inswapper_128 files are fixed at batch 1, so k² runs) and the outputs are put back where their
samples came from, ``out[i::k, j::k] = swapped(i, j)``: one S crop at k² times the swapper's cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import numpy_helper

from kiosk.inference.align import align_matrix, warp_crop
from kiosk.inference.crop_model import AlignedCropModel
from kiosk.inference.errors import ModelCorruptError, ModelSignatureError
from kiosk.inference.kernels import crop_to_tiles, planar_to_bgr, tiles_to_bgr
from kiosk.inference.specs import ModelSpec
from kiosk.types import Affine2x3, Embedding, FrameBGR, Landmarks5


def load_emap(path: str | Path) -> NDArray[np.float32]:
    """The swapper's ``emap``: the last initializer of the graph, 512x512."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelCorruptError(
            f"{path}: cannot read the ONNX graph ({exc}) — run: kiosk models fetch"
        ) from None
    if not model.graph.initializer:
        raise ModelSignatureError(
            f"{path}: swapper has no initializers, so no emap (expected emap 512x512 last)"
        )
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.shape != (512, 512):
        raise ModelSignatureError(
            f"{path}: the last initializer (emap) must be 512x512, got {emap.shape} — is this inswapper_128?"
        )
    return emap


class InSwapper(AlignedCropModel):
    """``swap(frame_bgr, kps, latent)`` → (128x128 BGR crop, frame→crop 2x3 matrix)."""

    default_size_px = 128
    default_template = "arcface_128"

    def __init__(
        self,
        session: Any,
        spec: ModelSpec,
        path: str | Path,
        provider: str,
        *,
        iobinding: bool = True,
        device_id: int = 0,
    ) -> None:
        super().__init__(session, spec, path, provider, iobinding=iobinding, device_id=device_id)
        self.emap = load_emap(path)
        self.target_name = self.input_name
        self.source_name = session.get_inputs()[1].name
        self._latent_of: NDArray[np.float32] | None = None
        self._latent_feed = np.zeros((1, 512), self._dtype)
        dims = [session.get_inputs()[i].shape for i in (0, 1)] + [session.get_outputs()[0].shape]
        #: The graph takes a batch of targets and sources (dynamic first axis on every tensor).
        self.batchable = all(len(d) > 0 and not isinstance(d[0], int) for d in dims)
        self._tiles: _Tiles | None = None

    def latent(self, embedding: Embedding) -> NDArray[np.float32]:
        """Source latent (1, 512): ``e @ emap`` normalised, ``e`` the unit source embedding."""
        e = np.asarray(embedding, np.float32).reshape(1, -1)
        lat = e @ self.emap
        lat /= np.linalg.norm(lat)
        return lat.astype(np.float32)

    def align(self, frame_bgr: FrameBGR, kps: Landmarks5) -> Affine2x3:
        """Warp the target face into the reused 128 crop and input blob; return the frame→crop matrix."""
        return self._load_crop(frame_bgr, kps, rgb=True, mean=0.0, std=self.spec.std)

    def infer(self, latent: NDArray[np.float32]) -> NDArray[np.float32]:
        """Run the model on the aligned blob: (1,3,128,128) RGB in [0,1]. With IOBinding the array
        is the runner's reused output buffer: valid until the next call."""
        if latent is not self._latent_of:  # a new source face: copy it into the bound input once
            np.copyto(self._latent_feed, np.asarray(latent).reshape(1, -1), casting="same_kind")
            self._latent_of = latent
        feeds = {self.target_name: self._feed, self.source_name: self._latent_feed}
        out = self.runner.run(feeds)[0]
        return out if out.dtype == np.float32 else out.astype(np.float32)

    def warm_up(self) -> float:
        """One run on zeros (captures the CUDA graph when enabled); the milliseconds it took."""
        self._feed.fill(0)
        self._latent_of = None
        self._latent_feed.fill(0)
        return self.runner.warm_up({self.target_name: self._feed, self.source_name: self._latent_feed})

    # -- swap resolution 256 / 512 ------------------------------------------------------------------
    def _tile_buffers(self, size_px: int) -> _Tiles:
        t = self._tiles
        if t is None or t.size_px != size_px:
            base = self.size_px
            if size_px % base or size_px < base:
                raise ValueError(f"swap resolution must be a multiple of {base}, got {size_px}")
            t = _Tiles(size_px, size_px // base, base, self._dtype, self.batchable)
            self._tiles = t
        return t

    @property
    def tiles_crop(self) -> FrameBGR:
        """The visitor's face aligned at the swap resolution by the last :meth:`align_tiles` (BGR
        uint8, overwritten by the next call): what colour correction compares the swap with."""
        if self._tiles is None:
            raise RuntimeError("tiles_crop before align_tiles")
        return self._tiles.crop

    def align_tiles(self, frame_bgr: FrameBGR, kps: Landmarks5, size_px: int) -> Affine2x3:
        """Align the target face at ``size_px`` (the 128 template scaled) and split it into the
        k² sub-pixel shifted 128 samplings of :meth:`infer_tiles`; the frame→crop matrix of the
        ``size_px`` crop."""
        t = self._tile_buffers(size_px)
        m = align_matrix(kps, self.spec.template or self.default_template, size_px)
        warp_crop(frame_bgr, m, size_px, out=t.crop)
        # crop[y*k + i, x*k + j] → tile i*k + j [c, y, x], RGB, x/255: one pass.
        crop_to_tiles(t.crop, t.tiles, t.k, mean=0.0, std=self.spec.std)
        if t.feed is not t.tiles:
            np.copyto(t.feed, t.tiles, casting="same_kind")
        return m

    def infer_tiles(self, latent: NDArray[np.float32], out_bgr: FrameBGR | None = None) -> FrameBGR:
        """Swap the k² tiles of the last :meth:`align_tiles` and interleave them into one
        (size_px, size_px) BGR crop (into ``out_bgr`` when given)."""
        t = self._tiles
        if t is None:
            raise RuntimeError("infer_tiles before align_tiles")
        n = t.k * t.k
        if t.batchable:
            if t.latent_of is not latent:
                np.copyto(t.latents, np.broadcast_to(np.asarray(latent).reshape(1, -1), t.latents.shape))
                t.latent_of = latent
            pred = self.runner.run({self.target_name: t.feed, self.source_name: t.latents})[0]
            np.copyto(t.out_tiles, pred.reshape(t.out_tiles.shape), casting="same_kind")
        else:
            for i in range(n):
                np.copyto(self._feed[0], t.feed[i], casting="same_kind")
                np.copyto(t.out_tiles[i], self.infer(latent)[0], casting="same_kind")
        if out_bgr is None:
            out_bgr = np.empty((t.size_px, t.size_px, 3), np.uint8)
        # tile i*k + j [c, y, x] → out[y*k + i, x*k + j], BGR, insightface's clip and truncate.
        return tiles_to_bgr(t.out_tiles, out_bgr, t.k, mul=255.0)

    def swap_at(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32], size_px: int
    ) -> tuple[FrameBGR, Affine2x3]:
        """Swapped face as a new (size_px, size_px) BGR crop and its frame→crop matrix; 128 is the
        plain :meth:`swap`."""
        if size_px == self.size_px:
            return self.swap(frame_bgr, kps, latent)
        m = self.align_tiles(frame_bgr, kps, size_px)
        return self.infer_tiles(latent), m

    @staticmethod
    def to_bgr(pred: NDArray[np.float32], out: FrameBGR | None = None) -> FrameBGR:
        """Model output → a 128x128 BGR uint8 crop (insightface's clip-and-truncate), into ``out``
        when given (one fused pass), else a new array."""
        if out is None:
            out = np.empty((pred.shape[2], pred.shape[3], 3), np.uint8)
        return planar_to_bgr(np.asarray(pred[0], np.float32), out, add=0.0, mul=255.0)

    def swap_raw(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], Affine2x3]:
        """Raw model output (1,3,128,128) RGB in [0,1] (a new array) and the frame→crop matrix."""
        m = self.align(frame_bgr, kps)
        return np.array(self.infer(latent), np.float32), m

    def swap(
        self, frame_bgr: FrameBGR, kps: Landmarks5, latent: NDArray[np.float32]
    ) -> tuple[FrameBGR, Affine2x3]:
        """Swapped face as a new 128x128 BGR uint8 crop, and the frame→crop matrix."""
        m = self.align(frame_bgr, kps)
        return self.to_bgr(self.infer(latent)), m


class _Tiles:
    """Reused buffers of one swap resolution: the big crop and the k² tiles in and out."""

    def __init__(self, size_px: int, k: int, base: int, dtype: type, batchable: bool) -> None:
        self.size_px, self.k, self.batchable = size_px, k, batchable
        n = k * k
        self.crop = np.zeros((size_px, size_px, 3), np.uint8)
        self.tiles = np.zeros((n, 3, base, base), np.float32)
        self.feed = self.tiles if dtype == np.float32 else self.tiles.astype(dtype)
        self.latents: NDArray[Any] = np.zeros((n, 512), dtype)
        self.latent_of: NDArray[np.float32] | None = None
        self.out_tiles = np.zeros((n, 3, base, base), np.float32)
