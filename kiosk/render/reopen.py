"""Reopening the window after a display change, without ever leaving the kiosk without a surface.

A display change (live reload of ``display``) closes the window and opens one with the new
settings. That can fail (a GL context the driver refuses, an X server that went away). Then the
previous settings, which worked, are opened again; if even that fails, an offscreen surface
keeps the render loop (and with it stats, the watchdog and supervision) running. Either way the
reason is one log line and one line on the staff view, and the new settings are retried with
exponential back-off until they open.

The old window is closed before the new one opens: glfw's ``terminate`` in
:meth:`kiosk.render.window.Window.close` ends every window of the process, and a GL context is
current on one window at a time, so two windows side by side would need the renderer's objects
juggled between contexts. A failed attempt therefore costs a brief blank while the previous
settings reopen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from kiosk.render import window as _window
from kiosk.render.options import DisplayOptions
from kiosk.util.errors import one_line

log = logging.getLogger(__name__)


class _Closable(Protocol):
    def close(self) -> None: ...


class _Releasable(Protocol):
    def release(self) -> None: ...


S = TypeVar("S", bound=_Closable)
R = TypeVar("R", bound=_Releasable)


def open_display(display: DisplayOptions, headless: bool) -> tuple[Any, Any]:
    """A surface for ``display`` (window, or offscreen when ``headless``) and a renderer on it."""
    from kiosk.render.renderer import Renderer

    surface = _window.open_surface(display, headless=headless)
    try:
        return surface, Renderer(surface.ctx, display)
    except BaseException:
        surface.close()
        raise


class SurfaceReopener(Generic[S, R]):
    """Owns the reopen of (surface, renderer) pairs for new display settings; render thread only.

    ``open_pair(display)`` opens a pair or raises; ``fallback(display)``, where given, opens a
    pair that does not depend on the display (the offscreen surface) for when neither the new
    nor the previous settings open. ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        open_pair: Callable[[DisplayOptions], tuple[S, R]],
        working: DisplayOptions,
        fallback: Callable[[DisplayOptions], tuple[S, R]] | None = None,
        retry_initial_s: float = 2.0,
        retry_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open = open_pair
        self._fallback = fallback
        self.working = working  # the settings of the window open now (the last that opened)
        self.wanted: DisplayOptions | None = None  # settings asked for and not open yet
        self.problem = ""  # one line for the staff view; "" when the wanted settings are open
        self.failures = 0  # failed attempts at the wanted settings since they were asked for
        self.offscreen = False  # the fallback surface is up: no window at all
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._delay = retry_initial_s
        self._retry_at = 0.0
        self._clock = clock
        self._shown = ""  # the problem line last handed out by staff_line

    def request(self, wanted: DisplayOptions) -> None:
        """New display settings: the next :meth:`reopen` opens them (at once, no back-off)."""
        self.wanted = wanted
        self.failures = 0
        self._delay = self._retry_initial_s
        self._retry_at = 0.0

    def due(self, now: float | None = None) -> bool:
        """Whether settings are waiting and their (next) attempt is due."""
        if self.wanted is None:
            return False
        return (self._clock() if now is None else now) >= self._retry_at

    def reopen(self, surface: S, renderer: R) -> tuple[S, R]:
        """Close ``surface`` and ``renderer`` and open the wanted settings; on failure the previous
        settings, then the fallback. Returns the pair to draw with from now on. Raises only when
        nothing at all can be opened (no GL anywhere)."""
        wanted = self.wanted
        if wanted is None:
            return surface, renderer
        _close(surface, renderer)
        try:
            pair = self._open(wanted)
        except Exception as exc:
            return self._failed(wanted, one_line(exc))
        if self.failures:
            log.info("display reopened with the new settings after %d failed attempt(s)", self.failures)
        self.working, self.wanted = wanted, None
        self.problem, self.failures, self.offscreen = "", 0, False
        self._delay = self._retry_initial_s
        return pair

    def _failed(self, wanted: DisplayOptions, why: str) -> tuple[S, R]:
        self.failures += 1
        retry_in = self._delay
        self._retry_at = self._clock() + retry_in
        self._delay = min(self._delay * 2.0, self._retry_max_s)
        if wanted != self.working:
            try:
                pair = self._open(self.working)
            except Exception as exc:
                why = f"{why}; previous settings: {one_line(exc)}"
            else:
                self.offscreen = False
                self.problem = (
                    f"display change not applied ({why}); kept the previous display settings, "
                    f"retrying in {retry_in:.0f} s"
                )
                log.error("%s", self.problem)
                return pair
        if self._fallback is None:
            raise _window.DisplayError(f"cannot open any surface: {why}")
        pair = self._fallback(self.working)  # raises when even that fails: no GL at all
        self.offscreen = True
        self.problem = f"no window ({why}); drawing offscreen, retrying in {retry_in:.0f} s"
        log.error("%s", self.problem)
        return pair

    def staff_line(self, current: str) -> str:
        """The line for the staff view, given the one it shows now (``current``): this reopener's
        problem while there is one; once it is solved, ``current`` unless that is the line this
        reopener put there (then nothing)."""
        if self.problem:
            self._shown = self.problem
            return self.problem
        line = "" if current == self._shown else current
        self._shown = ""
        return line


def _close(surface: _Closable, renderer: _Releasable) -> None:
    """Release a pair; a broken context may raise on the way out, which must not stop the reopen."""
    for what, close in (("renderer", renderer.release), ("surface", surface.close)):
        try:
            close()
        except Exception as exc:
            log.warning("display: closing the old %s failed: %s", what, one_line(exc))
