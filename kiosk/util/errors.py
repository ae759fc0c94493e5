"""How an exception reads in a log line, a staff line or a CLI error: one line, never a traceback."""

from __future__ import annotations


def one_line(exc: BaseException, limit: int | None = None, *, with_type: bool = False) -> str:
    """The first line of ``str(exc)`` (at most ``limit`` characters), or the exception's type name
    when it has no message; ``with_type`` puts the type name in front (``OSError: disk full``)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0][:limit] if limit is not None else text.splitlines()[0]
    return f"{type(exc).__name__}: {line}" if with_type else line
