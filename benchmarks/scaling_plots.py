"""SVG line plots of ``benchmarks/scaling.py``'s results (no matplotlib): one file per figure.

``write_plots(results, img)`` writes, for what ``results`` holds,

- ``scaling_library_time.svg``: first face and all loaded (s) against photos, cold and warm;
- ``scaling_library_rss.svg``: peak RSS (MB) and the face-switch median (ms) against photos;
- ``scaling_frames_fps.svg``: the render rate against faces per frame, one line per
  resolution and source;
- ``scaling_frames_capture.svg``: the capture rate against faces per frame;
- ``scaling_frames_ms.svg``: the frame time (processing per result, mean ms) against faces per frame
  (the mean: the stats' p50 is over a window that the tracker's quick frames can fill).
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

W, H = 640, 380
L, R, T, B = 64, 190, 34, 50  # margins: the legend on the right
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
Series = tuple[str, list[tuple[float, float]], str]  # label, points, dash ("" or "6 4")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    start = math.floor(lo / step) * step
    return [start + k * step for k in range(int((hi - start) / step + 1.5)) if start + k * step <= hi + 1e-9]


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.0e}"


def line_plot(title: str, xlabel: str, ylabel: str, series: list[Series], log_x: bool = False) -> str:
    """An SVG document: ``series`` as lines with dots, y from 0, a legend at the right."""
    xs = [x for _, pts, _ in series for x, _ in pts]
    ys = [y for _, pts, _ in series for _, y in pts]
    if not xs:
        raise ValueError(f"{title}: nothing to plot")
    fx = (lambda v: math.log10(v)) if log_x else (lambda v: v)
    x0, x1 = fx(min(xs)), fx(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    yt = _ticks(0.0, max(ys) * 1.08 or 1.0)
    y1 = yt[-1]
    pw, ph = W - L - R, H - T - B

    def px(v: float) -> float:
        return L + (fx(v) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return T + ph - v / y1 * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{L + pw / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">'
        f"{escape(title)}</text>",
    ]
    for v in yt:
        y = py(v)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for v in sorted(set(xs)):
        x = px(v)
        out.append(f'<line x1="{x:.1f}" y1="{T + ph}" x2="{x:.1f}" y2="{T + ph + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{T + ph + 18}" text-anchor="middle">{_fmt(v)}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    out.append(f'<text x="{L + pw / 2}" y="{H - 12}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(
        f'<text x="16" y="{T + ph / 2}" text-anchor="middle" transform="rotate(-90 16 {T + ph / 2})">'
        f"{escape(ylabel)}</text>"
    )
    for k, (label, pts, dash) in enumerate(series):
        c = COLOURS[k % len(COLOURS)]
        pts = sorted(pts)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{d}/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>' for x, y in pts]
        ly = T + 10 + 18 * k
        out.append(
            f'<line x1="{L + pw + 12}" y1="{ly}" x2="{L + pw + 36}" y2="{ly}" stroke="{c}" '
            f'stroke-width="2"{d}/>'
        )
        out.append(f'<text x="{L + pw + 42}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _lib_series(rows: list[dict[str, Any]], key: str, name: str) -> list[Series]:
    out: list[Series] = []
    for kind, dash in (("cold", ""), ("warm", "6 4")):
        pts = [
            (float(r["photos"]), float(r[key])) for r in rows if r["cache"] == kind and r.get(key) is not None
        ]
        if pts:
            out.append((f"{name}, {kind}", pts, dash))
    return out


def write_plots(results: dict[str, Any], img: Path) -> list[Path]:
    img.mkdir(parents=True, exist_ok=True)
    figures: dict[str, str] = {}
    lib = results.get("library") or []
    if lib:
        figures["scaling_library_time.svg"] = line_plot(
            "Start-up against library size",
            "photos in the face folder (log scale)",
            "seconds from process start",
            _lib_series(lib, "first_face_s", "first face") + _lib_series(lib, "loaded_s", "all loaded"),
            log_x=True,
        )
        figures["scaling_library_rss.svg"] = line_plot(
            "Memory and face switch against library size",
            "photos in the face folder (log scale)",
            "MB  /  ms",
            _lib_series(lib, "rss_peak_mb", "RSS peak MB")
            + _lib_series(lib, "switch_ms_median", "switch ms (median)"),
            log_x=True,
        )
    frames = results.get("frames") or []
    if frames:
        keys = sorted(
            {(r["resolution"], r["source"]) for r in frames}, key=lambda k: (k[1], _res_order(k[0]))
        )

        def series(field: str) -> list[Series]:
            out: list[Series] = []
            for res, src in keys:
                pts = [
                    (float(r["faces"]), float(r[field]))
                    for r in frames
                    if (r["resolution"], r["source"]) == (res, src)
                ]
                out.append((f"{res} {src}", pts, "" if src == "video" else "6 4"))
            return out

        figures["scaling_frames_fps.svg"] = line_plot(
            "Render rate against faces per frame", "faces per frame", "render fps", series("render_fps")
        )
        figures["scaling_frames_capture.svg"] = line_plot(
            "Capture rate against faces per frame", "faces per frame", "capture fps", series("capture_fps")
        )
        figures["scaling_frames_ms.svg"] = line_plot(
            "Frame time against faces per frame",
            "faces per frame",
            "processing per result, mean (ms)",
            series("process_ms_mean"),
        )
    paths = []
    for name, svg in figures.items():
        path = img / name
        path.write_text(svg)
        paths.append(path)
    return paths


def _res_order(res: str) -> int:
    return {"720p": 0, "1080p": 1, "4k": 2}.get(res, 3)
