"""``kiosk config init``: write a commented YAML config, every key with its description, default and
bounds taken from the pydantic fields, the values from a preset (the bundled booth or demo config)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from kiosk.config import KioskConfig, field_facts, load_config, parse_config
from kiosk.paths import PACKAGE_PREFIX, bundled_config
from kiosk.util.atomic import atomic_write

#: Presets of ``kiosk config init``: the configs shipped in the package.
PRESETS = {"booth": "default", "demo": "demo"}

#: Keys holding a path that resolves against the config's folder (``KioskConfig.resolve``; a test
#: finds the keys named or described like a path and checks they are here).
PATH_KEYS = frozenset(
    {
        "models.dir",
        "models.providers.trt_cache_dir",
        "faces.dir",
        "faces.cache_dir",
        "processing.source_face",
        "snapshots.dir",
        "logging.file",
        "monitoring.textfile",
        "source.path",
        "keepsake.tls_cert",
        "keepsake.tls_key",
        "keepsake.frame",
        "console.pin_file",
    }
)

_WIDTH = 100


def _flow(value: Any) -> str:
    """One YAML value on one line (``[a, b]``, ``{k: v}``, ``'0.5'`` quoted where needed)."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _home_relative(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def _preset_paths(cfg: KioskConfig, values: dict[str, Any]) -> dict[str, Any]:
    """Relative paths of a bundled preset, whether it sets them or keeps the default, resolve
    against the kiosk's data folder, not against the new file's folder: write them out in full
    (``~/...`` under the home folder)."""

    def walk(model: BaseModel, data: dict[str, Any], prefix: str) -> None:
        for name, field in type(model).model_fields.items():
            if field.exclude:
                continue
            value = getattr(model, name)
            key = f"{prefix}{name}"
            if isinstance(value, BaseModel):
                walk(value, data[name], f"{key}.")
            elif (
                key in PATH_KEYS
                and isinstance(value, str)
                and not value.startswith(PACKAGE_PREFIX)  # a file in the package: valid anywhere
                and not Path(value).expanduser().is_absolute()
            ):
                data[name] = _home_relative(cfg.resolve(value))

    walk(cfg, values, "")
    return values


def _comment(field: Any) -> list[str]:
    default_text, limits = field_facts(field)
    if default_text == "see below":
        default_text = "the built-in table (`kiosk config show` on an empty file prints it)"
    facts = f"Default: {default_text}."
    if limits:
        facts += f" Allowed: {' '.join(limits)}."
    lines = textwrap.wrap(field.description or "", _WIDTH - 2, break_on_hyphens=False)
    return [f"# {line}" for line in [*lines, facts]]


def _render(model: type[BaseModel], values: dict[str, Any], indent: int) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        ann = field.annotation
        value = values[name]
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if indent == 0 and out:
                out.append("")
            out.append(f"{pad}{name}:")
            out.extend(_render(ann, value, indent + 1))
            continue
        out.extend(pad + line for line in _comment(field))
        if isinstance(value, dict) and value:
            out.append(f"{pad}{name}:")
            out.extend(f"{pad}  {_flow(k)}: {_flow(v)}" for k, v in value.items())
        else:
            out.append(f"{pad}{name}: {_flow(value)}")
    return out


def commented_config(preset: str = "booth") -> str:
    """The YAML text of ``kiosk config init --<preset>``."""
    from kiosk import __version__

    cfg = load_config(bundled_config(PRESETS[preset]), env=False)
    values = _preset_paths(cfg, cfg.model_dump(mode="json"))
    header = [
        f"# faceswap-kiosk configuration (written by `kiosk config init --{preset}`, version {__version__}).",
        "# Every key is listed with its description, default and allowed values; the values are those of",
        f"# the bundled {preset} config. Delete what you keep at the default. Relative paths are relative to",
        "# this file's folder. Check an edit: kiosk config check FILE   Run: kiosk run --config FILE",
        "",
    ]
    text = "\n".join(header + _render(KioskConfig, values, 0)) + "\n"
    parse_config(text, f"<config init --{preset}>", env=False)  # what we write must load
    return text


def write_config(path: Path, preset: str = "booth", force: bool = False) -> None:
    """Write :func:`commented_config` to ``path`` atomically; :class:`FileExistsError` unless ``force``."""
    if path.exists() and not force:
        raise FileExistsError(f"{path}: already exists; pass --force to overwrite it")
    atomic_write(path, commented_config(preset))
