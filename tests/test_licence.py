"""Licence-clean by default: a booth made with ``kiosk config init --booth`` swaps with nothing
downloaded and runs no non-commercial weights; InSwapper (and the other non-commercial models)
runs only when a config names it and accepts the licence in ``models.accept_noncommercial_licence``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kiosk.booth.controls import ControlState
from kiosk.booth.faces import make_library
from kiosk.cli import main
from kiosk.config import parse_config
from kiosk.paths import package_file
from kiosk.processing.booth_stage import build_booth_processor
from kiosk.processing.models import licence_problems, swapper_mode
from kiosk.processing.stage import StageUnavailable
from kiosk.tools.standins import make_all

ROOT = Path(__file__).resolve().parent.parent
DEMO = package_file("data", "demo")
NON_COMMERCIAL_NAMES = ("inswapper", "det_10g", "det_500m", "det_2.5g", "w600k", "GPEN")


@pytest.mark.parametrize(
    ("models", "named"),
    [
        ("{swapper: inswapper_128.onnx}", "models.swapper: inswapper_128.onnx"),
        ("{swapper: classic, detector: det_10g.onnx}", "models.detector: det_10g.onnx"),
        ("{enhancer: GPEN-BFR-512.onnx}\nprocessing: {enhance: true}", "models.enhancer: GPEN-BFR-512.onnx"),
    ],
)
def test_config_check_refuses_non_commercial_weights_until_the_licence_is_accepted(
    models: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(f"models: {models}\n")
    assert main(["config", "check", str(cfg)]) == 1
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if named in x)  # one line per model, naming it
    assert line.startswith(f"{cfg}: ") and "non-commercial" in line
    assert "models.accept_noncommercial_licence: true" in line and "Traceback" not in err
    assert main(["models", "list", "--config", str(cfg)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(x.startswith("not run: ") and named in x for x in listed)
    if "swapper" in named:
        assert listed[-1].startswith("swapper in use: none"), listed[-1]
    accepted = models.replace("{", "{accept_noncommercial_licence: true, ", 1)
    cfg.write_text(f"models: {accepted}\n")
    assert main(["config", "check", str(cfg)]) == 0
    assert capsys.readouterr().out.strip() == f"{cfg}: OK"


def test_licence_clean_models_need_no_acceptance() -> None:
    # the classic swap with the bundled YuNet, GFPGAN (Apache-2.0) and a GPEN named but not enabled
    for text in (
        "{}",
        "{enhancer: GFPGANv1.4.onnx}\nprocessing: {enhance: true}",
        "{enhancer: GPEN-BFR-256.onnx}",
    ):
        assert licence_problems(parse_config(f"models: {text}", "<t>", env=False)) == [], text


def test_the_booth_stage_never_opens_non_commercial_weights_it_has_not_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file is there (stand-ins with the real contracts): without the key the stage is a
    one-line notice naming the files and the key, and no model session is created; with it, the
    neural swap is built."""
    import kiosk.inference.sessions as sessions

    models = tmp_path / "models"
    make_all(models)
    shutil.copy(DEMO / "source_face_fred_marshall_1961.jpg", tmp_path / "face.jpg")
    text = (
        "models: {dir: models, swapper: inswapper_128.onnx, enhancer: null, providers: {order: [cpu]}%s}\n"
        "processing: {source_face: face.jpg}\nfaces: {dir: null, cache_dir: cache}\n"
    )
    cfg = parse_config(text % "", "<t>", base_dir=tmp_path, env=False)
    opened: list[str] = []
    real = sessions.create_session
    monkeypatch.setattr(
        sessions, "create_session", lambda p, *a, **k: opened.append(str(p)) or real(p, *a, **k)
    )
    with pytest.raises(StageUnavailable) as err:
        build_booth_processor(cfg, make_library(cfg), ControlState())
    notice = err.value.notice
    assert "inswapper_128.onnx" in notice and "models.accept_noncommercial_licence: true" in notice
    assert "\n" not in notice and "models missing" not in notice and opened == []

    accepted = parse_config(
        text % ", accept_noncommercial_licence: true", "<t>", base_dir=tmp_path, env=False
    )
    proc = build_booth_processor(accepted, make_library(accepted), ControlState())
    assert proc.name.startswith("swap (") and proc.name.endswith("· non-commercial only"), proc.name


def test_auto_never_switches_to_non_commercial_weights_on_its_own(tmp_path: Path) -> None:
    make_all(tmp_path / "models")  # InSwapper, its embedder and det_10g all fetched
    for value, mode in (("false", "classic"), ("true", "neural")):
        text = f"models: {{swapper: auto, detector: auto, accept_noncommercial_licence: {value}}}"
        assert swapper_mode(parse_config(text, "<t>", base_dir=tmp_path, env=False)) == mode


def _stats(path: Path) -> dict:  # type: ignore[type-arg]
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


@pytest.mark.slow  # a kiosk process: models load, faces scan, ~15 s
@pytest.mark.gl
def test_a_fresh_booth_from_config_init_swaps_with_nothing_downloaded(tmp_path: Path) -> None:
    """``kiosk config init --booth`` with an empty data folder, one face photo in its faces folder
    and a still picture of a visitor instead of camera 0: the first run shows the photo's face
    swapped in by the classic swap (MIT), and no non-commercial model is opened."""
    data = tmp_path / "data"
    (data / "faces").mkdir(parents=True)
    shutil.copy(DEMO / "source_face_fred_marshall_1961.jpg", data / "faces")
    shutil.copy(DEMO / "visitor_eileen_collins_nasa.jpg", tmp_path / "visitor.jpg")
    env = {k: v for k, v in os.environ.items() if k not in ("KIOSK_MODELS_DIR", "KIOSK_CONFIG")}
    env.update(KIOSK_DATA_DIR=str(data), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    booth = tmp_path / "booth.yaml"

    def kiosk(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kiosk", *args], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=60, check=False, **kw,  # type: ignore[arg-type]
        )  # fmt: skip

    assert kiosk("config", "init", "--booth", str(booth)).returncode == 0
    values = yaml.safe_load(booth.read_text())
    assert (
        values["models"]["swapper"] == "classic" and values["models"]["accept_noncommercial_licence"] is False
    )
    assert kiosk("config", "check", str(booth)).stdout.strip() == f"{booth}: OK"
    listed = kiosk("models", "list", "--config", str(booth)).stdout
    assert "swapper in use: classic swap" in listed.splitlines()[-1] and "MIT" in listed.splitlines()[-1]
    # no camera here: the visitor is a still picture; a small window; the faces cache in tmp_path
    values["source"] = {"kind": "image", "path": str(tmp_path / "visitor.jpg"), "mirror": False}
    values["display"].update(fullscreen=False, width=640, height=360, max_fps=30)
    values["faces"]["cache_dir"] = str(tmp_path / "cache")
    booth.write_text(yaml.safe_dump(values))

    stats, shot = tmp_path / "s.json", tmp_path / "s.png"
    run = ["run", "--config", str(booth), "--headless", "--seconds", "90", "--stats-interval", "0.3"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiosk", *run, "--stats-json", str(stats), "--screenshot", str(shot)],
        env=env, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 80
        while time.monotonic() < deadline and proc.poll() is None:
            if _stats(stats).get("frames", {}).get("with_swapped_faces", 0) >= 5:
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, log = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if "EGL" in log and proc.returncode != 0:
        pytest.skip("no headless EGL here")
    assert proc.returncode == 0, log[-3000:]
    data_stats = _stats(stats)
    assert data_stats["processing"]["stage"].startswith("classic swap ("), data_stats["processing"]
    assert data_stats["processing"]["stage"].endswith("· MIT") and data_stats["processing"]["notice"] == ""
    assert data_stats["frames"]["with_swapped_faces"] >= 5, data_stats["frames"]
    assert data_stats["faces"]["names"] == ["source_face_fred_marshall_1961"]
    assert shot.is_file()
    # only the bundled MIT detector was opened: no non-commercial model is named in the log, and
    # nothing was downloaded into the data folder
    assert "face_detection_yunet_2023mar.onnx" in log or "classic swap" in log
    assert not any(name.lower() in log.lower() for name in NON_COMMERCIAL_NAMES), log[-3000:]
    assert not (data / "models").exists() or not any((data / "models").rglob("*.onnx"))


def test_models_fetch_downloads_no_non_commercial_weights_until_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = tmp_path / "usb"
    make_all(mirror)  # a local mirror holding every file (stand-ins)
    cfg = tmp_path / "kiosk.yaml"
    cfg.write_text(f"models: {{dir: {tmp_path / 'models'}, swapper: inswapper_128.onnx, enhancer: null}}\n")
    assert main(["models", "fetch", "--config", str(cfg), "--from", str(mirror), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "not fetched: models.swapper: inswapper_128.onnx" in err and "accept_noncommercial_licence" in err
    assert not any((tmp_path / "models").glob("*.onnx"))  # nothing non-commercial was downloaded


def test_doctor_names_the_licence_not_a_fetch_for_unaccepted_weights(tmp_path: Path) -> None:
    from kiosk.appliance.doctor.core import DoctorContext
    from kiosk.appliance.doctor.models import check_models

    cfg_path = tmp_path / "kiosk.yaml"
    cfg_path.write_text("models: {dir: models, swapper: inswapper_128.onnx, enhancer: null}\n")
    cfg = parse_config(cfg_path.read_text(), str(cfg_path), base_dir=tmp_path, env=False)
    results = {r.name: r for r in check_models(DoctorContext(cfg_path, cfg, True))}
    assert results["models"].ok, results["models"]  # not "missing: ... run kiosk models fetch"
    assert not results["licence"].ok and "inswapper_128.onnx" in results["licence"].detail
    assert "models.accept_noncommercial_licence: true" in results["licence"].fix


def test_kiosk_swap_runs_no_non_commercial_weights_until_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import cv2

    from kiosk.tools import standins

    make_all(tmp_path / "models")
    src, inp, out = tmp_path / "src.png", tmp_path / "in.png", tmp_path / "out.png"
    cv2.imwrite(str(src), standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),)))
    cv2.imwrite(str(inp), standins.white_square_frame(squares=((64, 64, 64),)))
    cfg = tmp_path / "kiosk.yaml"
    text = "models: {dir: models, swapper: inswapper_128.onnx, enhancer: null, providers: {order: [cpu]}%s}\n"
    cfg.write_text(text % "")
    args = ["swap", "--source", str(src), "--input", str(inp), "--output", str(out), "--config", str(cfg)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("kiosk swap: error: not run: ") and err.count("\n") == 1
    assert "inswapper_128.onnx" in err and "models.accept_noncommercial_licence: true" in err
    assert not out.exists()
    cfg.write_text(text % ", accept_noncommercial_licence: true")
    assert main(args) == 0 and out.is_file()


def test_every_way_of_opening_models_refuses_unaccepted_weights(tmp_path: Path) -> None:
    """``ModelSet.open`` (the pipeline of ``kiosk swap``, ``bench``, the benchmarks) and
    ``open_detector`` (``kiosk detect``) refuse what the config has not accepted, an enhancer
    turned on by the caller (``kiosk swap --enhance``) included; a one-line error, nothing opened."""
    from kiosk.inference.errors import ModelError
    from kiosk.processing.models import open_detector
    from kiosk.processing.pipeline import SwapPipeline
    from kiosk.tools.standins import make_gpen

    make_all(tmp_path / "models")
    make_gpen(tmp_path / "models" / "GPEN-BFR-256.onnx", 256)
    base = "models: {dir: models, providers: {order: [cpu]}, %s%s}\n"
    for models, enhance in (
        ("swapper: inswapper_128.onnx, enhancer: null", None),
        ("swapper: classic, detector: det_10g.onnx, enhancer: null", None),
        ("swapper: classic, enhancer: GPEN-BFR-256.onnx", True),  # processing.enhance is off
    ):
        cfg = parse_config(base % (models, ""), "<t>", base_dir=tmp_path, env=False)
        with pytest.raises(ModelError) as err:
            SwapPipeline.from_config(cfg, enhance=enhance)
        assert "\n" not in str(err.value) and "models.accept_noncommercial_licence: true" in str(err.value)
        accepted = parse_config(
            base % (models, ", accept_noncommercial_licence: true"), "<t>", base_dir=tmp_path, env=False
        )
        assert SwapPipeline.from_config(accepted, enhance=enhance) is not None
    cfg = parse_config(base % ("detector: det_10g.onnx", ""), "<t>", base_dir=tmp_path, env=False)
    with pytest.raises(ModelError, match="det_10g.onnx has non-commercial"):
        open_detector(cfg)
    clean = parse_config(
        base % ("swapper: classic, enhancer: GPEN-BFR-256.onnx", ""), "<t>", base_dir=tmp_path, env=False
    )
    assert SwapPipeline.from_config(clean, enhance=False).classic  # GPEN named but not run: fine
