"""Booth UI pixels on a headless EGL context: carousel, banner, attract screen, badge, warnings."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import moderngl
import numpy as np
import pytest

from kiosk.render.booth_ui import TRANSITION_S, BoothView, FaceThumb
from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import OverlayState, Renderer

pytestmark = pytest.mark.gl

GREY = 128
#: Thumbnail colours (RGB); every tile is one flat colour so it can be found in the picture.
COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 0, 255), (0, 255, 255), (255, 255, 0)]
ACCENT = (255, 199, 61)  # booth_layer.ACCENT in 8 bits


def faces(n: int = 6, tag: str = "") -> list[FaceThumb]:
    return [
        FaceThumb(
            key=f"face{i}{tag}",
            name=f"Face {i}",
            thumb_bgr=np.full((64, 64, 3), COLOURS[i % len(COLOURS)][::-1], np.uint8),
        )
        for i in range(n)
    ]


class Scene:
    """A renderer drawing into its own framebuffer; :meth:`draw` returns RGB, top row first."""

    def __init__(self, ctx: moderngl.Context, fb_size: tuple[int, int], **display: object) -> None:
        self.ctx = ctx
        self.size = fb_size
        self.rb = ctx.renderbuffer(fb_size, components=4)
        self.fbo = ctx.framebuffer(color_attachments=[self.rb])
        self.renderer = Renderer(ctx, DisplayOptions(**display))  # type: ignore[arg-type]

    def draw(
        self,
        booth: BoothView | None,
        now: float = 1000.0,
        overlay: OverlayState | None = None,
        frame: np.ndarray | None = None,
    ) -> np.ndarray:
        w, h = self.size
        if frame is None:
            frame = np.full((h, w, 3), GREY, np.uint8)
        self.renderer.set_frame(frame)
        self.fbo.use()
        self.renderer.draw(self.size, overlay, booth, now=now)
        assert self.ctx.error == "GL_NO_ERROR"
        data = self.fbo.read(components=3, alignment=1)
        return np.frombuffer(data, np.uint8).reshape(h, w, 3)[::-1].copy()

    def close(self) -> None:
        self.renderer.release()
        self.ctx.detect_framebuffer(0).use()
        self.fbo.release()
        self.rb.release()


@pytest.fixture
def landscape(ctx: moderngl.Context) -> Iterator[Scene]:
    scene = Scene(ctx, (960, 540))
    yield scene
    scene.close()


def colour_box(
    rgb: np.ndarray, colour: tuple[int, int, int], tol: int = 6
) -> tuple[int, int, int, int] | None:
    """Bounding box (x0, y0, x1, y1 exclusive) of pixels within ``tol`` of ``colour``."""
    near = (np.abs(rgb.astype(np.int16) - np.array(colour, np.int16)) <= tol).all(axis=2)
    ys, xs = np.nonzero(near)
    if len(xs) < 20:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def dimmed(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    return (colour[0] // 2, colour[1] // 2, colour[2] // 2)


def changed_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.nonzero((a != b).any(axis=(1, 2)))[0]


def test_carousel_draws_along_the_bottom_only(landscape: Scene) -> None:
    w, h = landscape.size
    plain = landscape.draw(None)
    with_booth = landscape.draw(BoothView(faces(), selected=2, t_switched=0.0))
    rows = changed_rows(plain, with_booth)
    assert len(rows) > 0
    assert rows.min() > h * 0.55, "the carousel keeps to the bottom of the screen"
    no_carousel = landscape.draw(BoothView(faces(), selected=2, t_switched=0.0, show_carousel=False))
    assert np.array_equal(no_carousel, plain)


def test_selected_tile_is_larger_highlighted_and_others_dimmed(landscape: Scene) -> None:
    rgb = landscape.draw(BoothView(faces(), selected=2, t_switched=0.0))
    selected = colour_box(rgb, COLOURS[2])
    assert selected is not None, "the selected tile shows its thumbnail at full brightness"
    assert colour_box(rgb, dimmed(COLOURS[2])) is None
    sel_w = selected[2] - selected[0]
    for i in (0, 1, 3, 4, 5):
        other = colour_box(rgb, dimmed(COLOURS[i]))
        assert other is not None, f"tile {i} dimmed"
        assert colour_box(rgb, COLOURS[i]) is None
        assert sel_w > 1.2 * (other[2] - other[0])
        assert abs((other[1] + other[3]) / 2 - (selected[1] + selected[3]) / 2) <= 2, "one row"
        assert (other[0] < selected[0]) == (i < 2), "tiles in library order"
    accent = colour_box(rgb, ACCENT, tol=12)
    assert accent is not None, "the selected tile has the accent outline"
    x0, y0, x1, y1 = selected
    assert accent[0] <= x0 and accent[2] >= x1 and accent[1] <= y0 and accent[3] >= y1
    assert accent[2] - accent[0] < 1.4 * sel_w, "the outline hugs the selected tile"


def test_switch_animates_then_settles(landscape: Scene) -> None:
    t0 = 500.0
    landscape.draw(BoothView(faces(), selected=1, t_switched=t0 - 10), now=t0)
    view = BoothView(faces(), selected=2, t_switched=t0)
    start = landscape.draw(view, now=t0)
    mid = landscape.draw(view, now=t0 + TRANSITION_S * 0.15)
    end = landscape.draw(view, now=t0 + TRANSITION_S + 0.01)

    def width_of(rgb: np.ndarray, i: int) -> int:
        """Width of tile i at any brightness: its full channels lit, its empty ones dark."""
        full = np.array(COLOURS[i]) > 0
        px = rgb.astype(np.int16)
        match = (px[..., full] > 60).all(axis=-1) & (px[..., ~full] < 25).all(axis=-1)
        xs = np.nonzero(match.any(axis=0))[0]
        return int(xs.max() - xs.min() + 1)

    assert width_of(start, 1) > width_of(start, 2)
    assert width_of(start, 2) < width_of(mid, 2) < width_of(end, 2)
    assert width_of(end, 2) > width_of(end, 1)
    again = landscape.draw(view, now=t0 + 5)
    assert np.array_equal(again, end), "settled: nothing moves"


def test_thumb_atlas_rebuilt_only_when_keys_change(landscape: Scene) -> None:
    booth = landscape.renderer.booth
    lib = faces()
    for i in range(3):
        landscape.draw(BoothView(lib, selected=i, t_switched=float(i)), now=100.0)
    assert booth.thumb_atlas_builds == 1
    renamed = [FaceThumb(f.key, f.name + "!", f.thumb_bgr) for f in lib]  # same keys
    landscape.draw(BoothView(renamed, selected=0, t_switched=0.0))
    assert booth.thumb_atlas_builds == 1
    landscape.draw(BoothView(faces(tag="-v2"), selected=0, t_switched=0.0))
    assert booth.thumb_atlas_builds == 2
    landscape.draw(BoothView(faces(5, tag="-v2"), selected=0, t_switched=0.0))
    assert booth.thumb_atlas_builds == 3
    layouts = booth.layouts
    for _ in range(3):  # settled: the instances are not rebuilt
        landscape.draw(BoothView(faces(5, tag="-v2"), selected=0, t_switched=0.0))
    assert booth.layouts == layouts
    landscape.draw(BoothView([], selected=0, t_switched=0.0))
    assert booth.thumb_atlas_builds == 3


def test_a_large_library_uploads_only_a_window_of_thumbnails(landscape: Scene) -> None:
    """300 faces (issue 27: 1,000): the atlas holds the carousel's window, not every thumbnail,
    and a face far away still shows its own thumbnail once selected."""
    booth = landscape.renderer.booth
    orange = (255, 128, 0)
    lib = [
        FaceThumb(
            f"big{i}",
            f"Face {i}",
            np.full((64, 64, 3), (orange if i == 150 else (60, 60, 60))[::-1], np.uint8),
        )
        for i in range(300)
    ]
    landscape.draw(BoothView(lib, selected=0, t_switched=0.0))
    tex = booth._thumbs.texture
    assert tex is not None
    cells = 7 * 7  # MAX_ATLAS_FACES (48) cells of 64 px and their gutters
    assert tex.size[0] * tex.size[1] <= cells * 72 * 72, f"atlas {tex.size} holds every thumbnail"
    assert colour_box(landscape.draw(BoothView(lib, selected=0, t_switched=0.0)), orange) is None
    rgb = landscape.draw(BoothView(lib, selected=150, t_switched=0.0))
    assert colour_box(rgb, orange) is not None, "the selected face far away shows its thumbnail"
    tex = booth._thumbs.texture
    assert tex is not None and tex.size[0] * tex.size[1] <= cells * 72 * 72


def test_banner_is_a_slim_bar_at_the_top(landscape: Scene) -> None:
    w, h = landscape.size
    plain = landscape.draw(None)
    rgb = landscape.draw(
        BoothView(faces(), 0, 0.0, show_carousel=False, banner="Live AI face swap. Nothing is recorded.")
    )
    rows = changed_rows(plain, rgb)
    assert rows.min() == 0 and rows.max() < h * 0.1
    bar = rgb[: rows.max() + 1]
    assert (bar.max(axis=2) < 60).mean() > 0.5, "dark bar"
    assert (bar.min(axis=2) > 220).sum() > 100, "bright text on it"
    cols = np.nonzero((bar.min(axis=2) > 220).any(axis=0))[0]
    assert abs((cols.min() + cols.max()) / 2 - w / 2) < w * 0.03, "centred text"


def test_banner_pushes_the_overlay_notice_below_it(landscape: Scene) -> None:
    overlay = OverlayState(notice="models missing", debug_lines=["fps 30"])  # the staff's debug block
    banner_only = landscape.draw(BoothView([], 0, 0.0, banner="Nothing is recorded."))
    both = landscape.draw(BoothView([], 0, 0.0, banner="Nothing is recorded."), overlay=overlay)
    rows = changed_rows(banner_only, both)
    banner_rows = changed_rows(landscape.draw(None), banner_only)
    assert rows.min() > banner_rows.max(), "the notice starts below the banner"


def test_attract_darkens_shows_title_and_the_cycling_face(landscape: Scene) -> None:
    w, h = landscape.size
    view = BoothView(
        faces(),
        selected=0,
        t_switched=0.0,
        attract=True,
        attract_lines=["Pick a face with the buttons"],
        attract_index=4,
    )
    rgb = landscape.draw(view)
    corners = np.concatenate([rgb[: h // 8, : w // 8], rgb[-h // 8 :, -w // 8 :]]).reshape(-1, 3)
    assert corners.mean() < GREY * 0.45, "the camera picture is darkened"
    thumb = colour_box(rgb, COLOURS[4])
    assert thumb is not None, "the attract face is shown"
    tw, th = thumb[2] - thumb[0], thumb[3] - thumb[1]
    assert tw > 0.3 * h and abs(tw - th) <= 3, "large and round"
    assert abs((thumb[0] + thumb[2]) / 2 - w / 2) <= 2
    for i in (0, 1, 2, 3, 5):  # no carousel in attract mode
        assert colour_box(rgb, COLOURS[i]) is None and colour_box(rgb, dimmed(COLOURS[i])) is None
    bright = rgb.min(axis=2) > 230
    above = bright[: thumb[1]]
    assert above.sum() > 300, "the title is above the face"
    title_rows = np.nonzero(above.any(axis=1))[0]
    title_cols = np.nonzero(above.any(axis=0))[0]
    assert abs((title_cols.min() + title_cols.max()) / 2 - w / 2) < w * 0.03
    assert title_rows.max() - title_rows.min() > 0.05 * h, "big title text"
    below = (rgb[thumb[3] :].min(axis=2) > 200).sum()
    assert below > 200, "name and instructions below the face"
    nxt = landscape.draw(BoothView(faces(), 0, 0.0, attract=True, attract_index=5), now=2000.0)
    fading = colour_box(nxt, COLOURS[5])
    assert fading is None, "the next face fades in"
    shown = landscape.draw(BoothView(faces(), 0, 0.0, attract=True, attract_index=5), now=2001.0)
    assert colour_box(shown, COLOURS[5]) is not None


def test_swap_off_badge_top_right(landscape: Scene) -> None:
    w, h = landscape.size
    on = landscape.draw(BoothView([], 0, 0.0))
    off = landscape.draw(BoothView([], 0, 0.0, swap_enabled=False))
    diff = (on != off).any(axis=2)
    ys, xs = np.nonzero(diff)
    assert xs.min() > w * 0.6 and ys.max() < h * 0.15
    red = (off[..., 0] > 170) & (off[..., 1] < 60)
    assert red.sum() > 200
    # the overlay's debug block starts below the badge, never under it
    overlay = OverlayState(debug_lines=["a long debug line " * 6])
    debug = landscape.draw(BoothView([], 0, 0.0, swap_enabled=False), overlay=overlay)
    assert changed_rows(off, debug).min() >= ys.max()


def test_swap_off_badge_sits_in_the_banner(landscape: Scene) -> None:
    w, h = landscape.size
    banner = "Live AI face swap. Nothing is recorded. " * 3  # long: elided clear of the badge
    on = landscape.draw(BoothView([], 0, 0.0, banner=banner))
    off = landscape.draw(BoothView([], 0, 0.0, banner=banner, swap_enabled=False))
    bar_rows = changed_rows(landscape.draw(None), on)
    red = (off[..., 0] > 170) & (off[..., 1] < 60) & (off[..., 2] < 60)
    ys, xs = np.nonzero(red)
    assert len(ys) > 200 and ys.max() <= bar_rows.max() and xs.min() > w * 0.6
    text = np.nonzero((off[: bar_rows.max() + 1].min(axis=2) > 220).any(axis=0))[0]
    assert not ((text >= xs.min() - 8) & (text < xs.min())).any(), "the banner text stops before the badge"
    assert text[text < xs.min()].max() > w * 0.5, "the (elided) banner text is still there"


#: The issue's own line: what visitors read under the banner with the kernel cache disk full.
CACHE_FULL = (
    "kernel cache folder /var/cache/faceswap-kiosk/numba is full: kernels compiled in memory this run "
    "(free space there or set NUMBA_CACHE_DIR)"
)


def amber(rgb: np.ndarray) -> np.ndarray:
    """Pixels of the notice's and warnings' amber text over the grey frame."""
    r, g, b = rgb[..., 0].astype(int), rgb[..., 1].astype(int), rgb[..., 2].astype(int)
    return (r > 200) & (g > 140) & (g < 210) & (b < 140)


def orange(rgb: np.ndarray) -> np.ndarray:
    """Pixels of the staff marker's orange (overlay.MARKER_RGBA)."""
    r, g, b = rgb[..., 0].astype(int), rgb[..., 1].astype(int), rgb[..., 2].astype(int)
    return (r > 220) & (g > 105) & (g < 150) & (b < 40)


@pytest.mark.parametrize(
    "overlay, booth_warnings",
    [
        (OverlayState(notice=CACHE_FULL), ()),  # the stage's notice (kernel cache, GPU fallback, models)
        (OverlayState(), ("faces/x.png: no face found",)),  # a face photo skipped
        (OverlayState(warnings=["source: /dev/video0: device busy"]), ()),  # the camera's error
        (OverlayState(notice="config change ignored: kiosk.yaml:3: unknown key"), ("config change ignored",)),
    ],
)
def test_the_visitor_sees_the_swap_and_a_staff_marker_and_staff_read_the_debug_block(
    landscape: Scene, overlay: OverlayState, booth_warnings: tuple[str, ...]
) -> None:
    """Before: the notice was drawn as text under the banner for every visitor. Now the visitor's
    screen differs from the plain booth only inside the small marker square; the debug block
    (the staff key) still shows the text."""
    from kiosk.render.overlay import marker_rect

    w, h = landscape.size
    banner = "Live AI face swap. Nothing is recorded."
    plain = landscape.draw(BoothView(faces(), 0, 0.0, banner=banner))
    view = BoothView(faces(), 0, 0.0, banner=banner, warnings=booth_warnings)
    shown = landscape.draw(view, overlay=overlay)
    changed = (np.abs(shown.astype(int) - plain.astype(int)) > 8).any(axis=2)
    ys, xs = np.nonzero(changed)
    assert len(ys), "the staff marker is drawn"
    x0, y0, x1, y1 = (round(v) for v in marker_rect((w, h), 1.0, top_inset=_banner_bottom(landscape, banner)))
    assert xs.min() >= x0 and xs.max() < x1 and ys.min() >= y0 and ys.max() < y1, (
        "nothing but the marker changed: no text on the visitor's screen",
        (xs.min(), ys.min(), xs.max(), ys.max()),
        (x0, y0, x1, y1),
    )
    assert changed.sum() >= 0.8 * (x1 - x0) * (y1 - y0), "the marker is a solid square"
    assert orange(shown)[y0:y1, x0:x1].mean() > 0.8, "an orange square"
    assert not (amber(shown) & ~amber(plain)).any(), "no amber text (the carousel's accent is amber too)"
    # The staff's debug block: the text is there (amber warnings or the notice), the marker is not.
    staff = landscape.draw(view, overlay=dataclasses.replace(overlay, debug_lines=["fps 30"]))
    assert (amber(staff) & ~amber(plain)).sum() > 30
    assert orange(staff)[y0:y1, x0:x1].mean() < 0.5, "no marker with the debug block open"


def _banner_bottom(scene: Scene, banner: str) -> float:
    """The banner's height (the top inset the overlay starts below), as the booth layer lays it out."""
    return scene.renderer.booth.draw(BoothView([], 0, 0.0, banner=banner), scene.size, 0, 1000.0)[0]


PORTRAIT_FB = (540, 960)


def portrait_frame() -> np.ndarray:
    w, h = PORTRAIT_FB
    frame = np.full((h, w, 3), GREY, np.uint8)
    frame[: h // 2, :, 0] = 90  # some structure so that turning it matters
    return frame


@pytest.mark.parametrize(
    "view",
    [
        BoothView(faces(), selected=2, t_switched=0.0, banner="Live AI face swap. Nothing is recorded."),
        BoothView(faces(12), selected=11, t_switched=0.0, banner="Nothing is recorded.", swap_enabled=False),
        BoothView(
            faces(),
            selected=0,
            t_switched=0.0,
            attract=True,
            attract_title="Step in front of the camera",
            attract_lines=["Look at the screen and choose a face with the buttons"],
            attract_index=1,
        ),
    ],
    ids=["carousel", "scrolling", "attract"],
)
def test_portrait_native_and_turned_display_look_the_same_and_fit(
    ctx: moderngl.Context, view: BoothView
) -> None:
    w, h = PORTRAIT_FB
    overlay = OverlayState(status="camera 1920x1080 · 30 fps")
    native = Scene(ctx, (w, h))
    turned = Scene(ctx, (h, w), rotate=90)
    try:
        upright = native.draw(view, overlay=overlay, frame=portrait_frame())
        sideways = turned.draw(view, overlay=overlay, frame=portrait_frame())
    finally:
        native.close()
        turned.close()
    # the turned framebuffer, turned back (counter-clockwise), is what the viewer sees
    back = np.rot90(sideways, k=1)
    assert back.shape == upright.shape
    assert (np.abs(back.astype(int) - upright.astype(int)) > 8).mean() < 0.002
    # everything fits: tiles and the attract face are whole and away from the edges
    for colour in COLOURS:
        for c in (colour, dimmed(colour)):
            box = colour_box(upright, c)
            if box is None:
                continue
            x0, y0, x1, y1 = box
            assert x0 > 2 and y0 > 2 and x1 < w - 2 and y1 < h - 2
            if view.attract or c == colour:
                assert abs((x1 - x0) - (y1 - y0)) <= 3, "not clipped"
    bright = np.nonzero((upright.min(axis=2) > 230).any(axis=0))[0]
    assert bright.min() > 0 and bright.max() < w - 1, "text inside the screen"
