"""The kiosk's side of the staff console (issue 29, items 1 and 2), without its process: the
console's commands become the booth's actions on the main thread, the status it is sent, and the
PIN that no log line carries."""

from __future__ import annotations

import io
import logging
import threading
from typing import Any

from session_fixtures import FakeLibrary

from kiosk.app.console_host import ConsoleHost
from kiosk.booth.controls import ControlState
from kiosk.config import KioskConfig, parse_config
from kiosk.console.auth import Door, PinError, basic_password, read_pin
from kiosk.console.history import DayHistory
from kiosk.console.pages import plot_svg
from kiosk.keepsake.privacy import hide_secret
from kiosk.util.logs import SafeFormatter


class FakeProcess:
    def __init__(self, *_: Any) -> None:
        self.queued: list[tuple[Any, ...]] = []
        self.sent: list[tuple[str, Any]] = []

    def start(self) -> FakeProcess:
        return self

    def commands(self) -> list[tuple[Any, ...]]:
        out, self.queued = self.queued, []
        return out

    def send(self, kind: str, value: Any) -> None:
        self.sent.append((kind, value))

    def health(self) -> str:
        return ""

    def stop(self) -> None:
        pass


class FakeRecord:
    def __init__(self, token: str) -> None:
        self.token = token


class FakeService:
    def __init__(self, tokens: list[str]) -> None:
        self._records = [FakeRecord(t) for t in tokens]
        self.discarded: list[str] = []
        self.store = self

    def records(self) -> list[FakeRecord]:
        return list(self._records)

    def discard(self, token: str) -> None:
        self.discarded.append(token)


class FakeKeepsake:
    def __init__(self, service: FakeService | None = None) -> None:
        self.service = service

    def metrics(self) -> dict[str, int] | None:
        return {"taken": 2, "downloaded": 1} if self.service is not None else None


def _host(
    tmp_path: Any, keepsake: FakeKeepsake | None = None
) -> tuple[ConsoleHost, FakeProcess, ControlState]:
    controls = ControlState(selected_key="ada")
    library = FakeLibrary(("ada", "grace", "hedy"))
    reload = threading.Event()
    host = ConsoleHost(
        controls, lambda: library, keepsake or FakeKeepsake(), reload, process_factory=FakeProcess
    )  # type: ignore[arg-type]
    cfg = parse_config("console: {enabled: true, pin: '4711-booth'}\n", "t.yaml", base_dir=tmp_path)
    host.open(cfg)
    assert host._starter is not None
    host._starter.join(5)
    assert host.available and host.process is not None
    return host, host.process, controls  # type: ignore[return-value]


def test_commands_become_the_booth_actions_of_the_frame(tmp_path: Any) -> None:
    service = FakeService(["t1", "t2", "t3"])
    host, process, controls = _host(tmp_path, FakeKeepsake(service))
    process.queued = [
        ("next_face",),
        ("prev_face",),
        ("swap", True),  # already on: nothing to do
        ("swap", False),
        ("swap", False),  # twice in one frame: one toggle
        ("pick_face", "hedy"),
        ("pick_face", "nobody"),
        ("keepsake",),
        ("print_again",),
        ("quit",),  # not a console command: ignored
    ]
    assert host.actions(1.0) == (
        "next_face",
        "prev_face",
        "toggle_swap",
        "pick_face_3",
        "keepsake",
        "print_again",
    )
    process.queued = [("reload_faces",), ("delete_keepsake", "t1"), ("delete_last_keepsakes", 2)]
    assert host.actions(1.1) == ()
    assert host._reload.is_set()
    assert service.discarded == ["t1", "t2", "t3"]


def test_the_status_goes_out_twice_a_second_with_the_day_plots(tmp_path: Any) -> None:
    from kiosk.app.counters import Counters

    host, process, _ = _host(tmp_path)
    c: Any = _counters()
    host.publish(c, 10.0)
    host.publish(c, 10.2)  # not due yet
    host.publish(c, 10.6)
    statuses = [v for k, v in process.sent if k == "status"]
    assert len(statuses) == 2
    doc = statuses[-1]
    assert doc["face"] == "grace" and doc["fps"]["render"] == 59.5 and doc["swap_share_pct"] == 88.0
    assert [f["key"] for f in doc["faces"]] == ["ada", "grace", "hedy"]
    assert doc["warnings"] == [
        {
            "text": "source: /dev/video0 gone",
            "todo": "Check the camera's cable and power; the kiosk reconnects by itself.",
        }
    ]
    assert doc["counters"]["errors"] == 3 and doc["counters"]["faces_seen"] == 1
    assert len(doc["history"]["errors"]) == 24 and doc["history"]["errors"][-1] == 3
    assert isinstance(c, Counters)


def _counters() -> Any:
    import dataclasses

    from kiosk.app import counters as k

    fields = {f.name: f for f in dataclasses.fields(k.Counters)}

    def blank(cls: Any, **over: Any) -> Any:
        vals = {}
        for f in dataclasses.fields(cls):
            if f.name in over:
                vals[f.name] = over[f.name]
            elif f.default is not dataclasses.MISSING:
                vals[f.name] = f.default
            else:
                vals[f.name] = {"str": "", "int": 0, "float": 0.0, "bool": False}.get(str(f.type))
        return cls(**vals)

    assert fields
    return blank(
        k.Counters,
        capture=blank(
            k.CaptureCounters,
            state="reconnecting",
            last_error="/dev/video0 gone",
            reconnects=2,
            kind="camera",
            description="cam",
        ),
        processing=blank(k.ProcessingCounters, errors=1, fps_now=20.0),
        render=blank(k.RenderCounters, fps_now=59.5, results_with_faces=5),
        screen={"swapped_pct": 88.0},
        faces=("ada", "grace", "hedy"),
        face_problems=(),
        selected_face="grace",
        swap_enabled=True,
        active_mode="synced",
        display_mode="synced",
        duration_s=5.0,
    )


def test_a_console_without_a_pin_is_a_staff_warning_and_no_process(tmp_path: Any) -> None:
    host = ConsoleHost(
        ControlState(), lambda: FakeLibrary(), FakeKeepsake(), threading.Event(), process_factory=FakeProcess
    )  # type: ignore[arg-type]
    cfg = parse_config("console: {enabled: true, pin_file: missing.pin}\n", "t.yaml", base_dir=tmp_path)
    host.open(cfg)
    assert host.process is None
    assert "missing.pin" in host.staff_line() and "console.pin_file" in host.staff_line()
    host.open(KioskConfig())  # off: nothing at all
    assert host.process is None


def test_the_pin_file_and_basic_header(tmp_path: Any) -> None:
    f = tmp_path / "pin"
    f.write_text("  s3cret-pin \nignored\n")
    assert read_pin(None, f) == "s3cret-pin"
    f.write_text("12\n")
    try:
        read_pin(None, f)
        raise AssertionError("a short PIN was taken")
    except PinError as exc:
        assert str(f) in str(exc) and "12" not in str(exc).replace(str(f), "")
    assert basic_password("Basic c3RhZmY6cGlu") == "pin"
    assert basic_password("Basic YWRtaW46cGlu") == ""  # admin:pin
    assert basic_password("Basic !!!") == "" and basic_password(None) is None


def test_the_lockout_ends_after_its_time() -> None:
    now = [0.0]
    door = Door("right-pin", max_failures=3, lockout_s=10.0, clock=lambda: now[0])
    for _ in range(3):
        assert not door.check("a", "wrong")
    assert door.locked("a") and not door.locked("b")
    now[0] = 11.0
    assert not door.locked("a") and door.check("a", "right-pin")


def test_the_pin_never_reaches_a_log_line() -> None:
    hide_secret("pin-9a8b7c")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(SafeFormatter("%(message)s"))
    logger = logging.getLogger("test.console.pin")
    logger.addHandler(handler)
    try:
        logger.warning("bad request %s", "Authorization: staff:pin-9a8b7c")
        try:
            raise ValueError("pin-9a8b7c")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "pin-9a8b7c" not in text and "<secret hidden>" in text


def test_day_history_and_its_plot() -> None:
    h = DayHistory()
    h.update({"errors": 2}, 3600 * 10 + 5)
    h.update({"errors": 5}, 3600 * 10 + 50)
    h.update({"errors": 6}, 3600 * 11 + 1)
    s = h.series(3600 * 11 + 2)
    assert s["errors"][-2:] == [5, 1] and s["hour_start"][-1] == 3600 * 11
    svg = plot_svg("errors", s["errors"], s["hour_start"])
    assert svg.startswith("<svg") and "errors: 6" in svg and svg.count("<rect") == 24
