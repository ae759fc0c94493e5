"""The booth session: one frozen view per frame, resolved against one library snapshot; the
selection is the face's key and stays valid whatever the faces folder does between key presses."""

from __future__ import annotations

import dataclasses
import random

import pytest
from session_fixtures import FakeLibrary

from kiosk.booth.controls import ControlState, KeyboardInput
from kiosk.booth.faces import LibrarySnapshot
from kiosk.booth.session import BoothSession, SessionView
from kiosk.config import KioskConfig, parse_config

FACE_KEYS = ["RIGHT", "LEFT", *(str(d) for d in range(1, 10))]


def _cfg(extra: str = "") -> KioskConfig:
    return parse_config(f"processing: {{enabled: false}}\nui: {{attract_after_s: 0}}\n{extra}", "k.yaml")


def _session(library: object, extra: str = "") -> tuple[BoothSession, ControlState]:
    controls = ControlState()
    return BoothSession(_cfg(extra), library, controls, now=0.0), controls  # type: ignore[arg-type]


def _check(view: SessionView, controls: ControlState) -> None:
    """The view is consistent with the one snapshot it was resolved against."""
    faces = view.faces
    assert [f.key for f in view.booth.faces] == list(faces.keys)
    if not faces.entries:
        assert view.selected_index is None and view.selected_key == "" and view.booth.selected == 0
        return
    i = view.selected_index
    assert i is not None and 0 <= i < len(faces.entries)
    assert view.booth.selected == i
    assert view.selected_key == faces.entries[i].key == controls.selected_key
    assert view.selected_name == faces.entries[i].name


def test_selection_follows_its_face_and_then_its_place():
    lib = FakeLibrary(("a", "b", "c"))
    s, controls = _session(lib)
    view = s.step(["3"], None, 1.0)  # pick the third face
    assert view.selected_key == "c" and view.selected_index == 2 and view.actions == ("pick_face_3",)
    lib.publish(("x", "c"))  # a face added before it, one removed: the selection stays on c
    view = s.step([], None, 2.0)
    assert (view.selected_key, view.selected_index) == ("c", 1)
    lib.publish(("x", "y", "z"))  # c removed: the face now at its place
    assert s.step([], None, 3.0).selected_key == "y"
    lib.publish(("x",))  # the list got shorter than the old place: the last face
    assert s.step([], None, 4.0).selected_key == "x"
    lib.publish(())  # the folder emptied: keys do nothing, nothing raises
    view = s.step(["RIGHT", "LEFT", "1", "9"], None, 5.0)
    assert view.selected_index is None and view.actions == ()
    lib.publish(("p", "q"))
    view = s.step(["RIGHT"], None, 6.0)
    assert view.selected_key == "q" and view.booth.t_switched == 6.0
    _check(view, controls)


def test_face_keys_under_library_churn_never_raise_and_keep_a_valid_selection():
    """Faces removed and added between key presses, down to none and back, in random order."""
    rng = random.Random(7)
    pool = [f"k{i}" for i in range(12)]
    lib = FakeLibrary(tuple(pool[:5]))
    s, controls = _session(lib)
    emptied = 0
    for frame in range(600):
        if rng.random() < 0.4:
            n = rng.choice([0, 0, 1, 2, 3, 5, 9, 12])
            emptied += n == 0
            lib.publish(tuple(rng.sample(pool, n)))
        before = controls.selected_key
        keep = before in lib.snapshot.keys
        keys = [rng.choice(FACE_KEYS) for _ in range(rng.randint(0, 3))]
        view = s.step(keys, None, float(frame))
        _check(view, controls)
        if keep and not view.actions:
            assert view.selected_key == before  # nobody pressed: the same face stays selected
    assert emptied > 10


class ChurningLibrary:
    """A library whose inference thread publishes a new snapshot between any two reads."""

    def __init__(self) -> None:
        self.rng = random.Random(3)
        self.version = 0
        self.reads = 0

    @property
    def snapshot(self) -> LibrarySnapshot:
        from session_fixtures import entry

        self.reads += 1
        self.version += 1
        n = self.rng.choice([0, 1, 2, 4, 9])
        return LibrarySnapshot(
            1, self.version, tuple(entry(f"k{self.rng.randrange(12)}{i}") for i in range(n))
        )


def test_a_frame_reads_the_library_once():
    lib = ChurningLibrary()
    s, controls = _session(lib)
    for frame in range(200):
        view = s.step(["RIGHT", "9", "LEFT", "2"], None, float(frame))
        _check(view, controls)
    assert lib.reads == 200  # one per frame


def test_the_view_is_frozen_and_belongs_to_its_frame():
    lib = FakeLibrary(("a", "b"))
    s, controls = _session(lib)
    first = s.step([], None, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.attract = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.booth.selected = 1  # type: ignore[misc]
    lib.publish(("a", "b", "c"), problems=("bad.jpg: no face found; use a clear, frontal photo",))
    second = s.step(["RIGHT"], None, 1.0)
    assert (first.selected_key, first.selected_index, len(first.booth.faces)) == ("a", 0, 2)
    assert first.booth.warnings == () and first.faces.version == 1
    assert (second.selected_key, len(second.booth.faces), second.faces.version) == ("b", 3, 2)
    assert list(second.booth.warnings) == ["bad.jpg: no face found; use a clear, frontal photo"]
    third = s.step([], None, 2.0, config_problem="config change ignored: k.yaml:1: bad")
    assert third.booth.warnings[0] == "config change ignored: k.yaml:1: bad"
    assert len(third.booth.warnings) == 2
    assert s.step(["SPACE"], None, 3.0).booth.swap_enabled is False and controls.swap_enabled is False


def test_quit_policy_and_reconfigure():
    s, controls = _session(FakeLibrary(("a",)), "display: {fullscreen: true}\n")
    assert not s.step(["ESCAPE"], None, 0.0).quit_requested  # booth: a visitor's Esc does nothing
    assert not controls.quit_requested
    new = _cfg("display: {fullscreen: true}\ncontrols: {allow_quit: true, keyboard: {quit: [F12]}}\n")
    s.cfg, s.keyboard = new, KeyboardInput(new.controls.keyboard)  # as a live reload does (the app)
    assert s.step(["F12"], None, 1.0).quit_requested


def test_a_new_library_keeps_a_face_it_still_has():
    old = FakeLibrary(("a", "b", "c"), serial=1)
    s, _ = _session(old)
    assert s.step(["3"], None, 0.0).selected_key == "c"
    s.library = FakeLibrary(("c", "d"), serial=2)  # a live reload of faces.*
    assert s.step([], None, 1.0).selected_key == "c"
    s.library = FakeLibrary(("x", "y"), serial=3)
    assert s.step([], None, 2.0).selected_key == "x"
