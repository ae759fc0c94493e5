"""Loopback ports for tests that start a server."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now, chosen by the kernel (a bind to port 0),
    so tests on parallel workers never pick the same one (a fixed range they would race over)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_request(port: int, data: bytes, source: str = "127.0.0.1", timeout_s: float = 5.0) -> bytes:
    """Send ``data`` from ``source`` to 127.0.0.1:``port`` and read the answer until the server
    closes: its bytes, b"" when the connection was closed (or reset) unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s, source_address=(source, 0)) as s:
        try:
            s.sendall(data)
        except (ConnectionResetError, BrokenPipeError):
            return b""
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            out += chunk
    return out
