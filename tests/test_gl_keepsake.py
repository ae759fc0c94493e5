"""The keepsake layer's pixels on a headless EGL context: the QR code reads back, the countdown and
the consent prompt are drawn over the picture."""

from __future__ import annotations

import cv2
import moderngl
import numpy as np
import pytest

from kiosk.keepsake.qr import qr_matrix
from kiosk.render.keepsake_ui import KeepsakeView
from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import Renderer

pytestmark = pytest.mark.gl

URL = "http://192.168.1.20:8088/p/AbCdEfGhIjKlMnOpQrStUv"


def draw(
    ctx: moderngl.Context, size: tuple[int, int], view: KeepsakeView | None, **display: object
) -> np.ndarray:
    """RGB, top row first, of a grey-noise frame with ``view`` over it."""
    w, h = size
    rb = ctx.renderbuffer(size, components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions(**display))  # type: ignore[arg-type]
    try:
        rng = np.random.default_rng(0)
        renderer.set_frame(rng.integers(60, 200, (720, 1280, 3), dtype=np.uint8))
        fbo.use()
        renderer.draw(size, None, None, now=0.0, keepsake=view)
        assert ctx.error == "GL_NO_ERROR"
        data = fbo.read(components=3, alignment=1)
        return np.frombuffer(data, np.uint8).reshape(h, w, 3)[::-1].copy()
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()
        fbo.release()
        rb.release()


def show_view() -> KeepsakeView:
    return KeepsakeView(
        "show",
        freeze=True,
        qr=qr_matrix(URL),
        title="Scan to take your photo home",
        address=URL[7:],
        expiry="Deleted after 15 min",
        remaining_s=12.0,
        total_s=20.0,
    )


@pytest.mark.parametrize(("size", "rotate"), [((640, 360), 0), ((1280, 720), 0), ((720, 1280), 90)])
def test_the_qr_code_on_screen_reads_back_as_the_address(ctx, size, rotate) -> None:
    rgb = draw(ctx, size, show_view(), rotate=rotate)
    if rotate == 90:  # the screen turned a quarter clockwise: what the visitor (and a phone) sees
        rgb = cv2.rotate(rgb, cv2.ROTATE_90_COUNTERCLOCKWISE)
    text, points, _ = cv2.QRCodeDetector().detectAndDecode(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert text == URL
    # beside the picture: on the right half of the upright screen
    assert points.reshape(-1, 2)[:, 0].min() > rgb.shape[1] * 0.45


def test_without_a_view_nothing_is_drawn(ctx) -> None:
    a = draw(ctx, (640, 360), None)
    b = draw(ctx, (640, 360), KeepsakeView("idle"))
    assert np.array_equal(a, b)
    text, _, _ = cv2.QRCodeDetector().detectAndDecode(cv2.cvtColor(a, cv2.COLOR_RGB2BGR))
    assert text == ""


def test_the_countdown_digit_is_big_and_centred(ctx) -> None:
    live = draw(ctx, (640, 360), None)
    rgb = draw(ctx, (640, 360), KeepsakeView("countdown", count=3, count_progress=1.0))
    changed = np.abs(rgb.astype(int) - live.astype(int)).max(axis=2) > 40
    ys, xs = np.nonzero(changed)
    assert abs(xs.mean() - 320) < 30 and abs(ys.mean() - 180) < 40
    white = (rgb.min(axis=2) > 235)[100:260, 250:390]  # the digit's ink
    assert white.sum() > 1500
    # the live picture stays visible around it
    assert np.array_equal(rgb[:40, :100], live[:40, :100])


def test_the_consent_prompt_is_drawn_in_the_accent_colour(ctx) -> None:
    rgb = draw(
        ctx,
        (640, 360),
        KeepsakeView(
            "confirm",
            freeze=True,
            prompt="Press again to keep this photo",
            hint="Otherwise it is not saved",
            remaining_s=5,
            total_s=10,
        ),
    )
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    accent = (r > 200) & (g > 150) & (g < 225) & (b < 120)
    assert accent.sum() > 300


def test_a_long_consent_text_is_drawn_whole_in_the_smaller_size(ctx) -> None:
    """keepsake.consent (up to 300 characters): more than two lines of the big size take the small
    one, so the organiser's wording is drawn whole, not cut after two lines."""
    text = " ".join(["Your photo is kept on this kiosk for 15 minutes only."] * 5)
    view = KeepsakeView("consent", prompt=text, hint="Press again to agree", remaining_s=5, total_s=10)
    rb = ctx.renderbuffer((1280, 720), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions())
    try:
        renderer.set_frame(np.full((720, 1280, 3), 90, np.uint8))
        fbo.use()
        renderer.draw((1280, 720), None, None, now=0.0, keepsake=view)
        assert ctx.error == "GL_NO_ERROR"
        layer = renderer.keepsake
        assert layer is not None
        frame = layer._layout(view, (1280, 720))
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()
        fbo.release()
        rb.release()
    glyphs = sum(len(rows) for runs in frame.text.values() for rows in runs)
    ink = len(text.replace(" ", "")) + len(view.hint.replace(" ", ""))
    assert glyphs == ink  # every letter of the text and the hint, none elided
    assert len(frame.text) == 1  # all in the one (smaller) size


def test_per_visitor_the_carousel_marks_the_faces_on_screen(ctx) -> None:
    from kiosk.render.booth_ui import BoothView, FaceThumb

    thumbs = [
        FaceThumb(key=f"k{i}", name=f"Face {i}", thumb_bgr=np.full((64, 64, 3), c, np.uint8))
        for i, c in enumerate([(200, 60, 60), (60, 200, 60), (60, 60, 200)])
    ]
    size = (960, 540)

    def frame(on_screen: dict[int, int]) -> np.ndarray:
        rb = ctx.renderbuffer(size, components=4)
        fbo = ctx.framebuffer(color_attachments=[rb])
        renderer = Renderer(ctx, DisplayOptions())
        try:
            renderer.set_frame(np.full((540, 960, 3), 128, np.uint8))
            fbo.use()
            view = BoothView(faces=thumbs, selected=0, t_switched=-100.0, on_screen=on_screen)
            renderer.draw(size, None, view, now=1000.0)
            data = fbo.read(components=3, alignment=1)
            return np.frombuffer(data, np.uint8).reshape(540, 960, 3)[::-1].copy()
        finally:
            renderer.release()
            ctx.detect_framebuffer(0).use()
            fbo.release()
            rb.release()

    plain, marked = frame({}), frame({1: 1, 2: 2})
    changed = np.abs(plain.astype(int) - marked.astype(int)).max(axis=2) > 30
    ys, xs = np.nonzero(changed)
    assert len(ys) > 100 and ys.min() > 540 * 0.6  # down by the carousel only
    r, g, b = (marked[..., i].astype(int) for i in range(3))
    dots = changed & (r > 200) & (g > 150) & (g < 225) & (b < 120)  # the accent colour
    # three dots: one over the second face, two over the third (right of it), none over the first
    n, _, stats, centres = cv2.connectedComponentsWithStats(dots.astype(np.uint8))
    blobs = sorted(float(centres[i][0]) for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] > 10)
    assert len(blobs) == 3 and blobs[0] > 480 - 20

    # the tiles of faces on screen are not dimmed (the third face is BGR (60, 60, 200): RGB red)
    def red_tile(img: np.ndarray, level: int) -> int:
        return int((np.abs(img.astype(int) - (level, level * 0.3, level * 0.3)).max(axis=2) < 12).sum())

    assert red_tile(marked, 200) > 500 and red_tile(plain, 200) == 0
    assert red_tile(plain, 100) > 500
