"""SwapPipeline public API, SwapProcessor and the stage's builder, build_booth_processor, for a
single source face (stand-in models; real det_500m and insightface's photos where available)."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import standins
from inference_fixtures import *  # noqa: F403
from inference_fixtures import insightface_image, make_cfg

from kiosk.booth.controls import ControlState
from kiosk.booth.faces import make_library
from kiosk.config import KioskConfig
from kiosk.inference.errors import ImageError, ModelCorruptError, ModelSignatureError, NoFaceError
from kiosk.processing.booth_stage import build_booth_processor
from kiosk.processing.models import missing_models, read_image
from kiosk.processing.pipeline import SwapPipeline
from kiosk.processing.stage import PassThrough, Processor, StageUnavailable
from kiosk.processing.swap_stage import SwapProcessor
from kiosk.types import SwapResult

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SOURCE = standins.white_square_frame(h=256, w=256, squares=((96, 96, 64),))
FRAME = standins.white_square_frame(h=360, w=640, squares=((64, 64, 64), (384, 160, 64)))


@pytest.fixture(scope="module")
def pipe(standin_cfg: KioskConfig) -> SwapPipeline:
    p = SwapPipeline.from_config(standin_cfg)
    p.set_source(SOURCE)
    return p


def test_public_api(pipe: SwapPipeline) -> None:
    faces = pipe.detect(FRAME)
    assert len(faces) == 2
    out = pipe.process(FRAME)
    assert out.shape == FRAME.shape and out.dtype == np.uint8 and out is not FRAME
    assert (out != FRAME).any()
    assert pipe.times.faces == 2 and pipe.times.detect_ms > 0


def test_old_attribute_names_are_the_collaborators_state(standin_cfg: KioskConfig) -> None:
    """The pipeline's attributes are its collaborators' own: reading one reads the owner's, the
    assignable ones (a stand-in swapper, parser, mask builder, the enhance toggle, the tracker)
    write through to the one owner, and the others refuse assignment instead of shadowing it."""
    from kiosk.inference.classic import ClassicSwapper
    from kiosk.inference.mask import MaskBuilder

    p = SwapPipeline.from_config(standin_cfg)
    assert p.detector is p.models.detector is p.finder.detector
    assert p.masks is p.face_step.masks and p.tracker is p.finder.tracker
    classic = ClassicSwapper()
    p.swapper = classic
    assert p.models.swapper is classic and p.classic
    masks = MaskBuilder()
    p.masks = masks
    assert p.face_step.masks is masks
    p.enhance = False
    assert p.face_step.enhance is False
    with pytest.raises(AttributeError, match="read-only"):
        p.detector = p.detector


def test_process_changes_only_the_face_regions(pipe: SwapPipeline) -> None:
    frame = FRAME.copy()
    out = pipe.process(frame)
    np.testing.assert_array_equal(frame, FRAME)  # input untouched
    changed = (out != FRAME).any(axis=2)
    ys, xs = np.nonzero(changed)
    faces = pipe.detect(FRAME)
    for y, x in zip(ys[::50], xs[::50], strict=True):
        assert any(
            f.box_xyxy[0] - 80 <= x <= f.box_xyxy[2] + 80 and f.box_xyxy[1] - 80 <= y <= f.box_xyxy[3] + 80
            for f in faces
        )
    assert not changed[:, 600:].any()


def test_no_face_in_source(standin_cfg: KioskConfig) -> None:
    p = SwapPipeline.from_config(standin_cfg)
    with pytest.raises(NoFaceError, match="no face"):
        p.set_source(np.full((200, 200, 3), 80, np.uint8))
    with pytest.raises(RuntimeError, match="set_source"):
        p.process(FRAME)


def test_source_latent_is_cached(pipe: SwapPipeline) -> None:
    before = dict(pipe.sources._latents)
    pipe.set_source(SOURCE)
    assert pipe.sources._latents.keys() == before.keys()


def test_enhancer(standin_cfg: KioskConfig) -> None:
    p = SwapPipeline.from_config(standin_cfg, enhance=True)
    p.set_source(SOURCE)
    out = p.process(FRAME)
    assert out.shape == FRAME.shape and p.times.enhance_ms > 0


def test_processor_writes_into_the_slot(pipe: SwapPipeline) -> None:
    proc = SwapProcessor(pipe)
    assert proc.name.startswith("swap (CPUExecutionProvider")
    slot = SwapResult(frame_bgr=np.zeros_like(FRAME))
    buf = slot.frame_bgr
    proc.process(FRAME, slot)
    assert slot.frame_bgr is buf and (buf != 0).any()
    assert len(slot.faces) == 2
    sf = slot.faces[0]
    assert sf.crop_bgr.shape == (128, 128, 3) and sf.affine.shape == (2, 3)
    proc.process(np.zeros((360, 640, 3), np.uint8), slot)  # no faces: plain copy
    assert slot.faces == [] and not slot.frame_bgr.any()


def test_processor_leaves_errors_to_the_inference_thread(pipe: SwapPipeline) -> None:
    """One error policy: the processor catches nothing; the inference thread's ladder decides."""
    proc = SwapProcessor(pipe)
    bad = SwapResult(frame_bgr=np.zeros((5, 5, 3), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        proc.process(np.zeros((10, 10, 3), np.uint8), bad)


def test_processor_sets_faces_pasted_by_composite(pipe: SwapPipeline) -> None:
    for composite, pasted in (("cpu", True), ("gpu", False)):
        proc = SwapProcessor(pipe, composite=composite)
        slot = SwapResult(frame_bgr=np.zeros_like(FRAME), faces_pasted=not pasted)
        proc.process(FRAME, slot)
        assert slot.faces_pasted is pasted and len(slot.faces) == 2
        if not pasted:
            assert np.array_equal(slot.frame_bgr, FRAME)  # the camera frame, crops for the shader


# -- the builder, for a single source face ---------------------------------------------------------
# (was swap_stage.build_processor, which returned a pass-through for a broken model: the one
# builder raises StageUnavailable, as the kiosk has always had it)
def _cfg_with_source(models_dir: Path, tmp_path: Path, **kw: object) -> KioskConfig:
    src = tmp_path / "face.png"
    cv2.imwrite(str(src), SOURCE)
    cfg = make_cfg(models_dir, **kw)  # type: ignore[arg-type]
    cache = str(tmp_path / "face-cache")
    return cfg.model_copy(
        update={
            "processing": cfg.processing.model_copy(update={"source_face": str(src)}),
            "faces": cfg.faces.model_copy(update={"cache_dir": cache}),
        }
    )


def _build(cfg: KioskConfig) -> Processor:
    return build_booth_processor(cfg, make_library(cfg), ControlState())


def test_build_processor_ready(standin_dir: Path, tmp_path: Path) -> None:
    proc = _build(_cfg_with_source(standin_dir, tmp_path))
    assert isinstance(proc, SwapProcessor) and proc.library is not None  # the photo, as a library


def test_build_processor_models_missing(tmp_path: Path) -> None:
    cfg = _cfg_with_source(tmp_path / "empty", tmp_path)
    assert [p.name for p in missing_models(cfg)] == ["det_10g.onnx", "w600k_r50.onnx", "inswapper_128.onnx"]
    with pytest.raises(StageUnavailable) as err:
        _build(cfg)
    notice = err.value.notice
    assert notice.startswith("models missing: det_10g.onnx, w600k_r50.onnx, inswapper_128.onnx in ")
    assert "run: kiosk models fetch" in notice and "\n" not in notice


def test_build_processor_corrupt_model(standin_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "models"
    shutil.copytree(standin_dir, d)
    (d / "inswapper_128.onnx").write_bytes(b"not a model")
    with pytest.raises(StageUnavailable) as err:
        _build(_cfg_with_source(d, tmp_path))
    assert "inswapper_128.onnx" in err.value.notice and "kiosk models fetch" in err.value.notice
    assert any(w.endswith("inswapper_128.onnx") for w in err.value.watch)  # retried when repaired


def test_build_processor_no_source(standin_cfg: KioskConfig, standin_dir: Path, tmp_path: Path) -> None:
    proc = _build(standin_cfg)
    assert isinstance(proc, PassThrough) and "faces.dir" in proc.notice
    cfg = _cfg_with_source(standin_dir, tmp_path)
    cv2.imwrite(cfg.processing.source_face or "", np.full((100, 100, 3), 80, np.uint8))
    proc = _build(cfg)
    slot = SwapResult(frame_bgr=np.zeros_like(FRAME))
    proc.process(FRAME, slot)  # the photo is scanned on the first frame: no face in it
    assert "no usable face photos" in slot.notice and not slot.faces


def test_from_config_errors(standin_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "m"
    shutil.copytree(standin_dir, d)
    shutil.copy(d / "inswapper_128.onnx", d / "w600k_r50.onnx")  # swapper in the embedder's place
    with pytest.raises(ModelSignatureError, match="w600k_r50.onnx"):
        SwapPipeline.from_config(make_cfg(d))
    (d / "det_10g.onnx").write_bytes(b"")
    with pytest.raises(ModelCorruptError, match="det_10g.onnx"):
        SwapPipeline.from_config(make_cfg(d))


def test_read_image_errors(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="not found"):
        read_image(tmp_path / "none.jpg")
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8garbage")
    with pytest.raises(ImageError, match="cannot decode"):
        read_image(tmp_path / "bad.jpg")


# -- real detector, real photos --------------------------------------------------------------------
def test_real_photos(standin_dir: Path, det_500m: Path, t1_bgr: np.ndarray) -> None:
    cfg = make_cfg(standin_dir, detector=str(det_500m))
    pipe = SwapPipeline.from_config(cfg)
    hanks = read_image(insightface_image("Tom_Hanks_54745.png"))  # an aligned 112x112 crop: padded retry
    face = pipe.set_source(hanks)
    assert face.score > 0.5
    out = pipe.process(t1_bgr)
    assert pipe.times.faces == 6 and out.shape == t1_bgr.shape


def test_neural_demo_without_models_says_which_command_fetches_them(tmp_path: Path) -> None:
    """The bundled demo asked for the neural swap (no faces folder) on a fresh install: the notice is
    about the missing models and `kiosk models fetch`, not about faces, and the build is retried when
    the files appear. (With ``swapper: auto``, as bundled, it runs the classic swap instead:
    tests/test_classic_swap.py.)"""
    from kiosk.booth.controls import ControlState
    from kiosk.booth.faces import make_library
    from kiosk.config import load_config
    from kiosk.paths import bundled_config
    from kiosk.processing.booth_stage import build_booth_processor
    from kiosk.processing.stage import StageUnavailable

    cfg = load_config(bundled_config("demo"), env=False)
    neural = {
        "dir": str(tmp_path),
        "swapper": "inswapper_128.onnx",
        "detector": "det_10g.onnx",
        "accept_noncommercial_licence": True,
    }
    cfg = cfg.model_copy(update={"models": cfg.models.model_copy(update=neural)})
    with pytest.raises(StageUnavailable) as err:
        build_booth_processor(cfg, make_library(cfg), ControlState())
    assert str(err.value.notice).startswith("models missing:") and "kiosk models fetch" in str(
        err.value.notice
    )
    assert any(w.endswith("inswapper_128.onnx") for w in err.value.watch)
