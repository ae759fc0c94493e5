"""Fixtures for the inference/pipeline tests. Import them into a test module with
``from inference_fixtures import *  # noqa: F403``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import standins

from kiosk.config import KioskConfig, ModelsConfig, ProcessingConfig, ProvidersConfig
from kiosk.inference.sessions import ProviderOptions

SHARED_MODELS = Path(__file__).resolve().parents[1].parent / "shared" / "models"

__all__ = [
    "SHARED_MODELS",
    "cpu_only",
    "det_500m",
    "insightface_image",
    "make_cfg",
    "shared_model",
    "standin_dir",
    "standin_cfg",
    "t1_bgr",
]

cpu_only_config = ProvidersConfig.model_validate({"order": ["cpu"], "intra_op_threads": 2})
cpu_only = ProviderOptions.of(cpu_only_config)


def shared_model(name: str) -> Path:
    """A real model from ../shared/models, or skip the test with the reason."""
    p = SHARED_MODELS / name
    if not p.is_file():
        pytest.skip(f"{p} not present (../shared/models is only in the dev checkout)")
    return p


def insightface_image(name: str) -> Path:
    spec = importlib.util.find_spec("insightface")
    if spec is None or spec.origin is None:
        pytest.skip("insightface (test-only dependency) is not installed")
    p = Path(spec.origin).parent / "data" / "images" / name
    if not p.is_file():
        pytest.skip(f"{p} missing from the insightface package")
    return p


def make_cfg(models_dir: Path, **models: str | bool | None) -> KioskConfig:
    """A config of the stand-in models: the neural swap (InSwapper named, its non-commercial licence
    accepted as a booth must) unless ``models`` say otherwise."""
    neural: dict[str, object] = {"swapper": "inswapper_128.onnx", "accept_noncommercial_licence": True}
    mc = ModelsConfig.model_validate(
        {"dir": str(models_dir), "providers": cpu_only_config, **neural, **models}
    )
    proc = ProcessingConfig.model_validate({"det_size": 640, "max_faces": 8})
    return KioskConfig.model_validate({"models": mc, "processing": proc, "base_dir": models_dir})


@pytest.fixture(scope="session")
def standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("standin_models")
    standins.make_all(d)
    return d


@pytest.fixture(scope="session")
def standin_cfg(standin_dir: Path) -> KioskConfig:
    return make_cfg(standin_dir)


@pytest.fixture(scope="session")
def det_500m() -> Path:
    return shared_model("det_500m.onnx")


@pytest.fixture(scope="session")
def t1_bgr():  # type: ignore[no-untyped-def]
    import cv2

    return cv2.imread(str(insightface_image("t1.jpg")))
