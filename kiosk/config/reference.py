"""The config reference generated from the schema's fields (``kiosk config doc``, ``config init``,
docs/configuration.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kiosk.config.schema import KioskConfig


def field_facts(field: Any) -> tuple[str, list[str]]:
    """The default (as text) and the limits (``≥0``, ``fit / fill``, ...) of a pydantic field."""
    ann = field.annotation
    default = field.get_default(call_default_factory=True)
    if isinstance(default, dict):
        default_text = "see below" if len(str(default)) > 60 else str(default)
    else:
        default_text = (
            "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
        )
    limits = []
    for meta in field.metadata:
        for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("multiple_of", "×")):
            v = getattr(meta, attr, None)
            if v is not None:
                limits.append(f"{sym}{v}")
    args = getattr(ann, "__args__", ())
    literal = (
        [a for a in args if not isinstance(a, type)]
        if "Literal" in str(ann) and "list" not in str(ann)
        else []
    )
    if literal:
        limits.append(" / ".join(map(str, literal)))
    return default_text, limits


def config_table() -> str:
    """A Markdown table of every config key with its default, limits and description."""
    rows = ["| key | default | limits | description |", "|---|---|---|---|"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
                continue
            default_text, limits = field_facts(field)
            desc = (field.description or "").replace("|", "\\|")
            rows.append(f"| `{prefix}{name}` | `{default_text}` | {' '.join(limits)} | {desc} |")

    walk(KioskConfig, "")
    return "\n".join(rows)
