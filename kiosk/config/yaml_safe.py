"""Reading a config file safely: any bytes give one-line problems in bounded time and memory.

:func:`safe_yaml` parses YAML text with limits on size, nesting, aliases and numbers;
:class:`ConfigError` carries one line per problem (``file:line: key.path: message``).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kiosk.util.files import (
    FileTooLargeError,
    NotRegularFileError,
    read_regular_file,
    regular_file_kind,
    shown,
)


@dataclass
class ConfigError(Exception):
    """A config file could not be loaded. ``problems`` holds one line per problem."""

    path: str
    problems: list[str]

    def __str__(self) -> str:
        return "\n".join(self.problems)


def _line_index(node: yaml.Node | None, prefix: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each key path in a composed YAML document to its 1-based line number."""
    out: dict[tuple[Any, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            path = (*prefix, key)
            out[path] = key_node.start_mark.line + 1
            out.update(_line_index(value_node, path))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = (*prefix, i)
            out[path] = item.start_mark.line + 1
            out.update(_line_index(item, path))
    return out


def _describe(err: dict[str, Any], valid_keys: tuple[str, list[str]] | None = None) -> str:
    """One problem in words. ``valid_keys``: (section, its keys) for an unknown key, named in the
    message with the closest spelling, so the fix needs no other command."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        if valid_keys is None:
            return "unknown key (remove it or check the spelling; `kiosk config doc` lists every key)"
        section, keys = valid_keys
        loc = err.get("loc") or ()
        typed = str(loc[-1]) if loc else ""
        close = difflib.get_close_matches(typed, keys, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        where = f"valid keys of {section}" if section else "valid sections"
        return f"unknown key{hint}; {where}: {', '.join(keys)} (`kiosk config doc` describes every key)"
    if kind == "literal_error" and "expected" in ctx:
        options = str(ctx["expected"]).replace("'", "").replace(" or ", ", ")
        return f"must be one of {options}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg[:1].lower() + msg[1:]


def _format_loc(loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], str]:
    """Drop pydantic's union/type tags from a location and render it as ``a.b[0].c``."""
    clean: list[Any] = []
    for part in loc:
        if isinstance(part, str) and (part in {"int", "str", "float", "bool", "none"} or "[" in part):
            continue
        clean.append(part)
    text = ""
    for part in clean:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return tuple(clean), text or "(top level)"


#: Bounds on any YAML the kiosk reads (config, faces.yaml): a kiosk config is a few KiB.
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32  # nested mappings/lists
MAX_YAML_NODES = 20_000  # values after alias expansion ("billion laughs" stops here)
MAX_INT_DIGITS = 18  # no setting needs more; also keeps 10**100000 out of int()
_MAX_LINE = 300  # longest problem line shown


def _clip(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


def _yaml_loader() -> type[yaml.SafeLoader]:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[no-any-return]


def _check_yaml_shape(text: str, path: str) -> None:
    """Walk the YAML event stream once (no recursion, no expansion) and refuse documents that are
    too deep or whose aliases would expand past :data:`MAX_YAML_NODES` values."""
    sizes: dict[str, int] = {}  # anchor -> expanded size of the anchored node
    stack: list[list[Any]] = [[None, 0]]  # [anchor, size so far] per open collection
    for event in yaml.parse(text, Loader=_yaml_loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            stack.append([event.anchor, 1])
            if len(stack) - 1 > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise ConfigError(
                    path, [f"{path}:{line}: nested deeper than {MAX_YAML_DEPTH} levels (flatten the file)"]
                )
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, n = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, n = event.anchor, 1
            plain = event.implicit[0] and not event.style
            digits = sum(c.isdigit() for c in event.value)
            if plain and digits > MAX_INT_DIGITS and re.fullmatch(r"[-+]?[0-9_]+", event.value):
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise ConfigError(
                    path, [f"{path}:{line}: number with {digits} digits is out of range (use a sane value)"]
                )
        elif isinstance(event, yaml.AliasEvent):
            anchor, n = None, sizes.get(event.anchor or "", 1)
        else:
            continue
        if anchor:
            sizes[anchor] = n
        stack[-1][1] += n
        if stack[0][1] + sum(s[1] for s in stack[1:]) > MAX_YAML_NODES:
            raise ConfigError(
                path,
                [f"{path}: more than {MAX_YAML_NODES} values once aliases are expanded (remove the aliases)"],
            )


def _check_numbers(data: Any, path: str) -> None:
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(path, [f"{path}: number {item} is out of range (use a finite value)"])


def safe_yaml(text: str, path: str = "<config>") -> tuple[yaml.Node | None, Any]:
    """Parse untrusted YAML ``text`` within bounded time and memory.

    Returns (composed node, data). Raises :class:`ConfigError` with one line for any text: too
    large, too deep, alias bombs, out-of-range numbers, syntax errors, tabs, and anything else
    the parser may raise."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(
            path, [f"{path}: {len(text)} characters is too large for a config (at most {MAX_YAML_BYTES})"]
        )
    try:
        _check_yaml_shape(text, path)
        loader = _yaml_loader()
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        _check_numbers(data, path)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        bad_line = text.splitlines()[mark.line : mark.line + 1] if mark is not None else []
        if bad_line and "\t" in bad_line[0]:
            problem = f"{problem}: a tab; indent with spaces, not tabs"
        raise ConfigError(
            path, [_clip(f"{path}{line}: YAML syntax error: {problem} (fix the indentation/quoting)")]
        ) from None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        raise ConfigError(
            path, [_clip(f"{path}: cannot be read as YAML ({type(exc).__name__}: {exc})")]
        ) from None
    return node, data


def read_text_bounded(path: Path, limit: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of ``path``, at most ``limit`` bytes; :class:`ConfigError` otherwise."""
    try:  # a regular file only: a FIFO or device at the path is refused, never opened to block
        raw = read_regular_file(path, limit)
    except FileTooLargeError:
        raise ConfigError(
            str(path), [f"{shown(path)}: larger than {limit} bytes; this is not a kiosk config"]
        ) from None
    except NotRegularFileError:
        what = regular_file_kind(path) or "not a regular file"
        raise ConfigError(
            str(path), [f"{shown(path)}: is {what}, not a config file; replace it with the YAML file"]
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            str(path),
            [f"{path}: config file not found (check the path, or write one: kiosk config init {path})"],
        ) from None
    except OSError as exc:
        raise ConfigError(
            str(path), [_clip(f"{path}: cannot read the file: {exc.strerror or exc}")]
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(path),
            [f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8"],
        ) from None
