"""Live config reload: valid changes produce a new config, invalid ones keep the old one."""

from __future__ import annotations

import os

from kiosk.app.config_watch import ConfigWatcher


def _write(path, text, bump):
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))


def test_valid_change_is_reported(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "display:\n  fit: fit\n", 0)
    w = ConfigWatcher(f, interval_s=0.0)
    assert w.poll(1.0) is None
    _write(f, "display:\n  fit: fill\n", 1)
    assert w.poll(2.0) is None  # seen once: wait until it settles
    ev = w.poll(2.5)
    assert ev is not None and ev.config is not None and ev.config.display.fit == "fill"
    assert w.poll(3.0) is None  # no further change


def test_invalid_change_reports_problems_only(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "display:\n  fit: fit\n", 0)
    w = ConfigWatcher(f, interval_s=0.0)
    _write(f, "display:\n  fit: sideways\n", 1)
    assert w.poll(1.0) is None
    ev = w.poll(1.5)
    assert ev is not None and ev.config is None
    assert ev.problems == (f"{f}:2: display.fit: must be one of fit, fill",)


def test_touch_without_change_and_polling_interval(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "{}\n", 0)
    w = ConfigWatcher(f, interval_s=10.0)
    assert w.poll(0.0) is None
    _write(f, "display: {fit: fill}\n", 1)
    assert w.poll(5.0) is None  # within the interval: not even a stat
    assert w.poll(10.0) is None  # changed: looked at again settle_s later
    assert w.poll(10.1) is None
    assert w.poll(10.3) is not None
    _write(f, "display: {fit: fill}\n", 2)  # same bytes, new mtime
    assert w.poll(20.0) is None


def test_file_deleted_is_not_a_crash(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "{}\n", 0)
    w = ConfigWatcher(f, interval_s=0.0)
    f.unlink()
    assert w.poll(1.0) is None
    ev = w.poll(2.0)
    assert ev is not None and ev.config is None and "not found" in ev.problems[0]


def test_half_written_file_is_never_applied(tmp_path):
    """An editor mid-save: the file grows between polls; only the finished file is applied."""
    f = tmp_path / "k.yaml"
    _write(f, "display: {fit: fit, width: 640}\n", 0)
    w = ConfigWatcher(f, interval_s=1.0)  # settle_s: 0.3 s by default
    full = "display: {fit: fill, width: 1280}\nsource: {mirror: false}\n"
    events = []
    t = 1.0
    for n in range(5, len(full) + 1, 5):  # a slow writer: 5 more bytes before every poll
        _write(f, full[:n], n)
        events.append(w.poll(t))
        t += 0.3
    assert events == [None] * len(events)  # nothing applied while the file kept changing
    _write(f, full, 999)
    assert w.poll(t) is None
    ev = w.poll(t + 0.3)  # unchanged across two polls: applied
    assert ev is not None and ev.config is not None
    assert ev.config.display.fit == "fill" and ev.config.display.width == 1280
    assert ev.config.source.mirror is False


def test_reload_now_loads_at_once(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "display: {fit: fit}\n", 0)
    w = ConfigWatcher(f, interval_s=100.0)
    _write(f, "display: {fit: fill}\n", 1)
    ev = w.reload_now()
    assert ev.config is not None and ev.config.display.fit == "fill"
    assert w.poll(1000.0) is None  # already applied
