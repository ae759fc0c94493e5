"""The booth's face thumbnails on the GPU: packed into one atlas texture (mipmapped, with
replicated gutters so the mipmaps do not bleed) that is built and uploaded again only when the set
of face keys changes, or when a face the screen needs is not in it.

A library of up to :data:`MAX_ATLAS_FACES` faces is packed whole. A larger one (1,000 photos) is
packed as a window of that many faces around the carousel's position (its visible tiles and the
attract face always among them), rebuilt when the carousel moves past the window's edge; so only
that many thumbnails are decoded, packed and held on the GPU at once, whatever the library's size.

:func:`build_thumb_atlas` is the packing (pure, no GL); :class:`ThumbAtlas` owns the texture and
each thumbnail's uv rect. Main (GL) thread only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import moderngl
import numpy as np
from numpy.typing import NDArray

from kiosk.render.booth_ui import FaceThumb
from kiosk.render.ui_quads import UV

#: Largest side of the thumbnail atlas texture.
MAX_ATLAS_PX = 4096
#: Most thumbnails in the atlas at once (a larger library is packed as a window of this many).
MAX_ATLAS_FACES = 48


def square_thumb(img: NDArray[np.uint8], side: int) -> NDArray[np.uint8]:
    """``img`` (H, W, 3) centre-cropped to a square and resized to ``side``."""
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(f"expected a (S, S, 3) uint8 BGR thumbnail, got {img.shape} {img.dtype}")
    h, w = img.shape[:2]
    s = min(h, w)
    y0, x0 = (h - s) // 2, (w - s) // 2
    sq = img[y0 : y0 + s, x0 : x0 + s]
    if s == side:
        return np.ascontiguousarray(sq)
    interp = cv2.INTER_AREA if s > side else cv2.INTER_CUBIC
    return np.asarray(cv2.resize(sq, (side, side), interpolation=interp), dtype=np.uint8)


def build_thumb_atlas(
    thumbs: Sequence[NDArray[np.uint8]],
) -> tuple[NDArray[np.uint8], NDArray[np.float32]]:
    """Pack thumbnails into one BGR image: a grid of square cells with replicated gutters (so
    mipmaps do not bleed). Returns the atlas (H, W, 3) and each thumbnail's uv rect (n, 4)."""
    n = len(thumbs)
    if n == 0:
        return np.zeros((1, 1, 3), np.uint8), np.zeros((0, 4), np.float32)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    cell = int(min(256, max(32, max(min(t.shape[:2]) for t in thumbs))))
    gutter = max(2, cell // 16)
    while cols * (cell + 2 * gutter) > MAX_ATLAS_PX and cell > 16:
        cell //= 2
        gutter = max(2, cell // 16)
    pitch = cell + 2 * gutter
    atlas = np.zeros((rows * pitch, cols * pitch, 3), np.uint8)
    uvs = np.zeros((n, 4), np.float32)
    height, width = atlas.shape[:2]
    for i, thumb in enumerate(thumbs):
        r, c = divmod(i, cols)
        sq = square_thumb(thumb, cell)
        padded = cv2.copyMakeBorder(sq, gutter, gutter, gutter, gutter, cv2.BORDER_REPLICATE)
        atlas[r * pitch : (r + 1) * pitch, c * pitch : (c + 1) * pitch] = padded
        x0, y0 = c * pitch + gutter, r * pitch + gutter
        uvs[i] = (x0 / width, y0 / height, (x0 + cell) / width, (y0 + cell) / height)
    return atlas, uvs


def atlas_window(n: int, centre: int, wanted: Sequence[int], size: int = MAX_ATLAS_FACES) -> list[int]:
    """The face indices to pack (ascending): all ``n`` when they fit in ``size``; else ``wanted``
    and the ring of faces around ``centre``, ``size`` in all."""
    if n <= size:
        return list(range(n))
    held = {i % n for i in wanted}
    for d in range(n):
        if len(held) >= size:
            break
        held.add((centre + (d + 1) // 2 * (1 if d % 2 else -1)) % n)  # centre, +1, -1, +2, -2, ...
    return sorted(held)


class ThumbAtlas:
    """The atlas texture of the faces last synced (or of a window of them, see the module) and
    where each face sits in it."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self._ctx = ctx
        self._texture: moderngl.Texture | None = None
        self._uv = np.zeros((0, 4), np.float32)
        #: The face keys last synced (None: nothing synced yet, or released).
        self.keys: tuple[str, ...] | None = None
        #: Which of them the texture holds (by index): all, or a window around the carousel.
        self.held: tuple[int, ...] = ()
        self._cell: dict[int, int] = {}  # face index -> its cell in the atlas
        #: How many times the atlas was built and uploaded.
        self.builds = 0

    @property
    def texture(self) -> moderngl.Texture | None:
        """The atlas texture; None while there are no faces."""
        return self._texture

    def sync(self, faces: Sequence[FaceThumb], centre: int = 0, wanted: Sequence[int] = ()) -> None:
        """Hold ``faces``' thumbnails (those ``wanted`` on screen now and the window around
        ``centre`` when they are more than :data:`MAX_ATLAS_FACES`): builds and uploads the atlas
        only when their keys changed or a wanted face is not in it."""
        keys = tuple(f.key for f in faces)
        n = len(keys)
        if keys == self.keys and (not n or all(i % n in self._cell for i in wanted)):
            return
        self._release_texture()
        self.keys = keys
        if not keys:
            self._uv = np.zeros((0, 4), np.float32)
            self.held, self._cell = (), {}
            return
        self.held = tuple(atlas_window(n, centre % n, wanted))
        self._cell = {i: c for c, i in enumerate(self.held)}
        pixels, self._uv = build_thumb_atlas([faces[i].pixels() for i in self.held])
        h, w = pixels.shape[:2]
        tex = self._ctx.texture((w, h), 3, np.ascontiguousarray(pixels), alignment=1)
        tex.swizzle = "BGR1"
        tex.build_mipmaps()
        tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
        tex.repeat_x = tex.repeat_y = False
        self._texture = tex
        self.builds += 1

    def uv(self, index: int) -> UV:
        """The uv rect of face ``index`` of the faces last synced (of the nearest face held when
        it is not in the atlas: a tile fading in at the carousel's edge, for one frame)."""
        cell = self._cell.get(index)
        if cell is None:
            cell = min(self._cell.items(), key=lambda kv: abs(kv[0] - index))[1] if self._cell else 0
        u = self._uv[cell]
        return float(u[0]), float(u[1]), float(u[2]), float(u[3])

    def release(self) -> None:
        """Free the texture; the next :meth:`sync` builds the atlas again."""
        self._release_texture()
        self.keys = None
        self.held, self._cell = (), {}

    def _release_texture(self) -> None:
        if self._texture is not None:
            self._texture.release()
            self._texture = None
