"""Screenshots of the booth UI on an offscreen surface, with synthetic pictures only.

    python -m kiosk.tools.demo OUT_DIR [--size 1920x1080] [--rotate 90] [--docs]

Writes ``carousel.png`` (settled and ``carousel_moving.png`` mid-transition), ``attract.png``
and ``debug.png``. The thumbnails are coloured discs with initials and the "camera" picture is
a drawn scene, so no photo of a real person ends up in the repository. ``--docs`` also writes
1280x720 copies for ``docs/img``.
"""

from __future__ import annotations

import argparse
import colorsys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from kiosk.render.booth_ui import TRANSITION_S, BoothView, FaceThumb
from kiosk.render.options import DisplayOptions
from kiosk.render.overlay import OverlayState
from kiosk.render.renderer import Renderer, logical_size
from kiosk.render.window import OffscreenSurface, save_png

NAMES = ["Aria", "Bruno", "Chloe Marchetti", "Dev", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas"]


def synthetic_thumb(name: str, index: int, side: int = 128) -> NDArray[np.uint8]:
    """A BGR thumbnail: a coloured gradient, a pale silhouette and the name's initials."""
    s = 4 * side
    hue = (index * 0.137 + 0.02) % 1.0
    top = tuple(round(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.55, 0.95))
    bottom = tuple(round(255 * c) for c in colorsys.hsv_to_rgb((hue + 0.06) % 1.0, 0.8, 0.55))
    t = np.linspace(0.0, 1.0, s)[:, None, None]
    grad = (np.array(top) * (1 - t) + np.array(bottom) * t) * np.ones((1, s, 1))
    bg = Image.fromarray(grad.astype(np.uint8), "RGB")
    img = bg.copy()
    shade = Image.new("L", (s, s), 0)  # a lighter head-and-shoulders silhouette behind the initials
    d = ImageDraw.Draw(shade)
    d.ellipse((s * 0.3, s * 0.16, s * 0.7, s * 0.62), fill=70)
    d.ellipse((s * 0.1, s * 0.66, s * 0.9, s * 1.4), fill=70)
    img.paste((255, 255, 255), (0, 0), shade.filter(ImageFilter.GaussianBlur(s / 80)))
    initials = "".join(part[0] for part in name.split()[:2]).upper()
    font = ImageFont.load_default(size=round(s * (0.38 if len(initials) < 2 else 0.32)))
    draw = ImageDraw.Draw(img)
    box = draw.textbbox((0, 0), initials, font=font)
    x = (s - (box[2] - box[0])) / 2 - box[0]
    y = (s - (box[3] - box[1])) / 2 - box[1]
    draw.text((x + s * 0.01, y + s * 0.015), initials, font=font, fill=(0, 0, 0))
    draw.text((x, y), initials, font=font, fill=(255, 255, 255))
    small = img.resize((side, side), Image.Resampling.LANCZOS)
    return np.asarray(small, dtype=np.uint8)[:, :, ::-1].copy()


def synthetic_scene(width: int, height: int) -> NDArray[np.uint8]:
    """A BGR "camera" picture: a warm room with soft lights and a figure-like silhouette."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = xx / width, yy / height
    rgb = np.stack([70 + 90 * u + 40 * v, 60 + 50 * v + 20 * u, 80 + 60 * (1 - u)], axis=2)
    img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    lights = Image.new("RGB", (width, height), (0, 0, 0))
    d = ImageDraw.Draw(lights)
    rng = np.random.default_rng(3)
    for _ in range(18):
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height * 0.6), rng.uniform(0.02, 0.07) * width
        colour = tuple(int(c) for c in rng.integers(90, 200, 3))
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    lights = lights.filter(ImageFilter.GaussianBlur(width / 60))
    img = Image.fromarray(
        np.clip(np.asarray(img, np.int16) + np.asarray(lights, np.int16) // 2, 0, 255).astype(np.uint8)
    )
    d = ImageDraw.Draw(img)
    cx, cy, unit = width * 0.5, height * 0.42, min(width, height)
    d.ellipse((cx - unit * 0.13, cy - unit * 0.17, cx + unit * 0.13, cy + unit * 0.17), fill=(214, 170, 140))
    d.ellipse((cx - unit * 0.34, cy + unit * 0.22, cx + unit * 0.34, cy + unit * 0.95), fill=(40, 60, 90))
    img = img.filter(ImageFilter.GaussianBlur(2))
    return np.asarray(img, dtype=np.uint8)[:, :, ::-1].copy()


def demo_faces(n: int = 6) -> list[FaceThumb]:
    return [
        FaceThumb(
            key=f"synthetic/{i}",
            name=NAMES[i % len(NAMES)],
            thumb_bgr=synthetic_thumb(NAMES[i % len(NAMES)], i),
        )
        for i in range(n)
    ]


BANNER = "Live AI face swap. Nothing is recorded."
STATUS = "camera 1920x1080 · 30 fps · swap on"
DEBUG_LINES = [
    "capture   30.0 fps  (running, reconnects 0)",
    "process   24.8 fps  38.2 ms p50",
    "render    60.0 fps",
    "dropped   capture→process 12  process→display 0",
    "latency   capture→display p50 71.3 ms  p95 88.0 ms",
    "provider  CUDAExecutionProvider · faces loaded 6",
]
WARNINGS = [
    "faces/group-photo.jpg: 3 faces found, using the largest",
    "config line 14: display.rotate must be 0, 90, 180 or 270 (kept the last good config)",
]


def render_views(surface: OffscreenSurface, display: DisplayOptions, out: Path) -> dict[str, Path]:
    """Draw the demo views into ``surface`` and save them under ``out``; returns name → path."""
    renderer = Renderer(surface.ctx, display)
    faces = demo_faces(6)
    # A camera picture shaped like the upright screen (the renderer turns it with the display).
    lw, lh = logical_size(surface.size, display.rotate)
    renderer.set_frame(synthetic_scene(round(lw * 2 / 3), round(lh * 2 / 3)))
    saved: dict[str, Path] = {}
    try:

        def shot(name: str, view: BoothView, now: float, overlay: OverlayState | None = None) -> None:
            size = surface.begin_frame()
            renderer.draw(size, overlay or OverlayState(status=STATUS), view, now=now)
            assert surface.ctx.error == "GL_NO_ERROR"
            saved[name] = save_png(out / f"{name}.png", surface.read_rgb())

        t0 = 100.0
        settle = BoothView(faces, selected=1, t_switched=t0 - 10, banner=BANNER)
        shot("carousel_before", settle, t0)
        moving = BoothView(faces, selected=2, t_switched=t0, banner=BANNER)
        shot("carousel_moving", moving, t0 + TRANSITION_S * 0.3)
        shot("carousel", moving, t0 + TRANSITION_S * 2)
        ring = [FaceThumb(f"{f.key}/{i}", f.name, f.thumb_bgr) for i, f in enumerate(demo_faces(10) * 2)]
        many = BoothView(ring, selected=7, t_switched=0.0, banner=BANNER)
        shot("carousel_scroll", many, t0 + 20)
        attract = BoothView(
            faces,
            selected=2,
            t_switched=0.0,
            banner=BANNER,
            attract=True,
            attract_lines=["Look at the screen and choose a face with the buttons", "Nothing is recorded"],
            attract_index=3,
        )
        shot("attract", attract, t0 + 30)
        debug = BoothView(
            faces, selected=2, t_switched=0.0, banner=BANNER, swap_enabled=False, warnings=WARNINGS
        )
        status_off = STATUS.replace("swap on", "swap off")
        shot("debug", debug, t0 + 40, OverlayState(status=status_off, debug_lines=DEBUG_LINES))
    finally:
        renderer.release()
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="1920x1080", help="framebuffer WxH")
    parser.add_argument("--rotate", type=int, default=0, choices=(0, 90, 180, 270))
    parser.add_argument("--docs", action="store_true", help="also write 1280x720 copies as docs-*.png")
    args = parser.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))
    display = DisplayOptions(width=w, height=h, rotate=args.rotate)
    surface = OffscreenSurface(w, h)
    try:
        saved = render_views(surface, display, args.out)
    finally:
        surface.close()
    if args.docs:
        for name in ("carousel", "attract", "debug"):
            img = Image.open(saved[name]).convert("RGB")
            img.thumbnail((1280, 1280), Image.Resampling.LANCZOS)
            img.save(args.out / f"docs-{name}.png", optimize=True)
    for name, path in saved.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
