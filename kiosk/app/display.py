"""The kiosk's display: the surface (window or headless) and the renderer on it, opened when the
kiosk runs, reopened when ``display`` window settings change (:data:`kiosk.app.reload_table.Part.WINDOW`,
through :class:`kiosk.render.reopen.SurfaceReopener`: a failed reopen keeps the previous settings,
else goes offscreen, and retries), and the one log line when the X server goes away.

:class:`Display` owns the surface, the renderer, the reopener and the "window settings changed"
flag a reload sets for the render loop (which reopens on its own thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kiosk.appliance.exit import EXIT_DISPLAY_LOST
from kiosk.config.schema import DisplayConfig

log = logging.getLogger(__name__)


class Display:
    """See the module docstring. ``headless``: an offscreen surface, never a window."""

    def __init__(self, headless: bool) -> None:
        self.headless = headless
        self.surface: Any = None  # the window or headless surface, while the kiosk runs
        self.renderer: Any = None
        self._reopener: Any = None  # kiosk.render.reopen.SurfaceReopener, while the kiosk runs
        #: ``display`` window settings changed (set by a reload): the render loop reopens.
        self.changed = False

    def open_display(self, d: DisplayConfig) -> tuple[Any, Any]:
        """A new surface (window or headless) and a renderer on it, for the display config ``d``."""
        from kiosk.render.options import DisplayOptions
        from kiosk.render.reopen import open_display

        return open_display(DisplayOptions.of(d), self.headless)

    def open(self, d: DisplayConfig) -> None:
        """Open the surface and renderer, and the reopener later changes go through."""
        from kiosk.render.options import DisplayOptions
        from kiosk.render.reopen import SurfaceReopener, open_display

        self.surface, self.renderer = self.open_display(d)
        headless = self.headless  # a failed reopen keeps the old settings, else goes offscreen
        self._reopener = SurfaceReopener(
            lambda o: open_display(o, headless),
            DisplayOptions.of(d),
            fallback=None if headless else lambda o: open_display(o, True),
        )

    def request_reopen(self, d: DisplayConfig) -> None:
        """``display`` window settings changed: ask for a new surface and renderer."""
        from kiosk.render.options import DisplayOptions

        self.changed = False
        if self._reopener is not None:
            self._reopener.request(DisplayOptions.of(d))

    def reopen_due(self) -> bool:
        """Reopen the display when a requested change (or its retry) is due; True when it did
        (the caller reopens what belongs to the window: gamepads). Never raises while any surface
        opens."""
        reopener = self._reopener
        if reopener is None or not reopener.due():
            return False
        self.surface, self.renderer = reopener.reopen(self.surface, self.renderer)
        return True

    @property
    def problem(self) -> str:
        """A display change still waiting for its retry (stays on screen until a reopen heals it)."""
        return self._reopener.problem if self._reopener is not None else ""

    def staff_line(self, current: str) -> str:
        """The staff line after a reopen (the reopener's, in place of or after ``current``)."""
        return self._reopener.staff_line(current) if self._reopener is not None else current

    def watch_lost(self, last_words: Callable[[], None] | None) -> None:
        """Have ``last_words()`` run once if the X server goes away (:mod:`kiosk.render.xio`, from
        inside the X call that noticed; the process then leaves with status 4); None: stop
        watching (the X connection goes with the window). Nothing to watch headless."""
        if self.headless:
            return
        from kiosk.render import xio

        if last_words is None:
            xio.on_lost(None)
            return

        def lost(display: str) -> None:
            log.error(
                "display %s went away (the X server closed the connection): exiting with status %d "
                "so that systemd restarts the kiosk when the display is back",
                display,
                EXIT_DISPLAY_LOST,
            )
            last_words()

        xio.on_lost(lost)

    def close(self) -> None:
        self.renderer.release()
        self.surface.close()
