"""The kiosk's wiring: every buffer and worker thread, built by one function, :func:`wire`.

    capture thread ──TripleBuffer[CapturedFrame]──► inference thread ──TripleBuffer[SwapResult]──► render loop

``display.mode: live`` (or ``auto``) adds the live feed the capture thread drives
(:mod:`kiosk.capture.live_feed`): the inference thread hands each result's crops to it
(TripleBuffer[AnchorSlot]) and it publishes the tracked camera frame (TripleBuffer[LiveFrame]).

:func:`wire` builds all of it at start, and every later rebuild goes through it too, naming what to
renew (:class:`Renew`) and keeping the rest: the supervisor replacing a hung inference thread or a
stuck capture thread, restarting a dead one, a reload switching the source. So there is one place
that connects producers to buffers, and a renewed producer always gets buffers no abandoned thread
still writes to. Every thread it builds is handed the supervisor's meters of its kind
(:class:`~kiosk.app.supervisor.Meters`), so a renewed thread counts on where the old one stopped.
:class:`Workers` owns the current :class:`Wired` and these rebuilds: it has the
:class:`~kiosk.app.supervisor.Supervisor` watch its threads (the supervisor decides, the wiring
replaces), starts the threads a rebuild made, and joins the current ones at shutdown (never an
abandoned one).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Flag, auto

from kiosk.app.supervisor import Meters, Supervisor
from kiosk.booth.controls import ControlState
from kiosk.booth.faces import FaceLibrary
from kiosk.capture.live import AnchorSlot, LiveFrame, LiveOptions, new_live_frame
from kiosk.capture.live_feed import LiveFeed
from kiosk.capture.sources import Source, make_source
from kiosk.capture.thread import CaptureThread, new_captured_frame
from kiosk.config.schema import DisplayConfig, KioskConfig, SourceConfig
from kiosk.processing.stage import PassThrough, Processor
from kiosk.processing.thread import ErrorPolicy, InferenceThread, new_swap_result
from kiosk.sync import TripleBuffer
from kiosk.types import CapturedFrame, SwapResult

log = logging.getLogger(__name__)


def default_source_factory(cfg: KioskConfig) -> Callable[[], Source]:
    """The configured source, opened by the capture thread (``source``, paths from the config's folder)."""
    return lambda: make_source(cfg.source, cfg.base_dir)


def default_processor_factory(
    cfg: KioskConfig, library: FaceLibrary, controls: ControlState
) -> Callable[[], Processor]:
    """The face pipeline driven by the library and controls when processing is enabled, else a
    pass-through. Models are imported and opened on the loader thread, not here."""

    def build() -> Processor:
        if not cfg.processing.enabled:
            return PassThrough()  # without importing ONNX Runtime at all
        from kiosk.processing.booth_stage import build_booth_processor

        return build_booth_processor(cfg, library, controls)

    return build


def live_options(d: DisplayConfig) -> LiveOptions | None:
    """The live feed's options when it runs (display.mode live, or auto, which may switch to it any
    time), else None."""
    return (
        LiveOptions(d.live_track_px, d.live_max_age_s, d.live_ring_mb) if d.mode in ("live", "auto") else None
    )


@dataclass(frozen=True)
class WiringSpec:
    """What the threads are built from (taken from the config at start and on reload)."""

    source: SourceConfig
    source_factory: Callable[[], Source]
    processor_factory: Callable[[], Processor]
    live: LiveOptions | None  # the live feed's options; None: no live feed
    policy: ErrorPolicy
    controls: ControlState
    stop: threading.Event  # the kiosk's stop (the inference thread's)
    restart_initial_s: float = 1.0  # the inference thread's rebuild back-off


class Renew(Flag):
    """What :func:`wire` builds afresh (the rest is kept from the previous wiring)."""

    NOTHING = 0
    #: The capture, anchor and live buffers, and so a capture thread and live feed on them (the
    #: kept inference thread is rewired): for a capture thread stuck in a source call.
    CAPTURE_BUFFERS = auto()
    #: A capture thread (and its live feed) on the kept buffers: for one that died.
    CAPTURE = auto()
    #: The kept capture thread switches to the spec's source with a fresh live feed (it takes the
    #: switch itself; the inference thread is rewired to the live mode): a reload.
    SOURCE = auto()
    RESULT_BUFFER = auto()  # the inference thread's output: for an abandoned thread
    INFERENCE = auto()  # a fresh inference thread (on the current buffers)
    ALL = CAPTURE_BUFFERS | RESULT_BUFFER | INFERENCE


@dataclass(frozen=True)
class Wired:
    """Every buffer and worker thread of the kiosk at one moment."""

    capture_buf: TripleBuffer[CapturedFrame]
    result_buf: TripleBuffer[SwapResult]
    anchor_buf: TripleBuffer[AnchorSlot]
    live_buf: TripleBuffer[LiveFrame]
    live_feed: LiveFeed | None
    capture_stop: threading.Event  # the capture thread's own stop (an abandoned one keeps its own)
    capture: CaptureThread
    inference: InferenceThread


def wire(spec: WiringSpec, meters: Meters, renew: Renew = Renew.ALL, old: Wired | None = None) -> Wired:
    """The kiosk's buffers and threads for ``spec``: all new without ``old``, else ``old`` with
    what ``renew`` names built afresh and the kept threads connected to the new parts. A new thread
    writes ``meters`` (its kind's, the supervisor's). Threads are returned unstarted; a kept one is
    only asked (:meth:`CaptureThread.switch`, :meth:`InferenceThread.rewire`), never assigned."""
    fresh_buffers = old is None or Renew.CAPTURE_BUFFERS in renew
    if old is None or fresh_buffers:
        capture_buf = TripleBuffer(new_captured_frame)
        anchor_buf: TripleBuffer[AnchorSlot] = TripleBuffer(AnchorSlot)
        live_buf = TripleBuffer(new_live_frame)
    else:
        capture_buf, anchor_buf, live_buf = old.capture_buf, old.anchor_buf, old.live_buf
    if old is None or Renew.RESULT_BUFFER in renew:
        result_buf = TripleBuffer(new_swap_result)
    else:
        result_buf = old.result_buf
    anchors = anchor_buf if spec.live is not None else None

    new_capture = old is None or fresh_buffers or Renew.CAPTURE in renew
    if old is not None and not new_capture and Renew.SOURCE not in renew:
        live_feed, capture_stop, capture = old.live_feed, old.capture_stop, old.capture
    else:
        live_feed = LiveFeed(anchor_buf, live_buf, spec.live) if spec.live is not None else None
        if old is None or new_capture:
            capture_stop = threading.Event()
            capture = CaptureThread(
                spec.source,
                spec.source_factory,
                capture_buf,
                capture_stop,
                live=live_feed,
                meters=meters.capture,
            )
        else:  # a reload: the running thread switches (never waits; one producer per buffer)
            capture_stop, capture = old.capture_stop, old.capture
            capture.switch(spec.source, spec.source_factory, live_feed)

    if old is None or Renew.INFERENCE in renew:
        inference = InferenceThread(
            spec.processor_factory,
            capture_buf,
            result_buf,
            spec.stop,
            restart_initial_s=spec.restart_initial_s,
            controls=spec.controls,
            policy=spec.policy,
            anchors=anchors,
            meters=meters.inference,
        )
    else:
        inference = old.inference
        if fresh_buffers or Renew.SOURCE in renew:  # its input (and live anchors) changed
            inference.rewire(capture_buf, anchors)
    return Wired(capture_buf, result_buf, anchor_buf, live_buf, live_feed, capture_stop, capture, inference)


class Workers:
    """The kiosk's current :class:`Wired` and every rebuild of it (all through :func:`wire`).
    ``revoke(thread)``: the face library never publishes a refresh an abandoned thread started."""

    def __init__(
        self, spec: WiringSpec, supervisor: Supervisor, revoke: Callable[[InferenceThread], None]
    ) -> None:
        self.spec = spec
        self.supervisor = supervisor
        self._revoke = revoke
        self.now = wire(spec, supervisor.meters)

    def rebuild(self, renew: Renew, *, start: bool = True) -> None:
        """Rebuild what ``renew`` names; start the threads that are new (unless ``start`` is False:
        before the kiosk runs, it starts them)."""
        old = self.now
        self.now = wire(self.spec, self.supervisor.meters, renew, old)
        if start:
            if self.now.capture is not old.capture:
                self.now.capture.start()
            if self.now.inference is not old.inference:
                self.now.inference.start()

    def start(self) -> None:
        self.now.capture.start()
        self.now.inference.start()

    # -- the supervisor's replacements ---------------------------------------------------------
    def check_inference(self, now: float) -> float:
        """Abandon a hung unit of stage work for a fresh inference thread (:mod:`kiosk.app.supervisor`);
        return how long processing has been unhealthy, 0 when healthy."""
        swap_enabled = self.spec.controls.swap_enabled
        return self.supervisor.check_inference(now, self.now.inference, swap_enabled, self.replace_inference)

    def check_workers(self, now: float) -> None:
        """Replace a stuck capture thread, restart a dead worker (:meth:`Supervisor.check_workers`)."""
        w = self.now
        self.supervisor.check_workers(
            now, w.capture, w.inference, self.replace_capture, self.restart_capture, self.replace_inference
        )

    def replace_capture(self, stuck_s: float) -> None:
        """A fresh capture thread for one stuck in a source call (the supervisor abandoned it), on
        fresh buffers (capture, live, anchors), so the stuck one can never publish into what the
        inference thread and the screen read; it exits, closing its source, if the call returns."""
        self.rebuild(Renew.CAPTURE_BUFFERS)

    def restart_capture(self) -> None:
        """A fresh capture thread for one that died (it publishes nothing any more)."""
        self.rebuild(Renew.CAPTURE)

    def replace_inference(self, old: InferenceThread) -> None:
        """A fresh inference thread with its own output buffer for an abandoned one (the stuck one
        can never write to the screen), or on the same buffer for one that died."""
        if old.abandoned:
            self._revoke(old)  # it may be inside a library refresh: never publish it
        self.rebuild(Renew.INFERENCE | (Renew.RESULT_BUFFER if old.abandoned else Renew.NOTHING))

    # -- reload ------------------------------------------------------------------------------
    def switch_source(
        self, source: SourceConfig, factory: Callable[[], Source], live: LiveOptions | None
    ) -> None:
        """Switch capture to ``source`` and the live mode ``live``: the capture thread takes the
        switch itself (this never waits)."""
        self.spec = dataclasses.replace(self.spec, source=source, source_factory=factory, live=live)
        self.rebuild(Renew.SOURCE)

    def reconfigure_stage(self, factory: Callable[[], Processor], policy: ErrorPolicy) -> None:
        """Rebuild the processing stage in the background (the old one runs until then); later
        inference threads are built with it too."""
        self.spec = dataclasses.replace(self.spec, processor_factory=factory, policy=policy)
        self.now.inference.reconfigure(factory, policy)

    def follow_policy(self, policy: ErrorPolicy) -> None:
        """A custom stage is not rebuilt on reload, but inference threads built later (replacements)
        take the new error policy."""
        self.spec = dataclasses.replace(self.spec, policy=policy)

    def join(self, timeout_s: float) -> None:
        """Stop and join the current worker threads (the capture thread releases the camera), then
        the model loader, within about ``timeout_s``; an inference thread inside a model call gets
        only what such a call usually takes (:meth:`Supervisor.join_wait`)."""
        w = self.now
        w.capture_stop.set()
        deadline = time.perf_counter() + timeout_s
        for t in (w.capture, w.inference):
            wait = max(0.0, deadline - time.perf_counter())
            if t is w.inference:  # inside a model call: only what such a call usually takes
                wait = self.supervisor.join_wait(time.perf_counter(), t, wait)
            if t.is_alive():
                t.join(wait)
            if t.is_alive():
                log.warning("%s thread did not stop within %.1f s", t.name, timeout_s)
        if not w.inference.join_loaders(min(0.3, max(0.0, deadline - time.perf_counter()))):
            log.warning("the model loader is still busy; exiting without waiting for it")
