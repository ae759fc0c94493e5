"""The keepsake flow's state machine on a fake clock, its still and its texts (no GL, no server)."""

from __future__ import annotations

import concurrent.futures as cf
import logging
from typing import Any

import cv2
import numpy as np
import pytest

from kiosk.inference.paste import PasteBack
from kiosk.keepsake.flow import (
    FAILED_S,
    NO_PICTURE,
    NOT_SAVED,
    PROMPT_KEEP,
    FlowOptions,
    KeepsakeFlow,
    Phase,
    Saved,
    disclosure_banner,
    duration_text,
    short_address,
)
from kiosk.keepsake.privacy import photo_id
from kiosk.keepsake.qr import qr_matrix
from kiosk.keepsake.still import Picture, composite
from kiosk.types import Face, SwappedFace

URL = "http://192.168.1.20:8088/p/AbCdEfGhIjKlMnOpQrStUv"


class Inline(cf.Executor):
    """Runs each job at once on the caller's thread (the flow sees it done at the next step)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as exc:
            fut.set_exception(exc)
        return fut


class Booth:
    """A flow with a fake clock, a picture source and a store that records what it keeps."""

    def __init__(self, *, fail_save: bool = False, picture: bool = True, **options: Any) -> None:
        opts = {"enabled": True, "countdown_s": 3.0, "show_s": 10.0, "confirm": False, **options}
        self.t = 100.0
        self.saved: list[bytes] = []
        self.pictures = 0
        self.frame = np.full((72, 128, 3), 90, np.uint8)
        self._fail_save = fail_save
        self._picture = picture
        self.flow = KeepsakeFlow(FlowOptions(**opts), self.save, clock=lambda: self.t, executor=Inline())

    def save(self, jpeg: bytes) -> Saved:
        if self._fail_save:
            raise OSError("disk full")
        self.saved.append(jpeg)
        return Saved(URL, 1e9)

    def picture(self) -> Picture | None:
        self.pictures += 1
        return Picture.copy_of(self.frame) if self._picture else None

    def step(self, dt: float = 0.0) -> Any:
        self.t += dt
        return self.flow.step(self.picture)


def test_off_the_key_does_nothing() -> None:
    b = Booth(enabled=False)
    b.flow.press()
    assert b.step(5).phase == "idle" and not b.step(5).active
    assert b.pictures == 0 and b.saved == [] and b.flow.counts.started == 0


def test_countdown_still_qr_then_back_to_live() -> None:
    b = Booth()
    b.flow.press()
    counts = [b.step(dt).count for dt in (0.0, 0.5, 0.6, 1.0, 0.8)]  # t = 0, .5, 1.1, 2.1, 2.9
    assert counts == [3, 3, 2, 1, 1]
    v = b.step(0.0)
    assert v.phase == "countdown" and not v.freeze and b.pictures == 0
    v = b.step(0.11)  # past 3 s: the still is taken, the screen freezes
    assert v.phase == "capture" and v.freeze and b.pictures == 1
    v = b.step(0.02)  # composited: stored at once (no consent asked)
    assert v.phase == "saving" and v.freeze and v.still_bgr is not None
    v = b.step(0.02)
    assert v.phase == "show" and v.freeze and v.qr is not None
    assert len(b.saved) == 1 and b.saved[0][:2] == b"\xff\xd8"
    # the still is the picture, JPEG-encoded
    decoded = cv2.imdecode(np.frombuffer(b.saved[0], np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == b.frame.shape and abs(int(decoded.mean()) - 90) <= 2
    assert v.address == short_address(URL) == URL[len("http://") :]
    assert v.expiry == "Deleted after 15 min" and v.title
    assert b.flow.counts.taken == 1 and b.flow.counts.latency_ms == pytest.approx(3050.0, abs=1.0)
    b.step(9.9)
    assert b.flow.phase is Phase.SHOW
    assert not b.step(0.2).active  # show_s over: back to live
    assert len(b.saved) == 1


def test_the_qr_code_encodes_the_address() -> None:
    modules = qr_matrix(URL)
    img = cv2.resize(
        np.where(modules > 0, 0, 255).astype(np.uint8), None, fx=6, fy=6, interpolation=cv2.INTER_NEAREST
    )
    text, _, _ = cv2.QRCodeDetector().detectAndDecode(img)
    assert text == URL
    assert (modules[:4] == 0).all() and (modules[:, -4:] == 0).all()  # the quiet zone


def test_the_same_key_cancels_the_countdown() -> None:
    b = Booth()
    b.flow.press()
    b.step(1.0)
    b.flow.press()
    assert not b.step(0.0).active
    assert not b.step(5.0).active
    assert b.pictures == 0 and b.saved == [] and b.flow.counts.cancelled == 1


def test_countdown_zero_takes_the_still_at_once() -> None:
    b = Booth(countdown_s=0)
    b.flow.press()
    v = b.step(0.0)
    assert v.phase == "capture" and b.pictures == 1


def test_confirm_without_the_second_press_stores_nothing() -> None:
    b = Booth(confirm=True)
    b.flow.press()
    b.step(3.0)
    v = b.step(0.0)
    assert v.phase == "confirm" and v.prompt == PROMPT_KEEP and v.freeze and v.still_bgr is not None
    assert v.qr is None
    b.step(9.9)
    assert b.flow.phase is Phase.CONFIRM
    assert not b.step(0.2).active
    assert b.saved == [] and b.flow.counts.declined == 1 and b.flow.counts.taken == 0


def test_confirm_with_the_second_press_keeps_the_photo() -> None:
    b = Booth(confirm=True)
    b.flow.press()
    b.step(3.0)
    b.step(0.0)
    assert b.saved == []
    b.flow.press()  # "press again to keep this photo"
    assert b.flow.phase is Phase.SAVING and len(b.saved) == 1  # the inline worker stored it at once
    v = b.step(0.0)
    assert v.phase == "show" and v.qr is not None and len(b.saved) == 1


def test_a_press_soon_after_the_qr_code_does_not_hide_it_a_later_one_does() -> None:
    b = Booth()
    b.flow.press()
    b.step(3.0)
    b.step(0.0)
    b.step(0.0)
    b.flow.press()
    assert b.step(0.1).phase == "show"
    b.step(1.5)
    b.flow.press()
    assert not b.step(0.0).active


def test_a_failed_save_shows_one_line_then_live() -> None:
    b = Booth(fail_save=True)
    b.flow.press()
    b.step(3.0)
    b.step(0.0)
    v = b.step(0.0)
    assert v.phase == "failed" and v.message == NOT_SAVED and v.qr is None
    assert b.flow.counts.failed == 1
    assert not b.step(FAILED_S + 0.1).active


def test_no_picture_yet_is_said() -> None:
    b = Booth(picture=False)
    b.flow.press()
    v = b.step(3.0)
    assert v.phase == "failed" and v.message == NO_PICTURE and not v.freeze


def test_the_still_is_a_copy_with_the_gpu_crops_pasted_as_the_cpu_composite_does() -> None:
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    crop = np.full((128, 128, 3), (20, 200, 40), np.uint8)
    affine = np.array([[2.0, 0.0, -60.0], [0.0, 2.0, -40.0]])  # a face at (30, 20), 64 px
    face = Face(np.array([30, 20, 94, 84], np.float32), 0.9, np.zeros((5, 2), np.float32))
    pic = Picture.copy_of(frame, [SwappedFace(crop, affine, face)])
    frame[:] = 0  # the triple-buffer slot is written again: the copy is not
    crop[:] = 0
    still = composite(pic)
    expect_frame = np.random.default_rng(1).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    PasteBack().paste(expect_frame, np.full((128, 128, 3), (20, 200, 40), np.uint8), affine)
    assert still is pic.frame_bgr and np.array_equal(still, expect_frame)
    assert tuple(int(v) for v in still[52, 62]) == (20, 200, 40)  # the face's centre is the crop


def test_texts() -> None:
    assert [duration_text(s) for s in (45, 900, 3600, 5400, 86400 * 3)] == [
        "45 s",
        "15 min",
        "1 h",
        "1 h 30 min",
        "3 days",
    ]
    default = "Live AI face swap. Nothing is recorded."
    on = FlowOptions(enabled=True, ttl_s=600)
    assert disclosure_banner(default, default, FlowOptions()) == default
    assert disclosure_banner(default, default, on) == (
        "Live AI face swap. Photos only when you ask; deleted after 10 min."
    )
    assert disclosure_banner("Welcome to ACME", default, on) == "Welcome to ACME"
    assert short_address("https://booth.lan/p/x") == "https://booth.lan/p/x"


def test_the_keepsake_key_is_enter_and_start_and_refused_while_keepsakes_are_off() -> None:
    from kiosk.bindings import DEFAULT_GAMEPAD, DEFAULT_KEYBOARD
    from kiosk.booth.controls import ControlState, KeyboardInput

    assert KeyboardInput(DEFAULT_KEYBOARD).actions(["ENTER", "KP_ENTER"]) == ["keepsake", "keepsake"]
    assert DEFAULT_GAMEPAD["keepsake"] == ["START"]
    c = ControlState()
    assert not c.apply("keepsake", allow_quit=False, snapshots_enabled=False)
    assert c.apply("keepsake", allow_quit=False, snapshots_enabled=False, keepsakes_enabled=True)
    assert c.last_action == "keepsake"


def test_the_session_applies_the_key_and_the_banner_only_while_keepsakes_run() -> None:
    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import LibrarySnapshot
    from kiosk.booth.session import BoothSession
    from kiosk.config import KioskConfig

    class Lib:
        snapshot = LibrarySnapshot(serial=1)

    cfg = KioskConfig.model_validate({"keepsake": {"enabled": True, "ttl_s": 600}})
    s = BoothSession(cfg, Lib(), ControlState())
    view = s.step(["ENTER"], None, 1.0)
    assert view.actions == () and "Nothing is recorded" in view.booth.banner  # the service is not up
    s.keepsake_options = FlowOptions.of(cfg.keepsake)
    view = s.step(["ENTER"], None, 2.0)
    assert view.actions == ("keepsake",)
    assert s.step(["CTRL+P"], None, 2.5).actions == ("print_again",)  # staff: print the last again
    assert view.booth.banner == "Live AI face swap. Photos only when you ask; deleted after 10 min."


def test_a_reloaded_config_changes_the_flow_at_once_and_keepsakes_stay_on_until_restart() -> None:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import KioskConfig
    from kiosk.processing.stage import PassThrough

    cfg = KioskConfig.model_validate({"source": {"kind": "synthetic"}, "keepsake": {"enabled": True}})
    app = KioskApp(cfg, RunOptions(headless=True), processor_factory=PassThrough)
    app.keepsake.flow = KeepsakeFlow(FlowOptions.of(cfg.keepsake), lambda jpeg: Saved(URL, 0.0))
    new = cfg.model_copy(
        update={
            "keepsake": cfg.keepsake.model_copy(
                update={"countdown_s": 5, "show_s": 30.0, "confirm": True, "enabled": False}
            )
        }
    )
    app.apply_config(new)
    assert app.keepsake.flow.options == FlowOptions(True, 5.0, 30.0, True, 900.0)


def test_the_qr_line_in_the_log_names_the_photo_by_id_never_by_its_address(caplog) -> None:
    """Issue 28, item 3: the address is the photo's only key, and logs are kept and shipped."""
    b = Booth()
    with caplog.at_level(logging.INFO, logger="kiosk.keepsake.flow"):
        b.flow.press()
        for dt in (0.0, 1.0, 1.0, 1.2, 0.02, 0.02):
            b.step(dt)
    line = next(r.getMessage() for r in caplog.records if "QR code on screen" in r.getMessage())
    token = URL.rsplit("/", 1)[1]
    assert token not in caplog.text and "/p/" not in caplog.text
    assert line.endswith(f"photo {photo_id(token)}")


def test_enter_held_takes_a_photo_per_cooldown_and_at_most_the_visitors_cap() -> None:
    """Enter held for 90 s took 53 photos; now one per cooldown_s and takes_per_visitor in all,
    each refusal said on screen."""
    from kiosk.keepsake.flow import COOLDOWN, ENOUGH, VISITOR_GAP_S

    b = Booth(countdown_s=0.5, show_s=5.0, cooldown_s=10.0, takes_per_visitor=3)
    unlimited = Booth(countdown_s=0.5, show_s=5.0, cooldown_s=0.0, takes_per_visitor=0)
    messages = set()
    for i in range(int(90 / 0.05)):  # 90 s; the key again every 0.85 s
        for booth in (b, unlimited):
            if i % 17 == 0:
                booth.flow.press(booth.t)
            view = booth.step(0.05)
            if view.message and booth is b:
                messages.add(view.message)
    assert len(unlimited.saved) > 20  # what the booth did before
    assert len(b.saved) == 3
    assert ENOUGH in messages and any(m.startswith(COOLDOWN.split("{")[0]) for m in messages)
    assert b.flow.stats()["limited"] > 0
    b.flow.new_visitor()  # nobody at the booth for a while: the next visitor may take theirs
    b.step(FAILED_S)
    b.flow.press(b.t)
    assert b.flow.phase is Phase.COUNTDOWN
    b2 = Booth(countdown_s=1.0, cooldown_s=0.0, takes_per_visitor=1)
    b2.flow.press(b2.t)
    b2.step(1.0)
    b2.step()
    b2.step()
    assert len(b2.saved) == 1 and b2.flow.phase is Phase.SHOW
    b2.step(10.0)  # the QR code times out
    b2.flow.press(b2.t)
    assert b2.flow.phase is Phase.FAILED  # the visitor's one photo is taken
    b2.step(VISITOR_GAP_S)  # a long gap after the last photo: a new visitor
    b2.flow.press(b2.t)
    assert b2.flow.phase is Phase.COUNTDOWN


def test_a_full_store_is_said_on_screen() -> None:
    from kiosk.keepsake.store import STORE_FULL, StoreFull

    b = Booth(countdown_s=0.0)

    def full(_: bytes) -> Saved:
        raise StoreFull("keepsake: the store is full")

    b.flow._save = full
    b.flow.press(b.t)
    b.step()
    b.step()
    view = b.step()
    assert b.flow.phase is Phase.FAILED and view.message == STORE_FULL
