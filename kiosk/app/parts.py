"""The kiosk's per-frame collaborators, as one value: what the render loop draws a frame from and
the counters read (each object the one owner of its state; this only names them together)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from kiosk.app.display import Display
from kiosk.app.keepsake_host import KeepsakeHost
from kiosk.app.screen import Screen
from kiosk.app.shots import Shots
from kiosk.app.wiring import Workers
from kiosk.booth.controls import ControlState
from kiosk.booth.session import BoothSession


class StaffConsole(Protocol):
    """What a frame asks of the staff console (:class:`kiosk.app.console_host.ConsoleHost`)."""

    def actions(self, mono: float) -> tuple[str, ...]: ...  # its commands, as booth actions
    def publish(self, counters: Any, mono: float) -> None: ...  # the frame's Counters, when due
    def capture(self, surface: Any, mono: float) -> None: ...  # the screen's thumbnail, when due


@dataclass(frozen=True)
class FrameParts:
    """What a frame is made of (each its own state's owner)."""

    workers: Workers  # the threads and buffers
    screen: Screen  # the picture on screen and the render meters
    display: Display  # the surface and renderer
    session: BoothSession  # input, attract mode, selection: the booth's view
    keepsake: KeepsakeHost
    shots: Shots
    controls: ControlState  # the staff toggles (shared with the inference thread)
    stop: threading.Event  # the kiosk's stop
    console: StaffConsole  # the staff console (console.enabled): its commands, the status sent to it
