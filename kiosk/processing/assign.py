"""``processing.assign: per_visitor``: a face from the library for each visitor on screen.

Each tracked face (a visitor: :class:`~kiosk.processing.tracking.FaceTracker`'s track id) gets an
*offset* when it first appears, in the order visitors appear (track ids grow with each new face):
the smallest offset no visitor on screen has, or, when every face of the library is taken, the
one the fewest visitors share (the lowest first). Its face is the library face ``offset`` places after the
selected one, so the first visitor wears the selected face, the second the next one, and
``next_face`` / ``prev_face`` (which move the selection) shift every visitor's face by one. The offset
is kept while the track lives; a visitor who leaves and comes back is a new track and may get
another face. Without tracking (no ids) the faces are numbered left to right in each frame.

Owned by the inference thread (the processing stage's one caller); nothing here is shared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kiosk.types import Face


class VisitorFaces:
    """Offsets (library places after the selected face) of the visitors on screen, by track id."""

    def __init__(self) -> None:
        self._offsets: dict[int, int] = {}

    def offsets(self, ids: Sequence[int | None], faces: Sequence[Face], n_library: int) -> list[int]:
        """The offset of each face (``ids[i]`` its track id, None without tracking) among
        ``n_library`` faces; forgets the visitors no longer on screen."""
        if n_library <= 0:
            return [0] * len(faces)
        if not ids or any(i is None for i in ids):
            order = sorted(
                range(len(faces)), key=lambda k: float(faces[k].box_xyxy[0] + faces[k].box_xyxy[2])
            )
            out = [0] * len(faces)
            for rank, k in enumerate(order):
                out[k] = rank % n_library
            return out
        live = {int(i) for i in ids if i is not None}
        for gone in [t for t in self._offsets if t not in live]:
            del self._offsets[gone]
        for track in sorted(t for t in live if t not in self._offsets):  # in the order they appeared
            used = Counter(o % n_library for o in self._offsets.values())
            self._offsets[track] = min(range(n_library), key=lambda o: (used[o], o))
        return [self._offsets[int(i)] % n_library for i in ids if i is not None]

    def reset(self) -> None:
        self._offsets.clear()
