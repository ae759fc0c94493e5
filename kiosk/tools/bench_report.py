"""What ``kiosk bench`` prints: :class:`BenchResult` (``--json``: :meth:`BenchResult.as_dict`), the
text report of one run and the side-by-side table of display modes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Stage columns recorded per processed frame.
STAGES = (
    "detect",
    "track",
    "align",
    "swap",
    "enhance",
    "paste",
    "total",
    "session",
    "overhead",
    "mask",
    "color",
)


@dataclass
class BenchResult:
    """Everything ``kiosk bench`` prints (``--json`` prints :meth:`as_dict`)."""

    machine: dict[str, Any]
    setup: dict[str, Any]
    stages_ms: dict[str, dict[str, float]]
    overhead: dict[str, float]
    runtime: dict[str, Any]
    allocation: dict[str, float]
    warmup_ms: dict[str, float]
    insightface: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "setup": self.setup,
            "stages_ms": self.stages_ms,
            "overhead": self.overhead,
            "runtime": self.runtime,
            "allocation": self.allocation,
            "warmup_ms": self.warmup_ms,
            "insightface": self.insightface,
        }


def format_report(r: BenchResult) -> str:
    s, m = r.setup, r.machine
    lines = [
        f"kiosk bench: {s['frame']}, {s['frames_measured']} frames measured, {s['composite']} composite, "
        f"tracking {'on (full detection every ' + str(s['detect_every']) + ')' if s['tracking'] else 'off'}",
        f"machine: {m['cpu']}, {m['cores']} cores, load {m['load_avg_1m']}, provider {m['provider']}"
        + (
            f" (requested {m['gpu_requested']}: FALLBACK)"
            if m["gpu_requested"] and m["provider"] != m["gpu_requested"]
            else ""
        ),
        f"models: detector {s['detector']} at {s['det_size']}"
        + (f" (regions at {s['roi_det_size']})" if s["roi_det_size"] else "")
        + (f", swapper {s['swapper']} ({s['swapper_licence']})" if "swapper" in s else "")
        + f", iobinding {s['iobinding']}, faces {r.overhead['faces_mean']:g} per frame",
        f"colour correction {s['color_correction']} (strength {s['color_strength']:g}); mask "
        + ", ".join(f"{k} {v}" for k, v in s["mask"].items()),
        f"run: {s.get('models', 'config')} models, enhancer {'on' if s.get('enhance') else 'off'}"
        + (f", display mode {s['display_mode']}" if s.get("display_mode") else "")
        + (
            f", pipelined detection {'on' if s['pipelined'] else 'off'}"
            if s.get("pipelined") is not None
            else ""
        ),
        "",
        "stage (ms per frame)     p50      p95",
    ]
    for name in STAGES:
        v = r.stages_ms[name]
        lines.append(f"  {name:<20} {v['p50']:8.2f} {v['p95']:8.2f}")
    o = r.overhead
    lines += [
        "",
        f"outside session.run: {o['per_frame_ms_p50']:.2f} ms/frame p50 ({o['per_frame_ms_p95']:.2f} p95); "
        f"per face {o['per_face_ms_p50']:.2f} ms p50 ({o['per_face_ms_p95']:.2f} p95); "
        f"detection pre/post-processing {o['detection_ms_p50']:.2f} ms p50",
        f"share of processing time inside session.run: {100 * o['session_share']:.1f} %; "
        f"full-frame detections on {100 * o['full_detection_share']:.0f} % of frames",
    ]
    rt = r.runtime
    fps, lat, drop = rt["fps"], rt["latency_ms"], rt["dropped"]
    lines += [
        f"threads: capture {fps['capture']:.1f} fps, processing {fps['processing']:.1f} fps, "
        f"render {fps['render']:.1f} fps (display cap {s['display_max_fps']:g})"
        + (
            f"; process CPU {rt['cpu_s_per_frame_p50']:.2f} s per processed frame (all threads)"
            if rt.get("cpu_s_per_frame_p50") is not None
            else ""
        ),
        f"latency capture→display: p50 {lat['capture_to_display_p50']} ms, p95 {lat['capture_to_display_p95']} ms; "
        f"dropped: capture→processing {drop['capture_to_processing']}, processing→display {drop['processing_to_display']}",
        f"display {s['display_mode']} ({s['motion']}"
        + (f", swapper ≥ {s['swap_ms_min']:g} ms/face" if s["swap_ms_min"] else "")
        + f"): face content age p50 {lat['face_age_p50']} ms, p95 {lat['face_age_p95']} ms",
    ]
    screen = rt.get("screen")
    if screen:
        parts = [
            f"{m} {v['swapped_pct']} % ({v['faces_swapped_frames']} swapped, real {v['faces_real_by_reason'] or 0})"
            for m, v in screen.items()
            if isinstance(v, dict) and v["rendered_frames"]
        ]
        lines.append(f"swap on screen (face x rendered frame): {'; '.join(parts) or '-'}")
    live = rt.get("live")
    if live:
        d = live["faces_dropped_to_real"]
        lines.append(
            f"live tracker: {live['results_carried']} results carried ({live['tracks_started']} face tracks "
            f"started), {live['track_ms_p50']} ms/frame p50 "
            f"({live['track_ms_p95']} p95, bringing a result forward {live['catch_up_ms_p50']} ms p50); "
            f"carried vs next detection p50 {live['carry_error_px_p50']} px, p95 {live['carry_error_px_p95']} px "
            f"(stale positions p50 {live['stale_error_px_p50']} px, p95 {live['stale_error_px_p95']} px); "
            f"faces dropped to the real face {d['total']} (track {d['track']}, fast {d['fast']}, "
            f"old {d['old']}, gap {d['gap']})"
        )
    a = r.allocation
    if a["frames"]:
        lines.append(
            f"allocation (tracemalloc, {a['frames']:g} frames): largest within a frame "
            f"{a['peak_bytes_per_frame'] / 1024:.1f} KiB, net {a['net_bytes_per_frame']:.0f} B/frame "
            f"(a frame is {a['frame_bytes'] / 1024:.0f} KiB)"
        )
    if r.warmup_ms:
        lines.append("warm-up ms: " + ", ".join(f"{k} {v:.0f}" for k, v in r.warmup_ms.items()))
    ins = r.insightface
    if ins:
        if "error" in ins:
            lines.append(f"insightface: {ins['error']}")
        else:
            lines.append(
                f"insightface 2.1 reference (detect + get(paste_back=True) per face, {ins['faces']} faces): "
                f"{ins['insightface_ms_p50']:.1f} ms/frame; ours (CPU paste-back, no tracking) "
                f"{ins['ours_ms_p50']:.1f} ms/frame; ratio ours/insightface {ins['ratio_ours_to_insightface']:.3f}"
            )
    return "\n".join(lines)


def _screenshot_path(template: str | None, mode: str, composite: str) -> Path | None:
    if not template:
        return None
    p = Path(template)
    return p.with_name(f"{p.stem}-{mode}-{composite}{p.suffix or '.png'}")


def format_display_comparison(results: list[BenchResult]) -> str:
    """synced next to live: picture latency, face content age, render and processing rates."""
    lines = [
        "display   latency p50/p95 ms   face age p50/p95 ms   render fps (new pictures)   processing fps   faces→real   swap on screen %",
    ]
    for r in results:
        lat, fps = r.runtime["latency_ms"], r.runtime["fps"]
        live = r.runtime.get("live")
        drops = live["faces_dropped_to_real"]["total"] if live else "-"
        lines.append(
            f"{r.setup['display_mode']:<8} {lat['capture_to_display_p50']!s:>8} / {lat['capture_to_display_p95']!s:<8}"
            f"   {lat['face_age_p50']!s:>8} / {lat['face_age_p95']!s:<8}"
            f"   {fps['render']:10.1f} ({fps.get('new_pictures', 0.0):5.1f})      {fps['processing']:14.2f}   {drops!s:>11}"
            f"   {(r.runtime.get('screen') or {}).get('swapped_pct', '-')}"
        )
    return "\n".join(lines)


# -- command ---------------------------------------------------------------------------------------
