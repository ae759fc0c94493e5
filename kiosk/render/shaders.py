"""Finding and compiling the GLSL programs in ``kiosk/shaders/`` (no GLSL lives in Python files).

The shader files are package data (they ship in the wheel); ``$KIOSK_SHADERS_DIR`` points the kiosk
at another folder while working on them."""

from __future__ import annotations

import os
from pathlib import Path

import moderngl

from kiosk.paths import package_file

#: Environment variable that points the kiosk at another shaders folder.
SHADERS_DIR_ENV = "KIOSK_SHADERS_DIR"


class ShaderError(RuntimeError):
    """A shader file is missing or does not compile. The message is one line."""


def shaders_dir() -> Path:
    """The folder holding the ``*.vert``/``*.frag`` files: ``$KIOSK_SHADERS_DIR``, else the
    ``shaders`` package data of the installed ``kiosk`` package."""
    override = os.environ.get(SHADERS_DIR_ENV)
    return Path(override).expanduser() if override else package_file("shaders")


def read_shader(name: str) -> str:
    """Source text of ``shaders/<name>``; :class:`ShaderError` naming the file when it is missing."""
    path = shaders_dir() / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = (
            "the kiosk package is incomplete: reinstall faceswap-kiosk, or set "
            f"{SHADERS_DIR_ENV} to the folder holding it"
            if SHADERS_DIR_ENV not in os.environ
            else (f"check {SHADERS_DIR_ENV}")
        )
        raise ShaderError(f"shader file not found: {path} ({hint})") from None
    except OSError as exc:
        raise ShaderError(f"cannot read shader file {path}: {exc.strerror or exc}") from None


def load_program(ctx: moderngl.Context, name: str) -> moderngl.Program:
    """Compile and link ``shaders/<name>.vert`` + ``shaders/<name>.frag``."""
    vert_name, frag_name = f"{name}.vert", f"{name}.frag"
    vertex_shader = read_shader(vert_name)
    fragment_shader = read_shader(frag_name)
    try:
        return ctx.program(vertex_shader=vertex_shader, fragment_shader=fragment_shader)
    except moderngl.Error as exc:
        # moderngl's message is the multi-line compiler log; keep the lines that say something.
        lines = [ln.strip() for ln in str(exc).splitlines()]
        detail = "; ".join(ln for ln in lines if ln and set(ln) != {"="})
        raise ShaderError(f"cannot build shader program {vert_name} + {frag_name}: {detail}") from None


def uniform(program: moderngl.Program, name: str) -> moderngl.Uniform:
    """The uniform ``name`` of ``program`` (look it up once, set ``.value`` per frame)."""
    try:
        member = program[name]
    except KeyError:
        member = None
    if not isinstance(member, moderngl.Uniform):
        raise ShaderError(
            f"shader program has no active uniform {name!r} (check the files in {shaders_dir()})"
        )
    return member


def blend_over(ctx: moderngl.Context) -> None:
    """Enable blending for drawing UI over the frame: straight alpha for colour, and the
    destination kept opaque (its alpha only ever grows)."""
    ctx.enable(moderngl.BLEND)
    ctx.blend_func = (
        moderngl.SRC_ALPHA,
        moderngl.ONE_MINUS_SRC_ALPHA,
        moderngl.ONE,
        moderngl.ONE_MINUS_SRC_ALPHA,
    )  # type: ignore[assignment]  # moderngl accepts separate colour/alpha factors
