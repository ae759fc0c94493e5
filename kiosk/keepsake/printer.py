"""Printing keepsakes: ``keepsake.print_command`` run on each kept photo, one at a time.

The command is split with :mod:`shlex` and run without a shell, ``{file}`` in any word replaced by
the photo's path (so a path can never become shell syntax). A worker thread runs the queue in
order, each job within ``keepsake.print_timeout_s`` (then its process group is killed). The screen
never waits: :meth:`Printer.submit` only queues. A failure (a non-zero exit, a timeout, a command
not found, a full queue) becomes one staff line, shown until the next print succeeds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from kiosk.keepsake.privacy import hide_tokens, photo_id

log = logging.getLogger(__name__)

#: Photos waiting for the printer; one more is refused (a staff line says so).
MAX_QUEUE = 8


@dataclass
class PrintCounts:
    printed: int = 0
    failed: int = 0


def print_argv(template: str, path: Path) -> list[str]:
    """The command's words with ``{file}`` replaced by ``path`` (no shell, no quoting needed)."""
    return [word.replace("{file}", str(path)) for word in shlex.split(template)]


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[-1][:160] if text else ""


class Printer:
    """Runs ``command`` (a template with ``{file}``) on queued photos, one at a time."""

    def __init__(self, command: str, timeout_s: float, counts: PrintCounts | None = None) -> None:
        self.command = command
        self.timeout_s = timeout_s
        self.counts = counts or PrintCounts()
        self.problem = ""  # the staff line of the last failure; "" once a print succeeds
        self._queue: queue.Queue[Path | None] = queue.Queue(MAX_QUEUE)
        self._thread = threading.Thread(target=self._run, name="keepsake-printer", daemon=True)
        self._thread.start()

    def update(self, command: str, timeout_s: float) -> None:
        """A reloaded config: the next job runs the new command."""
        self.command, self.timeout_s = command, timeout_s

    def submit(self, path: Path) -> bool:
        """Queue ``path`` for printing; False (and a staff line) when the queue is full."""
        try:
            self._queue.put_nowait(path)
        except queue.Full:
            self._fail(f"print skipped: {MAX_QUEUE} photos already wait for the printer (is it on?)")
            return False
        return True

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop after the job in progress (queued photos are not printed)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        with contextlib.suppress(queue.Full):  # a submit raced in: the daemon thread ends with the kiosk
            self._queue.put_nowait(None)
        self._thread.join(timeout_s)

    @property
    def busy(self) -> bool:
        return self._queue.unfinished_tasks > 0

    def _fail(self, line: str) -> None:
        self.counts.failed += 1
        self.problem = line
        log.error("keepsakes: %s", line)

    def _run(self) -> None:
        while True:
            path = self._queue.get()
            try:
                if path is None:
                    return
                self._print(path)
            finally:
                self._queue.task_done()

    def _print(self, path: Path) -> None:
        argv = print_argv(self.command, path)
        name = Path(argv[0]).name
        if not path.exists():
            self._fail(f"print skipped: the photo was deleted before {name} ran")
            return
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv from the booth's config, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # a timeout kills the command and whatever it started
            )
        except OSError as exc:
            self._fail(f"print failed: cannot run {name}: {exc.strerror or exc} (keepsake.print_command)")
            return
        try:
            _, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self._fail(
                f"print failed: {name} took longer than {self.timeout_s:g} s (keepsake.print_timeout_s)"
            )
            return
        if proc.returncode != 0:
            detail = hide_tokens(_first_line(err))  # the staff line and stats name no address
            self._fail(f"print failed: {name} exited {proc.returncode}" + (f": {detail}" if detail else ""))
            return
        self.counts.printed += 1
        self.problem = ""
        log.info("keepsakes: %s printed by %s", photo_id(path.name.removesuffix(".jpg")), name)
