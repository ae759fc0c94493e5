"""The console's pages: the login form, the status page with its controls, the SVG plots (drawn
here, on the server: nothing is fetched from anywhere else) and the small script that refreshes
the status and the screen's thumbnail. Every text from the kiosk is HTML-escaped."""

from __future__ import annotations

import base64
import hashlib
import html
import time
from collections.abc import Sequence
from typing import Any

from kiosk.console.history import SERIES

CSS = (
    "body{margin:0;font-family:system-ui,sans-serif;background:#14161a;color:#e8e8e8}"
    "main{max-width:60rem;margin:auto;padding:.8rem}h1{font-size:1.2rem;margin:.2rem 0 .8rem}"
    "h2{font-size:1rem;margin:1rem 0 .4rem;color:#9ab}"
    ".tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:.5rem}"
    ".tile{background:#22262d;border-radius:.4rem;padding:.5rem}.tile b{display:block;font-size:1.1rem}"
    ".tile span{color:#9ab;font-size:.8rem}.warn{background:#3a2a12;border-left:.3rem solid #f90;"
    "padding:.4rem .6rem;margin:.3rem 0;border-radius:.3rem}.warn i{display:block;color:#fc8;font-size:.85rem}"
    ".ok{color:#7c7}img.screen{width:100%;max-width:32rem;border-radius:.4rem;background:#000}"
    "form{display:inline-block;margin:.2rem}button,select,input{font-size:1rem;padding:.6rem .8rem;"
    "border-radius:.4rem;border:0;background:#2d7ff9;color:#fff}input,select{background:#2a2f38}"
    "button.off{background:#a33}.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));"
    "gap:.5rem}svg{background:#22262d;border-radius:.4rem;width:100%;height:auto}"
    ".small{color:#9ab;font-size:.85rem}.err{color:#f88}"
)
_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
#: Only this console's own script, style, pictures and requests; no other site, no inline script.
CSP = (
    f"default-src 'none'; img-src 'self'; style-src 'sha256-{_CSS_HASH}'; script-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

#: Refreshes the status tiles every second and the screen's thumbnail every 3 s (no library).
SCRIPT = """'use strict';
(function () {
  function set(k, v) {
    document.querySelectorAll('[data-k="' + k + '"]').forEach(function (e) { e.textContent = v; });
  }
  function num(v, unit) { return (v === null || v === undefined) ? '-' : v.toFixed(1) + unit; }
  function poll() {
    fetch('/status.json', {credentials: 'same-origin', cache: 'no-store'}).then(function (r) {
      if (r.status === 401) { location.href = '/login'; return null; }
      return r.ok ? r.json() : null;
    }).then(function (s) {
      if (!s || !s.fps) { set('age', 'waiting for the kiosk'); return; }
      if (!s.kiosk_answering) { set('age', 'the kiosk is not answering'); return; }
      set('swapping', s.swapping ? 'on' : 'off');
      set('face', s.face || '-');
      set('mode', s.mode);
      set('render_fps', num(s.fps.render, ' fps'));
      set('processing_fps', num(s.fps.processing, ' fps'));
      set('swap_share', num(s.swap_share_pct, ' %'));
      set('camera', s.camera.state);
      set('warnings_n', String(s.warnings.length));
      set('age', 'updated ' + new Date(s.updated_unix * 1000).toLocaleTimeString());
    }).catch(function () { set('age', 'console not answering'); });
  }
  function thumb() {
    var img = document.getElementById('screen');
    if (img) { img.src = '/screen.jpg?t=' + Date.now(); }
  }
  poll(); setInterval(poll, 1000); setInterval(thumb, 3000);
})();
"""


def _head(title: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        '<meta name=robots content="noindex,nofollow">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body><main>"
    )


def login_page(message: str = "") -> str:
    """The one page reachable without the PIN."""
    note = f"<p class=err>{html.escape(message)}</p>" if message else ""
    return (
        _head("Staff console: log in")
        + "<h1>faceswap-kiosk staff console</h1>"
        + note
        + "<form method=post action=/login><label>PIN "
        "<input type=password name=pin autocomplete=current-password autofocus required></label> "
        "<button type=submit>Log in</button></form>"
        "<p class=small>Scripts: HTTP Basic, user <code>staff</code>.</p></main></body></html>"
    )


def unauthorised_page() -> str:
    return _head("Staff console") + "<p>Please <a href=/login>log in</a>.</p></main></body></html>"


def _tile(label: str, key: str, value: str) -> str:
    return f"<div class=tile><span>{html.escape(label)}</span><b data-k={key}>{html.escape(value)}</b></div>"


def _fmt(v: Any, unit: str) -> str:
    return "-" if v is None else f"{float(v):.1f}{unit}"


def _button(action: str, label: str, csrf: str, extra: str = "", cls: str = "") -> str:
    c = f" class={cls}" if cls else ""
    return (
        f"<form method=post action={action}><input type=hidden name=csrf value={html.escape(csrf)}>"
        f"{extra}<button type=submit{c}>{html.escape(label)}</button></form>"
    )


def status_page(status: dict[str, Any] | None, csrf: str, now_unix: float | None = None) -> str:
    """The console's page from the kiosk's newest status (None: none came yet)."""
    if not status:
        return (
            _head("Staff console")
            + "<h1>Staff console</h1><p>Waiting for the kiosk's first status…</p>"
            + "<script src=/app.js></script></main></body></html>"
        )
    s = status
    esc = html.escape
    fps, cam = s.get("fps", {}), s.get("camera", {})
    tiles = "".join(
        [
            _tile("swapping", "swapping", "on" if s.get("swapping") else "off"),
            _tile("face on screen", "face", s.get("face") or "-"),
            _tile("mode on screen", "mode", str(s.get("mode", "-"))),
            _tile("render", "render_fps", _fmt(fps.get("render"), " fps")),
            _tile("processing", "processing_fps", _fmt(fps.get("processing"), " fps")),
            _tile("swap share on screen", "swap_share", _fmt(s.get("swap_share_pct"), " %")),
            _tile("camera", "camera", str(cam.get("state", "-"))),
            _tile("warnings", "warnings_n", str(len(s.get("warnings", [])))),
        ]
    )
    warnings = (
        "".join(
            f"<div class=warn>{esc(w['text'])}<i>{esc(w['todo'])}</i></div>" for w in s.get("warnings", [])
        )
        or "<p class=ok>No warnings: the booth runs as it should.</p>"
    )
    models = "".join(
        f"<li>{esc(m['role'])}: {esc(m['name'])} <span class=small>({esc(m['licence'])})</span></li>"
        for m in s.get("models", [])
    )
    disk = "".join(
        f"<li>{esc(d['what'])}: {d['free_gb']:.1f} GB free of {d['total_gb']:.0f} GB</li>"
        for d in s.get("disk", [])
    )
    faces = s.get("faces", [])
    options = "".join(
        f"<option value={esc(f['key'])}{' selected' if f['name'] == s.get('face') else ''}>"
        f"{esc(f['name'])}</option>"
        for f in faces
    )
    swapping = bool(s.get("swapping"))
    controls = "".join(
        [
            _button("/api/face/prev", "◀ previous face", csrf),
            _button("/api/face/next", "next face ▶", csrf),
            _button(
                "/api/swap",
                "swapping off" if swapping else "swapping on",
                csrf,
                f"<input type=hidden name=on value={0 if swapping else 1}>",
                "off" if swapping else "",
            ),
            _button("/api/faces/reload", "reload faces", csrf),
        ]
    )
    if options:
        controls += _button("/api/face/pick", "show this face", csrf, f"<select name=key>{options}</select>")
    keepsakes = ""
    if s.get("keepsakes_enabled"):
        keepsakes = (
            "<h2>Keepsakes</h2>"
            + _button("/api/keepsake/take", "take a keepsake", csrf)
            + _button("/api/keepsake/print", "print the last photo again", csrf)
            + _button(
                "/api/keepsake/delete",
                "delete this photo",
                csrf,
                "<input name=token placeholder='the photo address or token' size=26>",
                "off",
            )
            + _button(
                "/api/keepsake/delete",
                "delete the last photos",
                csrf,
                "<input name=last type=number min=1 max=1000 value=1>",
                "off",
            )
        )
    history = s.get("history", {})
    plots = "".join(
        plot_svg(_TITLES[name], history.get(name, []), history.get("hour_start", [])) for name in SERIES
    )
    when = time.strftime("%H:%M:%S", time.localtime(s.get("updated_unix", now_unix or time.time())))
    return (
        _head("Staff console")
        + "<h1>faceswap-kiosk staff console "
        + f"<span class=small data-k=age>updated {esc(when)}</span></h1>"
        + f"<div class=tiles>{tiles}</div>"
        + f"<h2>Warnings</h2>{warnings}"
        + "<h2>Screen</h2><img id=screen class=screen src=/screen.jpg alt='the kiosk screen'>"
        + f"<h2>Controls</h2>{controls}{keepsakes}"
        + f"<h2>Today, per hour</h2><div class=plots>{plots}</div>"
        + f"<h2>Models</h2><ul>{models}</ul><h2>Disk</h2><ul>{disk}</ul>"
        + _button("/logout", "log out", csrf)
        + "<script src=/app.js></script></main></body></html>"
    )


_TITLES = {
    "faces_seen": "faces seen",
    "keepsakes_taken": "keepsakes taken",
    "keepsakes_downloaded": "keepsakes downloaded",
    "keepsakes_printed": "keepsakes printed",
    "keepsakes_expired": "keepsakes expired",
    "errors": "errors",
}


def plot_svg(
    title: str, values: Sequence[int], hour_starts: Sequence[int], w: int = 320, h: int = 120
) -> str:
    """A bar chart of ``values`` per hour (oldest first), its total in the title, hour labels every
    6 hours: plain SVG elements, no script, no style sheet."""
    n = max(1, len(values))
    top = max([1, *values])
    pad_l, pad_b, pad_t = 28, 18, 20
    bw = (w - pad_l - 4) / n
    bars = []
    for i, v in enumerate(values):
        bh = (h - pad_b - pad_t) * v / top
        x = pad_l + i * bw
        bars.append(
            f'<rect x="{x + 1:.1f}" y="{h - pad_b - bh:.1f}" width="{max(1.0, bw - 2):.1f}" '
            f'height="{bh:.1f}" fill="#2d7ff9"><title>{v}</title></rect>'
        )
    labels = []
    for i, start in enumerate(hour_starts):
        if i % 6 == 0:
            label = time.strftime("%H:00", time.localtime(start))
            labels.append(
                f'<text x="{pad_l + i * bw:.1f}" y="{h - 4}" font-size="10" fill="#9ab">{label}</text>'
            )
    total = sum(values)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" role="img" '
        f'aria-label="{html.escape(title)}">'
        f'<text x="4" y="14" font-size="12" fill="#e8e8e8">{html.escape(title)}: {total}</text>'
        f'<text x="4" y="{pad_t + 10}" font-size="9" fill="#9ab">{top}</text>'
        f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - 2}" y2="{h - pad_b}" stroke="#556"/>'
        + "".join(bars)
        + "".join(labels)
        + "</svg>"
    )
