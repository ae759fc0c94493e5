"""GPU paste-back (``shaders/frame.frag``) against the CPU paste-back (:mod:`kiosk.inference.paste`)."""

from __future__ import annotations

import math

import cv2
import moderngl
import numpy as np
import pytest

from kiosk.inference.paste import PasteBack, feather_mask
from kiosk.render.composite import MAX_FACES
from kiosk.render.options import DisplayOptions
from kiosk.render.renderer import Renderer
from kiosk.types import Face, SwappedFace

pytestmark = pytest.mark.gl


def textured(h: int, w: int, seed: int) -> np.ndarray:
    """A natural-ish BGR image: smooth colour gradients plus blurred noise (edges and detail)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack(
        [
            127 + 100 * np.sin(xx / (w / 5.0) + seed),
            127 + 100 * np.cos(yy / (h / 3.0) - seed),
            127 + 90 * np.sin((xx + yy) / (w / 7.0)),
        ],
        axis=2,
    )
    noise = cv2.GaussianBlur(rng.normal(0, 60, (h, w, 3)).astype(np.float32), (0, 0), 1.5)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def similarity(cx: float, cy: float, face_px: float, angle_deg: float, crop: int) -> np.ndarray:
    """Frame→crop affine putting a ``face_px`` wide square around (cx, cy), turned, onto a ``crop`` crop."""
    s = crop / face_px
    a = math.radians(angle_deg)
    m = np.array([[s * math.cos(a), s * math.sin(a)], [-s * math.sin(a), s * math.cos(a)]])
    t = np.array([crop / 2, crop / 2]) - m @ np.array([cx, cy])
    return np.hstack([m, t[:, None]])


def swapped(crop: np.ndarray, affine: np.ndarray) -> SwappedFace:
    face = Face(np.zeros(4, np.float32), 1.0, np.zeros((5, 2), np.float32))
    return SwappedFace(crop_bgr=crop, affine=affine, face=face)


def gpu_composite(ctx: moderngl.Context, frame: np.ndarray, faces: list[SwappedFace]) -> np.ndarray:
    """The renderer's output at the frame's native size (fit, no rotation), as BGR."""
    h, w = frame.shape[:2]
    rb = ctx.renderbuffer((w, h), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions(fit="fit", rotate=0))
    try:
        renderer.set_frame(frame, faces)
        fbo.use()
        renderer.draw((w, h))
        assert ctx.error == "GL_NO_ERROR"
        rgb = np.frombuffer(fbo.read(components=3, alignment=1), np.uint8).reshape(h, w, 3)[::-1]
        return np.ascontiguousarray(rgb[:, :, ::-1])
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()
        fbo.release()
        rb.release()


def cpu_composite(frame: np.ndarray, faces: list[SwappedFace]) -> np.ndarray:
    out = frame.copy()
    paste = PasteBack()
    for f in faces:
        paste.paste(out, f.crop_bgr, f.affine)
    return out


def face_mask(frame_hw: tuple[int, int], faces: list[SwappedFace]) -> np.ndarray:
    """Frame pixels the crops cover with a non-zero mask (the face region)."""
    h, w = frame_hw
    covered = np.zeros((h, w), bool)
    for f in faces:
        s = f.crop_bgr.shape[0]
        warped = cv2.warpAffine(
            feather_mask(s), cv2.invertAffineTransform(f.affine), (w, h), flags=cv2.INTER_LINEAR
        )
        covered |= warped > 0
    return covered


@pytest.mark.parametrize(
    ("frame_size", "placements", "crop_px"),
    [
        ((640, 480), [(320, 230, 180, 12.0)], 128),
        ((640, 480), [(200, 200, 150, -20.0), (430, 260, 210, 35.0)], 128),
        ((800, 600), [(400, 300, 300, 7.0)], 512),  # an enhanced (GFPGAN-size) crop
        ((640, 360), [(600, 40, 160, 0.0)], 128),  # partly outside the frame
    ],
)
def test_gpu_composite_matches_cpu_paste_back(
    ctx: moderngl.Context,
    frame_size: tuple[int, int],
    placements: list[tuple[float, float, float, float]],
    crop_px: int,
) -> None:
    w, h = frame_size
    frame = textured(h, w, seed=1)
    faces = [
        swapped(textured(crop_px, crop_px, seed=10 + i), similarity(cx, cy, size, angle, crop_px))
        for i, (cx, cy, size, angle) in enumerate(placements)
    ]
    cpu = cpu_composite(frame, faces)
    gpu = gpu_composite(ctx, frame, faces)
    region = face_mask((h, w), faces)
    assert region.sum() > 1000
    diff = np.abs(cpu.astype(np.int16) - gpu.astype(np.int16))
    assert diff[region].mean() <= 2.0, f"mean abs diff over the face region {diff[region].mean():.3f}"
    assert np.percentile(diff[region], 99) <= 8
    assert np.array_equal(gpu[~region], frame[~region]), "pixels outside the face region are the frame"
    assert np.array_equal(cpu[~region], frame[~region])
    # the crop is really there: over the face region the output moved far from the frame
    assert np.abs(gpu.astype(np.int16) - frame.astype(np.int16))[region].mean() > 20


def test_no_faces_is_the_plain_frame_and_faces_none_clears(ctx: moderngl.Context) -> None:
    frame = textured(120, 160, seed=3)
    face = swapped(textured(128, 128, seed=4), similarity(80, 60, 80, 0.0, 128))
    assert np.array_equal(gpu_composite(ctx, frame, []), frame)
    with_face = gpu_composite(ctx, frame, [face])
    assert not np.array_equal(with_face, frame)
    renderer = Renderer(ctx, DisplayOptions())
    try:
        renderer.set_frame(frame, [face])
        assert renderer.face_crops.count == 1
        renderer.set_frame(frame)  # faces None: the existing path, nothing composited
        assert renderer.face_crops.count == 0
    finally:
        renderer.release()


def test_crop_array_is_reused_and_grows_only_when_needed(ctx: moderngl.Context) -> None:
    frame = textured(90, 160, seed=5)
    crop = textured(128, 128, seed=6)
    affine = similarity(80, 45, 60, 0.0, 128)
    renderer = Renderer(ctx, DisplayOptions())
    try:
        for _ in range(3):
            renderer.set_frame(frame, [swapped(crop, affine)] * 2)
        assert renderer.face_crops.textures_created == 1
        assert renderer.face_crops.layout == (128, 2)
        renderer.set_frame(frame, [swapped(crop, affine)] * 3)
        assert renderer.face_crops.layout == (128, 4)
        renderer.set_frame(frame, [swapped(textured(512, 512, seed=7), affine)])
        assert renderer.face_crops.layout == (512, 4)
        assert renderer.face_crops.textures_created == 3
        renderer.set_frame(frame, [swapped(crop, affine)] * (MAX_FACES + 3))
        assert renderer.face_crops.count == MAX_FACES
        with pytest.raises(ValueError, match="square"):
            renderer.set_frame(frame, [swapped(np.zeros((128, 100, 3), np.uint8), affine)])
    finally:
        renderer.release()


def test_mixed_crop_sizes_composite_like_the_cpu(ctx: moderngl.Context) -> None:
    frame = textured(480, 640, seed=8)
    faces = [
        swapped(textured(512, 512, seed=9), similarity(200, 240, 200, 10.0, 512)),
        swapped(textured(128, 128, seed=11), similarity(450, 240, 160, -5.0, 128)),
    ]
    cpu, gpu = cpu_composite(frame, faces), gpu_composite(ctx, frame, faces)
    region = face_mask((480, 640), faces)
    diff = np.abs(cpu.astype(np.int16) - gpu.astype(np.int16))
    assert diff[region].mean() <= 2.0
    assert np.array_equal(gpu[~region], frame[~region])


def test_composite_happens_in_frame_space_under_display_rotation(ctx: moderngl.Context) -> None:
    """A turned display shows the same composite, turned (the paste-back ignores the display)."""
    w, h = 320, 240
    frame = textured(h, w, seed=12)
    faces = [swapped(textured(128, 128, seed=13), similarity(150, 110, 120, 15.0, 128))]
    cpu = cpu_composite(frame, faces)
    rb = ctx.renderbuffer((h, w), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions(rotate=90))
    try:
        renderer.set_frame(frame, faces)
        fbo.use()
        renderer.draw((h, w))
        assert ctx.error == "GL_NO_ERROR"
        rgb = np.frombuffer(fbo.read(components=3, alignment=1), np.uint8).reshape(w, h, 3)[::-1]
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()
        fbo.release()
        rb.release()
    upright = np.rot90(rgb, k=1)[:, :, ::-1]  # turn the framebuffer back; RGB → BGR
    region = face_mask((h, w), faces)
    diff = np.abs(upright.astype(np.int16) - cpu.astype(np.int16))
    assert diff[region].mean() <= 2.0
    assert np.array_equal(upright[~region], frame[~region])


def test_a_frame_far_larger_than_the_screen_is_shrunk_before_its_upload(ctx: moderngl.Context) -> None:
    """A 4K camera on a small screen: the renderer uploads the frame at the size it is shown
    (``cv2.INTER_AREA``, the 25 MB upload was 9.5 ms of llvmpipe's render loop holding the GIL),
    and the faces still land where the CPU paste-back puts them in the full frame."""
    w, h, sw, sh = 1280, 720, 320, 180
    frame = textured(h, w, seed=3)
    faces = [swapped(textured(128, 128, seed=11), similarity(500, 330, 360, 10.0, 128))]
    rb = ctx.renderbuffer((sw, sh), components=4)
    fbo = ctx.framebuffer(color_attachments=[rb])
    renderer = Renderer(ctx, DisplayOptions(fit="fit", rotate=0))
    try:
        fbo.use()
        renderer.set_frame(frame, faces)
        renderer.draw((sw, sh))  # the first frame: the screen's size is not known before it
        renderer.set_frame(frame, faces)
        renderer.draw((sw, sh))
        assert ctx.error == "GL_NO_ERROR"
        assert renderer.frame_size == (w, h)  # the frame's own size, for the layout and the crops
        tex = renderer._frame_texture
        assert tex is not None and tex.size == (sw, sh)  # before: 1280x720
        rgb = np.frombuffer(fbo.read(components=3, alignment=1), np.uint8).reshape(sh, sw, 3)[::-1]
        gpu = np.ascontiguousarray(rgb[:, :, ::-1])
    finally:
        renderer.release()
        ctx.detect_framebuffer(0).use()
        fbo.release()
        rb.release()
    want = cv2.resize(cpu_composite(frame, faces), (sw, sh), interpolation=cv2.INTER_AREA)
    region = cv2.resize(face_mask((h, w), faces).astype(np.uint8), (sw, sh), interpolation=cv2.INTER_AREA) > 0
    diff = np.abs(want.astype(np.int16) - gpu.astype(np.int16))
    assert diff[~region].mean() <= 1.0, f"the frame: mean abs diff {diff[~region].mean():.2f}"
    assert diff[region].mean() <= 2.0, f"the face: mean abs diff {diff[region].mean():.2f}"
    unswapped = cv2.resize(frame, (sw, sh), interpolation=cv2.INTER_AREA)
    assert np.abs(gpu.astype(np.int16) - unswapped)[region].mean() > 20  # the face is on the screen
