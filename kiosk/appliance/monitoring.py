"""Fleet monitoring: the kiosk's figures as a Prometheus textfile for node_exporter.

With ``monitoring.textfile`` set, the render loop hands :meth:`KioskApp.stats` to a
:class:`TextfileMonitor` every ``monitoring.interval_s``; a writer thread of its own renders the
Prometheus text format and replaces the file atomically (temporary file in the same folder, then
``rename``), so node_exporter's textfile collector (``--collector.textfile.directory``) never reads
half a file. The kiosk opens no socket: node_exporter serves the figures.

The render loop only stores the newest figures and wakes the writer; a slow, full or read-only
disk delays or loses a write, never a frame. A failing write is logged once and tried again at
the next interval. On exit the file is rewritten with ``faceswap_kiosk_up 0``; a kiosk that was
killed or froze stops updating ``faceswap_kiosk_last_update_timestamp_seconds``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kiosk import __version__
from kiosk.util.atomic import atomic_write

log = logging.getLogger(__name__)

PREFIX = "faceswap_kiosk_"

#: Every state the capture thread reports (kiosk/capture/thread.py); one series each, 1 for the current one.
SOURCE_STATES = ("starting", "running", "reconnecting", "stopped")

#: stats()["keepsakes"] counters reported as faceswap_kiosk_keepsakes_total{event=...}.
_KEEPSAKE_EVENTS = (
    "taken",
    "downloaded",
    "printed",
    "print_failed",
    "expired",
    "evicted",
    "consent_declined",
    "clips_made",
    "clips_downloaded",
)

#: Every state of the processing stage (kiosk/app/counters.py processing_state).
PROCESSING_STATES = ("ok", "slow", "stalled", "stopped")

#: stats()["frames"] keys → the stage label also used by faceswap_kiosk_fps.
_STAGE_OF = {"captured": "capture", "processed": "processing", "rendered": "render"}

Labels = Mapping[str, str]
Sample = tuple[str, Labels, float | int | bool | None]  # (name suffix, labels, value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(v: float | int | bool | None) -> str:
    if v is None:
        return "NaN"
    if isinstance(v, bool | int):
        return str(int(v))
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class _Text:
    """Accumulates metric families in the Prometheus text exposition format (version 0.0.4)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> None:
        full = PREFIX + name
        self.lines.append(f"# HELP {full} {help_text}")
        self.lines.append(f"# TYPE {full} {kind}")
        for suffix, labels, value in samples:
            label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            self.lines.append(
                f"{full}{suffix}{{{label_text}}} {_number(value)}"
                if label_text
                else f"{full}{suffix} {_number(value)}"
            )

    def one(self, name: str, kind: str, help_text: str, value: float | int | bool | None) -> None:
        self.family(name, kind, help_text, [("", {}, value)])


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def render_metrics(stats: Mapping[str, Any], up: bool, now_unix: float, version: str = __version__) -> str:
    """The Prometheus text for one :meth:`KioskApp.stats` snapshot (no figure is computed here)."""
    t = _Text()
    src, proc, lat = stats["source"], stats["processing"], stats["latency_ms"]
    t.one("up", "gauge", "1 while the kiosk is running; 0 is written when it exits.", up)
    t.one(
        "last_update_timestamp_seconds",
        "gauge",
        "Unix time the render loop handed over these figures; stops advancing if the kiosk freezes or dies.",
        now_unix,
    )
    t.one(
        "start_time_seconds",
        "gauge",
        "Unix time this kiosk process started; changes at every restart of the service.",
        stats["started_unix"],
    )
    t.family("build_info", "gauge", "Kiosk version (always 1).", [("", {"version": version}, 1)])
    provider = proc["provider"] or "none"
    t.family(
        "provider_info",
        "gauge",
        "ONNX Runtime provider the face models run on (always 1); provider=none while no models are "
        "loaded; requested is the GPU provider asked for in the config.",
        [("", {"provider": provider, "requested": proc["gpu_requested"] or provider}, 1)],
    )
    t.family(
        "processing_stage_info",
        "gauge",
        "The processing stage in use (always 1), e.g. passthrough when models or faces are missing.",
        [("", {"stage": proc["stage"]}, 1)],
    )
    t.one(
        "gpu_fallback",
        "gauge",
        "1 when a GPU provider was requested but the face models run on the CPU (run: kiosk doctor).",
        proc["gpu_fallback"],
    )
    t.family(
        "fps",
        "gauge",
        "Frames per second over the last second, per stage (falls towards 0 when a stage stops).",
        [("", {"stage": k}, v) for k, v in stats["fps_now"].items()],
    )
    t.family(
        "frames_total",
        "counter",
        "Frames captured, processed and rendered since the kiosk started.",
        # Only the three stages: stats["frames"] also counts frames with swapped faces (not a stage).
        [("", {"stage": _STAGE_OF[k]}, v) for k, v in stats["frames"].items() if k in _STAGE_OF],
    )
    t.family(
        "dropped_frames_total",
        "counter",
        "Frames overwritten in a triple buffer before the next stage read them (the newest frame wins).",
        [("", {"buffer": k}, v) for k, v in stats["dropped"].items() if k != "total"],
    )
    for name, key, help_text in (
        (
            "capture_to_display_latency_seconds",
            "capture_to_display",
            "Time from a frame's capture to its display; quantiles over the last 4096 frames.",
        ),
        (
            "processing_duration_seconds",
            "process",
            "Time the processing stage took per frame; quantiles over the last 1024 frames.",
        ),
    ):
        t.family(
            name,
            "summary",
            help_text,
            [
                ("", {"quantile": "0.5"}, _seconds(lat[f"{key}_p50"])),
                ("", {"quantile": "0.95"}, _seconds(lat[f"{key}_p95"])),
                ("_sum", {}, _seconds(lat[f"{key}_sum"])),
                ("_count", {}, lat[f"{key}_samples"]),
            ],
        )
    t.family(
        "errors_total",
        "counter",
        "Errors raised by the processing stage (each one shows the camera unchanged and rebuilds the stage).",
        [("", {"component": "processing"}, proc["errors"])],
    )
    t.family(
        "restarts_total",
        "counter",
        "In-process restarts: the processing stage rebuilt after an error, a worker thread restarted.",
        [
            ("", {"component": "processing"}, proc["restarts"]),
            ("", {"component": "threads"}, stats["thread_restarts"]),
        ],
    )
    t.one(
        "source_reconnects_total",
        "counter",
        "Times the camera or video source was reopened after it failed.",
        src["reconnects"],
    )
    t.one(
        "source_up", "gauge", "1 while the camera or video source delivers frames.", src["state"] == "running"
    )
    t.family(
        "source_state",
        "gauge",
        "State of the capture thread: 1 for the current state, 0 for the others.",
        [("", {"state": s}, src["state"] == s) for s in SOURCE_STATES],
    )
    t.one(
        "processing_stalled_seconds",
        "gauge",
        "How long no processed frame has reached the display while the source runs (0: frames flow).",
        proc["stalled_s"],
    )
    state = proc.get("state", "ok")
    t.family(
        "processing_state",
        "gauge",
        "State of the processing stage: 1 for the current one. slow: every model call returns but a "
        "frame takes a second or more (never abandoned); stalled: a call hung past its bound.",
        [("", {"state": s}, state == s) for s in PROCESSING_STATES],
    )
    t.one(
        "processing_slow_frame_seconds",
        "gauge",
        "Seconds a frame takes while the stage is slow but progressing (0 when not slow).",
        proc.get("slow_frame_s", 0.0),
    )
    display = stats.get("display") or {}
    screen = display.get("screen") or {}
    modes = [m for m in ("synced", "live") if m in screen]
    if modes:
        t.family(
            "display_mode_info",
            "gauge",
            "The picture on screen (always 1): mode = synced or live; configured = display.mode (auto switches).",
            [("", {"mode": display.get("active_mode", ""), "configured": display.get("mode", "")}, 1)],
        )
        t.family(
            "screen_faces_total",
            "counter",
            "Face x rendered frame on screen, per mode: shown swapped (fresh or carried) or as the visitor's "
            "real face (with the reason).",
            [
                *[
                    ("", {"mode": m, "shown": "swapped", "reason": ""}, screen[m]["faces_swapped_frames"])
                    for m in modes
                ],
                *[
                    ("", {"mode": m, "shown": "real", "reason": why}, n)
                    for m in modes
                    for why, n in screen[m]["faces_real_by_reason"].items()
                ],
            ],
        )
        t.family(
            "screen_swapped_ratio",
            "gauge",
            "Share of face x rendered frame shown swapped since start, per mode on screen (NaN: no face yet).",
            [
                (
                    "",
                    {"mode": m},
                    None if screen[m]["swapped_pct"] is None else screen[m]["swapped_pct"] / 100.0,
                )
                for m in modes
            ],
        )
        t.one(
            "display_mode_switches_total",
            "counter",
            "Changes of the picture's mode by display.mode auto.",
            display.get("mode_switches", 0),
        )
    t.one("faces_loaded", "gauge", "Face photos loaded and selectable.", stats["faces"]["loaded"])
    t.one(
        "faces_skipped",
        "gauge",
        "Face photos skipped (no face, several faces, unreadable).",
        len(stats["faces"]["problems"]),
    )
    t.one(
        "warnings",
        "gauge",
        "Staff warnings waiting (the stats JSON's warnings list; the screen shows only a small marker).",
        len(stats.get("warnings", ())),
    )
    t.one(
        "attract_mode",
        "gauge",
        "1 while the attract screen is shown (nobody in front of the camera).",
        stats["attract"],
    )
    t.one(
        "snapshots_total", "counter", "Snapshots saved since the kiosk started.", stats["snapshots_written"]
    )
    keepsakes = stats.get("keepsakes")
    if keepsakes:  # keepsake.enabled
        t.family(
            "keepsakes_total",
            "counter",
            "Keepsake photos since the kiosk started: taken, downloaded (JPEGs served), printed, "
            "print_failed, expired (deleted after keepsake.ttl_s), evicted (deleted early for max_photos/max_mb), "
            "consent_declined (keepsake.consent not agreed to: nothing taken), clips_made and "
            "clips_downloaded (keepsake.clip: MP4s and GIFs stored, and served).",
            [("", {"event": k}, keepsakes.get(k, 0)) for k in _KEEPSAKE_EVENTS],
        )
        t.family(
            "keepsake_refused_requests_total",
            "counter",
            "Requests to the keepsake web server refused: answered with an error (404, 405, 410, 413, "
            "429, 400), or their connection closed over the connection caps.",
            [
                ("", {"how": "answer"}, keepsakes["refused"]),
                ("", {"how": "connection"}, keepsakes.get("connections_refused", 0)),
            ],
        )
        t.one("keepsakes_stored", "gauge", "Keepsake photos kept right now.", keepsakes["stored"])
        t.one(
            "keepsake_server_up",
            "gauge",
            "1 while the keepsake web server is alive and answering (QR codes offered), else 0.",
            keepsakes.get("server_up", 0),
        )
    return "\n".join(t.lines) + "\n"


class TextfileMonitor:
    """Keeps ``path`` up to date with the figures the render loop submits, from a writer thread."""

    def __init__(self, path: Path, interval_s: float) -> None:
        self.path = path
        self.interval_s = interval_s
        self.writes = 0
        self.failures = 0
        self._failing = False
        self._next_due = 0.0
        self._cond = threading.Condition()
        self._pending: tuple[Mapping[str, Any], bool, float] | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="metrics-writer", daemon=True)
        self._thread.start()

    def due(self, now: float) -> bool:
        """True once per ``interval_s`` (``now``: time.perf_counter()); the first call is due."""
        if now < self._next_due:
            return False
        self._next_due = now + self.interval_s
        return True

    def submit(self, stats: Mapping[str, Any], up: bool = True) -> None:
        """Hand over the newest figures; returns at once (an unwritten older snapshot is dropped)."""
        with self._cond:
            self._pending = (stats, up, time.time())
            self._cond.notify()

    def close(self, stats: Mapping[str, Any] | None, timeout_s: float = 1.0) -> None:
        """Write the final figures with ``up 0`` (or remove the file if ``stats`` is None, e.g. when
        monitoring is switched off or moved by a config reload), then stop the writer thread."""
        with self._cond:
            self._pending = (stats, False, time.time()) if stats is not None else None
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("monitoring: writing %s did not finish within %.1f s", self.path, timeout_s)
        elif stats is None:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                item, self._pending = self._pending, None
            if item is None:
                return  # closed, nothing left to write
            self.write(*item)

    def write(self, stats: Mapping[str, Any], up: bool, now_unix: float) -> bool:
        """Render and write one snapshot; never raises. Returns whether the file was written."""
        try:
            # 0644 (the default): node_exporter is another user; the collector's folder is not ours
            atomic_write(self.path, render_metrics(stats, up, now_unix), make_folder=False)
        except Exception as exc:
            self.failures += 1
            if not self._failing:
                self._failing = True
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                log.warning(
                    "monitoring: cannot write %s: %s — make its folder writable for the kiosk user "
                    "(deploy/README.md, fleet monitoring); retrying every %.0f s",
                    self.path,
                    reason,
                    self.interval_s,
                    exc_info=not isinstance(exc, OSError),
                )
            return False
        self.writes += 1
        if self._failing:
            self._failing = False
            log.info("monitoring: writing %s again", self.path)
        return True
