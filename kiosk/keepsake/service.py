"""The keepsake service: the store, the web server and the printer, started and stopped together.

:class:`kiosk.app.KioskApp` opens one with :func:`open_keepsakes` when ``keepsake.enabled`` (at
:meth:`~kiosk.app.KioskApp.run`), hands it a reloaded config with :meth:`KeepsakeService.apply`,
shows :meth:`KeepsakeService.staff_line` in the staff warnings, reports
:meth:`KeepsakeService.metrics` and closes it at exit. The on-screen flow calls
:meth:`KeepsakeService.keep` with the JPEG of the frozen still and draws the address it returns as
a QR code. A service that could not start (port taken, bad certificate) keeps nothing and says why
on its staff line; the kiosk goes on without keepsakes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kiosk.config import KeepsakeConfig, KioskConfig
from kiosk.keepsake.counts import ServerCounts
from kiosk.keepsake.printer import PrintCounts, Printer
from kiosk.keepsake.process import KeepsakeServerProcess
from kiosk.keepsake.store import (
    SWEEP_EVERY_S,
    Found,
    KeepsakeError,
    KeepsakeRecord,
    KeepsakeStore,
    StoreLimits,
)
from kiosk.paths import keepsake_dir

if TYPE_CHECKING:
    from kiosk.keepsake.server import KeepsakeServer

log = logging.getLogger(__name__)

#: Waits before each restart of a dead or hung web server process (the last one repeats).
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 15.0, 30.0, 60.0)
#: A server that served this long since its restart starts the backoff from the beginning again.
STABLE_S = 60.0


@dataclass(frozen=True)
class Keepsake:
    """A kept photo and the address its QR code encodes."""

    record: KeepsakeRecord
    url: str


def limits_of(cfg: KeepsakeConfig) -> StoreLimits:
    return StoreLimits(cfg.ttl_s, cfg.max_photos, cfg.max_mb, cfg.keep_on_disk)


class KeepsakeService:
    def __init__(
        self,
        cfg: KeepsakeConfig,
        folder: Path,
        resolve: Callable[[str], Path] = Path,
        clock: Callable[[], float] = time.time,
        *,
        separate_process: bool = True,
    ) -> None:
        """``separate_process``: the web server in a child process (the kiosk), else in a thread."""
        self.cfg = cfg
        self.store = KeepsakeStore(folder, limits_of(cfg), clock)
        self.server_counts = ServerCounts()
        self.print_counts = PrintCounts()
        self.taken = 0
        self.last: Keepsake | None = None  # the last kept photo (print again)
        self.problem = ""  # why keepsakes are unavailable ("" while they work)
        self.server: KeepsakeServer | KeepsakeServerProcess | None = None
        self.printer: Printer | None = None
        self._resolve = resolve
        self._clock = clock
        self._separate_process = separate_process
        self._sweeper: threading.Thread | None = None
        self._starter: threading.Thread | None = None
        self._closing = threading.Event()
        #: Liveness of the server's process (the sweeper thread checks it every second).
        self._down = False  # found dead or hung, not yet restarted
        self._restart_at = 0.0  # monotonic time of the next restart while down
        self._restarts = 0  # restarts in a row without a stable run between them
        self._up_since = 0.0
        self._watching = threading.Lock()  # one check (and restart) at a time

    def start(self) -> KeepsakeService:
        """Open the store and start the server (and printer); a failure sets :attr:`problem`.

        The server's process starts in the background (``spawn`` takes a second or two), so the
        kiosk's first frame does not wait for it; :attr:`available` turns true once it serves and
        :meth:`wait_ready` waits for that."""
        try:
            self.store.open()
            if not self._separate_process:
                from kiosk.keepsake.server import KeepsakeServer

                self.server = KeepsakeServer(
                    self.store, self.cfg, self.server_counts, resolve=self._resolve, clock=self._clock
                ).start()
        except (KeepsakeError, OSError) as exc:
            self._fail(exc)
            return self
        if self._separate_process:
            self._starter = threading.Thread(target=self._start_process, name="keepsake-start", daemon=True)
            self._starter.start()
            self._sweeper = threading.Thread(target=self._sweep, name="keepsake-sweeper", daemon=True)
            self._sweeper.start()
        if self.cfg.print_command:
            self.printer = Printer(self.cfg.print_command, self.cfg.print_timeout_s, self.print_counts)
        return self

    def _fail(self, exc: Exception) -> None:
        self.problem = str(exc) if isinstance(exc, KeepsakeError) else f"keepsake: {self.store.folder}: {exc}"
        log.error("%s; the kiosk runs without keepsakes", self.problem)
        self.server = None

    def _start_process(self) -> None:
        try:
            server = KeepsakeServerProcess(self.store, self.cfg, resolve=self._resolve).start()
        except (KeepsakeError, OSError) as exc:
            self._fail(exc)
            return
        if self._closing.is_set():  # the kiosk exited while the server was starting
            server.stop()
            return
        self._up_since = time.monotonic()
        self.server = server

    def wait_ready(self, timeout_s: float = 30.0) -> bool:
        """Wait until the server serves (or failed to start); :attr:`available`."""
        if self._starter is not None:
            self._starter.join(timeout_s)
        return self.available

    @property
    def available(self) -> bool:
        """The server serves: alive, and (in its own process) answering; photos may be offered."""
        server = self.server
        if server is None or self._down:
            return False
        if isinstance(server, KeepsakeServerProcess):
            return server.health() == ""
        return server.is_alive()

    def keep(self, jpeg: bytes) -> Keepsake:
        """Store ``jpeg``, queue it for the printer; :class:`KeepsakeError` (one line) when not kept."""
        if not self.available or self.server is None:
            raise KeepsakeError(self.problem or "keepsake: the web server is not serving")
        record = self.store.add(jpeg)
        self.taken += 1
        kept = Keepsake(record, self.server.url_for(record.token))
        self.last = kept
        if self.printer is not None:
            self._print(kept, self.cfg.print_copies)
        return kept

    def keep_clip(self, token: str, files: dict[str, bytes]) -> KeepsakeRecord:
        """Keep a clip (``keepsake.clip``) beside the photo of ``token``: the page links it from now
        on and it is deleted with the photo; :class:`KeepsakeError` when not kept."""
        return self.store.add_clip(token, files)

    def _print(self, kept: Keepsake, copies: int) -> bool:
        assert self.printer is not None
        return self.printer.submit(kept.record.path, copies, kept.url if self.cfg.print_qr else "")

    def print_again(self, copies: int = 1) -> str:
        """Print the last kept photo again, ``copies`` copies (the staff key ``print_again``; a staff
        console can call this too): "" when queued, else one line saying why not (also logged)."""
        kept, why = self.last, ""
        if self.printer is None:
            why = "print again: printing is off (set keepsake.print_command)"
        elif kept is None:
            why = "print again: no photo has been kept yet"
        elif self.store.lookup(kept.record.token).found is not Found.OK:
            why = "print again: the last photo was deleted (keepsake.ttl_s); nothing to print"
        elif not self._print(kept, copies):
            return self.printer.problem
        if why:
            log.warning("keepsakes: %s", why)
        else:
            log.info("keepsakes: printing the last photo again (%d copies)", copies)
        return why

    def apply(self, cfg: KeepsakeConfig) -> None:
        """A reloaded config: limits, page text and printing now (the address at the next start)."""
        self.cfg = cfg
        self.store.set_limits(limits_of(cfg))
        if self.server is not None:
            self.server.update(cfg)
        if self.printer is not None and cfg.print_command:
            self.printer.update(cfg.print_command, cfg.print_timeout_s)
        elif self.printer is not None:
            self.printer.close()
            self.printer = None
        elif cfg.print_command and self.server is not None:
            self.printer = Printer(cfg.print_command, cfg.print_timeout_s, self.print_counts)

    def full(self) -> bool:
        """The store has no room for a photo without evicting one before its time-to-live."""
        return self.store.full()

    def discard(self, token: str) -> None:
        """Delete a kept photo nobody can fetch (its QR code was withdrawn from the screen)."""
        self.store.discard(token)

    def watch(self, now: float | None = None) -> None:
        """Check the server's process is alive and answering; replace a dead or hung one, waiting
        :data:`RESTART_BACKOFF_S` between tries (the sweeper thread, once a second)."""
        server = self.server
        if not isinstance(server, KeepsakeServerProcess) or self._closing.is_set():
            return
        with self._watching:
            self._check(server, time.monotonic() if now is None else now)

    def _check(self, server: KeepsakeServerProcess, now: float) -> None:
        if self._down:
            if now >= self._restart_at:
                self._restart(server, now)
            return
        why = server.health()
        if not why:
            if self._restarts and now - self._up_since >= STABLE_S:
                self._restarts = 0
            return
        delay = RESTART_BACKOFF_S[min(self._restarts, len(RESTART_BACKOFF_S) - 1)]
        self._down, self._restart_at = True, now + delay
        server.kill()
        log.error(
            "keepsakes: the web server process %s; photos are not offered; restarting it in %g s",
            why,
            delay,
        )

    def _restart(self, server: KeepsakeServerProcess, now: float) -> None:
        self._restarts += 1
        try:
            server.start()
        except (KeepsakeError, OSError) as exc:
            delay = RESTART_BACKOFF_S[min(self._restarts, len(RESTART_BACKOFF_S) - 1)]
            self._restart_at = time.monotonic() + delay
            server.kill()
            log.error("keepsakes: restarting the web server failed: %s; next try in %g s", exc, delay)
            return
        self._down, self._up_since = False, time.monotonic()
        log.warning(
            "keepsakes: the web server process was restarted (restart %d); photos offered again",
            self._restarts,
        )

    def staff_line(self) -> str:
        """One line for the staff warnings: why keepsakes are off, or the last print failure."""
        if self.problem:
            return self.problem
        if self._down:
            return "keepsake: the web server stopped; restarting it (see the log); no photos meanwhile"
        if self.server is not None and not self.server.is_alive():
            return "keepsake: the web server stopped (see the log); restart the kiosk"
        return self.printer.problem if self.printer is not None else ""

    def _sweep(self) -> None:
        """Delete photos past their time-to-live every second (the thread server does it itself)."""
        while not self._closing.wait(SWEEP_EVERY_S):
            try:
                self.store.sweep()
                self.watch()
            except Exception:  # noqa: BLE001 - tried again in a second
                log.exception("keepsakes: sweep failed")

    def metrics(self) -> dict[str, int]:
        """Totals since the start, for the stats JSON and the Prometheus file."""
        s = self.server.counts if self.server is not None else self.server_counts
        p, c = self.print_counts, self.store.counts
        return {
            "taken": self.taken,
            "stored": len(self.store.records()),
            "page_views": s.pages,
            "downloaded": s.downloads,
            "printed": p.printed,
            "print_failed": p.failed,
            "expired": c.expired,
            "evicted": c.evicted,
            "refused": s.refused,
            "connections_refused": s.connections_refused,
            "clips_downloaded": s.clip_downloads,
            "server_up": int(self.available),
        }

    def close(self) -> None:
        """At exit: stop the printer and the server, delete the photos (unless keep_on_disk)."""
        if self.printer is not None:
            self.printer.close()
        self._closing.set()
        if self._starter is not None:
            self._starter.join(3.0)  # a server still starting stops itself once it is up
        if self.server is not None:
            self.server.stop()
        if self._sweeper is not None:
            self._sweeper.join(2.0)
        self.store.close()


def open_keepsakes(cfg: KioskConfig) -> KeepsakeService | None:
    """The running service when ``keepsake.enabled``, else None (nothing opened, no socket)."""
    if not cfg.keepsake.enabled:
        return None
    return KeepsakeService(cfg.keepsake, keepsake_dir(), resolve=cfg.resolve).start()
