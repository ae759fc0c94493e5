"""One adapter convention: every plain option record a feature package takes is built from its config
section by ``X.of(section)``, and the record's defaults are the config's defaults (a field renamed or
added on one side only fails here)."""

from __future__ import annotations

import dataclasses

import pytest

from kiosk.config import KioskConfig
from kiosk.inference.color import ColorOptions
from kiosk.inference.mask import MaskOptions
from kiosk.inference.sessions import ProviderOptions
from kiosk.processing.thread import ErrorPolicy
from kiosk.processing.tracking import TrackingOptions
from kiosk.render.options import DisplayOptions

DEFAULTS = KioskConfig()
RECORDS = [
    (ProviderOptions, DEFAULTS.models.providers),
    (DisplayOptions, DEFAULTS.display),
    (MaskOptions, DEFAULTS.mask),
    (ColorOptions, DEFAULTS.processing),
    (TrackingOptions, DEFAULTS.processing),
    (ErrorPolicy, DEFAULTS.processing),
]


@pytest.mark.parametrize(("record", "section"), RECORDS, ids=lambda v: getattr(v, "__name__", ""))
def test_each_record_is_built_by_of_and_defaults_to_the_config(record: type, section: object) -> None:
    assert dataclasses.is_dataclass(record) and record.__dataclass_params__.frozen  # type: ignore[attr-defined]
    built = record.of(section)  # type: ignore[attr-defined]
    assert built == record(), f"{record.__name__}.of(config defaults) differs from its own defaults"


def test_of_reads_the_section_not_the_defaults() -> None:
    cfg = KioskConfig.model_validate(
        {
            "mask": {"shape": "face", "padding": [0.1, 0.05, 0.0, 0.05], "mouth": 1.0},
            "processing": {"color_correction": "mean_std", "color_strength": 0.5, "detect_every": 3},
        }
    )
    assert MaskOptions.of(cfg.mask) == MaskOptions(shape="face", padding=(0.1, 0.05, 0.0, 0.05), mouth=1.0)
    assert ColorOptions.of(cfg.processing) == ColorOptions(method="mean_std", strength=0.5)
    assert TrackingOptions.of(cfg.processing).detect_every == 3
