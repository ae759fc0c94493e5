"""Printing keepsakes (kiosk/keepsake/printer.py): the command runs without a shell with {file}
replaced, one job at a time, within its timeout; each failure is one staff line and submit never waits."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kiosk.keepsake.printer import MAX_QUEUE, Printer, print_argv

PY = sys.executable


def _wait(printer: Printer, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while printer.busy and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not printer.busy


def _photo(tmp_path: Path, name: str = "a b;$(touch pwned).jpg") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\xff\xd8photo")
    return path


def test_the_command_gets_the_path_as_one_word_and_no_shell(tmp_path: Path) -> None:
    photo = _photo(tmp_path)
    log = tmp_path / "printed.txt"
    script = f"import sys; open({str(log)!r}, 'a').write(repr(sys.argv[1:]) + '\\n')"
    printer = Printer(f'{PY} -c "{script}" --copies 1 {{file}}', timeout_s=20)
    try:
        assert printer.submit(photo)
        _wait(printer)
    finally:
        printer.close()
    assert log.read_text() == repr(["--copies", "1", str(photo)]) + "\n"
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert printer.counts.printed == 1 and printer.problem == ""
    assert print_argv("lp -d booth -o fit-to-page {file}", photo) == [
        "lp",
        "-d",
        "booth",
        "-o",
        "fit-to-page",
        str(photo),
    ]


def test_one_job_at_a_time_in_order(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    script = (
        f"import sys, time, os; f = open({str(log)!r}, 'a'); f.write('start ' + os.path.basename(sys.argv[1]) + '\\n'); "
        "f.flush(); time.sleep(0.2); f.write('end\\n')"
    )
    printer = Printer(f'{PY} -c "{script}" {{file}}', timeout_s=20)
    try:
        t0 = time.monotonic()
        for i in range(3):
            assert printer.submit(_photo(tmp_path, f"{i}.jpg"))
        assert time.monotonic() - t0 < 0.5, "submit only queues"
        _wait(printer)
    finally:
        printer.close()
    assert log.read_text().split("\n")[:-1] == [
        "start 0.jpg",
        "end",
        "start 1.jpg",
        "end",
        "start 2.jpg",
        "end",
    ]


def test_failures_are_one_staff_line_each_and_a_success_clears_it(tmp_path: Path) -> None:
    photo = _photo(tmp_path, "p.jpg")
    printer = Printer("no-such-printer-command-xyz {file}", timeout_s=5)
    try:
        printer.submit(photo)
        _wait(printer)
        assert printer.problem.startswith("print failed: cannot run no-such-printer-command-xyz")
        printer.update(
            f"{PY} -c \"import sys; sys.stderr.write('lp: The printer is out of paper\\\\n'); sys.exit(3)\" {{file}}",
            5,
        )
        printer.submit(photo)
        _wait(printer)
        assert (
            printer.problem == "print failed: " + Path(PY).name + " exited 3: lp: The printer is out of paper"
        )
        printer.update(f'{PY} -c "import time; time.sleep(30)" {{file}}', 0.5)
        t0 = time.monotonic()
        printer.submit(photo)
        _wait(printer)
        assert time.monotonic() - t0 < 10
        assert "took longer than 0.5 s (keepsake.print_timeout_s)" in printer.problem
        printer.update(f'{PY} -c "pass" {{file}}', 5)
        photo.unlink()
        printer.submit(photo)
        _wait(printer)
        assert printer.problem.startswith("print skipped: the photo was deleted")
        photo.write_bytes(b"\xff\xd8")
        printer.submit(photo)
        _wait(printer)
        assert printer.problem == ""
        assert (printer.counts.failed, printer.counts.printed) == (4, 1)
    finally:
        printer.close()


def test_a_full_queue_refuses_at_once_with_a_staff_line(tmp_path: Path) -> None:
    photo = _photo(tmp_path, "p.jpg")
    printer = Printer(f'{PY} -c "import time; time.sleep(1)" {{file}}', timeout_s=5)
    try:
        t0 = time.monotonic()
        results = [printer.submit(photo) for _ in range(MAX_QUEUE + 3)]
        assert time.monotonic() - t0 < 0.5
        assert results.count(False) >= 2
        assert "already wait for the printer" in printer.problem
    finally:
        t0 = time.monotonic()
        printer.close(timeout_s=3)
        assert time.monotonic() - t0 < 3.5


def test_a_print_commands_error_naming_the_photo_shows_no_token(tmp_path: Path, caplog) -> None:
    """Issue 28, item 3: lp's "cannot open /…/<token>.jpg" reaches the staff line and the stats;
    the photo id stands for the token there and in the log's "printed" line."""
    import logging

    from kiosk.keepsake.privacy import photo_id
    from kiosk.keepsake.store import new_token

    token = new_token()
    photo = _photo(tmp_path, f"{token}.jpg")
    fail = f"{PY} -c \"import sys; sys.stderr.write('lp: cannot open ' + sys.argv[1]); sys.exit(1)\" {{file}}"
    printer = Printer(fail, timeout_s=5)
    try:
        with caplog.at_level(logging.INFO, logger="kiosk.keepsake.printer"):
            printer.submit(photo)
            _wait(printer)
            assert printer.problem.endswith(f"lp: cannot open {tmp_path}/#{photo_id(token)}.jpg")
            printer.update(f'{PY} -c "pass" {{file}}', 5)
            printer.submit(photo)
            _wait(printer)
        assert printer.counts.printed == 1
        assert token not in printer.problem and token[:4] + "…" not in caplog.text
        assert f"{photo_id(token)} printed by" in caplog.text
    finally:
        printer.close()
