"""The triple buffer under thread stress: no torn reads, never stale, drops counted exactly."""

from __future__ import annotations

import threading
import time

import numpy as np

from kiosk.sync import TripleBuffer


def _slot() -> np.ndarray:
    return np.zeros(4096, np.int64)


def test_read_returns_none_until_published_and_newest_after():
    buf = TripleBuffer(_slot)
    assert buf.read() is None
    for value in (1, 2, 3):
        buf.write_slot()[:] = value
        buf.publish()
    got = buf.read()
    assert got is not None and got[0] == 3
    assert buf.dropped == 2  # 1 and 2 were overwritten unread
    assert buf.read() is None  # nothing new
    assert buf.current()[0] == 3


def test_publish_and_read_exchange_slots_without_copying():
    buf = TripleBuffer(_slot)
    ids = {id(buf.write_slot())}
    w = buf.write_slot()
    w[:] = 7
    buf.publish()
    r = buf.read()
    assert r is w  # the very array the writer filled, no copy
    ids |= {id(buf.write_slot()), id(buf.current())}
    assert len(ids) == 2 or len(ids) == 3
    assert buf.write_slot() is not r  # the writer never gets the reader's slot


def test_writer_never_gets_the_slot_the_reader_holds():
    buf = TripleBuffer(_slot)
    for i in range(100):
        buf.write_slot()[:] = i
        buf.publish()
        if i % 3 == 0:
            held = buf.read()
            assert held is not None
            for _ in range(5):  # several publications while the reader holds its slot
                assert buf.write_slot() is not held
                buf.publish()
            assert buf.write_slot() is not buf.current()


def test_threaded_stress_no_torn_or_stale_reads():
    """The writer fills a whole slot with one value (slowly, element by element in chunks) and
    publishes; the reader checks each read is uniform (not torn), strictly newer than the
    last one (not stale), and that published = read + dropped + unread at the end."""
    buf = TripleBuffer(_slot)
    n_writes = 20000
    stop = threading.Event()
    errors: list[str] = []
    reads = 0

    def writer() -> None:
        for value in range(1, n_writes + 1):
            slot = buf.write_slot()
            for start in range(0, slot.size, 1024):  # chunked write: a torn read would be visible
                slot[start : start + 1024] = value
            buf.publish()
        stop.set()

    def reader() -> None:
        nonlocal reads
        last = 0
        while True:
            done = stop.is_set()
            slot = buf.read()
            if slot is not None:
                first = int(slot[0])
                if not np.all(slot == first):
                    errors.append(f"torn read: {np.unique(slot)[:5]}")
                    return
                if first <= last:
                    errors.append(f"stale read: {first} after {last}")
                    return
                if buf.read_generation != first:
                    errors.append(f"generation {buf.read_generation} != value {first}")
                    return
                # hold the slot a little while the writer keeps going, then re-check it
                time.sleep(0)
                if not np.all(slot == first):
                    errors.append("slot changed while the reader held it")
                    return
                last = first
                reads += 1
            elif done:
                break

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
    assert buf.generation == n_writes
    assert reads > 0
    assert buf.current()[0] == n_writes  # the very last publication was seen
    assert reads + buf.dropped == n_writes


def test_wait_wakes_on_publish():
    buf = TripleBuffer(_slot)
    assert buf.wait(0.01) is False
    threading.Timer(0.05, buf.publish).start()
    assert buf.wait(2.0) is True
    assert buf.read() is not None
    assert buf.wait(0.01) is False


def test_a_second_live_producer_is_counted_a_successor_is_not():
    buf = TripleBuffer(_slot)
    buf.publish()  # the main thread is the producer now
    t = threading.Thread(target=buf.publish)
    t.start()
    t.join()
    assert buf.producer_conflicts == 1  # published while the main thread (its producer) runs
    buf.publish()  # the main thread again, after the other one ended: a successor, no conflict
    assert buf.producer_conflicts == 1
    buf.release_producer()  # the main thread gives the buffer up
    t = threading.Thread(target=buf.publish)
    t.start()
    t.join()
    assert buf.producer_conflicts == 1
    assert buf.generation == 4
