"""keepsake.consent: the organiser's text before the countdown; the same key agrees, else nothing is
taken (checked on the store's disk) and only the counts say what visitors chose."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from net_helpers import free_port

from kiosk.config import parse_config
from kiosk.keepsake.flow import CONSENT_GRACE_S, CONSENT_HINT, FlowOptions, KeepsakeFlow, Phase, Saved
from kiosk.keepsake.service import KeepsakeService
from kiosk.keepsake.still import Picture

TEXT = "We keep your photo for 15 minutes so you can download it. Press Enter to agree."


class Booth:
    """A flow storing through a real keepsake service (its web server in a thread), fake clock."""

    def __init__(self, tmp_path: Path) -> None:
        port = free_port()
        cfg = parse_config(
            f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}", consent: "{TEXT}", countdown_s: 1, '
            "show_s: 10, cooldown_s: 0}\n"
        )
        self.folder = tmp_path / "k"
        self.svc = KeepsakeService(cfg.keepsake, self.folder, separate_process=False).start()
        assert self.svc.wait_ready()
        self.t = 100.0
        self.pictures = 0
        self.flow = KeepsakeFlow(FlowOptions.of(cfg.keepsake), self._save, clock=lambda: self.t)

    def _save(self, jpeg: bytes) -> Saved:
        k = self.svc.keep(jpeg)
        return Saved(k.url, k.record.expires, k.record.token)

    def _picture(self) -> Picture:
        self.pictures += 1
        return Picture.copy_of(np.full((72, 128, 3), 90, np.uint8))

    def step(self, dt: float = 0.0):  # type: ignore[no-untyped-def]
        self.t += dt
        return self.flow.step(self._picture)

    def until(self, phase: Phase, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.flow.phase is not phase and time.monotonic() < deadline:
            self.step(0.01)
            time.sleep(0.01)
        assert self.flow.phase is phase

    def on_disk(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if not p.name.startswith("."))

    def close(self) -> None:
        self.flow.close()
        self.svc.close()


def test_consent_declined_takes_and_stores_nothing(tmp_path: Path) -> None:
    b = Booth(tmp_path)
    try:
        b.flow.press()
        v = b.step(0.0)
        assert v.phase == "consent" and v.prompt == TEXT and v.hint == CONSENT_HINT and not v.freeze
        assert v.total_s == 10.0 and v.remaining_s == 10.0 and v.count == 0
        assert b.step(9.9).phase == "consent"
        assert not b.step(0.2).active  # no answer within show_s: back to live
        for _ in range(5):
            b.step(1.0)
        assert b.pictures == 0 and b.on_disk() == []  # no still taken, nothing written
        s = b.flow.stats()
        assert (s["consent_declined"], s["consented"], s["shown"]) == (1, 0, 0)
    finally:
        b.close()


def test_consent_given_with_the_same_key_starts_the_countdown_and_keeps_the_photo(tmp_path: Path) -> None:
    b = Booth(tmp_path)
    try:
        b.flow.press()
        b.step(0.0)
        b.flow.press()  # a bounce right after the text appeared: not an answer
        assert b.flow.phase is Phase.CONSENT
        b.step(CONSENT_GRACE_S)
        b.flow.press()
        v = b.step(0.0)
        assert v.phase == "countdown" and v.count == 1
        b.step(1.0)
        b.until(Phase.SHOW)
        assert b.pictures == 1 and len(b.on_disk()) == 1 and b.on_disk()[0].endswith(".jpg")
        s = b.flow.stats()
        assert (s["consent_declined"], s["consented"], s["shown"]) == (0, 1, 1)
        # what was agreed and when is not stored: the folder has the photo only, and the photo's
        # JPEG carries no text of the consent
        jpeg = (b.folder / b.on_disk()[0]).read_bytes()
        assert b"agree" not in jpeg and TEXT.encode() not in jpeg
    finally:
        b.close()


def test_without_consent_text_the_key_starts_the_countdown_at_once() -> None:
    flow = KeepsakeFlow(FlowOptions(enabled=True), lambda jpeg: Saved("x", 0.0), clock=lambda: 0.0)
    flow.press()
    assert flow.phase is Phase.COUNTDOWN


def test_the_declined_consents_are_in_the_keepsake_metrics() -> None:
    from kiosk.app.keepsake_host import KeepsakeHost

    class Service:
        def metrics(self) -> dict[str, int]:
            return {"taken": 1, "downloaded": 0, "printed": 0, "print_failed": 0, "expired": 0}

    host = KeepsakeHost(None, lambda: None)  # type: ignore[arg-type]
    host.service = Service()  # type: ignore[assignment]
    t = [0.0]
    host.flow = KeepsakeFlow(
        FlowOptions(enabled=True, consent="Agree?"), lambda j: Saved("x", 0), clock=lambda: t[0]
    )
    for _ in range(2):
        host.flow.press()
        t[0] += 30.0
        host.flow.step(lambda: None)
    metrics = host.metrics()
    assert metrics is not None and metrics["consent_declined"] == 2
    # the Prometheus file's event: tests/test_keepsake_app.py::test_the_prometheus_file_counts_keepsakes
