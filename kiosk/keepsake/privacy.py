"""A photo's token is its only key: it never leaves the kiosk's memory but in the QR code.

:func:`photo_id` is what logs name a photo by (8 hex digits of a hash: tells two photos apart,
cannot be turned back into the token nor fetch anything); :func:`hide_tokens` replaces any token in
a line of text (``/p/<token>``, ``<token>.jpg``, a temporary ``.<token>…tmp``) by ``#<photo id>``;
the kiosk's and the server process's log formatters pass every line through it, tracebacks and
aiohttp's own messages included.
"""

from __future__ import annotations

import hashlib
import re

_TOKEN = r"[A-Za-z0-9_-]{22}"
_TOKEN_IN_TEXT = re.compile(
    rf"(?<=/p/){_TOKEN}(?![A-Za-z0-9_-])|(?<![A-Za-z0-9_-]){_TOKEN}(?=\.jpg)|(?<=/\.){_TOKEN}"
)


def photo_id(token: str) -> str:
    """A short, non-reversible name of the photo behind ``token`` for logs."""
    return hashlib.sha256(b"keepsake photo id:" + token.encode()).hexdigest()[:8]


def hide_tokens(text: str) -> str:
    """``text`` with every token written as ``#<photo id>``."""
    if len(text) < 22:
        return text
    return _TOKEN_IN_TEXT.sub(lambda m: "#" + photo_id(m.group(0)), text)
