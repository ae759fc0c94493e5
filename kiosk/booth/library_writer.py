"""Who may publish a face library: one writer thread at a time.

The first refresh makes the calling thread the writer; a refresh from any other thread is refused
with :class:`LibraryWriterError`. A fresh inference thread taking over from an abandoned one
calls :meth:`WriterClaim.claim`; the supervisor calls :meth:`WriterClaim.revoke` on the abandoned
thread, which can then never publish again, not even a refresh it was in the middle of: the
writer is checked again when the result is published, under the same lock as the claim
(:meth:`WriterClaim.publishing`), so a claim never interleaves a publication.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class LibraryWriterError(RuntimeError):
    """A refresh from a thread that is not the library's writer: refused, nothing is published."""


class WriterClaim:
    """The writer of one library and the threads that may never write it again."""

    def __init__(self) -> None:
        #: Guards the writer claim and the publication (a claim never interleaves a publish).
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._revoked: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # abandoned writers

    @property
    def writer(self) -> threading.Thread | None:
        """The thread that refreshes the library (None until the first refresh or claim)."""
        return self._writer

    def claim(self) -> None:
        """Make the calling thread the only writer. The previous writer's refreshes are refused
        from now on, including one it is in the middle of."""
        me = threading.current_thread()
        with self._lock:
            self._refuse_revoked(me)
            prev, self._writer = self._writer, me
        if prev is not None and prev is not me:
            log.info("face library: %s takes over refreshing from %s", me.name, prev.name)

    def revoke(self, thread: threading.Thread) -> None:
        """``thread`` may never refresh or claim again; the next thread to claim or refresh
        becomes the writer."""
        with self._lock:
            self._revoked.add(thread)
            if self._writer is thread:
                self._writer = None
        log.info("face library: %s may no longer refresh it", thread.name)

    def check(self, me: threading.Thread) -> None:
        """Before a refresh starts: ``me`` is the writer (the first refresh claims the library) or
        :class:`LibraryWriterError` is raised."""
        with self._lock:
            self._check(me)

    @contextmanager
    def publishing(self, me: threading.Thread) -> Iterator[None]:
        """Hold the lock while ``me`` publishes, after checking again that it is still the writer
        (a fresh thread may have claimed the library meanwhile)."""
        with self._lock:
            self._check(me)
            yield

    def _refuse_revoked(self, me: threading.Thread) -> None:
        if me in self._revoked:
            raise LibraryWriterError(f"face library refresh refused on thread {me.name!r}: it was abandoned")

    def _check(self, me: threading.Thread) -> None:
        """Called with the lock held: the first refresh claims the library, any other thread is refused."""
        self._refuse_revoked(me)
        if self._writer is None:
            self._writer = me
        elif self._writer is not me:
            raise LibraryWriterError(
                f"face library refresh refused on thread {me.name!r}: "
                f"{self._writer.name!r} is its writer (one writer per library)"
            )
