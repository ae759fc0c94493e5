"""The kiosk's configuration: one YAML file validated by pydantic.

Every section is a frozen pydantic model with ``extra="forbid"``, bounds and a description
per field (:mod:`kiosk.config.schema`). :func:`load_config` (:mod:`kiosk.config.loading`) returns a
:class:`KioskConfig` or raises :class:`ConfigError` whose ``problems`` are one-line messages of the
form ``file:line: key.path: message`` (:mod:`kiosk.config.yaml_safe`); :mod:`kiosk.config.reference`
generates the reference of every key from the fields.
"""

# The package's names are the schema's (every section model) and these; see pyproject's ruff
# per-file-ignores for this file (re-exports, and the schema's star import).
from kiosk.config.loading import SYSTEM_CONFIG, default_config_path, dump_config, load_config, parse_config
from kiosk.config.reference import config_table, field_facts
from kiosk.config.schema import *
from kiosk.config.yaml_safe import (
    MAX_INT_DIGITS,
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    ConfigError,
    read_text_bounded,
    safe_yaml,
)
