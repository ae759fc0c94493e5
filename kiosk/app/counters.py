"""One frozen snapshot of the kiosk's counters, taken once per rendered frame.

The render loop reads the kiosk's figures once (:meth:`CounterReader.read`, from each figure's
owner: the supervisor's worker meters and health, the wiring's threads and buffers, the screen, the
booth) and every figure the kiosk reports comes from that one :class:`Counters`: the ``--stats-json`` file and
the monitoring textfile (:func:`stats_dict`), the debug overlay (:func:`debug_lines`) and systemd's
``STATUS=`` (:func:`status_line`). So the four never disagree about one moment, and a rate is
computed in one place: a processing thread that is hung, abandoned or dead reports 0 frames per
second and "stalled", never the rate it had before it stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kiosk.app.startup import StartupTimes

if TYPE_CHECKING:
    from kiosk.app.parts import FrameParts
    from kiosk.app.supervisor import Supervisor
    from kiosk.booth.faces import FaceLibrary
    from kiosk.config.schema import KioskConfig
    from kiosk.stats import LatencyRecorder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaptureCounters:
    description: str
    kind: str  # source.kind, for "Camera"/"Video source" messages
    state: str
    last_error: str
    reconnects: int
    frames: int
    mean_fps: float
    fps_now: float
    live_errors: int


@dataclass(frozen=True)
class ProcessingCounters:
    stage: str
    frames: int  # over every inference thread since start (abandoned and dead ones included)
    mean_fps: float
    #: Over the last second; 0 while the thread is hung, being replaced or dead.
    fps_now: float
    #: Results of the swapping stage only (the pass-through while models load is not counted).
    swap_fps: float
    swap_fps_now: float
    #: Seconds processing has been unhealthy (a call hung past its bound, or not yet working again
    #: after one was abandoned); 0 when healthy.
    stalled_for_s: float
    #: Seconds without a processed frame on screen while the source runs, once over STALL_S; else 0.
    no_result_s: float
    #: The thread died while the kiosk runs (the supervisor starts a new one within a second).
    dead: bool
    #: Seconds a frame takes while the stage is slow but progressing (every model call returns;
    #: at least heartbeat.SLOW_FRAME_S); 0 otherwise. Never abandoned, reported as "slow".
    slow_frame_s: float
    unrecovered_s: float
    process_p50: float | None
    process_p95: float | None
    process_sum: float  # ms, over every inference thread
    process_samples: int
    errors: int
    restarts: int
    build_failures: int
    abandoned_threads: int
    last_error: str
    problem: str
    notice: str
    provider: str
    gpu_requested: str | None
    gpu_fallback: bool


@dataclass(frozen=True)
class RenderCounters:
    frames: int
    mean_fps: float
    fps_now: float
    new_pictures: int  # draws that showed a new picture
    latency_p50: float | None
    latency_p95: float | None
    latency_sum: float
    face_age_p50: float | None
    face_age_p95: float | None
    with_faces: int = 0  # draws whose picture carried at least one swapped face
    results: int = 0  # processing results taken for the screen
    results_swapping: int = 0  # ... of which from the swap stage (not a pass-through while loading)
    results_with_faces: int = 0  # ... of which with at least one swapped face


@dataclass(frozen=True)
class Counters:
    t: float  # the render loop's clock when taken
    detailed: bool  # with the latency percentiles (else they read None)
    duration_s: float
    started_unix: float
    capture: CaptureCounters
    processing: ProcessingCounters
    render: RenderCounters
    dropped_capture_to_processing: int
    dropped_processing_to_display: int
    dropped_capture_to_display_live: int
    display_mode: str  # display.mode as configured (synced, live or auto)
    active_mode: str  # the mode on screen now (synced or live: auto resolved)
    mode_switches: int  # changes of the mode on screen by display.mode auto
    #: Face × rendered frame shown swapped vs real, per mode on screen (ScreenShare.as_dict).
    screen: dict[str, Any]
    live: dict[str, Any] | None  # the live tracker's figures (display.mode: live or auto), else None
    carry_err_p95: float | None
    stale_err_p95: float | None
    real_face_drops: int
    faces: tuple[str, ...]  # names of the faces loaded, in carousel order
    face_problems: tuple[str, ...]
    selected_face: str
    selected_index: int
    actions_applied: int
    last_action: str
    swap_enabled: bool
    enhance_enabled: bool
    debug: bool
    attract: bool
    snapshots_written: int
    thread_restarts: int
    keepsakes: dict[str, int] | None = None  # KeepsakeService.metrics() while keepsakes are on
    #: The host's staff line (a config change refused, keepsakes down, snapshots kept in memory).
    staff_problem: str = ""
    #: Start-up with the face library (:class:`kiosk.app.startup.StartupTimes`): first_face_s,
    #: loaded_s (seconds from the process start, None until then) and the photos still to scan.
    library: dict[str, float | int | None] = field(default_factory=dict)


class ConfigInForce(Protocol):
    """The config and face library in force (:class:`kiosk.app.reload.ConfigReload`)."""

    cfg: KioskConfig
    library: FaceLibrary


class CounterReader:
    """Reads one :class:`Counters` from the figures' owners: the supervisor's meters of each worker
    kind (written by the kind's current thread, and counting on across replacements) and its
    health, the current threads' state, the render loop's screen, the booth session's controls.
    Only the render loop reads."""

    def __init__(self, parts: FrameParts, supervisor: Supervisor, reload: ConfigInForce) -> None:
        self._parts = parts
        self._supervisor = supervisor
        self._reload = reload  # the config in force and the face library
        self.startup = StartupTimes()  # first face on screen, all photos loaded (from the process start)

    def read(
        self, now: float, detailed: bool, t_start: float, started_unix: float, staff_problem: str = ""
    ) -> Counters:
        """Every counter at ``now`` (the loop's clock); ``t_start``: when the run began (0: not
        running). ``detailed=False`` leaves out the latency percentiles (a sort of up to 4096
        samples each)."""

        def pct(rec: LatencyRecorder, q: float) -> float | None:
            return rec.percentile(q) if detailed else None

        p = self._parts
        wired, screen, controls = p.workers.now, p.screen, p.controls
        cfg, faces = self._reload.cfg, self._reload.library.snapshot
        cap, inf = wired.capture, wired.inference
        cm, im = self._supervisor.meters.capture, self._supervisor.meters.inference
        provider, gpu_requested, gpu_fallback = inf.provider_info()
        health = self._supervisor.health(now, inf)
        stalled_for_s = health.stalled_for_s
        dead = bool(t_start) and not inf.is_alive() and not p.stop.is_set()
        # A thread that is hung, being replaced or stopped has no rate, whatever its last window said.
        stopped = bool(stalled_for_s) or (bool(t_start) and not inf.is_alive())
        live = (
            wired.live_feed.figures if wired.live_feed is not None else None
        )  # the capture thread's snapshot
        selected = controls.selected_index(faces.keys)
        self.startup.update(now, screen.faces_on_screen, len(faces.entries), faces.pending, faces.version)
        self.startup.switch.update(now, controls.selected_key, p.session.worn_keys)
        return Counters(
            t=now,
            detailed=detailed,
            duration_s=now - t_start if t_start else 0.0,
            started_unix=started_unix,
            capture=CaptureCounters(
                description=cap.description,
                kind=cfg.source.kind,
                state=cap.state,
                last_error=cap.last_error,
                reconnects=cm.reconnects,
                frames=cm.rate.count,
                mean_fps=cm.rate.mean_fps,
                fps_now=cm.rate.fps_at(now) if cap.is_alive() else 0.0,
                live_errors=cm.live_errors,
            ),
            processing=ProcessingCounters(
                stage=inf.processor_name,
                frames=im.rate.count,
                mean_fps=im.rate.mean_fps,
                fps_now=0.0 if stopped else im.rate.fps_at(now),
                swap_fps=im.swap_rate.mean_fps,
                swap_fps_now=0.0 if stopped else im.swap_rate.fps_at(now),
                stalled_for_s=stalled_for_s,
                # A slow stage that keeps progressing is slow, not stalled, between its frames.
                no_result_s=0.0 if health.slow_frame_s else screen.stalled_s(now, cap.state),
                slow_frame_s=health.slow_frame_s,
                dead=dead,
                unrecovered_s=health.unrecovered_s,
                process_p50=pct(im.process_ms, 50),
                process_p95=pct(im.process_ms, 95),
                process_sum=im.process_ms.total,
                process_samples=im.process_ms.count,
                errors=im.errors,  # failed calls, over every inference thread
                restarts=im.restarts,  # stage rebuilds, over every thread
                build_failures=im.build_failures,
                abandoned_threads=self._supervisor.abandoned_threads,
                last_error=inf.last_error,
                problem=inf.problem,
                notice=screen.last_notice,
                provider=provider,
                gpu_requested=gpu_requested,
                gpu_fallback=gpu_fallback,
            ),
            render=RenderCounters(
                frames=screen.render_rate.count,
                mean_fps=screen.render_rate.mean_fps,
                fps_now=screen.render_rate.fps_at(now),
                new_pictures=screen.latency_ms.count,
                with_faces=screen.frames_with_faces,
                results=screen.results_shown,
                results_swapping=screen.results_swapping,
                results_with_faces=screen.results_with_faces,
                latency_p50=pct(screen.latency_ms, 50),
                latency_p95=pct(screen.latency_ms, 95),
                latency_sum=screen.latency_ms.total,
                face_age_p50=pct(screen.face_age_ms, 50),
                face_age_p95=pct(screen.face_age_ms, 95),
            ),
            dropped_capture_to_processing=wired.capture_buf.dropped,
            dropped_processing_to_display=wired.result_buf.dropped,
            dropped_capture_to_display_live=wired.live_buf.dropped,
            display_mode=cfg.display.mode,
            active_mode=screen.auto_mode.mode if cfg.display.mode == "auto" else cfg.display.mode,
            mode_switches=screen.auto_mode.switches,
            screen=screen.screen_share.as_dict(),
            live=live.stats if live is not None else None,
            carry_err_p95=live.carry_err_p95 if live is not None and detailed else None,
            stale_err_p95=live.stale_err_p95 if live is not None and detailed else None,
            real_face_drops=live.real_face_drops if live is not None else 0,
            faces=tuple(e.name for e in faces.entries),
            face_problems=tuple(faces.problems),
            selected_face=faces.entries[selected].name if selected is not None else "",
            selected_index=selected or 0,
            actions_applied=controls.actions_applied,
            last_action=controls.last_action,
            swap_enabled=controls.swap_enabled,
            enhance_enabled=controls.enhance_enabled,
            debug=controls.debug,
            attract=p.session.attract,
            snapshots_written=p.shots.snapshots_written,
            thread_restarts=self._supervisor.thread_restarts,
            keepsakes=p.keepsake.metrics() if detailed else None,
            staff_problem=staff_problem,
            library={**self.startup.as_dict(), "pending": faces.pending},
        )


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def stats_dict(c: Counters) -> dict[str, Any]:
    """The ``--stats-json`` document (also what the monitoring textfile is rendered from)."""
    cap, proc, ren = c.capture, c.processing, c.render
    dropped = (
        c.dropped_capture_to_processing,
        c.dropped_processing_to_display,
        c.dropped_capture_to_display_live,
    )
    return {
        "duration_s": round(c.duration_s, 3),
        "started_unix": round(c.started_unix, 3),
        "frames": {
            "captured": cap.frames,
            "processed": proc.frames,
            "rendered": ren.frames,
            "with_swapped_faces": ren.with_faces,
            "results_shown": ren.results,
            "results_from_swap_stage": ren.results_swapping,
            "results_with_swapped_faces": ren.results_with_faces,
        },
        "dropped": {
            "capture_to_processing": dropped[0],
            "processing_to_display": dropped[1],
            "capture_to_display_live": dropped[2],
            "total": sum(dropped),
        },
        "fps": {
            "capture": round(cap.mean_fps, 2),
            "processing": round(proc.mean_fps, 2),
            "swap_results": round(proc.swap_fps, 2),  # of the swapping stage, not the pass-through
            "render": round(ren.mean_fps, 2),
            # draws that showed a new picture (a new result in synced mode, a new camera frame in live)
            "new_pictures": round(ren.new_pictures / c.duration_s, 2) if c.duration_s > 0 else 0.0,
        },
        "fps_now": {  # over the last second, 0 for a stage that has stopped
            "capture": round(cap.fps_now, 2),
            "processing": round(proc.fps_now, 2),
            "swap_results": round(proc.swap_fps_now, 2),
            "render": round(ren.fps_now, 2),
        },
        "latency_ms": {
            "capture_to_display_p50": _ms(ren.latency_p50),
            "capture_to_display_p95": _ms(ren.latency_p95),
            "capture_to_display_sum": round(ren.latency_sum, 3),
            "capture_to_display_samples": ren.new_pictures,
            "face_age_p50": _ms(ren.face_age_p50),
            "face_age_p95": _ms(ren.face_age_p95),
            "process_p50": _ms(proc.process_p50),
            "process_p95": _ms(proc.process_p95),
            "process_sum": round(proc.process_sum, 3),
            "process_samples": proc.process_samples,
            "samples": ren.new_pictures,
        },
        "display": {
            "mode": c.display_mode,
            "active_mode": c.active_mode,
            "mode_switches": c.mode_switches,
            "screen": c.screen,
            "live": c.live,
            "live_errors": cap.live_errors,
        },
        "source": {
            "description": cap.description,
            "state": cap.state,
            "reconnects": cap.reconnects,
            "last_error": cap.last_error,
        },
        "processing": {
            "stage": proc.stage,
            "errors": proc.errors,
            "restarts": proc.restarts,
            "last_error": proc.last_error,
            "notice": proc.notice,
            "provider": proc.provider,
            "gpu_requested": proc.gpu_requested,
            "gpu_fallback": proc.gpu_fallback,
            "stalled_s": round(proc.no_result_s, 2),
            "state": processing_state(c),
            "slow_frame_s": round(proc.slow_frame_s, 2),
            "problem": proc.problem,
            "build_failures": proc.build_failures,
            "abandoned_threads": proc.abandoned_threads,
            "unrecovered_s": round(proc.unrecovered_s, 2),
        },
        "controls": {
            "selected_face": c.selected_face,
            "selected_index": c.selected_index,
            "actions_applied": c.actions_applied,
            "last_action": c.last_action,
            "swap_enabled": c.swap_enabled,
            "enhance_enabled": c.enhance_enabled,
            "debug": c.debug,
        },
        "faces": {"loaded": len(c.faces), "names": list(c.faces), "problems": list(c.face_problems)},
        "warnings": staff_warnings(c),
        "attract": c.attract,
        "snapshots_written": c.snapshots_written,
        "thread_restarts": c.thread_restarts,
        "keepsakes": c.keepsakes,
        # The kiosk process's peak resident size so far (issue 27: a 1,000-photo library's budget).
        "memory": {"rss_peak_mb": round(peak_rss_mb(), 1)},
        # Issue 27: seconds from the process start to the first library face swapped on screen and
        # to every photo loaded (None until then), and the photos still to scan.
        "library": dict(c.library),
    }


def peak_rss_mb() -> float:
    """The kiosk process's peak resident size so far, in MB (0 where the OS does not say)."""
    try:
        import resource
    except ImportError:  # not on a POSIX system
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KB on Linux, bytes on macOS
    return kb / (1 << 20) if sys.platform == "darwin" else kb / 1024


def slow_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def processing_state(c: Counters) -> str:
    """``stalled`` (a unit of stage work hung past its bound, or not recovered yet), ``stopped``
    (the thread died), ``slow`` (progressing, at least SLOW_FRAME_S a frame) or ``ok``."""
    proc = c.processing
    if proc.stalled_for_s:
        return "stalled"
    if proc.dead:
        return "stopped"
    if proc.slow_frame_s:
        return "slow"
    return "ok"


def _degraded(c: Counters) -> bool:
    return processing_state(c) != "ok"


def process_rate_text(c: Counters) -> str:
    """The processing rate, or how long it has been stalled, or how slow it is: never a stopped
    thread's old rate."""
    proc = c.processing
    state = processing_state(c)
    if state == "stalled":
        return f"stalled ({proc.stalled_for_s:.0f} s)"
    if state == "stopped":
        return "stopped (restarting)"
    if state == "slow":
        return f"slow ({slow_text(proc.slow_frame_s)} a frame)"
    return f"{proc.fps_now:5.1f} fps"


def debug_lines(c: Counters) -> list[str]:
    """The debug overlay's lines (``overlay.debug`` / the toggle_debug action)."""
    cap, proc, ren = c.capture, c.processing, c.render
    if _degraded(c):
        process = f"process  {process_rate_text(c)}"
    else:
        process = f"process  {process_rate_text(c)}  " + (
            f"{proc.process_p50:.1f} ms p50" if proc.process_p50 is not None else "-"
        )
    lat = (
        f"p50 {ren.latency_p50:.1f} ms  p95 {ren.latency_p95:.1f} ms"
        if ren.latency_p50 is not None and ren.latency_p95 is not None
        else "-"
    )
    age = (
        f"p50 {ren.face_age_p50:.0f} ms  p95 {ren.face_age_p95:.0f} ms"
        if ren.face_age_p50 is not None and ren.face_age_p95 is not None
        else "-"
    )
    mode = c.active_mode if c.display_mode == c.active_mode else f"{c.display_mode}: {c.active_mode}"
    pct = c.screen.get("swapped_pct") if c.screen else None
    shown = f"swap on {pct:.0f} % of face×frame" if pct is not None else "swap on -"
    display = f"display  {mode}  {shown}  face age {age}"
    # live mode's carry figures on a line of their own: one long line would widen the block over
    # the middle of a 1280 px screen, where the visitor's face is
    carry = ""
    if c.live is not None:
        if c.carry_err_p95 is not None and c.stale_err_p95 is not None:
            carry += f"  err p95 {c.carry_err_p95:.1f} px (stale {c.stale_err_p95:.0f})"
        carry += f"  real-face drops {c.real_face_drops}"
    on = c.screen.get(c.active_mode) if c.screen else None
    if on and on["faces_real_by_reason"]:
        real = "  real: " + ", ".join(f"{k} {v}" for k, v in on["faces_real_by_reason"].items())
        if c.live is not None:
            carry += real
        else:
            display += real
    faces = f"faces    {len(c.faces)} loaded"
    if c.face_problems:
        faces += f", {len(c.face_problems)} skipped"
    if c.faces:
        faces += f"  selected: {c.selected_face}"
    return [
        f"capture  {cap.fps_now:5.1f} fps  ({cap.state}, reconnects {cap.reconnects})",
        process,
        f"render   {ren.fps_now:5.1f} fps",
        f"dropped  capture→process {c.dropped_capture_to_processing}  "
        f"process→display {c.dropped_processing_to_display}",
        f"latency  capture→display {lat}",
        display,
        *([f"carry  {carry}"] if carry else []),
        f"stage    {proc.stage}  errors {proc.errors}",
        faces,
    ]


def status_line(c: Counters) -> str:
    """One line for systemd's ``STATUS=`` (``systemctl status faceswap-kiosk``)."""
    cap, proc = c.capture, c.processing
    process = process_rate_text(c) if _degraded(c) else f"{proc.fps_now:.0f} fps"
    return (
        f"{cap.description or cap.kind} {cap.state}, render {c.render.fps_now:.0f} fps, "
        f"process {process}, {proc.stage}, {len(c.faces)} faces"
    )


def overlay_texts(c: Counters, config_problem: str, status_line: bool) -> dict[str, Any]:
    """The overlay's texts from the frame's snapshot ``c``: the source's trouble in plain words
    (its error joins the warnings), the staff notice (:func:`_notice`; drawn only with the debug
    block open), the status line (``overlay.status_line``) and the debug lines."""
    cap = c.capture
    message = ""
    if _source_down(c):  # plain words for the visitor; the source's error is a staff warning
        what = "Camera" if cap.kind == "camera" else "Video source"
        message = f"{what} unavailable — reconnecting…"
    status = f"{cap.description or cap.kind} · {c.processing.stage}"
    return {
        "status": status if status_line else "",
        "message": message,
        "notice": _notice(c, config_problem),
        "debug_lines": debug_lines(c) if c.debug else [],
        "warnings": [_source_warning(c)] if _source_warning(c) else [],
    }


def _source_down(c: Counters) -> bool:
    cap = c.capture
    return cap.state == "reconnecting" or (cap.state == "starting" and c.duration_s > 1.0)


def _source_warning(c: Counters) -> str:
    """The source's error while it is down (a device path, a library's words), else ""."""
    return f"source: {c.capture.last_error}" if _source_down(c) and c.capture.last_error else ""


def _notice(c: Counters, config_problem: str) -> str:
    """The staff notice: a config problem first, else the stage's; "stalled" or "slow" when
    processing is."""
    notice = config_problem or c.processing.notice
    if c.processing.no_result_s:
        shown = "the camera without swaps" if c.active_mode == "live" else "the last frame"
        notice = f"processing stalled for {c.processing.no_result_s:.0f} s; showing {shown}"
    elif c.processing.slow_frame_s:
        slow = f"processing slow ({slow_text(c.processing.slow_frame_s)} a frame)"
        notice = f"{notice} · {slow}" if notice else slow
    return notice


def staff_warnings(c: Counters) -> list[str]:
    """Every staff warning of the snapshot ``c``, one line each: the host's staff line, the
    processing notice (kernel cache, GPU fallback, models missing, stalled, slow), the source's
    error while it is down, the face photos skipped. The stats JSON's ``warnings`` (and the
    metrics' ``warnings`` gauge) carry them; the visitor's screen shows only the staff marker."""
    lines = [c.staff_problem, _notice(c, ""), _source_warning(c), *c.face_problems]
    return list(dict.fromkeys(line for line in lines if line))


class StatsFile:
    """The ``--stats-json`` file, replaced whole (a reader never sees half a document). A failed
    write never stops the booth: it is said once in the log."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._failed = False

    def write(self, doc: dict[str, Any]) -> None:
        path = self.path
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(doc, indent=2) + "\n")
            tmp.replace(path)
        except OSError as exc:  # a stats file must never stop the booth: say so once
            if not self._failed:
                log.error("--stats-json not written (%s): %s", path, exc.strerror or exc)
            self._failed = True
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
