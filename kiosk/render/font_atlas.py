"""A glyph atlas for the overlay text, built once per pixel size with Pillow (no GL in here).

The font is Pillow's bundled FreeType font (``ImageFont.load_default(size=...)``, Aileron in
Pillow >= 10.1), so no system font files are needed. That font is a small subset: it has ASCII,
"…", "·" and "°", but no dashes, arrows or accented letters. Dashes, arrows, "•" and "×" are
drawn here from the hyphen's metrics; accented letters fall back to their base letter ("é" → "e")
and anything else to "?".

Layout works in pixels with y down and the pen at the top of the line (the ascender), and
returns one instance row per visible glyph: ``x0 y0 x1 y1 u0 v0 u1 v1 r g b a`` (float32),
ready for the overlay's instanced draw. Glyph positions are rounded to whole pixels and the
atlas is sampled 1:1, so text stays crisp.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFont

#: Floats per instance row: rect (4), uv rect (4), colour (4).
INSTANCE_FLOATS = 12

RGBA = tuple[float, float, float, float]

_SUPERSAMPLE = 4  # drawn glyphs are drawn this much larger, then box-filtered down (antialiasing)
_PAD = 2  # empty texels around each glyph in the atlas, so linear filtering never bleeds
_SOLID = 4  # side of the solid white block used for boxes


@dataclass(frozen=True)
class _Bar:
    """Metrics the drawn glyphs share, taken from the font's hyphen."""

    em: float
    centre_y: float  # y of the hyphen's centre below the line top
    thickness: float


#: Maps a point in glyph pixels (pen at the line top) to canvas coordinates.
_ToCanvas = Callable[[float, float], tuple[float, float]]
#: Draws one glyph with white fill and returns its advance in pixels.
_GlyphPainter = Callable[[ImageDraw.ImageDraw, _Bar, _ToCanvas], float]


def _bar_rect(d: ImageDraw.ImageDraw, at: _ToCanvas, x0: float, x1: float, bar: _Bar) -> None:
    half = bar.thickness / 2
    (ax, ay), (bx, by) = at(x0, bar.centre_y - half), at(x1, bar.centre_y + half)
    d.rectangle([ax, ay, bx - 1, by - 1], fill=255)


def _dash(width_em: float) -> _GlyphPainter:
    def paint(d: ImageDraw.ImageDraw, bar: _Bar, at: _ToCanvas) -> float:
        advance = bar.em * width_em
        _bar_rect(d, at, bar.em * 0.04, advance - bar.em * 0.04, bar)
        return advance

    return paint


def _arrow(direction: int) -> _GlyphPainter:
    def paint(d: ImageDraw.ImageDraw, bar: _Bar, at: _ToCanvas) -> float:
        advance = bar.em * 0.95
        x0, x1 = bar.em * 0.08, advance - bar.em * 0.08
        head = bar.em * 0.24
        y = bar.centre_y
        tip, back = (x1, x1 - head * 1.1) if direction > 0 else (x0, x0 + head * 1.1)
        _bar_rect(d, at, *((x0, back) if direction > 0 else (back, x1)), bar)
        d.polygon([at(tip, y), at(back, y - head), at(back, y + head)], fill=255)
        return advance

    return paint


def _bullet(d: ImageDraw.ImageDraw, bar: _Bar, at: _ToCanvas) -> float:
    advance = bar.em * 0.5
    r = bar.em * 0.13
    cx, cy = advance / 2, bar.centre_y
    d.ellipse([at(cx - r, cy - r), at(cx + r, cy + r)], fill=255)
    return advance


def _times(d: ImageDraw.ImageDraw, bar: _Bar, at: _ToCanvas) -> float:
    advance = bar.em * 0.55
    r = bar.em * 0.18
    cx, cy = advance / 2, bar.centre_y
    width = max(1, round(bar.thickness * 0.8 * _SUPERSAMPLE))
    d.line([at(cx - r, cy - r), at(cx + r, cy + r)], fill=255, width=width)
    d.line([at(cx - r, cy + r), at(cx + r, cy - r)], fill=255, width=width)
    return advance


#: Glyphs the bundled font lacks that are worth drawing ourselves.
_DRAWN: dict[str, _GlyphPainter] = {
    "\u2014": _dash(1.0),  # — em dash
    "\u2013": _dash(0.55),  # – en dash
    "\u2192": _arrow(+1),  # →
    "\u2190": _arrow(-1),  # ←
    "\u2022": _bullet,  # •
    "\u00d7": _times,  # ×
}

#: Wanted beyond ASCII 32..126 when the font has them.
_EXTRA = "\u2026\u00b7\u00b0\u00a9"  # … · ° ©


@dataclass
class _Glyph:
    char: str
    image: Image.Image | None  # cropped coverage, None for blank glyphs (space)
    offset: tuple[int, int]  # top-left of ``image`` relative to the pen (line top)
    advance: float


class FontAtlas:
    """Glyph images packed into one coverage texture (``pixels``, (H, W) uint8) plus metrics."""

    def __init__(self, size_px: int) -> None:
        self.size_px = max(6, int(size_px))
        font = ImageFont.load_default(size=self.size_px)
        if not isinstance(font, ImageFont.FreeTypeFont):
            raise RuntimeError(
                "Pillow was built without FreeType; the overlay text needs it (pip install Pillow)"
            )
        ascent, descent = font.getmetrics()
        self.ascent = int(ascent)
        #: Distance between the tops of two lines, in pixels.
        self.line_height = int(ascent + descent)
        self._bar: _Bar | None = None
        glyphs = [self._render(font, ch) for ch in self._charset(font)]
        ink = {g.char: g for g in glyphs if g.image is not None}
        #: Top of the capitals and bottom of the descenders, below the line top (for boxes).
        self.ink_top = ink["H"].offset[1]
        self.ink_bottom = ink["g"].offset[1] + ink["g"].image.height  # type: ignore[union-attr]
        self._pack(glyphs)
        self._fallback: dict[str, str] = {}

    # -- building ------------------------------------------------------------------------------

    @staticmethod
    def _charset(font: ImageFont.FreeTypeFont) -> list[str]:
        notdef = font.getmask("\ue000")  # a private-use code point: the font's "missing" glyph
        notdef_key = (notdef.size, bytes(notdef))
        chars = [chr(c) for c in range(32, 127)]
        for ch in _EXTRA:
            mask = font.getmask(ch)
            if (mask.size, bytes(mask)) != notdef_key:
                chars.append(ch)
        chars.extend(_DRAWN)
        return chars

    def _hyphen_bar(self, font: ImageFont.FreeTypeFont) -> _Bar:
        """Height and thickness of the font's hyphen, measured on its rendered ink."""
        if self._bar is None:
            hyphen = self._render(font, "-")
            if hyphen.image is None:
                centre, thickness = self.line_height * 0.6, max(1.0, self.size_px / 12)
            else:
                centre, thickness = hyphen.offset[1] + hyphen.image.height / 2, float(hyphen.image.height)
            self._bar = _Bar(em=float(self.size_px), centre_y=centre, thickness=thickness)
        return self._bar

    def _render(self, font: ImageFont.FreeTypeFont, ch: str) -> _Glyph:
        margin = self.size_px  # room for overhangs on every side
        if ch in _DRAWN:
            s = _SUPERSAMPLE
            bar = self._hyphen_bar(font)
            big = Image.new("L", (3 * margin * s, (self.line_height + 2 * margin) * s), 0)
            draw = ImageDraw.Draw(big)

            def at(gx: float, gy: float) -> tuple[float, float]:
                return ((gx + margin) * s, (gy + margin) * s)

            advance = _DRAWN[ch](draw, bar, at)
            canvas = big.reduce(s)
        else:
            advance = float(font.getlength(ch))
            canvas = Image.new("L", (int(advance) + 3 * margin, self.line_height + 2 * margin), 0)
            ImageDraw.Draw(canvas).text((margin, margin), ch, font=font, fill=255)
        box = canvas.getbbox()
        if box is None:
            return _Glyph(ch, None, (0, 0), advance)
        return _Glyph(ch, canvas.crop(box), (box[0] - margin, box[1] - margin), advance)

    def _pack(self, glyphs: list[_Glyph]) -> None:
        """Shelf-pack the glyph images (tallest first) and fill the metric tables."""
        area = sum((g.image.width + _PAD) * (g.image.height + _PAD) for g in glyphs if g.image is not None)
        width = 256
        while width * width < area * 2:
            width *= 2
        placed: dict[str, tuple[int, int]] = {}
        x, y, shelf = _SOLID + _PAD, 0, _SOLID + _PAD
        for g in sorted((g for g in glyphs if g.image is not None), key=lambda g: -g.image.height):  # type: ignore[union-attr]
            assert g.image is not None
            if x + g.image.width + _PAD > width:
                x, y, shelf = 0, y + shelf, 0
            placed[g.char] = (x, y)
            x += g.image.width + _PAD
            shelf = max(shelf, g.image.height + _PAD)
        height = max(_SOLID, y + shelf)
        height += -height % 4

        atlas = Image.new("L", (width, height), 0)
        atlas.paste(255, (0, 0, _SOLID, _SOLID))
        n = len(glyphs)
        self.advance = np.zeros(n, np.float32)
        self.quad = np.zeros((n, 4), np.float32)  # x0 y0 x1 y1 relative to the pen
        self.uv = np.zeros((n, 4), np.float32)
        self.visible = np.zeros(n, bool)
        self._slot: dict[str, int] = {}
        for i, g in enumerate(glyphs):
            self._slot[g.char] = i
            self.advance[i] = g.advance
            if g.image is None:
                continue
            ax, ay = placed[g.char]
            atlas.paste(g.image, (ax, ay))
            w, h = g.image.size
            self.quad[i] = (g.offset[0], g.offset[1], g.offset[0] + w, g.offset[1] + h)
            self.uv[i] = (ax / width, ay / height, (ax + w) / width, (ay + h) / height)
            self.visible[i] = True
        self.pixels: NDArray[np.uint8] = np.asarray(atlas, dtype=np.uint8)
        #: uv rect that samples the solid white block (for boxes).
        self.solid_uv = (
            (_SOLID / 2) / width,
            (_SOLID / 2) / height,
            (_SOLID / 2) / width,
            (_SOLID / 2) / height,
        )

    # -- text ----------------------------------------------------------------------------------

    @property
    def chars(self) -> str:
        """Every character the atlas can draw."""
        return "".join(self._slot)

    def normalize(self, text: str) -> str:
        """``text`` with characters the atlas lacks replaced ("é" → "e", tabs → spaces, else "?")."""
        if self._slot.keys() >= set(text):
            return text
        return "".join(ch if ch in self._slot else self._substitute(ch) for ch in text)

    def _substitute(self, ch: str) -> str:
        sub = self._fallback.get(ch)
        if sub is None:
            if ch in "\t\n\r\u00a0":
                sub = " "
            else:
                base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
                sub = base if base and all(c in self._slot for c in base) else "?"
            self._fallback[ch] = sub
        return sub

    def _slots(self, text: str) -> NDArray[np.intp]:
        slot = self._slot
        return np.fromiter((slot[c] for c in self.normalize(text)), dtype=np.intp)

    def measure(self, text: str) -> float:
        """Width of ``text`` in pixels (sum of advances)."""
        return float(self.advance[self._slots(text)].sum())

    def elide(self, text: str, max_width: float) -> str:
        """``text`` cut to fit ``max_width`` pixels, ending in "…" when cut."""
        text = self.normalize(text)
        widths = np.cumsum(self.advance[self._slots(text)])
        if len(widths) == 0 or widths[-1] <= max_width:
            return text
        ellipsis = "\u2026" if "\u2026" in self._slot else "..."
        room = max_width - self.measure(ellipsis)
        keep = int(np.searchsorted(widths, room, side="right"))
        return text[:keep].rstrip() + ellipsis

    def wrap(self, text: str, max_width: float, max_lines: int = 8) -> list[str]:
        """Greedy word wrap; explicit newlines are kept; over-long words and the last line are elided."""
        lines: list[str] = []
        for paragraph in text.split("\n"):
            current = ""
            for word in paragraph.split(" "):
                candidate = f"{current} {word}" if current else word
                if current and self.measure(candidate) > max_width:
                    lines.append(current)
                    current = word
                else:
                    current = candidate
            lines.append(current)
        if len(lines) > max_lines:
            lines = lines[: max_lines - 1] + [self.elide(" ".join(lines[max_lines - 1 :]), max_width)]
        return [self.elide(line, max_width) for line in lines]

    def layout(self, text: str, x: float, y: float, rgba: RGBA) -> NDArray[np.float32]:
        """Instance rows for ``text`` with the pen at (x, y) (left edge, line top), in pixels."""
        slots = self._slots(text)
        if len(slots) == 0:
            return np.zeros((0, INSTANCE_FLOATS), np.float32)
        pen = np.concatenate(([0.0], np.cumsum(self.advance[slots])[:-1])) + x
        slots_visible = self.visible[slots]
        slots, pen = slots[slots_visible], pen[slots_visible]
        out = np.empty((len(slots), INSTANCE_FLOATS), np.float32)
        origin_x = np.floor(pen + 0.5)
        origin_y = np.floor(y + 0.5)
        quad = self.quad[slots]
        out[:, 0] = quad[:, 0] + origin_x
        out[:, 1] = quad[:, 1] + origin_y
        out[:, 2] = quad[:, 2] + origin_x
        out[:, 3] = quad[:, 3] + origin_y
        out[:, 4:8] = self.uv[slots]
        out[:, 8:12] = rgba
        return out

    def box(self, x0: float, y0: float, x1: float, y1: float, rgba: RGBA) -> NDArray[np.float32]:
        """One instance row for a solid rectangle (pixels, rounded to whole pixels)."""
        row = np.empty((1, INSTANCE_FLOATS), np.float32)
        row[0, 0:4] = np.floor(np.array([x0, y0, x1, y1]) + 0.5)
        row[0, 4:8] = self.solid_uv
        row[0, 8:12] = rgba
        return row
