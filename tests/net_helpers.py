"""Loopback ports for tests that start a server."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now, chosen by the kernel (a bind to port 0),
    so tests on parallel workers never pick the same one (a fixed range they would race over)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
