"""Building the inference thread's stage off the thread (:class:`StageLoader`).

A build (opening the face models, minutes for a TensorRT engine) runs on a short-lived loader
thread that hands its result over through one :class:`BuildJob` (an atomic reference plus an
event), so frames keep flowing through the stage on screen meanwhile. The loader owns which builder
is current (the newest one asked for: its generation), the one build running, the retry schedule
and the model files watched while a failed build waits for its retry: a changed file (mtime, size
or inode) starts the build at once, so copying the right file in heals the booth without a restart.

The inference thread owns its loader and calls it between frames; other threads only ask for a new
stage (:meth:`StageLoader.request`, a queue) and wait for the loader threads at shutdown. What a
built stage or a failure means (install it, keep the previous one, how long to back off) is the
inference thread's (:mod:`kiosk.processing.thread`).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable

from kiosk.processing.ladder import ErrorPolicy
from kiosk.processing.stage import Processor

log = logging.getLogger(__name__)

#: How often watched model files are stat()ed while a failed build waits for its retry.
WATCH_INTERVAL_S = 0.25

FileSignature = tuple[tuple[int, int, int] | None, ...]


class BuildJob:
    """One build on a loader thread; ``result``/``error`` are final once ``done`` is set."""

    def __init__(self, build: Callable[[], Processor], generation: int) -> None:
        self.generation = generation
        self.started = time.perf_counter()
        self.result: Processor | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(build,), name="processor-loader", daemon=True)
        self.thread.start()

    def _run(self, build: Callable[[], Processor]) -> None:
        try:
            self.result = build()
        except BaseException as exc:  # handed to the inference thread, which logs and retries
            self.error = exc
        finally:
            self.done.set()


def file_signature(paths: tuple[str, ...]) -> FileSignature:
    out: list[tuple[int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class StageLoader:
    """The builds of one inference thread's stage (see the module docstring)."""

    def __init__(self, build: Callable[[], Processor]) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Processor], ErrorPolicy | None]] = (
            queue.SimpleQueue()
        )
        # The inference thread's alone from here on:
        self._build = build
        self._generation = 0
        self._job: BuildJob | None = None
        self._threads: list[threading.Thread] = []  # build threads, joined at shutdown
        self._retry_at = 0.0  # perf_counter of the next build attempt; 0: none scheduled
        self._watch: tuple[str, ...] = ()
        self._watch_sig: FileSignature = ()
        self._next_watch = 0.0

    # -- any thread ----------------------------------------------------------------------------
    def request(self, build: Callable[[], Processor], policy: ErrorPolicy | None = None) -> None:
        """Ask for a stage from ``build`` (and the ladder's bounds ``policy``, None: unchanged)."""
        self._requests.put((build, policy))

    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def join(self, timeout_s: float) -> bool:
        """Join the loader threads; False if one is still inside a build after ``timeout_s``."""
        deadline = time.perf_counter() + timeout_s
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.perf_counter()))
        return not self.alive()

    # -- the inference thread --------------------------------------------------------------------
    def start(self) -> None:
        """Start a build with the current builder now."""
        self._retry_at = 0.0
        self._job = BuildJob(self._build, self._generation)
        self._threads = [t for t in self._threads if t.is_alive()] + [self._job.thread]

    def take_requests(self) -> tuple[bool, ErrorPolicy | None]:
        """Take the stages asked for since the last call: the newest builder becomes current and its
        build starts (or, if a build is running, once that stale one ends). Returns whether one was
        asked for and the newest policy that came with one."""
        requested, newest = False, None
        while True:
            try:
                self._build, policy = self._requests.get_nowait()
            except queue.Empty:
                break
            newest = policy if policy is not None else newest
            requested = True
        if requested:
            self._generation += 1
            if self._job is None:
                self.start()
        return requested, newest

    def poll(self, now: float, load_stall_s: float) -> Processor | BaseException | None:
        """The stage the current build made, or why it failed (also: it ran over ``load_stall_s``;
        its thread is left to finish or hang and its result is ignored), once it ended; else None,
        after starting a retry that is due (its time came, or a watched model file changed)."""
        job = self._job
        if job is not None:
            if job.done.is_set():
                self._job = None
                if job.generation != self._generation:
                    self.start()  # a stale build: the builder asked for since then starts now
                    return None
                if job.error is None and job.result is not None:
                    self._watch = ()
                    return job.result
                return job.error or RuntimeError("build returned nothing")
            if now - job.started > load_stall_s:
                self._job = None
                return TimeoutError(f"building the stage took over {load_stall_s:g} s")
            return None
        if self._retry_at:
            if now >= self._retry_at:
                self.start()
            elif self._watch and now >= self._next_watch:
                self._next_watch = now + WATCH_INTERVAL_S
                if file_signature(self._watch) != self._watch_sig:
                    log.info("a model file changed: rebuilding the processing stage now")
                    self.start()
        return None

    def retry_in(self, delay_s: float, watch: tuple[str, ...] = ()) -> None:
        """Build again after ``delay_s``, or as soon as one of the model files ``watch`` changes."""
        self._watch = watch
        self._watch_sig = file_signature(watch)
        self._retry_at = time.perf_counter() + delay_s
