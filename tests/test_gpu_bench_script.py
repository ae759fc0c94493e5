"""``scripts/gpu_bench.sh``'s variant matrix (``scripts/gpu_bench_matrix.py``): the variants, the
configs it generates, and skipping a variant whose key this build lacks. The GPU run itself is
not a test (CI has no GPU); ``gpu_bench.sh --cpu`` is its dry run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kiosk.config import KioskConfig

ROOT = Path(__file__).resolve().parents[1]


def _matrix():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "gpu_bench_matrix", ROOT / "scripts" / "gpu_bench_matrix.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bench_matrix"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_variants_cover_the_matrix_baselines_first() -> None:
    m = _matrix()
    vs = m.variants()
    assert len(vs) == 2 * 2 * 2 * 2 * 2 and len({v.name for v in vs}) == len(vs)
    first = vs[:2]
    assert {v.provider for v in first} == {"cuda", "tensorrt-fp16"}
    assert all(v.faces == 1 and not v.enhance and v.mode == "synced" and not v.pipelined for v in first)
    assert all(v.pipelined for v in vs[16:]) and not any(v.pipelined for v in vs[:16])


def test_configs_validate_and_missing_keys_skip(tmp_path: Path) -> None:
    m = _matrix()
    v = m.Variant("tensorrt-fp16", 4, True, "live", True)
    cfg, missing = m.config_for(v, tmp_path, {"display.mode": False, "processing.pipelined": False})
    assert missing == ["display.mode", "processing.pipelined"]
    base = m.Variant("tensorrt-fp16", 4, True, "synced", False)
    cfg, missing = m.config_for(base, tmp_path, {"display.mode": False, "processing.pipelined": False})
    assert missing == [] and "mode" not in cfg["display"] and "pipelined" not in cfg["processing"]
    parsed = KioskConfig.model_validate(yaml.safe_load(yaml.safe_dump(cfg)))
    assert parsed.models.providers.order[0] == "tensorrt" and parsed.models.providers.trt_fp16
    assert parsed.processing.enhance and parsed.processing.max_faces == 4
    cfg, missing = m.config_for(v, tmp_path, {"display.mode": True, "processing.pipelined": True})
    assert missing == [] and cfg["display"]["mode"] == "live" and cfg["processing"]["pipelined"] is True


def test_probe_keys_asks_kiosk_config_check(tmp_path: Path) -> None:
    m = _matrix()
    kiosk = Path(sys.executable).parent / "kiosk"
    if not kiosk.is_file():
        pytest.skip("no kiosk command beside this python")
    keys = m.probe_keys(str(kiosk), tmp_path)
    fields = KioskConfig.model_fields
    assert keys["display.mode"] == ("mode" in fields["display"].annotation.model_fields)  # type: ignore[union-attr]
    assert keys["processing.pipelined"] == (
        "pipelined" in fields["processing"].annotation.model_fields  # type: ignore[union-attr]
    )


def test_table_shows_skipped_and_measured_rows() -> None:
    m = _matrix()
    v = m.Variant("cuda", 1, False, "synced", False)
    result = {
        "machine": {"provider": "CUDAExecutionProvider"},
        "stages_ms": {k: {"p50": 1.0, "p95": 2.0} for k in ("detect", "swap", "enhance", "total")},
        "runtime": {
            "fps": {"processing": 30.0, "render": 60.0},
            "latency_ms": {"capture_to_display_p50": 40.0},
        },
    }
    runs = [
        {"variant": m.asdict(v), "status": "ok", "result": result},
        {
            "variant": m.asdict(m.Variant("cuda", 1, False, "live", False)),
            "status": "skipped",
            "reason": "display.mode not in this build's config",
        },
    ]
    text = m.table(runs)
    assert "| cuda | 1 | off | synced | off | CUDA | 30.0 | 60.0 | 40.0 |" in text
    assert "skipped: display.mode not in this build's config" in text


def test_script_help_and_bad_argument() -> None:
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_bench.sh"), "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "--cpu" in r.stdout
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_bench.sh"), "--bogus"], capture_output=True, text=True
    )
    assert r.returncode == 2 and "unknown argument --bogus" in r.stderr
