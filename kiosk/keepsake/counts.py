"""The web server's counters (kept apart from the server, so the kiosk's process reads them without
importing aiohttp when the server runs in a process of its own)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServerCounts:
    """What the server saw (the Prometheus file reports them)."""

    pages: int = 0
    downloads: int = 0  # JPEGs served (GET with status 200)
    refused: int = 0  # every answer that is not 200
    connections_refused: int = 0  # connections closed unanswered: over the caps, or outside keepsake.allow
    clip_downloads: int = 0  # clip files (MP4, GIF) served whole or from their start (keepsake.clip)


#: The fields, in the order the server process shares them.
COUNT_FIELDS = ("pages", "downloads", "refused", "connections_refused", "clip_downloads")
