"""A single-producer, single-consumer triple buffer with an atomic generation counter.

Three preallocated slots. The writer owns one (``write_slot``), fills it, and ``publish``
swaps it with the shared *ready* slot and bumps the generation. The reader's ``read`` swaps
the ready slot with its own only when something new was published, so it always gets the
newest complete slot, never one the writer is filling. Nothing is copied: publishing and
reading exchange slot indices. A publish that replaces an unread slot counts as a drop.

The lock is held only around the index exchange (a few bytecodes), never during pixel work,
so the writer never waits on the reader's processing and vice versa.

One producer: the buffer remembers the thread that publishes into it. A publish from another
thread while that one is still alive (two writers filling one write slot: torn frames) is
counted in :attr:`TripleBuffer.producer_conflicts` and logged once; a thread that replaced a
dead producer, or one that took over after :meth:`TripleBuffer.release_producer`, is not.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class TripleBuffer(Generic[T]):
    def __init__(self, factory: Callable[[], T]) -> None:
        self._slots: tuple[T, T, T] = (factory(), factory(), factory())
        self._write = 0
        self._ready = 1
        self._read = 2
        self._fresh = False  # ready slot holds a publication the reader has not taken
        self._lock = threading.Lock()
        self._new = threading.Event()
        self.generation = 0  # number of publications so far
        self.dropped = 0  # publications overwritten before the reader took them
        self.read_generation = 0  # generation of the slot the reader holds
        self._producer: threading.Thread | None = None  # the thread that published last
        self.producer_conflicts = 0  # publishes from a second thread while the first was alive

    # -- writer side ---------------------------------------------------------------------
    def write_slot(self) -> T:
        """The writer's private slot; fill it, then call :meth:`publish`."""
        return self._slots[self._write]

    def publish(self) -> None:
        """Make the write slot the newest complete one. Never blocks on the reader."""
        me = threading.current_thread()
        if me is not self._producer:
            self._claim(me)
        with self._lock:
            self._write, self._ready = self._ready, self._write
            if self._fresh:
                self.dropped += 1
            self._fresh = True
            self.generation += 1
        self._new.set()

    def _claim(self, me: threading.Thread) -> None:
        owner = self._producer
        if owner is not None and owner.is_alive():
            self.producer_conflicts += 1
            if self.producer_conflicts == 1:
                log.error(
                    "single-producer buffer: thread %s publishes while %s, its producer, still runs",
                    me.name,
                    owner.name,
                )
        self._producer = me

    def release_producer(self) -> None:
        """The producer gives the buffer up (it will never publish again): the next thread to
        publish becomes the producer without a conflict."""
        self._producer = None

    # -- reader side ---------------------------------------------------------------------
    def read(self) -> T | None:
        """The newest published slot if something new arrived since the last read, else None.

        The returned slot stays the reader's (the writer never touches it) until the next
        successful ``read``.
        """
        with self._lock:
            self._new.clear()
            if not self._fresh:
                return None
            self._read, self._ready = self._ready, self._read
            self._fresh = False
            self.read_generation = self.generation
        return self._slots[self._read]

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until something new is published (reader side)."""
        return self._new.wait(timeout)

    def current(self) -> T:
        """The slot the reader took last (for redrawing without a new frame)."""
        return self._slots[self._read]
