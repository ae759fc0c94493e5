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


def _recorder(tmp_path: Path, fail_on: int = 0) -> tuple[str, Path]:
    """A print command that records each call (the file's name and bytes); ``fail_on``: the n-th
    call exits 1."""
    log = tmp_path / "calls"
    log.mkdir()
    script = (
        "import sys, os, shutil; d = sys.argv[1]; n = len(os.listdir(d)) + 1; "
        f"shutil.copy(sys.argv[2], os.path.join(d, str(n) + '.jpg')); sys.exit(1 if n == {fail_on} else 0)"
    )
    return f'{PY} -c "{script}" {log} {{file}}', log


def _calls(log: Path) -> list[bytes]:
    return [(log / f"{n}.jpg").read_bytes() for n in range(1, len(list(log.iterdir())) + 1)]


def test_a_job_prints_its_copies_and_a_failed_copy_ends_it(tmp_path: Path) -> None:
    photo = _photo(tmp_path, "photo.jpg")
    command, log = _recorder(tmp_path, fail_on=5)
    printer = Printer(command, timeout_s=20)
    try:
        assert printer.submit(photo, copies=3)
        _wait(printer)
        assert _calls(log) == [photo.read_bytes()] * 3 and printer.counts.printed == 3
        assert printer.submit(photo, copies=4)  # the 5th call fails: the job's last two copies
        _wait(printer)
    finally:
        printer.close()
    assert len(_calls(log)) == 5 and printer.counts.printed == 4 and printer.counts.failed == 1
    assert printer.problem.startswith("print failed:") and "exited 1" in printer.problem


def test_print_qr_prints_the_photo_with_its_address_and_keeps_no_file(tmp_path: Path) -> None:
    import tempfile

    import cv2
    import numpy as np

    url = "http://192.168.1.20:8088/p/AbCdEfGhIjKlMnOpQrStUv"
    photo = tmp_path / "AbCdEfGhIjKlMnOpQrStUv.jpg"
    ok, data = cv2.imencode(".jpg", np.full((720, 1280, 3), 120, np.uint8))
    photo.write_bytes(data.tobytes())
    command, log = _recorder(tmp_path)
    before = set(Path(tempfile.gettempdir()).glob("keepsake-print-*"))
    printer = Printer(command, timeout_s=20)
    try:
        assert printer.submit(photo, copies=2, qr_url=url)
        _wait(printer)
    finally:
        printer.close()
    calls = _calls(log)
    assert len(calls) == 2 and calls[0] == calls[1] and printer.counts.printed == 2
    printed = cv2.imdecode(np.frombuffer(calls[0], np.uint8), cv2.IMREAD_COLOR)
    text, points, _ = cv2.QRCodeDetector().detectAndDecode(printed)
    assert text == url
    assert points.reshape(-1, 2)[:, 0].min() > 1280 * 0.6 and points.reshape(-1, 2)[:, 1].min() > 720 * 0.5
    assert photo.read_bytes() == data.tobytes()  # the stored photo (the phone's) has no QR code
    assert set(Path(tempfile.gettempdir()).glob("keepsake-print-*")) == before  # the print file is gone


def test_each_kept_photo_prints_print_copies_and_the_staff_key_prints_the_last_again(tmp_path: Path) -> None:
    """Issue 30, item 4: keepsake.print_copies per photo; the print_again key (CTRL+P) and
    KeepsakeHost.print_again (for a staff console) print the last kept photo once more."""
    from net_helpers import free_port

    from kiosk.app.keepsake_host import KeepsakeHost
    from kiosk.bindings import DEFAULT_KEYBOARD
    from kiosk.booth.controls import KeyboardInput
    from kiosk.config import KioskConfig
    from kiosk.keepsake.service import KeepsakeService

    command, log = _recorder(tmp_path)
    cfg = KioskConfig.model_validate(
        {
            "keepsake": {
                "enabled": True,
                "listen": f"127.0.0.1:{free_port()}",
                "print_copies": 2,
                "print_command": command,
            }
        }
    )
    assert cfg.keepsake.print_copies == 2 and cfg.keepsake.print_command == command
    svc = KeepsakeService(cfg.keepsake, tmp_path / "k", separate_process=False).start()
    host = KeepsakeHost(None, lambda: None)  # type: ignore[arg-type]
    host.service = svc
    try:
        assert svc.wait_ready()
        assert host.print_again() == "print again: no photo has been kept yet"
        assert host.staff_line() == "print again: no photo has been kept yet"
        first = svc.keep(b"\xff\xd8first\xff\xd9")
        last = svc.keep(b"\xff\xd8last\xff\xd9")
        assert svc.printer is not None
        _wait(svc.printer)
        assert _calls(log) == [b"\xff\xd8first\xff\xd9"] * 2 + [b"\xff\xd8last\xff\xd9"] * 2
        assert KeyboardInput(DEFAULT_KEYBOARD).actions(["CTRL+P"]) == ["print_again"]
        host.step(("print_again",), 0.0, None)  # the staff key, as the render loop hands it over
        _wait(svc.printer)
        assert _calls(log)[4:] == [b"\xff\xd8last\xff\xd9"] and host.staff_line() == ""
        assert svc.metrics()["printed"] == 5
        svc.discard(last.record.token)
        assert "was deleted" in host.print_again() and len(_calls(log)) == 5
        assert first.record.path.exists()
    finally:
        host.service = None
        svc.close()
