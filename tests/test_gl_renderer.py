"""Renderer pixels on a headless EGL context (Mesa llvmpipe): placement, colour order, overlay."""

from __future__ import annotations

import moderngl
import numpy as np
import pytest

from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import OverlayState, Renderer
from kiosk.render.window import OffscreenSurface, open_surface

pytestmark = pytest.mark.gl

RED, GREEN, BLUE, WHITE, BLACK = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0)


def quadrants_bgr(w: int = 200, h: int = 100) -> np.ndarray:
    """Top-left red, top-right green, bottom-left blue, bottom-right white (stored BGR)."""
    frame = np.empty((h, w, 3), np.uint8)
    frame[: h // 2, : w // 2] = RED[::-1]
    frame[: h // 2, w // 2 :] = GREEN[::-1]
    frame[h // 2 :, : w // 2] = BLUE[::-1]
    frame[h // 2 :, w // 2 :] = WHITE[::-1]
    return frame


def render(
    ctx: moderngl.Context,
    fb_size: tuple[int, int],
    frame: np.ndarray | None,
    overlay: OverlayState | None = None,
    **display: object,
) -> np.ndarray:
    """Draw once into a fresh ``fb_size`` framebuffer; return (h, w, 3) RGB, top row first."""
    w, h = fb_size
    rb = ctx.renderbuffer((w, h), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions(**display))  # type: ignore[arg-type]
    try:
        if frame is not None:
            renderer.set_frame(frame)
        fbo.use()
        renderer.draw((w, h), overlay)
        assert ctx.error == "GL_NO_ERROR"
        data = fbo.read(components=3, alignment=1)
        return np.frombuffer(data, np.uint8).reshape(h, w, 3)[::-1].copy()
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()  # unbind ours before deleting it
        fbo.release()
        rb.release()


def at(rgb: np.ndarray, x: int, y: int) -> tuple[int, ...]:
    return tuple(int(v) for v in rgb[y, x])


def test_fit_letterboxes_and_keeps_colours_in_place(ctx: moderngl.Context) -> None:
    rgb = render(ctx, (200, 200), quadrants_bgr(200, 100), fit="fit")
    # 2:1 frame in a square: picture rows 50..149, black bars above and below.
    assert at(rgb, 100, 10) == BLACK and at(rgb, 100, 45) == BLACK
    assert at(rgb, 100, 190) == BLACK and at(rgb, 100, 153) == BLACK
    assert at(rgb, 50, 75) == RED
    assert at(rgb, 150, 75) == GREEN
    assert at(rgb, 50, 125) == BLUE  # BGR (255, 0, 0) shows as blue
    assert at(rgb, 150, 125) == WHITE


def test_fit_pillarboxes_a_tall_frame(ctx: moderngl.Context) -> None:
    rgb = render(ctx, (400, 100), quadrants_bgr(100, 100), fit="fit")
    assert at(rgb, 20, 50) == BLACK and at(rgb, 380, 50) == BLACK
    assert at(rgb, 175, 25) == RED and at(rgb, 225, 75) == WHITE


def test_fill_crops_centre_without_bars(ctx: moderngl.Context) -> None:
    rgb = render(ctx, (100, 200), quadrants_bgr(200, 100), fit="fill")
    # Scaled x2 to 400x200; the middle 100 columns of it (frame columns 50..149) remain.
    assert rgb.reshape(-1, 3).sum(axis=1).min() > 0, "fill must not leave black bars"
    assert at(rgb, 25, 50) == RED
    assert at(rgb, 75, 50) == GREEN
    assert at(rgb, 25, 150) == BLUE
    assert at(rgb, 75, 150) == WHITE


@pytest.mark.parametrize(
    ("rotate", "fb_size", "expected"),
    [
        # expected colours at top-left, top-right, bottom-left, bottom-right of the screen
        (90, (100, 200), (BLUE, RED, WHITE, GREEN)),
        (180, (200, 100), (WHITE, BLUE, GREEN, RED)),
        (270, (100, 200), (GREEN, WHITE, RED, BLUE)),
    ],
)
def test_rotation_turns_the_picture_clockwise(
    ctx: moderngl.Context, rotate: int, fb_size: tuple[int, int], expected: tuple[tuple[int, ...], ...]
) -> None:
    rgb = render(ctx, fb_size, quadrants_bgr(200, 100), rotate=rotate)
    w, h = fb_size
    corners = [at(rgb, w // 4, h // 4), at(rgb, 3 * w // 4, h // 4), at(rgb, w // 4, 3 * h // 4)]
    corners.append(at(rgb, 3 * w // 4, 3 * h // 4))
    assert tuple(corners) == expected


def test_rotation_90_fits_the_rotated_size(ctx: moderngl.Context) -> None:
    # A 2:1 frame turned on its side is 1:2; in a 200x200 framebuffer that leaves side bars.
    rgb = render(ctx, (200, 200), quadrants_bgr(200, 100), rotate=90)
    assert at(rgb, 10, 100) == BLACK and at(rgb, 190, 100) == BLACK
    assert at(rgb, 125, 50) == RED  # top-left of the frame went to the top-right


def test_no_frame_draws_black(ctx: moderngl.Context) -> None:
    rgb = render(ctx, (64, 48), None)
    assert rgb.max() == 0


def test_odd_width_frame_uploads_with_byte_alignment(ctx: moderngl.Context) -> None:
    frame = np.zeros((31, 33, 3), np.uint8)
    frame[:, :, 2] = 255  # red in BGR
    rgb = render(ctx, (33, 31), frame)
    assert np.all(rgb[..., 0] == 255) and rgb[..., 1:].max() == 0


def test_frame_texture_reused_while_size_unchanged(ctx: moderngl.Context) -> None:
    renderer = Renderer(ctx, DisplayOptions())
    try:
        renderer.set_frame(quadrants_bgr(64, 32))
        renderer.set_frame(quadrants_bgr(64, 32)[::-1])  # same size, a non-contiguous view
        assert renderer.frame_textures_created == 1
        assert renderer.frame_size == (64, 32)
        renderer.set_frame(quadrants_bgr(32, 64))
        assert renderer.frame_textures_created == 2
        with pytest.raises(ValueError, match="uint8 BGR"):
            renderer.set_frame(np.zeros((4, 4), np.uint8))
    finally:
        renderer.release()


GREY = 128


def grey_frame(w: int, h: int) -> np.ndarray:
    return np.full((h, w, 3), GREY, np.uint8)


def box_bounds(rgb: np.ndarray) -> tuple[int, int, int, int] | None:
    """x0, y0, x1, y1 (exclusive) of pixels darkened by the overlay boxes on a grey frame."""
    dark = rgb.max(axis=2) < GREY - 20
    ys, xs = np.nonzero(dark)
    if len(xs) == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def top_box(rgb: np.ndarray) -> tuple[int, int, int, int] | None:
    """:func:`box_bounds` of the topmost box alone (the notice, above the debug block)."""
    rows = np.nonzero((rgb.max(axis=2) < GREY - 20).any(axis=1))[0]
    if len(rows) == 0:
        return None
    gaps = np.nonzero(np.diff(rows) > 1)[0]
    end = rows[gaps[0]] + 1 if len(gaps) else rows[-1] + 1
    cut = rgb.copy()
    cut[end:] = GREY
    return box_bounds(cut)


def test_message_box_is_centred_with_bright_text(ctx: moderngl.Context) -> None:
    w, h = 640, 360
    rgb = render(ctx, (w, h), grey_frame(w, h), OverlayState(message="Camera unavailable — reconnecting…"))
    bounds = box_bounds(rgb)
    assert bounds is not None
    x0, y0, x1, y1 = bounds
    assert abs((x0 + x1) / 2 - w / 2) <= 1.5 and abs((y0 + y1) / 2 - h / 2) <= 1.5
    assert 0.3 * w < x1 - x0 < w and 10 < y1 - y0 < h / 3
    bright = rgb.min(axis=2) > 200
    assert bright[y0:y1, x0:x1].sum() > 200, "message text inside the box"
    assert bright.sum() == bright[y0:y1, x0:x1].sum(), "no text outside the box"


def test_status_notice_and_debug_land_in_their_regions(ctx: moderngl.Context) -> None:
    w, h = 640, 360
    frame = grey_frame(w, h)
    status = box_bounds(render(ctx, (w, h), frame, OverlayState(status="synthetic 1280x720 · passthrough")))
    notice = top_box(  # staff text: drawn with the debug block open (the staff key)
        render(
            ctx,
            (w, h),
            frame,
            OverlayState(notice="Models missing: run kiosk models fetch", debug_lines=["x"]),
        )
    )
    debug = box_bounds(
        render(ctx, (w, h), frame, OverlayState(debug_lines=["fps 30.0", "latency 40 ms", "x"]))
    )
    assert status is not None and notice is not None and debug is not None
    assert status[0] < w * 0.05 and status[3] > h * 0.9 and status[1] > h * 0.8  # bottom-left
    assert notice[1] < h * 0.1 and abs((notice[0] + notice[2]) / 2 - w / 2) <= 1.5  # top, centred
    assert debug[0] < w * 0.05 and debug[1] < h * 0.1 and debug[3] - debug[1] > 2.5 * (status[3] - status[1])


def test_debug_block_goes_below_the_notice(ctx: moderngl.Context) -> None:
    w, h = 640, 360
    overlay = OverlayState(notice="a notice " * 10, debug_lines=["fps 30.0"])
    rgb = render(ctx, (w, h), grey_frame(w, h), overlay)
    dark_rows = np.nonzero((rgb.max(axis=2) < GREY - 20).any(axis=1))[0]
    # two separate boxes stacked vertically: a gap of undarkened rows between them
    assert np.any(np.diff(dark_rows) > 1)


def test_a_long_notice_wraps_so_its_fix_stays_on_screen(ctx: moderngl.Context) -> None:
    # A model notice starts with the file's full path; its fix comes last. On a 640 px screen one
    # line cut it off; the notice wraps instead (at most three lines) and stays inside the screen.
    w, h = 640, 360
    frame = grey_frame(w, h)
    short = top_box(render(ctx, (w, h), frame, OverlayState(notice="models missing", debug_lines=["x"])))
    text = (
        "/var/lib/faceswap-kiosk/models/inswapper_128.onnx: cannot read the ONNX graph "
        "(Error parsing message with type 'onnx.ModelProto') — run: kiosk models fetch"
    )
    long = top_box(render(ctx, (w, h), frame, OverlayState(notice=text, debug_lines=["x"])))
    assert short is not None and long is not None
    line = short[3] - short[1]
    assert long[3] - long[1] > 1.8 * line, "wrapped onto more than one line"
    assert long[3] - long[1] < 3.6 * line, "at most three lines"
    assert long[0] >= 0 and long[2] <= w and long[1] < h * 0.1


def test_overlay_turns_with_the_display(ctx: moderngl.Context) -> None:
    # Display rotated 90 clockwise: the viewer's bottom edge is the framebuffer's left edge.
    w, h = 360, 640
    rgb = render(ctx, (w, h), grey_frame(h, w), OverlayState(status="status line"), rotate=90)
    bounds = box_bounds(rgb)
    assert bounds is not None
    x0, y0, x1, y1 = bounds
    assert x0 < w * 0.1 and x1 < w * 0.25, "status box hugs the left edge"
    assert y1 - y0 > x1 - x0, "the line runs along the edge"
    assert y0 < h * 0.1, "the viewer's left is the framebuffer's top"


def test_text_scales_with_screen_size(ctx: moderngl.Context) -> None:
    def box_height(w: int, h: int, scale: float = 1.0) -> int:
        b = box_bounds(render(ctx, (w, h), grey_frame(w, h), OverlayState(status="Hg"), text_scale=scale))
        assert b is not None
        return b[3] - b[1]

    small, large = box_height(800, 480), box_height(1600, 960)
    assert 1.7 < large / small < 2.3
    assert 1.7 < box_height(800, 480, 2.0) / small < 2.3


def test_repeated_draws_reuse_layout_and_stay_error_free(ctx: moderngl.Context) -> None:
    surface = OffscreenSurface(320, 180)
    renderer = Renderer(surface.ctx, DisplayOptions(width=320, height=180))
    try:
        renderer.set_frame(quadrants_bgr(160, 90))
        for i in range(5):
            size = surface.begin_frame()
            renderer.draw(
                size, OverlayState(status="s", debug_lines=[f"frame {i}"] * (i + 1), message="m" * i)
            )
            assert surface.ctx.error == "GL_NO_ERROR"
        rgb = surface.read_rgb()
        assert rgb.shape == (180, 320, 3)
        assert surface.poll_events() == [] and not surface.should_close()
        surface.end_frame()
    finally:
        renderer.release()
        surface.close()


def test_open_surface_headless_is_offscreen_of_display_size() -> None:
    try:
        surface = open_surface(DisplayOptions(width=200, height=120, rotate=90), headless=True)
    except Exception as exc:
        pytest.skip(f"EGL unavailable: {exc}")
    try:
        assert isinstance(surface, OffscreenSurface)
        assert surface.begin_frame() == (200, 120)
    finally:
        surface.close()


def test_display_options_mirror_the_config_section() -> None:
    """The render package's plain record has the config section's fields and defaults."""
    from kiosk.config import DisplayConfig

    assert DisplayOptions.of(DisplayConfig()) == DisplayOptions()
    custom = DisplayConfig.model_validate({"width": 640, "rotate": 90, "fit": "fill", "title": "t"})
    assert DisplayOptions.of(custom) == DisplayOptions(width=640, rotate=90, fit="fill", title="t")
