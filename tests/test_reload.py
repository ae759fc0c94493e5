"""Live config reload: valid changes produce a new config, invalid ones keep the old one."""

from __future__ import annotations

import os

from kiosk.booth.reload import ConfigWatcher


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
    ev = w.poll(2.0)
    assert ev is not None and ev.config is not None and ev.config.display.fit == "fill"
    assert w.poll(3.0) is None  # no further change


def test_invalid_change_reports_problems_only(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "display:\n  fit: fit\n", 0)
    w = ConfigWatcher(f, interval_s=0.0)
    _write(f, "display:\n  fit: sideways\n", 1)
    ev = w.poll(1.0)
    assert ev is not None and ev.config is None
    assert ev.problems == (f"{f}:2: display.fit: must be one of fit, fill",)


def test_touch_without_change_and_polling_interval(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "{}\n", 0)
    w = ConfigWatcher(f, interval_s=10.0)
    assert w.poll(0.0) is None
    _write(f, "display: {fit: fill}\n", 1)
    assert w.poll(5.0) is None  # within the interval: not even a stat
    assert w.poll(10.0) is not None
    _write(f, "display: {fit: fill}\n", 2)  # same bytes, new mtime
    assert w.poll(20.0) is None


def test_file_deleted_is_not_a_crash(tmp_path):
    f = tmp_path / "k.yaml"
    _write(f, "{}\n", 0)
    w = ConfigWatcher(f, interval_s=0.0)
    f.unlink()
    ev = w.poll(1.0)
    assert ev is not None and ev.config is None and "not found" in ev.problems[0]
