"""The keepsake store (kiosk/keepsake/store.py) on a fake clock: tokens, the time-to-live (410 and the
file gone), max_photos and max_mb (oldest first), mode 0600, atomic writes, clean-up at start and exit."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from kiosk.keepsake.privacy import GONE_FILE
from kiosk.keepsake.store import (
    Found,
    KeepsakeError,
    KeepsakeStore,
    StoreFull,
    StoreLimits,
    is_token,
)

JPEG = b"\xff\xd8\xff\xe0" + b"x" * 1000 + b"\xff\xd9"


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _store(tmp_path: Path, clock: Clock, **kw: object) -> KeepsakeStore:
    limits = StoreLimits(
        ttl_s=float(kw.get("ttl_s", 900)),  # type: ignore[arg-type]
        max_photos=int(kw.get("max_photos", 50)),  # type: ignore[call-overload]
        max_mb=float(kw.get("max_mb", 200)),  # type: ignore[arg-type]
        keep_on_disk=bool(kw.get("keep_on_disk", False)),
    )
    return KeepsakeStore(tmp_path / "keepsakes", limits, clock).open()


def test_add_gives_a_random_url_safe_128_bit_token_and_a_0600_file(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock)
    recs = [store.add(JPEG) for _ in range(20)]
    assert len({r.token for r in recs}) == 20
    for rec in recs:
        assert is_token(rec.token) and len(rec.token) == 22  # 16 bytes of base64url
        assert rec.path.read_bytes() == JPEG
        assert stat.S_IMODE(rec.path.stat().st_mode) == 0o600
        assert rec.created == clock.t and rec.expires == clock.t + 900
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    assert store.lookup(recs[0].token).record == recs[0]
    assert store.lookup("A" * 22).found is Found.UNKNOWN
    assert store.lookup("../" + recs[0].token).found is Found.UNKNOWN
    with pytest.raises(KeepsakeError):
        store.add(b"not a jpeg")


def test_after_the_ttl_the_token_is_gone_and_the_file_deleted(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock, ttl_s=60)
    rec = store.add(JPEG)
    clock.t += 59.9
    assert store.lookup(rec.token).found is Found.OK
    clock.t += 0.2
    assert store.sweep() == 1  # what the server's timer calls every second
    assert not rec.path.exists()
    assert store.lookup(rec.token).found is Found.GONE
    assert store.read(rec.token) == (store.lookup(rec.token), None)
    assert store.counts.expired == 1
    assert sorted(p.name for p in store.folder.iterdir()) == sorted([GONE_FILE, ".lock"])  # no photo


def test_a_lookup_alone_expires_the_photo(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock, ttl_s=60)
    rec = store.add(JPEG)
    clock.t += 61
    assert store.lookup(rec.token).found is Found.GONE
    assert not rec.path.exists()


def test_a_full_store_refuses_a_photo_and_evicts_none_before_its_ttl(tmp_path: Path) -> None:
    """Enter held for 90 s took 53 photos under max_photos 50 and evicted earlier visitors' photos
    (200 -> 410): a full store now refuses the new photo instead."""
    clock = Clock()
    store = _store(tmp_path, clock, max_photos=3, ttl_s=60)
    recs = []
    for _ in range(3):
        recs.append(store.add(JPEG))
        clock.t += 1
    assert store.full()
    with pytest.raises(StoreFull, match="max_photos 3"):
        store.add(JPEG)
    assert [r.token for r in store.records()] == [r.token for r in recs]
    assert all(store.lookup(r.token).found is Found.OK for r in recs)
    assert store.counts.evicted == 0
    clock.t += 57  # the first photo's time is up (t0 + 60): room for one
    new = store.add(JPEG)
    assert store.lookup(recs[0].token).found is Found.GONE and store.lookup(new.token).found is Found.OK
    assert store.counts.expired == 1 and store.counts.evicted == 0


def test_a_reload_lowering_max_photos_deletes_the_oldest_first(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock, max_photos=5)
    recs = [store.add(JPEG) for _ in range(5)]
    store.set_limits(StoreLimits(ttl_s=900, max_photos=3, max_mb=200))
    assert [r.token for r in store.records()] == [r.token for r in recs[2:]]
    for old in recs[:2]:
        assert store.lookup(old.token).found is Found.GONE
        assert not old.path.exists()
    assert len(list(store.folder.glob("*.jpg"))) == 3
    assert store.counts.evicted == 2 and store.counts.expired == 0


def test_max_mb_refuses_a_photo_that_does_not_fit(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock, max_mb=1)
    big = b"\xff\xd8" + b"y" * 400_000
    a, b = store.add(big), store.add(big)
    with pytest.raises(StoreFull, match="max_mb 1"):
        store.add(big)  # 1.2 MB > 1 MB: refused, a is not evicted
    assert store.lookup(a.token).found is Found.OK and store.lookup(b.token).found is Found.OK
    assert store.total_bytes() == 2 * len(big) <= 1_000_000
    with pytest.raises(KeepsakeError, match="max_mb"):
        store.add(b"\xff\xd8" + b"z" * 1_000_001)


def test_a_shorter_ttl_from_a_reload_applies_to_new_photos(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock, ttl_s=600)
    first = store.add(JPEG)
    store.set_limits(StoreLimits(ttl_s=60, max_photos=50, max_mb=200))
    second = store.add(JPEG)  # younger, but expires before the first
    clock.t += 61
    store.sweep()
    assert store.lookup(second.token).found is Found.GONE and not second.path.exists()
    assert store.lookup(first.token).found is Found.OK


def test_the_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write cut short leaves no photo under the token and no temporary file; the final name
    only ever appears by a rename of a complete file."""
    store = _store(tmp_path, Clock())
    real_replace = os.replace
    seen: list[bytes] = []

    def replace(src: str, dst: str) -> None:
        seen.append(Path(src).read_bytes())  # complete before it gets its name
        assert not Path(dst).exists()
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    store.add(JPEG)
    assert seen == [JPEG]

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(KeepsakeError, match="No space left"):
        store.add(JPEG)
    assert len(list(store.folder.glob("*.jpg"))) == 1  # only the first photo
    assert not list(store.folder.glob("*.tmp"))  # no .tmp left behind


def test_every_keepsake_is_deleted_at_start_and_at_exit(tmp_path: Path) -> None:
    clock = Clock()
    store = _store(tmp_path, clock)
    recs = [store.add(JPEG) for _ in range(3)]
    (store.folder / f".{recs[0].token}.jpg.abc.tmp").write_bytes(b"half")  # a crash mid-write
    other = store.folder / "README.txt"
    other.write_text("not ours")
    assert store._lock_fd is not None
    os.close(store._lock_fd)  # a crash: the kernel drops the dead kiosk's lock, the file stays
    again = _store(tmp_path, clock)  # the next start (the first never closed: a crash)
    assert sorted(p.name for p in again.folder.iterdir()) == sorted([GONE_FILE, ".lock", "README.txt"])
    assert again.lookup(recs[0].token).found is Found.GONE  # deleted at this start: 410 (before: 404)
    rec = again.add(JPEG)
    again.close()
    assert not rec.path.exists()
    assert again.lookup(rec.token).found is Found.GONE
    assert other.exists()  # only keepsakes are deleted


def test_keep_on_disk_keeps_photos_over_a_restart_and_their_ttl(tmp_path: Path) -> None:
    clock = Clock(t=os.stat(tmp_path).st_mtime)  # the files' times are wall-clock
    store = _store(tmp_path, clock, keep_on_disk=True, ttl_s=100)
    rec = store.add(JPEG)
    store.close()
    assert rec.path.exists()
    again = _store(tmp_path, clock, keep_on_disk=True, ttl_s=100)
    assert again.lookup(rec.token).found is Found.OK
    clock.t = rec.path.stat().st_mtime + 101
    assert again.lookup(rec.token).found is Found.GONE and not rec.path.exists()


def test_threads_add_and_read_at_once(tmp_path: Path) -> None:
    store = _store(tmp_path, Clock(), max_photos=10)
    errors: list[BaseException] = []
    tokens: list[str] = []

    def writer() -> None:
        for _ in range(200):
            if store.full():  # make room as the time-to-live would
                store.discard(store.records()[0].token)
            tokens.append(store.add(JPEG).token)

    def reader() -> None:
        try:
            for _ in range(2000):
                for tok in list(tokens[-15:]):
                    found, data = store.read(tok)
                    assert (found.found is Found.OK) == (data == JPEG)
                    assert found.found in (Found.OK, Found.GONE)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.records()) == 10 == len(list(store.folder.glob("*.jpg")))


def test_a_photo_deleted_at_exit_is_gone_410_after_a_restart_and_no_token_is_written(tmp_path: Path) -> None:
    """Issue 28, item 11: the deleted photos are remembered across a restart as salted hashes."""
    clock = Clock()
    store = _store(tmp_path, clock, ttl_s=10)
    expired, kept = store.add(JPEG), None
    clock.t += 11
    store.sweep()  # deleted by its time-to-live while running
    kept = store.add(JPEG)
    store.close()  # deleted at the exit
    gone_file = store.folder / GONE_FILE
    text = gone_file.read_text()
    assert expired.token not in text and kept.token not in text
    assert stat.S_IMODE(gone_file.stat().st_mode) == 0o600
    again = _store(tmp_path, clock)
    assert again.lookup(kept.token).found is Found.GONE  # before: 404
    assert again.lookup(expired.token).found is Found.GONE
    assert again.lookup("A" * 22).found is Found.UNKNOWN


def test_the_memory_of_deleted_photos_is_bounded_and_a_broken_file_is_one_line(
    tmp_path: Path, caplog
) -> None:
    from kiosk.keepsake.privacy import GoneTokens

    gone = GoneTokens(limit=3)
    for t in "ABCDE":
        gone.add(t * 22)
    assert len(gone) == 3 and "A" * 22 not in gone and "E" * 22 in gone
    folder = tmp_path / "keepsakes"
    folder.mkdir()
    (folder / GONE_FILE).write_bytes(b"\xff garbage \x00")
    store = _store(tmp_path, Clock())  # starts with an empty memory, writes a good file
    assert len([r for r in caplog.records if GONE_FILE in r.getMessage()]) == 1
    assert (folder / GONE_FILE).read_text().startswith("# faceswap-kiosk")
    store.close()


def test_a_folder_deleted_while_running_is_created_again(tmp_path: Path) -> None:
    import shutil

    store = _store(tmp_path, Clock())
    store.add(JPEG)
    shutil.rmtree(store.folder)
    rec = store.add(JPEG)  # not "every later photo fails until restart"
    assert rec.path.read_bytes() == JPEG
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    assert store.lookup(rec.token).found is Found.OK


def test_a_second_kiosk_on_the_same_folder_is_refused_and_deletes_nothing(tmp_path: Path) -> None:
    first = _store(tmp_path, Clock())
    rec = first.add(JPEG)
    second = KeepsakeStore(first.folder, first.limits, Clock())
    with pytest.raises(KeepsakeError, match="in use by another kiosk"):
        second.open()
    second.close()  # its exit must not empty the first one's folder either
    assert rec.path.read_bytes() == JPEG and first.lookup(rec.token).found is Found.OK
    first.close()
    assert not rec.path.exists()
    third = KeepsakeStore(first.folder, first.limits, Clock()).open()  # the folder is free again
    third.close()


def test_page_and_jpeg_agree_when_the_file_is_gone(tmp_path: Path) -> None:
    store = _store(tmp_path, Clock())
    rec = store.add(JPEG)
    rec.path.unlink()  # deleted behind the store's back
    assert store.lookup(rec.token).found is Found.GONE  # the page: 410, like the JPEG
    assert store.read(rec.token)[0].found is Found.GONE
