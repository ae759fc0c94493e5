"""No keepsake token in any log line (issue 28, item 3): the photo id instead, in the kiosk's and
the server process's formatter, for messages, arguments and tracebacks alike."""

from __future__ import annotations

import logging
import sys

from kiosk.keepsake.privacy import hide_tokens, photo_id
from kiosk.keepsake.store import KeepsakeStore, StoreLimits, new_token
from kiosk.util.logs import SafeFormatter


def _record(msg: str, *args: object, exc: bool = False) -> logging.LogRecord:
    return logging.LogRecord("x", logging.ERROR, __file__, 1, msg, args, sys.exc_info() if exc else None)


def test_photo_id_is_short_stable_and_not_the_token() -> None:
    t = new_token()
    assert photo_id(t) == photo_id(t) != photo_id(new_token())
    assert len(photo_id(t)) == 8 and photo_id(t) not in t


def test_the_formatter_writes_no_token_in_a_message_its_arguments_or_a_traceback() -> None:
    t = new_token()
    fmt = SafeFormatter("%(message)s")
    try:
        raise ValueError(f"Bad status line 'GET /p/{t}.jpg HTTP/9.9'")
    except ValueError:
        rec = _record(
            "request %s failed; file /var/k/%s.jpg, temp /var/k/.%sab12.tmp", f"/p/{t}", t, t, exc=True
        )
    text = fmt.format(rec)
    assert t not in text
    assert text.count(f"#{photo_id(t)}") == 4  # the three arguments and the exception's line
    # other words of 22 characters are left alone
    assert hide_tokens("models/inswapper_128_fp16.onnx aaaaaaaaaaaaaaaaaaaaaa") == (
        "models/inswapper_128_fp16.onnx aaaaaaaaaaaaaaaaaaaaaa"
    )


def test_the_store_logs_a_deleted_photo_by_its_id(tmp_path, caplog) -> None:
    now = [1000.0]
    store = KeepsakeStore(tmp_path / "k", StoreLimits(ttl_s=10, max_photos=5, max_mb=5), clock=lambda: now[0])
    store.open()
    rec = store.add(b"\xff\xd8 jpeg")
    now[0] += 11
    with caplog.at_level(logging.INFO, logger="kiosk.keepsake.store"):
        assert store.sweep() == 1
    assert f"{rec.token[:4]}…" not in caplog.text  # before: "keepsake AbCd… deleted"
    assert f"keepsake {photo_id(rec.token)} deleted (time-to-live)" in caplog.text


def test_a_withdrawn_photo_is_logged_by_its_id_not_the_start_of_its_token(tmp_path, caplog) -> None:
    """A QR code withdrawn (the server went down) deletes its photo: the line names the photo id,
    not the token's first characters (before: "keepsake AbCd… deleted (withdrawn)")."""
    store = KeepsakeStore(tmp_path / "k", StoreLimits(ttl_s=10, max_photos=5, max_mb=5)).open()
    rec = store.add(b"\xff\xd8 jpeg")
    with caplog.at_level(logging.INFO, logger="kiosk.keepsake.store"):
        store.discard(rec.token)
    assert f"{rec.token[:4]}…" not in caplog.text
    assert f"keepsake {photo_id(rec.token)} deleted (withdrawn)" in caplog.text
