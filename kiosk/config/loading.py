"""Loading a config: where it is found, how relative paths and the environment apply, and the
validation of its text against the schema."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kiosk.config.schema import KioskConfig
from kiosk.config.yaml_safe import (
    ConfigError,
    _clip,
    _describe,
    _format_loc,
    _line_index,
    read_text_bounded,
    safe_yaml,
)
from kiosk.paths import MODELS_DIR_ENV, bundled_config, data_dir, is_bundled_config


def _section_keys(loc: tuple[Any, ...]) -> tuple[str, list[str]] | None:
    """The section at ``loc`` (``("source", "camera")``) and its valid keys; None when ``loc`` is
    not a section of the schema."""
    model: type[BaseModel] = KioskConfig
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        ann = field.annotation if field is not None else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    keys = [name for name, field in model.model_fields.items() if not field.exclude]
    return ".".join(map(str, loc)), keys


def parse_config(
    text: str, path: str = "<config>", base_dir: Path | None = None, *, env: bool = True
) -> KioskConfig:
    """Validate YAML ``text``; raise :class:`ConfigError` with one line per problem. ``env``: apply
    the environment's overrides (``$KIOSK_MODELS_DIR``)."""
    node, data = safe_yaml(text, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            path, [f"{path}:1: the file must be a mapping of sections (source:, display:, ...)"]
        )
    try:
        lines = _line_index(node)
    except TypeError:  # a complex key (a list or mapping used as a key): no line numbers then
        lines = {}
    try:
        cfg = KioskConfig.model_validate(data)
    except ValidationError as exc:
        problems: list[tuple[int, str]] = []
        for err in exc.errors():
            loc, text_loc = _format_loc(tuple(err["loc"]))
            line_no = 0
            for n in range(len(loc), 0, -1):
                if loc[:n] in lines:
                    line_no = lines[loc[:n]]
                    break
            where = f"{path}:{line_no}" if line_no else path
            if err["type"] == "extra_forbidden":  # the list of valid keys comes from the schema:
                # bounded, so only the user's part of the line is clipped
                described = _describe(dict(err), _section_keys(loc[:-1]))
                problems.append((line_no, f"{_clip(f'{where}: {text_loc}')}: {described}"))
                continue
            problems.append((line_no, _clip(f"{where}: {text_loc}: {_describe(dict(err))}")))
        raise ConfigError(path, [text for _, text in sorted(problems, key=lambda p: p[0])]) from None
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. unhashable keys deep inside
        raise ConfigError(
            path, [_clip(f"{path}: cannot be used as a config ({type(exc).__name__}: {exc})")]
        ) from None
    cfg = cfg.model_copy(update={"base_dir": base_dir or Path.cwd()})
    return _apply_env(cfg) if env else cfg


#: Where an installed booth keeps its config (deploy/install.sh).
SYSTEM_CONFIG = Path("/etc/faceswap-kiosk/kiosk.yaml")


def default_config_path() -> Path:
    """The config used when none is named: ``$KIOSK_CONFIG``, else the installed booth config,
    else the booth config shipped in the package (``kiosk/configs/default.yaml``)."""
    env = os.environ.get("KIOSK_CONFIG")
    if env:
        return Path(env)
    if SYSTEM_CONFIG.exists():
        return SYSTEM_CONFIG
    return bundled_config("default")


def _config_base_dir(p: Path) -> Path:
    """Relative paths in a config resolve against its folder; those in the configs shipped in the
    package (which must not point into site-packages) against the kiosk's data folder."""
    return data_dir() if is_bundled_config(p) else p.resolve().parent


def _apply_env(cfg: KioskConfig) -> KioskConfig:
    """``$KIOSK_MODELS_DIR`` replaces ``models.dir`` of every config (models on another disk, CI)."""
    models_dir = os.environ.get(MODELS_DIR_ENV)
    if not models_dir:
        return cfg
    return cfg.model_copy(update={"models": cfg.models.model_copy(update={"dir": models_dir})})


def load_config(path: str | Path, *, env: bool = True) -> KioskConfig:
    """Read and validate the YAML file at ``path`` (``env``: see :func:`parse_config`)."""
    p = Path(path)
    text = read_text_bounded(p)
    return parse_config(text, str(p), base_dir=_config_base_dir(p), env=env)


def dump_config(cfg: KioskConfig) -> str:
    """The effective config as YAML, defaults filled in."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
