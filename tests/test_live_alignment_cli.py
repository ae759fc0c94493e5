"""``benchmarks/live_alignment.py --detector``: the chosen file is the detector of the whole table
(results, truth, the detector column and the "<detector> alone" floor row), and the printed text
names it and its det_size. The full benchmark is not a test (README shows its figures); this runs
a few frames of each clip."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kiosk.tools.motion_videos import SHARED, astronaut_scene, group_scene

ROOT = Path(__file__).resolve().parents[1]


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("live_alignment", ROOT / "benchmarks" / "live_alignment.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["live_alignment"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_missing_detector_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no_such_det.onnx"
    assert _bench().main(["--detector", str(missing)]) == 2
    out = capsys.readouterr().out
    assert f"needs {missing} (--detector)" in out


@pytest.mark.slow
def test_table_names_the_chosen_detector_and_det_size(capsys: pytest.CaptureFixture[str]) -> None:
    path = SHARED / "models" / "det_2.5g.onnx"
    if not path.is_file() or astronaut_scene() is None or group_scene() is None:
        pytest.skip("needs ../shared/models/det_2.5g.onnx, the astronaut photo and insightface's t1.jpg")
    bench = _bench()
    assert (
        bench.main(["--detector", str(path), "--det-size", "256", "--frames", "16", "--result-frames", "4"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("detector: ") and "(det_2.5g, det_size=256)" in out.splitlines()[0]
    assert out.count("det_2.5g alone") == 8  # one floor row per clip
    assert "det_500m" not in out
