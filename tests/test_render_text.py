"""Font atlas and text layout (CPU only) and shader file loading errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kiosk.render.font_atlas import INSTANCE_FLOATS, FontAtlas
from kiosk.render.overlay import text_sizes
from kiosk.render.shaders import SHADERS_DIR_ENV, ShaderError, read_shader, shaders_dir


@pytest.fixture(scope="module")
def atlas() -> FontAtlas:
    return FontAtlas(24)


def test_atlas_covers_ascii_and_drawn_symbols(atlas: FontAtlas) -> None:
    for code in range(32, 127):
        assert chr(code) in atlas.chars
    for ch in "…—–→←•×":
        assert ch in atlas.chars
    assert atlas.pixels.dtype == np.uint8 and atlas.pixels.ndim == 2
    assert atlas.pixels[:2, :2].min() == 255, "solid block for boxes"


def test_missing_characters_fall_back(atlas: FontAtlas) -> None:
    assert atlas.normalize("Café naïve") == "Cafe naive"
    assert atlas.normalize("a\tb") == "a b"
    assert atlas.normalize("\u4e2d") == "?"
    assert atlas.normalize("plain ASCII → ok") == "plain ASCII → ok"


def test_layout_rows_are_pixel_aligned_and_advance(atlas: FontAtlas) -> None:
    rows = atlas.layout("Hi there", 10.3, 20.6, (1, 1, 1, 1))
    assert rows.shape == (7, INSTANCE_FLOATS)  # the space draws nothing
    assert np.all(rows[:, :4] == np.round(rows[:, :4])), "whole pixels keep glyphs crisp"
    assert np.all(np.diff(rows[:, 0]) > 0)
    assert np.all(rows[:, 2] > rows[:, 0]) and np.all(rows[:, 3] > rows[:, 1])
    assert np.all((rows[:, 4:8] >= 0) & (rows[:, 4:8] <= 1))
    assert atlas.layout("", 0, 0, (1, 1, 1, 1)).shape == (0, INSTANCE_FLOATS)


def test_elide_and_wrap_respect_width(atlas: FontAtlas) -> None:
    text = "Camera unavailable — reconnecting…"
    assert atlas.elide(text, 10_000) == text
    short = atlas.elide(text, 120)
    assert short.endswith("…") and atlas.measure(short) <= 120
    lines = atlas.wrap(text + " and some more words to wrap", 200)
    assert len(lines) > 1 and all(atlas.measure(t) <= 200 for t in lines)
    assert atlas.wrap("one\ntwo", 1000) == ["one", "two"]
    assert len(atlas.wrap("word " * 200, 100, max_lines=3)) == 3


def test_text_size_follows_the_smaller_side() -> None:
    assert text_sizes((1920, 1080), 1.0) == text_sizes((1080, 1920), 1.0) == (27, 54)
    assert text_sizes((1920, 1080), 2.0)[0] == 54
    assert text_sizes((320, 240), 1.0)[0] == 10  # floor keeps tiny windows legible


def test_shaders_dir_default_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(SHADERS_DIR_ENV, raising=False)
    assert (shaders_dir() / "frame.vert").is_file()
    monkeypatch.setenv(SHADERS_DIR_ENV, str(tmp_path))
    assert shaders_dir() == tmp_path
    with pytest.raises(ShaderError) as err:
        read_shader("frame.vert")
    message = str(err.value)
    assert str(tmp_path / "frame.vert") in message and "\n" not in message


def test_broken_shader_names_its_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    moderngl = pytest.importorskip("moderngl")
    try:
        ctx = moderngl.create_standalone_context(require=330, backend="egl")
    except Exception as exc:
        pytest.skip(f"EGL unavailable: {exc}")
    from kiosk.render.shaders import load_program
    from kiosk.render.window import release_standalone_context

    monkeypatch.delenv(SHADERS_DIR_ENV, raising=False)
    for name in ("text.vert", "text.frag"):
        shutil.copy(shaders_dir() / name, tmp_path / name)
    (tmp_path / "text.frag").write_text("#version 330\nvoid main() { this is not glsl; }\n")
    monkeypatch.setenv(SHADERS_DIR_ENV, str(tmp_path))
    try:
        with pytest.raises(ShaderError) as err:
            load_program(ctx, "text")
        assert "text.frag" in str(err.value) and "\n" not in str(err.value)
    finally:
        release_standalone_context(ctx)
