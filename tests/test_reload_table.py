"""Live reload is a declared table (kiosk/app/reload_table.py): every config key has a row, and changing a key in
a constructed kiosk rebuilds exactly the parts its row names, observed on the app itself (a new
capture thread, a new library, a stage rebuild handed to the inference thread, the window marked
for reopening, new loop options, new bindings, toggles, monitor, log level)."""

from __future__ import annotations

import logging
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.app.reload_table import RELOAD_TABLE, Part, plan_reload
from kiosk.config import KioskConfig

BASE = {"source": {"kind": "synthetic"}, "processing": {"enabled": False}}


def _config_keys() -> set[str]:
    keys = set()
    for section, field in KioskConfig.model_fields.items():
        if field.exclude:  # base_dir: where the file is, not a setting
            continue
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), section
        keys |= {f"{section}.{name}" for name in model.model_fields}
    return keys


def test_every_config_key_has_a_row_and_every_row_a_key() -> None:
    keys = _config_keys()
    assert sorted(keys - set(RELOAD_TABLE)) == [], (
        "declare these keys in kiosk/app/reload_table.py RELOAD_TABLE"
    )
    assert sorted(set(RELOAD_TABLE) - keys) == [], "RELOAD_TABLE names keys the config no longer has"


def _candidates(value: Any, annotation: Any) -> list[Any]:
    """Values other than ``value`` that a field of ``annotation`` may take (the first valid one is used)."""
    out: list[Any] = []
    args = typing.get_args(annotation)
    literals = (
        [a for a in args if not isinstance(a, type)]
        if typing.get_origin(annotation) is typing.Literal
        else []
    )
    out += [v for v in literals if v != value]
    if isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int | float):
        out += [value + 1, value * 2, value / 2, value - 1, 1]
    elif isinstance(value, str):
        out += [value + "x", "other.onnx", "127.0.0.1:18199"]  # the last: an address:port
    elif isinstance(value, tuple):
        out.append(tuple(0.1 for _ in value))
    elif isinstance(value, list):
        out += [[*value, "extra"], [*value, "CUDAExecutionProvider"], list(reversed(value))]
    elif isinstance(value, dict):
        out.append({**value, "next_face": ["X"], "prev_face": ["A"]})
    elif isinstance(value, BaseModel):  # a nested section: change its first field that can change
        for name, field in type(value).model_fields.items():
            for cand in _candidates(getattr(value, name), field.annotation):
                out.append(value.model_copy(update={name: cand}))
    elif value is None:
        out += [
            "faces",
            "photo.jpg",
            True,
            "other.onnx",
            "kiosk.prom",
            "http://192.168.1.10:8088",
            "lp {file}",
        ]
    return out


def _changed(cfg: KioskConfig, key: str) -> KioskConfig:
    section_name, name = key.split(".")
    section = getattr(cfg, section_name)
    field = type(section).model_fields[name]
    for cand in _candidates(getattr(section, name), field.annotation):
        data = section.model_dump()
        data[name] = cand.model_dump() if isinstance(cand, BaseModel) else cand
        try:
            new_section = type(section).model_validate(data)
        except ValueError:
            continue
        if getattr(new_section, name) != getattr(section, name):
            return cfg.model_copy(update={section_name: new_section})
    raise AssertionError(f"no other valid value found for {key}")


def _observe(app: KioskApp, new: KioskConfig, caplog: pytest.LogCaptureFixture) -> set[Part]:
    """Apply ``new`` and report what was rebuilt, from the app's own state."""
    stage: list[object] = []
    app.inference.reconfigure = lambda build, *policy: stage.append(build)  # type: ignore[method-assign]
    monitor: list[bool] = []
    real_monitor = app.reload.reconfigure_monitor
    app.reload.reconfigure_monitor = lambda: (monitor.append(True), real_monitor())[1]  # type: ignore[method-assign]
    before = (app.capture, app.library, app.loop.options, app.keyboard, app.controls.debug)
    pending = app.capture.switch_pending
    enhance = app.controls.enhance_enabled
    app.display.changed = False  # the render loop would have reopened the window by now
    root = logging.getLogger()
    level = root.level
    caplog.clear()
    try:
        with caplog.at_level(logging.INFO, logger="kiosk.app.reload"):
            root.setLevel(logging.WARNING)  # a level the config's INFO/DEBUG/ERROR differ from
            app.apply_config(new)
            seen_level = root.level
    finally:
        root.setLevel(level)
    parts: set[Part] = set()
    if app.capture is not before[0] or app.capture.switch_pending is not pending:
        parts.add(Part.CAPTURE)  # the capture thread was asked to switch (it takes it itself)
    if app.library is not before[1]:
        parts.add(Part.LIBRARY)
    if stage:
        parts.add(Part.STAGE)
    if app.display.changed:
        parts.add(Part.WINDOW)
    if app.loop.options is not before[2]:
        parts.add(Part.LOOP)
    if app.keyboard is not before[3]:
        parts.add(Part.INPUT)
    if app.controls.debug != before[4] or app.controls.enhance_enabled != enhance:
        parts.add(Part.TOGGLES)
    if monitor:
        parts.add(Part.MONITOR)
    if seen_level != logging.WARNING:
        parts.add(Part.LOG_LEVEL)
    if any("applies at the next start" in r.getMessage() for r in caplog.records):
        parts.add(Part.RESTART)
    return parts


@pytest.mark.parametrize("key", sorted(RELOAD_TABLE))
def test_changing_a_key_rebuilds_exactly_what_the_table_says(
    key: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = KioskConfig.model_validate(BASE).model_copy(update={"base_dir": tmp_path})
    new = _changed(cfg, key)
    assert plan_reload(cfg, new) == RELOAD_TABLE[key]
    app = KioskApp(cfg, RunOptions(headless=True))
    try:
        assert _observe(app, new, caplog) == set(RELOAD_TABLE[key]), key
        assert app.cfg is new
        assert app.session.cfg is new, "the booth session reads the new config too"
        assert _observe(app, new, caplog) == set(), "the same config again rebuilds nothing"
    finally:
        app.shutdown(0.5)
    assert not app.capture.is_alive()  # a kiosk that is not running gets no thread started


def test_display_composite_rebuilds_the_stage_with_the_new_composite_and_keeps_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """display.composite: cpu makes the rebuilt stage paste faces itself (the renderer then draws the
    frame as it comes, ``faces_pasted``); the window is not reopened for it."""
    import kiosk.processing.booth_stage as booth_processor
    from kiosk.processing.swap_stage import stage_composite

    built: list[str] = []
    monkeypatch.setattr(
        booth_processor,
        "build_booth_processor",
        lambda cfg, library, controls: built.append(stage_composite(cfg)),
    )
    cfg = KioskConfig.model_validate({"source": {"kind": "synthetic"}}).model_copy(
        update={"base_dir": tmp_path}
    )
    app = KioskApp(cfg, RunOptions(headless=True))
    builds: list[Any] = []
    app.inference.reconfigure = lambda build, *policy: builds.append(build)  # type: ignore[method-assign]
    app.apply_config(cfg.model_copy(update={"display": cfg.display.model_copy(update={"composite": "cpu"})}))
    assert len(builds) == 1
    builds[0]()  # what the loader thread runs
    assert built == ["cpu"]
    assert not app.display.changed
    live = app.cfg.model_copy(update={"display": app.cfg.display.model_copy(update={"mode": "live"})})
    app.apply_config(live)
    builds[-1]()
    assert built == ["cpu", "gpu"]  # the live display always composites on the GPU
    app.shutdown(0.5)


def test_keys_read_where_used_reach_the_booth_session(tmp_path: Path) -> None:
    """ui.* and controls.allow_quit rebuild nothing: the booth session reads them at the next
    frame, so a live change of the banner or the quit policy shows without a restart."""
    cfg = KioskConfig.model_validate(
        {**BASE, "display": {"fullscreen": True}, "ui": {"banner": "old"}}
    ).model_copy(update={"base_dir": tmp_path})
    app = KioskApp(cfg, RunOptions(headless=True))
    try:
        assert app.session.view(0.0).booth.banner == "old"
        assert not app.session.quit_allowed("ESCAPE")
        new = cfg.model_copy(
            update={
                "ui": cfg.ui.model_copy(update={"banner": "new"}),
                "controls": cfg.controls.model_copy(update={"allow_quit": True}),
            }
        )
        assert app.apply_config(new) == frozenset()
        assert app.session.view(1.0).booth.banner == "new"
        assert app.session.quit_allowed("ESCAPE")
    finally:
        app.shutdown(timeout_s=0.5)


def test_configuration_doc_shows_the_table() -> None:
    from kiosk.app.reload_table import table_markdown

    doc = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    assert table_markdown() in doc, (
        "docs/configuration.md's live-reload table: paste kiosk.app.reload_table.table_markdown()"
    )
    rows = table_markdown().splitlines()[2:]
    sections = {line.split("`")[1] for line in rows}
    assert sections == {k.split(".")[0] for k in RELOAD_TABLE}
