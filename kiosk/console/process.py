"""The staff console's server in a process of its own (``spawn``, like the keepsake server's:
:mod:`kiosk.keepsake.process`), so no request can take the render loop's time.

The kiosk sends the child its newest status (a small dict, twice a second) and now and then the
screen's thumbnail (a JPEG) through ``inbox``; the child sends back the commands staff gave
through ``outbox`` (putting on either never blocks). The child's heartbeat is a shared
``time.monotonic()``; it exits when told to, or by itself when the kiosk's process is gone.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from typing import Any

from kiosk.config import ConsoleConfig
from kiosk.keepsake.privacy import hide_secret
from kiosk.keepsake.process import BEAT_EVERY_S, HUNG_S, START_TIMEOUT_S, _loop_answers, lower_priority
from kiosk.keepsake.store import KeepsakeError
from kiosk.signals import ignore_stray_signals
from kiosk.util.logs import SafeFormatter

log = logging.getLogger(__name__)

#: The child tells the kiosk someone looks at the thumbnail at most this often.
VIEWER_EVERY_S = 2.0


class _Latest:
    """The newest status and thumbnail, as the inbox brought them (the server's thread reads)."""

    def __init__(self) -> None:
        self.status: dict[str, Any] | None = None
        self.thumb: bytes | None = None


def _child(
    cfg: ConsoleConfig,
    pin: str,
    inbox: multiprocessing.Queue[Any],
    outbox: multiprocessing.Queue[Any],
    parent_pid: int,
    beat: Any,
) -> None:
    """The console's process: serve until told to stop or the kiosk is gone."""
    from kiosk.console.server import ConsoleServer  # aiohttp: in this process only

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    priority = lower_priority()
    hide_secret(pin)
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("%(levelname)s %(name)s: %(message)s"))  # no PIN in a line
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    ignore_stray_signals()
    latest = _Latest()
    stop = threading.Event()
    told = [0.0]

    def command(cmd: tuple[Any, ...]) -> None:
        if cmd[0] == "viewer":
            now = time.monotonic()
            if now - told[0] < VIEWER_EVERY_S:
                return
            told[0] = now
        with contextlib.suppress(OSError, ValueError):
            outbox.put(("cmd", cmd))

    def receive() -> None:
        while not stop.is_set():
            try:
                kind, value = inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                stop.set()
                return
            if kind == "stop":
                stop.set()
            elif kind == "status":
                latest.status = value
            elif kind == "thumb":
                latest.thumb = value

    threading.Thread(target=receive, name="console-inbox", daemon=True).start()
    try:
        server = ConsoleServer(cfg, pin, lambda: latest.status, lambda: latest.thumb, command).start()
    except KeepsakeError as exc:
        outbox.put(("error", str(exc)))
        return
    beat.value = time.monotonic()
    outbox.put(("ready", server.port, priority))
    try:
        while not stop.wait(BEAT_EVERY_S):
            if os.getppid() != parent_pid or not server.is_alive():
                break
            if _loop_answers(server):
                beat.value = time.monotonic()
    finally:
        server.stop()


class ConsoleProcess:
    """The console's child process: :meth:`start`, :meth:`send` (status, thumbnails),
    :meth:`commands` (what staff asked, in order), :meth:`health`, :meth:`stop`."""

    def __init__(self, cfg: ConsoleConfig, pin: str) -> None:
        self.cfg = cfg
        self._pin = pin
        self._ctx = multiprocessing.get_context("spawn")
        self._inbox: multiprocessing.Queue[Any] = self._ctx.Queue()
        self._outbox: multiprocessing.Queue[Any] = self._ctx.Queue()
        self._beat = self._ctx.Value("d", 0.0, lock=False)
        self._proc: Any = None
        self.port = cfg.listen_host_port()[1]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ConsoleProcess:
        """Start the child (again after :meth:`kill`: fresh queues); :class:`KeepsakeError` with one
        line when it cannot serve (the port taken, no permission)."""
        if self._proc is not None:
            self._inbox = self._ctx.Queue()
            self._outbox = self._ctx.Queue()
        self._proc = self._ctx.Process(
            target=_child,
            args=(self.cfg, self._pin, self._inbox, self._outbox, os.getpid(), self._beat),
            name="console-server",
            daemon=True,
        )
        self._proc.start()
        try:
            message = self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise KeepsakeError(
                f"console: the web server process did not start within {timeout_s:g} s"
            ) from None
        if message[0] == "error":
            self.kill()
            raise KeepsakeError(message[1])
        _, self.port, priority = message
        (log.info if priority.startswith("at nice") else log.warning)(
            "console: serving the staff console on %s from process %d %s",
            self.cfg.listen,
            self._proc.pid,
            priority,
        )
        return self

    def send(self, kind: str, value: Any) -> None:
        """Hand the child a status or thumbnail (never blocks; lost if the child is gone)."""
        with contextlib.suppress(OSError, ValueError):
            self._inbox.put((kind, value))

    def commands(self) -> list[tuple[Any, ...]]:
        """The commands staff gave since the last call, in order (never blocks)."""
        out: list[tuple[Any, ...]] = []
        while True:
            try:
                kind, value = self._outbox.get_nowait()
            except (queue.Empty, OSError, ValueError, EOFError):
                return out
            if kind == "cmd":
                out.append(tuple(value))

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def health(self, hung_s: float = HUNG_S) -> str:
        """Empty while the child runs and answers; else what is wrong, for the log line."""
        proc = self._proc
        if proc is None:
            return "is not running"
        if not proc.is_alive():
            return f"exited (exit code {proc.exitcode})"
        quiet = time.monotonic() - self._beat.value
        if quiet > hung_s:
            return f"does not answer (no heartbeat for {quiet:.1f} s)"
        return ""

    def stop(self, timeout_s: float = 3.0) -> None:
        if self._proc is None or self._proc.pid is None:  # never started
            return
        self.send("stop", None)
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            log.warning("console: the web server process did not stop within %.1f s; killed", timeout_s)
        self.kill()

    def kill(self) -> None:
        """End the child at once (SIGKILL when it still runs); :meth:`start` may start it again."""
        if self._proc is None or self._proc.pid is None:
            return
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(2.0)
        for q in (self._inbox, self._outbox):
            q.cancel_join_thread()
            q.close()
