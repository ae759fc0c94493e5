"""Model specs: well-formed, the defaults are known files, and models/README.md agrees with the code."""

from __future__ import annotations

import re
from pathlib import Path

from kiosk.config import ModelsConfig
from kiosk.inference.specs import KNOWN_MODELS, ROLES, spec_for_file

README = Path(__file__).resolve().parents[1] / "models" / "README.md"


def test_specs_are_well_formed() -> None:
    ids = [s.id for s in KNOWN_MODELS]
    assert len(ids) == len(set(ids))
    for s in KNOWN_MODELS:
        for h in s.known_hashes:
            assert re.fullmatch(r"[0-9a-f]{64}", h), (s.id, h)
        assert s.licence and s.inputs and s.outputs
        assert s.sha256 is None or s.sha256_source, s.id
        assert all(u.startswith("https://") for u in s.urls)


def test_default_files_are_known() -> None:
    """Every default is a known file with a hash and a source, or the built-in classic swapper (no
    file: the booth's licence-clean default); the detector's ``auto`` is the neural swap's det_10g
    (fetched) or the YuNet the package carries (hash checked, nothing to fetch)."""
    from kiosk.inference.classic import CLASSIC
    from kiosk.inference.specs import BUNDLED_DETECTOR
    from kiosk.processing.models import AUTO, NEURAL_DEFAULTS

    defaults = ModelsConfig()
    for role in ROLES:
        name = getattr(defaults, role)
        if name == AUTO:
            assert role in NEURAL_DEFAULTS, f"{role} has no auto choice"
            neural = spec_for_file(role, NEURAL_DEFAULTS[role])
            assert neural.sha256 is not None and neural.urls, f"{role} auto's neural file has no hash or URL"
            if role == "detector":
                bundled = spec_for_file(role, BUNDLED_DETECTOR.split("/")[-1])
                assert bundled.sha256 is not None, f"the bundled {BUNDLED_DETECTOR} has no hash"
            continue
        if role == "swapper" and name == CLASSIC:
            continue
        spec = spec_for_file(role, name)
        assert spec.sha256 is not None and spec.urls, f"{role} default {name} has no hash or URL"


def test_unknown_file_keeps_the_contract_without_identity() -> None:
    spec = spec_for_file("swapper", "/somewhere/my_swapper.onnx")
    assert spec.family == "inswapper" and spec.sha256 is None and not spec.urls
    assert spec_for_file("detector", "yunet_custom.onnx").family == "yunet"


def test_readme_manifest_matches_code() -> None:
    text = README.read_text(encoding="utf-8")
    for s in KNOWN_MODELS:
        assert s.file in text, s.file
        for h in s.known_hashes:
            assert h in text, f"{s.file}: {h} missing from models/README.md"
    documented = set(re.findall(r"`([0-9a-f]{64})`", text))
    known = {h for s in KNOWN_MODELS for h in s.known_hashes}
    assert documented <= known, documented - known
