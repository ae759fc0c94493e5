"""Plain option records for the feature packages, and the one way to fill them from config.

``kiosk.inference`` and ``kiosk.render`` take frozen dataclasses (defined beside the code that
reads them) instead of the pydantic config, so they can be used and tested without it. Each such
dataclass names its fields exactly like the config section it mirrors; :func:`copy_fields` reads
them by name, so a field added on both sides needs no converter code. This module imports nothing
of the kiosk.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def copy_fields(cls: type[T], src: Any) -> T:
    """An instance of dataclass ``cls`` with every field read from the same-named attribute of ``src``
    (a config section). Sequences become tuples, so the record stays immutable and hashable."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        v = getattr(src, f.name)
        values[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**values)
