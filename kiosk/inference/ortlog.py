"""ONNX Runtime's own (C++) log, through the kiosk's Python logging.

ONNX Runtime's default logger writes straight to the process's stderr (file descriptor 2), with
ANSI colour codes, and its Python API offers no hook to redirect it. Around the calls that log
(creating a session, probing a provider) :func:`capture` points descriptor 2 at a temporary file,
then turns each record it finds there into a record of the ``kiosk.onnxruntime`` logger at the
matching level (V/I → DEBUG/INFO, W → WARNING, E → ERROR, F → CRITICAL), without the colour codes,
timestamp and C++ source location. A message already logged is repeated only at DEBUG, so a
provider failing the same way for every model is said once. Anything else written to stderr
meanwhile (another thread's log lines) is passed on to the real stderr unchanged.

Outside a capture the default logger's threshold is raised to ERROR (:func:`quiet_default_logger`):
a warning there could not be captured, and the kiosk states provider fallbacks itself
(:mod:`kiosk.inference.sessions`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

log = logging.getLogger("kiosk.onnxruntime")

#: ONNX Runtime severities (``set_default_logger_severity``): 0 verbose, 1 info, 2 warning, 3 error, 4 fatal.
SEVERITY_WARNING = 2
SEVERITY_ERROR = 3
_LEVEL_OF = {
    "V": logging.DEBUG,
    "I": logging.INFO,
    "W": logging.WARNING,
    "E": logging.ERROR,
    "F": logging.CRITICAL,
}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ``2026-12-01 08:40:12.790771359 [W:onnxruntime:Default, file.cc:1295 Function] message``
_HEADER = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[([VIWEF]):onnxruntime:([^,\]]*), ([^\]]*)\] ",
    re.MULTILINE,
)
#: ``/onnxruntime_src/.../provider_bridge_ort.cc:2043 onnxruntime::Provider& ...() [ONNXRuntimeError] : 1 : FAIL : ``
_CXX_PREFIX = re.compile(r"^\S+\.(?:cc|cpp|h):\d+ .*?\[ONNXRuntimeError\] : \d+ : \w+ : ")


@dataclass
class OrtRecord:
    """One message of ONNX Runtime's C++ log."""

    level: int
    logger: str  # ONNX Runtime's logger id ("Default", or a session's log id)
    where: str  # C++ source location
    message: str


@dataclass
class Captured:
    """What one :func:`capture` saw: ONNX Runtime's records (filled when the block ends)."""

    records: list[OrtRecord] = field(default_factory=list)

    def reason(self) -> str | None:
        """The most telling line (the first error, else the first warning), for a one-line notice."""
        for level in (logging.CRITICAL, logging.ERROR, logging.WARNING):
            for r in self.records:
                if r.level == level:
                    return r.message
        return None


_lock = threading.RLock()
_depth = 0
_seen: set[tuple[int, str]] = set()


def parse(text: str) -> tuple[list[OrtRecord], str]:
    """Split captured stderr ``text`` into ONNX Runtime records and the other text (kept as is)."""
    records: list[OrtRecord] = []
    other: list[str] = []
    matches = list(_HEADER.finditer(text))
    other.append(text[: matches[0].start()] if matches else text)
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end() : end]
        # The record ends with the colour reset (``\x1b[m``) and a newline; what follows it is not ours.
        reset = body.find("\x1b[m")
        if reset >= 0:
            body, tail = body[:reset], body[reset + 3 :]
            other.append(tail[1:] if tail.startswith("\n") else tail)
        elif "\n" in body:  # no colour codes: the record is one line
            body, tail = body.split("\n", 1)
            other.append(tail)
        message = _CXX_PREFIX.sub("", _ANSI.sub("", body).strip())
        message = " ".join(line.strip() for line in message.splitlines() if line.strip())
        records.append(OrtRecord(_LEVEL_OF[m.group(1)], m.group(2), m.group(3), message))
    return records, "".join(other)


def emit(records: list[OrtRecord]) -> None:
    """Log ``records`` on ``kiosk.onnxruntime``; a message seen before only at DEBUG."""
    for r in records:
        key = (r.level, r.message)
        if key in _seen:
            log.debug("(again) %s", r.message)
            continue
        _seen.add(key)
        log.log(r.level, "%s", r.message)


def _set_default_severity(level: int) -> None:
    try:
        import onnxruntime as ort

        ort.set_default_logger_severity(level)
    except Exception:  # an onnxruntime without the call: its default threshold stays
        pass


def quiet_default_logger() -> None:
    """Outside :func:`capture`, let only errors of ONNX Runtime's default logger through."""
    with _lock:
        if _depth == 0:
            _set_default_severity(SEVERITY_ERROR)


@contextlib.contextmanager
def capture(quiet: bool = False) -> Iterator[Captured]:
    """Route ONNX Runtime's C++ log written inside the block through Python logging.

    ``quiet``: log the records only at DEBUG (a probe whose failure the caller reports itself).
    Process-wide (descriptor 2 is): one thread at a time; nested captures stack."""
    global _depth
    result = Captured()
    with _lock, tempfile.TemporaryFile() as tmp:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all (closed): nothing to capture or to keep clean
            yield result
            return
        os.dup2(tmp.fileno(), 2)
        _depth += 1
        _set_default_severity(SEVERITY_WARNING)
        try:
            yield result
        finally:
            _depth -= 1
            _set_default_severity(SEVERITY_WARNING if _depth else SEVERITY_ERROR)
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            records, other = parse(tmp.read().decode("utf-8", errors="replace"))
            if other:
                with contextlib.suppress(OSError):
                    os.write(2, other.encode("utf-8", errors="replace"))
            result.records.extend(records)
            if quiet:
                for r in records:
                    log.debug("%s", r.message)
            else:
                emit(records)


def reset() -> None:
    """Forget the messages already logged (tests)."""
    _seen.clear()
