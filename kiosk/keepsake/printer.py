"""Printing keepsakes: ``keepsake.print_command`` run on each kept photo, one at a time.

The command is split with :mod:`shlex` and run without a shell, ``{file}`` in any word replaced by
the photo's path (so a path can never become shell syntax). A worker thread runs the queue in
order, each job within ``keepsake.print_timeout_s`` (then its process group is killed). The screen
never waits: :meth:`Printer.submit` only queues. A failure (a non-zero exit, a timeout, a command
not found, a full queue) becomes one staff line, shown until the next print succeeds.

A job prints ``copies`` copies (``keepsake.print_copies``: the command once per copy, each counted
in :attr:`PrintCounts.printed`; a failed copy ends the job). With a ``qr_url`` the printed file is
the photo with that address's QR code in its bottom-right corner (``keepsake.print_qr``): made on
the printer's thread into a private temporary file (mode 0600, deleted after the job; the kiosk's
unit has a private /tmp), never the stored photo itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shlex
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from kiosk.keepsake.privacy import hide_tokens, photo_id

log = logging.getLogger(__name__)

#: Photos waiting for the printer; one more is refused (a staff line says so).
MAX_QUEUE = 8


@dataclass
class PrintCounts:
    printed: int = 0  # copies printed (each run of the command that succeeded)
    failed: int = 0


@dataclass(frozen=True)
class PrintJob:
    """One photo to print: ``copies`` times, with the QR code of ``qr_url`` when set."""

    path: Path
    copies: int = 1
    qr_url: str = ""


def with_qr(jpeg: bytes, url: str) -> bytes:
    """The photo ``jpeg`` with the QR code of ``url`` in its bottom-right corner, on white (its
    quiet zone included), a fifth of the photo's shorter side (at least 3 px a module)."""
    from kiosk.keepsake.qr import qr_matrix
    from kiosk.keepsake.still import encode_jpeg

    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise OSError("the photo cannot be decoded")
    modules = qr_matrix(url)
    h, w = bgr.shape[:2]
    scale = max(3, min(h, w) // 5 // modules.shape[0])
    qr = np.where(np.kron(modules, np.ones((scale, scale), np.uint8)) > 0, 0, 255).astype(np.uint8)
    side = qr.shape[0]
    if side > min(h, w):
        raise OSError(f"the photo is too small ({w}x{h}) for its QR code")
    margin = max(0, min(h, w) // 40)
    y0, x0 = h - side - margin, w - side - margin
    bgr[y0 : y0 + side, x0 : x0 + side] = qr[:, :, None]
    return encode_jpeg(np.asarray(bgr, np.uint8))


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
        self._queue: queue.Queue[PrintJob | None] = queue.Queue(MAX_QUEUE)
        self._thread = threading.Thread(target=self._run, name="keepsake-printer", daemon=True)
        self._thread.start()

    def update(self, command: str, timeout_s: float) -> None:
        """A reloaded config: the next job runs the new command."""
        self.command, self.timeout_s = command, timeout_s

    def submit(self, path: Path, copies: int = 1, qr_url: str = "") -> bool:
        """Queue ``path`` for printing ``copies`` times (with the QR code of ``qr_url`` when set);
        False (and a staff line) when the queue is full."""
        try:
            self._queue.put_nowait(PrintJob(path, max(1, int(copies)), qr_url))
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
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._job(job)
            finally:
                self._queue.task_done()

    def _job(self, job: PrintJob) -> None:
        """Print ``job.copies`` copies (of the photo with its QR code, when asked); the first failed
        copy ends the job."""
        name = Path(print_argv(self.command, job.path)[0]).name
        if not job.path.exists():
            self._fail(f"print skipped: the photo was deleted before {name} ran")
            return
        path, temporary = job.path, None
        if job.qr_url:
            try:
                printed = with_qr(job.path.read_bytes(), job.qr_url)
                fd, tmp = tempfile.mkstemp(prefix="keepsake-print-", suffix=".jpg")  # mode 0600
                with os.fdopen(fd, "wb") as f:
                    f.write(printed)
            except (OSError, ValueError) as exc:
                self._fail(f"print skipped: the QR code could not be added ({exc}) (keepsake.print_qr)")
                return
            path = temporary = Path(tmp)
        try:
            for _ in range(job.copies):
                if not self._print(path, photo_id(job.path.name.removesuffix(".jpg"))):
                    return
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink()

    def _print(self, path: Path, photo: str) -> bool:
        """Run the command on ``path`` once; False (and a staff line) when it failed."""
        argv = print_argv(self.command, path)
        name = Path(argv[0]).name
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
            return False
        try:
            _, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self._fail(
                f"print failed: {name} took longer than {self.timeout_s:g} s (keepsake.print_timeout_s)"
            )
            return False
        if proc.returncode != 0:
            detail = hide_tokens(_first_line(err))  # the staff line and stats name no address
            self._fail(f"print failed: {name} exited {proc.returncode}" + (f": {detail}" if detail else ""))
            return False
        self.counts.printed += 1
        self.problem = ""
        log.info("keepsakes: %s printed by %s", photo, name)
        return True
