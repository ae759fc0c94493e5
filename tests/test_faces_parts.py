"""The face library's collaborators on their own: the disk cache, the folder (listing, names and
order), one photo's scan and the writer claim. No models (a fake analyzer), no library."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from test_faces_snapshot import FakeAnalyzer

from kiosk.booth.face_cache import LatentCache, cache_key
from kiosk.booth.face_scan import FaceEntry, PhotoScanner, Scanned
from kiosk.booth.library_writer import LibraryWriterError, WriterClaim
from kiosk.booth.photo_files import PhotoRead
from kiosk.booth.photo_folder import PhotoFolder, Rescan


def test_the_latent_cache_round_trips_ignores_stale_and_prunes_what_is_not_kept(tmp_path: Path) -> None:
    cache = LatentCache(tmp_path, thumb_px=8)
    latent, thumb = np.arange(4, dtype=np.float32), np.full((8, 8, 3), 7, np.uint8)
    key, other = cache_key("a" * 64, "c" * 64), cache_key("b" * 64, "c" * 64)
    assert key == "a" * 24 + "-" + "c" * 12
    assert cache.load(key) is None  # missing
    cache.save(key, latent, thumb)
    cache.save(other, latent, thumb)
    loaded = cache.load(key)
    assert loaded is not None and np.array_equal(loaded[0], latent) and np.array_equal(loaded[1], thumb)
    assert LatentCache(tmp_path, thumb_px=16).load(key) is None  # stale: another thumbnail size
    assert (tmp_path / f"{key}.npz").exists()  # a stale entry is left to be overwritten
    (tmp_path / f"{other}.npz").write_bytes(b"not a zip")
    assert cache.load(other) is None and not (tmp_path / f"{other}.npz").exists()  # corrupt: deleted
    cache.save(other, latent, thumb)
    old_tmp, new_tmp = tmp_path / f"{key}.npz.1.tmp", tmp_path / f"{key}.npz.2.tmp"
    old_tmp.write_bytes(b"")
    new_tmp.write_bytes(b"")
    an_hour_ago = time.time() - 3700
    os.utime(old_tmp, (an_hour_ago, an_hour_ago))
    (tmp_path / "notes.txt").write_text("not ours")
    cache.prune([key])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{key}.npz", new_tmp.name, "notes.txt"])


def test_the_folder_keeps_known_photos_while_it_is_away(tmp_path: Path) -> None:
    folder = tmp_path / "faces"
    extra = tmp_path / "me.png"
    pf = PhotoFolder(folder, (extra,))
    known = [folder / "ann.png", extra]
    photos, listed, problem = pf.listing(known)
    assert photos == [extra, folder / "ann.png"] and not listed and "faces folder not found" in problem
    folder.mkdir()
    cv2.imwrite(str(folder / "ben.png"), np.zeros((4, 4, 3), np.uint8))
    (folder / "notes.txt").write_text("")
    assert pf.listing(known) == ([extra, folder / "ben.png"], True, "")  # listed: only what is there
    assert PhotoFolder(None, ()).listing(known) == ([], True, "")


def test_the_folder_names_and_orders_the_entries(tmp_path: Path) -> None:
    folder = tmp_path / "faces"
    folder.mkdir()
    extra = tmp_path / "me.png"
    pf = PhotoFolder(folder, (extra,))
    (folder / "faces.yaml").write_text("- {file: z.png, name: Zelda}\n- {file: y.png}\n")
    stamp, names = pf.read_names(None, ({}, [], ""))
    assert stamp is not None and names == ({"z.png": "Zelda"}, ["z.png", "y.png"], "")
    assert pf.read_names(stamp, ({}, ["cached"], ""))[1] == ({}, ["cached"], "")  # unchanged: not read

    def found(path: Path) -> Scanned:
        return Scanned(
            (1, 1),
            FaceEntry(path.name, path.stem, path, np.zeros(1, np.float32), np.zeros((1, 1, 3), np.uint8)),
            "",
        )

    seen = {p: found(p) for p in (folder / "a.png", folder / "y.png", extra, folder / "z.png")}
    seen[folder / "bad.png"] = Scanned((1, 1), None, "bad.png: no face found")
    entries, problems = pf.contents(Rescan(seen, 0, True, ""), names)
    assert [e.name for e in entries] == ["me", "Zelda", "y", "a"] and problems == ("bad.png: no face found",)
    assert entries[2] is seen[folder / "y.png"].entry  # an entry whose name is unchanged is the same one
    away = Rescan(seen, 0, False, "faces: faces folder not found")
    assert (
        pf.contents(away, names)[1][1] == "faces: faces folder not found; keeping the 4 faces loaded before"
    )


def test_a_photo_scan_names_the_photo_in_every_problem(tmp_path: Path) -> None:
    cache = LatentCache(tmp_path, thumb_px=8)
    scanner = PhotoScanner(cache, similar_size_ratio=0.6)
    path = tmp_path / "ann.png"
    picture = np.full((32, 32, 3), 90, np.uint8)
    ok = scanner.scan(path, (1, 2), PhotoRead("k1", image=picture), FakeAnalyzer())
    assert ok.entry is not None and ok.entry.name == "ann" and ok.entry.thumb_bgr.shape == (8, 8, 3)
    assert cache.load("k1") is not None  # a new entry is cached
    cached = scanner.scan(
        path, (1, 2), PhotoRead("k1", cached=cache.load_thumb("k1")), FakeAnalyzer(gate=threading.Event())
    )
    assert cached.entry is not None  # taken from the cache: the models are not run (the gate would hang)
    assert scanner.scan(path, (1, 2), PhotoRead("k2"), FakeAnalyzer()).problem == (
        "ann.png: not a readable image; use a JPEG or PNG"
    )

    class Broken(FakeAnalyzer):
        def source_latent(self, image, face):  # type: ignore[no-untyped-def]
            raise RuntimeError("CUDA out of memory\nsecond line")

    broken = scanner.scan(path, (1, 2), PhotoRead("k3", image=picture), Broken())
    assert broken.entry is None
    assert broken.problem == "ann.png: cannot be used (RuntimeError: second line); replace the photo"


def test_the_writer_claim_refuses_other_and_revoked_threads() -> None:
    claim = WriterClaim()
    me = threading.current_thread()
    other = threading.Thread(target=lambda: None, name="other")
    assert claim.writer is None
    claim.check(me)  # the first refresh claims
    assert claim.writer is me
    with pytest.raises(LibraryWriterError, match="'MainThread' is its writer"), claim.publishing(other):
        pass
    claim.revoke(me)
    assert claim.writer is None
    with pytest.raises(LibraryWriterError, match="it was abandoned"):
        claim.claim()
    with pytest.raises(LibraryWriterError, match="it was abandoned"):
        claim.check(me)
