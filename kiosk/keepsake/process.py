"""The keepsake web server in a process of its own, so no request can take the render loop's time.

A server thread in the kiosk's process shares the interpreter lock with the render loop: a burst of
a few hundred requests a second cost a render-like loop 15 % of its frames
(``benchmarks/keepsake_burst.py``). :class:`KeepsakeServerProcess` runs the same
:class:`~kiosk.keepsake.server.KeepsakeServer` in a child process started with ``spawn`` (never a
fork of a process holding GL, CUDA and camera threads). The kiosk's :class:`KeepsakeStore` stays
the one owner of the photos (it writes and deletes the files); the child serves a read-only
:class:`StoreMirror` of its index, told every addition and deletion in order through a queue
(putting on it never blocks the caller). The child's counters come back through shared memory; it
exits when told to, or by itself when the kiosk's process is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any

from kiosk.config import KeepsakeConfig
from kiosk.keepsake.counts import COUNT_FIELDS
from kiosk.keepsake.privacy import GoneTokens
from kiosk.keepsake.store import (
    GONE_MEMORY,
    Found,
    KeepsakeError,
    KeepsakeRecord,
    KeepsakeStore,
    Lookup,
    is_token,
    read_file,
)
from kiosk.signals import ignore_stray_signals
from kiosk.util.logs import SafeFormatter

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
#: The child's heartbeat: how often its event loop is asked to answer (and the beat written).
BEAT_EVERY_S = 0.5
#: A heartbeat older than this is a server that does not answer (stopped, hung): it is replaced.
HUNG_S = 10.0  # a niced server on a loaded 2-core booth can be slow to answer
#: The server process's niceness (lower CPU priority than the kiosk's render loop).
NICE = 10  # spawn imports aiohttp afresh: seconds on a loaded booth


class StoreMirror:
    """The child's view of the kiosk's store: lookup/read/sweep like :class:`KeepsakeStore`, fed by
    :meth:`apply`. A record past its expiry answers GONE even before the kiosk's sweep deletes it."""

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, KeepsakeRecord] = {}
        self._gone = GoneTokens(GONE_MEMORY)

    def apply(self, message: tuple[str, Any]) -> None:
        kind, value = message
        with self._lock:
            if kind == "add":
                self._records[value.token] = value
            elif kind == "gone":
                self._records.pop(value, None)
                self._gone.add(value)
            elif kind == "gone_tokens":  # the store's memory of deleted photos, at the start
                self._gone = value

    def lookup(self, token: str) -> Lookup:
        if not is_token(token):
            return Lookup(Found.UNKNOWN)
        with self._lock:
            rec = self._records.get(token)
            if rec is not None and rec.expires > self._clock() and rec.path.exists():
                return Lookup(Found.OK, rec)  # no file: GONE, for the page as for the JPEG
            if rec is not None or token in self._gone:
                return Lookup(Found.GONE)
        return Lookup(Found.UNKNOWN)

    def read(self, token: str, kind: str = "jpg") -> tuple[Lookup, bytes | None]:
        return read_file(self.lookup(token), kind)  # a file deleted by the kiosk in between: GONE

    def sweep(self) -> int:
        now = self._clock()
        with self._lock:
            old = [t for t, r in self._records.items() if r.expires <= now]
            for token in old:
                del self._records[token]
                self._gone.add(token)
        return len(old)


def lower_priority(nice: int = NICE) -> str:
    """Lower this process's CPU priority by ``nice``; what happened, as a phrase for the log line
    ("at nice 10", or why it stays at the kiosk's priority: a seccomp filter denying
    ``setpriority``, for example)."""
    try:
        return f"at nice {os.nice(nice)}"
    except OSError as exc:
        return (
            f"at the kiosk's own priority: lowering it by {nice} failed ({exc.strerror or exc}; "
            "allow setpriority in the unit's SystemCallFilter=)"
        )


def _child(
    cfg: KeepsakeConfig,
    inbox: multiprocessing.Queue[Any],
    outbox: multiprocessing.Queue[Any],
    counts: Any,
    parent_pid: int,
    beat: Any,
) -> None:
    """The server process: serve a mirror of the store until told to stop or the kiosk is gone.
    ``beat`` gets ``time.monotonic()`` (system-wide) each time the server's event loop answered."""
    from kiosk.keepsake.server import KeepsakeServer  # aiohttp: in this process only

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal: the kiosk stops us
    priority = lower_priority()  # the render loop wins any fight for the CPU
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))  # no token in a line
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    ignore_stray_signals()  # SIGHUP, SIGUSR1, … sent to every kiosk process: not our end
    mirror = StoreMirror()
    stop = threading.Event()
    server_box: list[Any] = []

    def receive() -> None:
        while not stop.is_set():
            try:
                message = inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                stop.set()
                return
            if message[0] == "stop":
                stop.set()
            elif message[0] == "cfg" and server_box:
                server_box[0].update(message[1])
            else:
                mirror.apply(message)

    if not _prime(mirror, inbox):  # the store as it is before the first answer (no early 404)
        outbox.put(("error", "keepsake: the web server process was not sent the store"))
        return
    threading.Thread(target=receive, name="keepsake-inbox", daemon=True).start()
    try:
        server = KeepsakeServer(mirror, cfg).start()
    except KeepsakeError as exc:
        outbox.put(("error", str(exc)))
        return
    server_box.append(server)
    base = list(counts)  # a restarted server's counts add to its predecessors'
    beat.value = time.monotonic()
    outbox.put(("ready", server.port, server.url_base, priority))
    try:
        while not stop.wait(BEAT_EVERY_S):
            for i, name in enumerate(COUNT_FIELDS):
                counts[i] = base[i] + getattr(server.counts, name)
            if os.getppid() != parent_pid:  # the kiosk died without telling us
                break
            if not server.is_alive():
                break
            if _loop_answers(server):
                beat.value = time.monotonic()
    finally:
        for i, name in enumerate(COUNT_FIELDS):
            counts[i] = base[i] + getattr(server.counts, name)
        server.stop()


def _prime(mirror: StoreMirror, inbox: Any, timeout_s: float = START_TIMEOUT_S) -> bool:
    """Apply the start's messages (the deleted photos' memory, every stored photo, and any change
    in between) up to the ``primed`` marker; False when the marker does not come or the queue
    breaks. Before this, a request right after a (re)start could miss a photo (404 for a valid
    QR code) or a deleted one's memory (404, not 410)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            message = inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        except (queue.Empty, EOFError, OSError):
            return False
        if message[0] == "primed":
            return True
        mirror.apply(message)  # a store change; it ignores any other kind


def _loop_answers(server: Any, timeout_s: float = 1.0) -> bool:
    """The server's event loop runs a no-op within ``timeout_s`` (it is not stuck)."""
    loop = getattr(server, "_loop", None)
    if loop is None or loop.is_closed():
        return False
    try:
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(timeout_s)
    except Exception:  # noqa: BLE001 - a timeout or a closed loop: no beat this time
        return False
    return True


class SharedCounts:
    """The child's :class:`ServerCounts`, read from shared memory (updated twice a second)."""

    def __init__(self, array: Any) -> None:
        self._array = array

    @property
    def pages(self) -> int:
        return int(self._array[0])

    @property
    def downloads(self) -> int:
        return int(self._array[1])

    @property
    def refused(self) -> int:
        return int(self._array[2])

    @property
    def connections_refused(self) -> int:
        return int(self._array[3])

    @property
    def clip_downloads(self) -> int:
        return int(self._array[4])


class KeepsakeServerProcess:
    """:class:`KeepsakeServer`'s interface (start, stop, url_for, counts, is_alive, update) for a
    server in a child process serving ``store``."""

    def __init__(self, store: KeepsakeStore, cfg: KeepsakeConfig, *, resolve: Any = Path) -> None:
        self.store = store
        if cfg.tls_cert and cfg.tls_key:  # the child resolves nothing: absolute paths
            cfg = cfg.model_copy(
                update={"tls_cert": str(resolve(cfg.tls_cert)), "tls_key": str(resolve(cfg.tls_key))}
            )
        self.cfg = cfg
        self._ctx = multiprocessing.get_context("spawn")
        self._inbox: multiprocessing.Queue[Any] = self._ctx.Queue()
        self._outbox: multiprocessing.Queue[Any] = self._ctx.Queue()
        self._array = self._ctx.Array("q", len(COUNT_FIELDS), lock=False)  # kept over restarts
        self._beat = self._ctx.Value("d", 0.0, lock=False)
        self.counts = SharedCounts(self._array)
        self._proc: Any = None
        self.port = cfg.listen_host_port()[1]
        self.url_base = ""

    def start(self, timeout_s: float = START_TIMEOUT_S) -> KeepsakeServerProcess:
        """Start the child (again, after :meth:`stop`: fresh queues, the same counts)."""
        if self._proc is not None:
            self._inbox = self._ctx.Queue()
            self._outbox = self._ctx.Queue()
        self._inbox.put(("gone_tokens", self.store.gone_tokens()))  # 410 for the last run's photos
        self.store.listener = self._inbox.put  # from now on, every change in order
        for rec in self.store.records():
            self._inbox.put(("add", rec))
        self._inbox.put(("primed", None))  # the child serves nothing before it has read so far
        self._proc = self._ctx.Process(
            target=_child,
            args=(self.cfg, self._inbox, self._outbox, self._array, os.getpid(), self._beat),
            name="keepsake-server",
            daemon=True,
        )
        self._proc.start()
        try:
            message = self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise KeepsakeError(
                f"keepsake: the web server process did not start within {timeout_s:g} s"
            ) from None
        if message[0] == "error":
            self.stop()
            raise KeepsakeError(message[1])
        _, self.port, self.url_base, priority = message
        (log.info if priority.startswith("at nice") else log.warning)(
            "keepsakes: serving %s from process %d %s", self.cfg.listen, self._proc.pid, priority
        )
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def health(self, hung_s: float | None = None) -> str:
        """Empty while the child runs and its server answers (a heartbeat within ``hung_s``,
        default :data:`HUNG_S`); else what is wrong, for the log line."""
        hung_s = HUNG_S if hung_s is None else hung_s
        proc = self._proc
        if proc is None:
            return "is not running"
        if not proc.is_alive():
            return f"exited (exit code {proc.exitcode})"
        quiet = time.monotonic() - self._beat.value
        if quiet > hung_s:
            return f"does not answer (no heartbeat for {quiet:.1f} s)"
        return ""

    def update(self, cfg: KeepsakeConfig) -> None:
        self.cfg = cfg.model_copy(update={"tls_cert": self.cfg.tls_cert, "tls_key": self.cfg.tls_key})
        self._inbox.put(("cfg", self.cfg))

    def url_for(self, token: str) -> str:
        return f"{self.url_base}/p/{token}"

    def stop(self, timeout_s: float = 3.0) -> None:
        self.store.listener = None
        if self._proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._inbox.put(("stop", None))
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            log.warning("keepsakes: the web server process did not stop within %.1f s; killed", timeout_s)
            self._proc.kill()
            self._proc.join(1.0)
        self._inbox.close()
        self._outbox.close()
        with contextlib.suppress(Exception):
            self._inbox.join_thread()

    def kill(self) -> None:
        """End a dead or hung child at once (SIGKILL); :meth:`start` may start it again."""
        self.store.listener = None
        if self._proc is None:
            return
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(2.0)
        for q in (self._inbox, self._outbox):
            q.cancel_join_thread()  # nobody reads it any more: never wait to flush it
            q.close()
