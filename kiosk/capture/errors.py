"""The one error a capture source raises (kept apart so every source module can import it)."""


class SourceError(Exception):
    """A source cannot deliver frames (yet). The message is one line, for screen and log."""
