"""The face swapped in (:class:`SourceLatents`): the source photo's face, its latent for the
swapper, and the cache of latents by key, so switching back to a face costs nothing per frame."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

from kiosk.inference.classic import ClassicSwapper
from kiosk.inference.errors import ImageError, NoFaceError
from kiosk.processing.model_set import ModelSet
from kiosk.types import Face, FrameBGR

#: How many source latents :class:`SourceLatents` remembers by key (the ones used last).
LATENTS_KEPT = 8


@dataclass
class _SourceFace:
    face: Face
    image_bgr: FrameBGR


class SourceLatents:
    """The source latent the pipeline swaps in, and every latent it was given, by key.

    Owns the latents and the current source (``latent``, ``key``, ``face``); asks ``models`` (the
    pipeline's detector, embedder and swapper) to find a photo's face and compute its latent."""

    def __init__(self, models: ModelSet) -> None:
        self.models = models
        #: The latent swapped in (None until :meth:`set_source` or :meth:`use_latent`).
        self.latent: NDArray[np.float32] | None = None
        #: Its key (a library key, a file path, or a hash of the photo's pixels).
        self.key: str | None = None
        #: The source photo's face of the last :meth:`set_source` (None for a library latent).
        self.face: Face | None = None
        #: The latents used last, by key: at most :attr:`capacity` (a classic latent is 0.8 MB;
        #: a booth cycling through 1,000 library faces must not keep them all).
        self._latents: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self.capacity = LATENTS_KEPT

    @property
    def has_source(self) -> bool:
        return self.latent is not None

    def set_source(self, face_bgr: FrameBGR, key: str | None = None) -> Face:
        """Use the largest face in ``face_bgr`` as the face swapped in. Its latent is computed once
        and cached under ``key`` (default: a hash of the pixels), so switching back costs nothing.
        Raises :class:`NoFaceError` if the image has no face."""
        if face_bgr is None or face_bgr.ndim != 3 or face_bgr.shape[2] != 3:
            raise ImageError("source face: expected a BGR image of shape (H, W, 3)")
        if key is None:
            key = hashlib.blake2b(np.ascontiguousarray(face_bgr).data, digest_size=16).hexdigest()
        face = self._find_source_face(face_bgr)
        latent = self._latents.get(key)
        if latent is None:
            latent = self.source_latent(face.image_bgr, face.face)
        self._keep(key, latent)
        self.latent = latent
        self.key = key
        self.face = face.face
        return face.face

    def use_latent(self, latent: NDArray[np.float32], key: str) -> None:
        """Swap in a precomputed source latent (a face library entry); costs nothing per frame."""
        self._keep(key, latent)
        self.latent = latent
        self.key = key

    @property
    def kept(self) -> int:
        """How many latents are remembered now (at most :attr:`capacity`)."""
        return len(self._latents)

    def _keep(self, key: str, latent: NDArray[np.float32]) -> None:
        self._latents[key] = latent
        self._latents.move_to_end(key)
        while len(self._latents) > self.capacity:
            self._latents.popitem(last=False)

    def find_source_faces(self, face_bgr: FrameBGR) -> tuple[list[Face], FrameBGR]:
        """All faces of a source photo, largest first, and the image they refer to (the photo, or
        the photo with a border when the face filled it). Used by the face library."""
        detector = self.models.detector
        faces = detector.detect(face_bgr)
        image = face_bgr
        if not faces:
            # An already tightly cropped face (e.g. a 112x112 aligned crop) fills the frame and is
            # missed by the detector; give it a border and look again.
            pad = max(face_bgr.shape[:2]) // 2 + 8
            border = cv2.copyMakeBorder(face_bgr, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(0, 0, 0))
            image = np.asarray(border, dtype=np.uint8)
            faces = detector.detect(image)
        faces.sort(key=lambda f: f.area_px, reverse=True)
        return faces, image

    def source_latent(self, image_bgr: FrameBGR, face: Face) -> NDArray[np.float32]:
        """The swapper's source latent for ``face`` in ``image_bgr``: embedding @ emap, normalised
        (InSwapper), or the photo's face aligned to the swap template with its keypoints and its mesh
        (classic)."""
        swapper = self.models.swapper
        if isinstance(swapper, ClassicSwapper):
            return swapper.source_latent(image_bgr, face.kps, face)
        assert self.models.embedder is not None, "a neural swapper needs the embedder"
        return swapper.latent(self.models.embedder.embed(image_bgr, face.kps))

    def _find_source_face(self, face_bgr: FrameBGR) -> _SourceFace:
        faces, image = self.find_source_faces(face_bgr)
        if not faces:
            raise NoFaceError(
                "no face found in the source image — use a clear, frontal, well-lit photo of one face"
            )
        return _SourceFace(faces[0], image)
