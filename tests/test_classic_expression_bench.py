"""The expression benchmark's judge-independent math: openings from 68 points, Pearson r."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "classic_expression.py"
_SPEC = importlib.util.spec_from_file_location("classic_expression", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["classic_expression"] = bench
_SPEC.loader.exec_module(bench)


def face(mouth_gap: float, eye_height: float, scale: float = 1.0) -> np.ndarray:
    """68 points: eyes 6 points each (width 1, given height), centres 3 apart, an inner-lip gap."""
    p = np.zeros((68, 2), np.float64)
    for start, cx in ((36, 0.0), (42, 3.0)):
        h = eye_height / 2
        p[start : start + 6] = [
            (cx - 0.5, 0),
            (cx - 0.2, -h),
            (cx + 0.2, -h),
            (cx + 0.5, 0),
            (cx + 0.2, h),
            (cx - 0.2, h),
        ]
    for top, bottom, x in ((61, 67, 1.0), (62, 66, 1.5), (63, 65, 2.0)):
        p[top], p[bottom] = (x, 3.0), (x, 3.0 + mouth_gap)
    return p * scale


def test_openings_are_scale_free_and_match_the_construction() -> None:
    for scale in (1.0, 7.5):
        pts = face(0.6, 0.4, scale)
        assert bench.inter_ocular(pts) == pytest.approx(3.0 * scale)
        assert bench.mouth_opening(pts) == pytest.approx(0.2)  # 0.6 / 3
        assert bench.eye_opening(pts) == pytest.approx(0.4)  # (0.4 + 0.4) / (2 * 1)


def test_openings_work_on_a_batch_and_pearson_follows_them() -> None:
    gaps = np.linspace(0.0, 1.0, 10)
    batch = np.stack([face(g, 0.3) for g in gaps])
    mouth = bench.mouth_opening(batch)
    assert mouth.shape == (10,)
    assert bench.pearson(gaps, mouth) == pytest.approx(1.0)
    assert bench.pearson(gaps, -mouth) == pytest.approx(-1.0)


def test_pearson_skips_missing_frames_and_refuses_flat_or_short_series() -> None:
    a = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    assert bench.pearson(a, a * 2 + 1) == pytest.approx(1.0)
    assert np.isnan(bench.pearson(a, np.ones(5)))
    assert np.isnan(bench.pearson(np.array([1.0, 2.0]), np.array([1.0, 2.0])))


def test_read_clip_starts_at_the_frame_asked_for(tmp_path: Path) -> None:
    """``--start`` reads a long clip in parts: frame k of a part is frame start + k of the clip."""
    import cv2

    path = tmp_path / "counting.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (32, 24))
    for i in range(12):
        writer.write(np.full((24, 32, 3), 20 * i, np.uint8))  # frame i is grey 20 i
    writer.release()
    part = bench.read_clip(path, frames=3, scale=2.0, start=5)
    assert [f.shape for f in part] == [(48, 64, 3)] * 3
    assert [round(float(f.mean()) / 20) for f in part] == [5, 6, 7]
    assert len(bench.read_clip(path, frames=99, scale=1.0, start=10)) == 2
    with pytest.raises(SystemExit, match="from frame 12"):
        bench.read_clip(path, frames=3, scale=1.0, start=12)


def _part(
    tmp: Path, name: str, start: int, mouth_in: list[float], mouth_out: list[float], closer: float
) -> Path:
    d = tmp / name
    d.mkdir()
    n = len(mouth_in)
    report = {
        "start": start,
        "frames": n,
        "input": {"mouth": mouth_in, "eye": [0.3] * (n - 1) + [None]},
        "variants": {
            "bundled": {"closer_to_source": closer, "series": {"mouth": mouth_out, "eye": [0.3] * n}}
        },
    }
    (d / "expression.json").write_text(__import__("json").dumps(report))
    return d


def test_pool_takes_r_over_all_the_parts_frames(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each part alone follows perfectly (r 1.0), but the second part's output is offset: the
    whole clip's r is lower, and --pool says so; the closer-to-source share is frame-weighted."""
    a = _part(tmp_path, "a", 0, [0.0, 0.1, 0.2, 0.3], [0.0, 0.1, 0.2, 0.3], 1.0)
    b = _part(tmp_path, "b", 4, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.6, 0.7, 0.8, 0.9, 1.0], 0.5)
    assert bench.pool([a, b]) == 0
    out = capsys.readouterr().out
    x = np.array([0.0, 0.1, 0.2, 0.3] + [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    y = np.array([0.0, 0.1, 0.2, 0.3] + [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert "2 parts (from frames 0, 4), 10 frames, 10 judged" in out
    assert f"mouth r {bench.pearson(x, y):.2f}," in out and "mouth r 1.00" not in out
    assert "closer to the source on 70% of frames" in out  # (4 * 1.0 + 6 * 0.5) / 10
    with pytest.raises(SystemExit, match=r"nope.expression\.json: No such file"):
        bench.pool([a, tmp_path / "nope"])
