"""A photo's token is its only key: it never leaves the kiosk's memory but in the QR code.

:func:`photo_id` is what logs name a photo by (8 hex digits of a hash: tells two photos apart,
cannot be turned back into the token nor fetch anything); :func:`hide_tokens` replaces any token in
a line of text (``/p/<token>``, ``<token>.jpg``, a temporary ``.<token>…tmp``) by ``#<photo id>``;
the kiosk's and the server process's log formatters pass every line through it, tracebacks and
aiohttp's own messages included. :class:`GoneTokens` remembers deleted photos across a restart
without keeping their tokens.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections import OrderedDict
from pathlib import Path

from kiosk.util.atomic import atomic_write

log = logging.getLogger(__name__)

_TOKEN = r"[A-Za-z0-9_-]{22}"
_TOKEN_IN_TEXT = re.compile(
    rf"(?<=/p/){_TOKEN}(?![A-Za-z0-9_-])|(?<![A-Za-z0-9_-]){_TOKEN}(?=\.jpg)|(?<=/\.){_TOKEN}"
)


#: Secrets no log line may carry (the staff console's PIN): :func:`hide_secret` adds one.
_SECRETS: set[str] = set()
SECRET_HIDDEN = "<secret hidden>"


def hide_secret(secret: str) -> None:
    """From now on, every log line written through the kiosk's formatters shows ``secret`` (a
    PIN) as :data:`SECRET_HIDDEN`."""
    if secret:
        _SECRETS.add(secret)


def hide_secrets(text: str) -> str:
    """``text`` with every secret given to :func:`hide_secret` replaced."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, SECRET_HIDDEN)
    return text


def photo_id(token: str) -> str:
    """A short, non-reversible name of the photo behind ``token`` for logs."""
    return hashlib.sha256(b"keepsake photo id:" + token.encode()).hexdigest()[:8]


def hide_tokens(text: str) -> str:
    """``text`` with every token written as ``#<photo id>``."""
    if len(text) < 22:
        return text
    return _TOKEN_IN_TEXT.sub(lambda m: "#" + photo_id(m.group(0)), text)


#: The file, in the keepsake folder, of the tokens of deleted photos (salted hashes, never a token).
GONE_FILE = ".gone-keepsakes"
_GONE_HEADER = "# faceswap-kiosk: deleted keepsakes, as salted hashes of their tokens (no address)"
_HASH_HEX = 24  # 96 bits: a token that never was matches by chance about once in 10^24 lookups


class GoneTokens:
    """The tokens of deleted photos, remembered as salted hashes (at most ``limit``, oldest
    forgotten first), so their address answers 410 Gone also after a restart: :meth:`save` and
    :meth:`load` keep them in :data:`GONE_FILE`, which says nothing of any address. Not locked:
    its owner (the store, the server's mirror) guards it."""

    def __init__(self, limit: int, salt: bytes | None = None) -> None:
        self.limit = limit
        self.salt = salt if salt is not None else secrets.token_bytes(16)
        self._hashes: OrderedDict[str, None] = OrderedDict()

    def _hash(self, token: str) -> str:
        return hashlib.sha256(self.salt + token.encode()).hexdigest()[:_HASH_HEX]

    def add(self, token: str) -> None:
        h = self._hash(token)
        self._hashes[h] = None
        self._hashes.move_to_end(h)
        while len(self._hashes) > self.limit:
            self._hashes.popitem(last=False)

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self._hash(token) in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)

    def copy(self) -> GoneTokens:
        twin = GoneTokens(self.limit, self.salt)
        twin._hashes.update(self._hashes)
        return twin

    def text(self) -> str:
        return "\n".join([_GONE_HEADER, f"salt {self.salt.hex()}", *self._hashes, ""])

    def save(self, path: Path) -> None:
        """Write :data:`GONE_FILE` (mode 0600, atomically); a failure is one log line."""
        try:
            atomic_write(path, self.text(), mode=0o600, make_folder=False)
        except OSError as exc:
            log.warning(
                "keepsakes: cannot write %s: %s (deleted photos may answer 404, not 410, after a restart)",
                path,
                exc.strerror or exc,
            )

    @classmethod
    def load(cls, path: Path, limit: int) -> GoneTokens:
        """The tokens saved in ``path``; none when it is missing, and none with one log line when it
        is unreadable or not such a file (it is written again at the next deletion)."""
        try:
            lines = path.read_text(encoding="ascii").splitlines()
        except FileNotFoundError:
            return cls(limit)
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("keepsakes: %s unreadable (%s); forgetting the deleted photos", path, exc)
            return cls(limit)
        ok = len(lines) >= 2 and lines[0] == _GONE_HEADER and lines[1].startswith("salt ")
        try:
            gone = cls(limit, bytes.fromhex(lines[1][5:])) if ok else None
        except ValueError:
            gone = None
        hashes = lines[2:] if gone is not None else []
        if gone is None or not all(len(h) == _HASH_HEX and _is_hex(h) for h in hashes):
            log.warning("keepsakes: %s is not a list of deleted photos; starting a new one", path)
            return cls(limit)
        for h in hashes[-limit:]:
            gone._hashes[h] = None
        return gone


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
