"""A large face library costs little memory (issue 27): an entry holds its thumbnail as a small
JPEG and reads its latent back from the disk cache when it is worn, only the few latents used last
stay in memory, and a latent whose cache entry went missing is scanned again from its photo.

No models: a stand-in analyzer gives every photo one face and a latent the size of the classic
swapper's (a 256×256 crop as float32, 0.8 MB), so 50 photos would hold 39 MB if kept."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import cv2
import numpy as np
import pytest

from kiosk.booth.faces import FaceLibrary
from kiosk.processing.source_latents import SourceLatents
from kiosk.types import Face

CLASSIC_FLOATS = 12 + 256 * 256 * 3  # kiosk.inference.classic.pack_source's layout


class ClassicSized:
    """One face per photo, a latent of the classic swapper's size that depends on the photo."""

    def __init__(self) -> None:
        self.analyzed = 0

    def find_source_faces(self, image):
        self.analyzed += 1
        h, w = image.shape[:2]
        kps = np.array(
            [[w * 0.35, h * 0.4], [w * 0.65, h * 0.4], [w / 2, h / 2], [w * 0.4, h * 0.7], [w * 0.6, h * 0.7]]
        )
        return [
            Face(np.array([w * 0.2, h * 0.2, w * 0.8, h * 0.8], np.float32), 0.9, kps.astype(np.float32))
        ], image

    def source_latent(self, image, face):
        out = np.empty(CLASSIC_FLOATS, np.float32)
        out[:] = float(image[0, 0, 0])  # tells the photos apart
        return out


def _photos(folder: Path, n: int) -> list[Path]:
    folder.mkdir()
    paths = []
    for i in range(n):
        img = np.full((96, 96, 3), (i * 5) % 256, np.uint8)
        img[40:60, 10 + i % 60 : 30 + i % 60] = 255  # distinct bytes, distinct cache keys
        path = folder / f"p{i:03d}.png"
        assert cv2.imwrite(str(path), img)
        paths.append(path)
    return paths


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_fifty_photos_hold_a_few_kb_each_not_their_latents(tmp_path: Path, warm: bool) -> None:
    folder, cache = tmp_path / "faces", tmp_path / "cache"
    _photos(folder, 50)
    if warm:  # a second start: every entry comes from the cache
        FaceLibrary(folder, cache).refresh(ClassicSized(), "m")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        lib = FaceLibrary(folder, cache)
        lib.refresh(ClassicSized(), "m")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    entries = lib.snapshot.entries
    assert len(entries) == 50
    # Old code: 50 × (0.8 MB latent + 77 KB thumbnail) = 43 MB. Now the thumbnails' JPEGs and
    # the bookkeeping: under 40 KB a photo.
    assert held < 50 * 40_000, f"the library holds {held / 1e6:.1f} MB for 50 photos"


def test_a_latent_is_read_back_when_worn_and_only_a_few_stay_in_memory(tmp_path: Path) -> None:
    folder = tmp_path / "faces"
    _photos(folder, 20)
    lib = FaceLibrary(folder, tmp_path / "cache", thumb_px=64)
    lib.refresh(ClassicSized(), "m")
    entries = lib.snapshot.entries
    for i, e in enumerate(entries):
        latent = e.latent
        assert latent is not None and latent.shape == (CLASSIC_FLOATS,)
        assert latent[0] == float((i * 5) % 256)  # its own photo's, read back
        thumb = e.thumb_bgr
        assert thumb.shape == (64, 64, 3) and thumb.dtype == np.uint8
        assert abs(int(thumb[32, 5, 0]) - (i * 5) % 256) <= 3  # the JPEG keeps the picture
    store = lib._scan.scanner.store
    assert store.held() <= store.capacity < len(entries)
    assert entries[-1].latent is entries[-1].latent  # the one used last is not read again


def test_a_latent_whose_cache_entry_is_gone_is_scanned_again(tmp_path: Path) -> None:
    folder, cache = tmp_path / "faces", tmp_path / "cache"
    _photos(folder, 3)
    lib = FaceLibrary(folder, cache)
    spy = ClassicSized()
    lib.refresh(spy, "m")
    assert spy.analyzed == 3
    victim = lib.snapshot.entries[1]
    (cache / f"{victim.key}.npz").unlink()  # someone cleared the cache
    assert victim.latent is None  # the kiosk keeps the face it wears meanwhile
    lib.refresh(spy, "m")
    assert spy.analyzed == 4  # that photo, and only that one, ran the models again
    again = lib.snapshot.entry(victim.key)
    assert again is not None and again.latent is not None and (cache / f"{victim.key}.npz").is_file()


def test_an_unwritable_cache_keeps_the_latents_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "faces"
    _photos(folder, 2)
    lib = FaceLibrary(folder, tmp_path / "cache")
    monkeypatch.setattr(lib._scan.scanner._cache, "save", lambda *a: False)
    lib.refresh(ClassicSized(), "m")
    assert all(e.holds_latent and e.latent is not None for e in lib.snapshot.entries)


def test_the_pipeline_remembers_only_the_latents_used_last() -> None:
    sources = SourceLatents(models=None)  # type: ignore[arg-type]  # use_latent needs no model
    latents = [np.full(CLASSIC_FLOATS, i, np.float32) for i in range(50)]
    for i, latent in enumerate(latents):  # a staff member cycles through 50 library faces
        sources.use_latent(latent, f"k{i}")
    assert sources.latent is latents[-1] and sources.key == "k49"
    # Old code kept every latent ever swapped in: 50 × 0.8 MB, 0.8 GB for a 1,000-face library.
    assert len(sources._latents) <= 8


def test_a_warm_start_reads_the_thumbnails_not_the_latents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: with a warm cache a start reads of each entry its thumbnail only (the latent, 0.8
    MB for the classic swap, stays on disk until the face is worn) and decodes no photo. Before,
    every entry's latent was read, checked and copied, and the reader's results that waited for
    the writer held them all (1,000 photos: 0.8 GB)."""
    from kiosk.booth.face_cache import LatentCache

    folder, cache = tmp_path / "faces", tmp_path / "cache"
    _photos(folder, 20)
    FaceLibrary(folder, cache).refresh(ClassicSized(), "m")  # the first start fills the cache
    read_latents: list[str] = []
    real_load = LatentCache.load

    def load(self: LatentCache, key: str):  # type: ignore[no-untyped-def]
        read_latents.append(key)
        return real_load(self, key)

    monkeypatch.setattr(LatentCache, "load", load)
    monkeypatch.setattr(cv2, "imdecode", lambda *a: pytest.fail("a warm start decoded a photo"))
    warm, spy = FaceLibrary(folder, cache), ClassicSized()
    warm.refresh(spy, "m")
    entries = warm.snapshot.entries
    assert len(entries) == 20 and spy.analyzed == 0 and read_latents == []
    monkeypatch.undo()
    assert entries[3].latent is not None and entries[3].latent[0] == float(15)  # read back when worn
