"""Which models a config needs, where they are, and opening them: the model files of each role
(``models.swapper: auto`` picks the neural swap when the booth accepts its licence and its files
are there, else the classic one), what is missing (and the one-line notice naming the fix), which
non-commercial models a config runs without accepting their licence, the detector, the face
parser and the classic swap's face mesh, and reading a photo within bounds."""

from __future__ import annotations

import logging
from pathlib import Path

from kiosk.config import KioskConfig
from kiosk.inference.classic import CLASSIC
from kiosk.inference.detector import FaceDetector, make_detector
from kiosk.inference.errors import ImageError, LicenceError, ModelError
from kiosk.inference.face_mesh import FaceMesh, open_face_mesh
from kiosk.inference.parser import FaceParser
from kiosk.inference.sessions import ProviderOptions, create_session
from kiosk.inference.specs import (
    BUNDLED_DETECTOR,
    CLASSIC_SWAPPER,
    ROLES,
    ModelSpec,
    Role,
    known_spec,
    spec_for_file,
)
from kiosk.types import FrameBGR
from kiosk.util.files import read_regular_file, shown
from kiosk.util.images import ImageDecodeError, decode_image

log = logging.getLogger(__name__)
#: A source face photo (or a still picture) larger than this is not read.
MAX_IMAGE_FILE_BYTES = 64 << 20

#: ``models.swapper`` / ``models.detector`` value: chosen from what is on disk (see :func:`swapper_mode`).
AUTO = "auto"
#: The neural swapper and embedder ``auto`` looks for, and the detector it uses with them.
NEURAL_DEFAULTS = {"swapper": "inswapper_128.onnx", "embedder": "w600k_r50.onnx", "detector": "det_10g.onnx"}
#: The config key by which a booth accepts the non-commercial licence of the weights it names.
LICENCE_KEY = "models.accept_noncommercial_licence"
#: The licence-clean choice that replaces a non-commercial model of each role.
_CLEAN_FIX = {
    "swapper": "models.swapper: classic (MIT, no weights)",
    "embedder": "models.swapper: classic (MIT, no embedder)",
    "detector": "models.detector: auto (the bundled YuNet, MIT)",
    "enhancer": "models.enhancer: GFPGANv1.4.onnx (Apache-2.0)",
    "parser": "mask.occlusion: false",
}


def _role_file(cfg: KioskConfig, value: str) -> Path:
    """A role's file: a bare name lives in ``models.dir``; a value with a folder part (or
    ``package:...``) is a path relative to the config file."""
    p = Path(value).expanduser()
    if value.startswith("package:") or p.is_absolute() or len(p.parts) > 1:
        return cfg.resolve(value)
    return cfg.resolve(cfg.models.dir) / p


def swapper_mode(cfg: KioskConfig) -> str:
    """``"classic"`` or ``"neural"``: ``models.swapper: classic``; ``auto`` is neural when the
    InSwapper file, the embedder and (with ``detector: auto``) ``det_10g.onnx`` are in
    ``models.dir`` and ``models.accept_noncommercial_licence`` is true (never on its own: those
    weights are non-commercial), else classic; any file name: neural."""
    value = cfg.models.swapper
    if value == CLASSIC:
        return "classic"
    if value == AUTO:
        if not cfg.models.accept_noncommercial_licence:
            return "classic"
        embedder = cfg.models.embedder if cfg.models.embedder != AUTO else NEURAL_DEFAULTS["embedder"]
        need = [NEURAL_DEFAULTS["swapper"], embedder]
        if cfg.models.detector == AUTO:
            need.append(NEURAL_DEFAULTS["detector"])
        return "neural" if all(_role_file(cfg, v).is_file() for v in need) else "classic"
    return "neural"


def swapper_spec(cfg: KioskConfig) -> ModelSpec:
    """The spec (title, licence) of the swapper ``cfg`` runs."""
    if swapper_mode(cfg) == "classic":
        return CLASSIC_SWAPPER
    p = model_paths(cfg)["swapper"]
    assert p is not None
    return spec_for_file("swapper", p)


def _detector_value(cfg: KioskConfig, classic: bool) -> str:
    """``models.detector`` with ``auto`` resolved: the bundled YuNet for the classic swap,
    ``det_10g.onnx`` for the neural one."""
    value = cfg.models.detector
    if value != AUTO:
        return value
    return BUNDLED_DETECTOR if classic else NEURAL_DEFAULTS["detector"]


def model_paths(cfg: KioskConfig) -> dict[Role, Path | None]:
    """Resolved file of each role. A bare file name lives in ``models.dir``; a value with a folder
    part is a path relative to the config file; ``package:...`` a file shipped in the package (the
    bundled YuNet). ``None``: role disabled (enhancer: null; the parser unless ``mask.occlusion``;
    the swapper and the embedder of the classic swap, which has no file and needs no embedder)."""
    out: dict[Role, Path | None] = {}
    classic = swapper_mode(cfg) == "classic"
    for role in ROLES:
        value = getattr(cfg.models, role)
        if role == "parser" and not cfg.mask.occlusion:
            value = None  # the face parser is needed (and fetched) only for the occlusion mask
        if role in ("swapper", "embedder"):
            value = None if classic else (NEURAL_DEFAULTS[role] if value == AUTO else value)
        if role == "detector":
            value = _detector_value(cfg, classic)
        if value is None:
            out[role] = None
            continue
        out[role] = _role_file(cfg, value)
    return out


def missing_models(cfg: KioskConfig, include_enhancer: bool | None = None) -> list[Path]:
    """Model files the config needs that are not on disk. The enhancer counts only when enabled."""
    need_enh = cfg.processing.enhance if include_enhancer is None else include_enhancer
    out = []
    for role, p in model_paths(cfg).items():
        if p is None or (role == "enhancer" and not need_enh):
            continue
        if not p.is_file():
            out.append(p)
    return out


def noncommercial_models(cfg: KioskConfig, enhance: bool | None = None) -> list[tuple[Role, Path, ModelSpec]]:
    """The known models the config runs whose weights are non-commercial (InsightFace's, GPEN's):
    the swapper and embedder of the neural swap, a named det_10g, a GPEN enhancer when it runs
    (``enhance``; None: ``processing.enhance``). Judged by file name; no file is read."""
    use_enh = cfg.processing.enhance if enhance is None else enhance
    out = []
    for role, p in model_paths(cfg).items():
        if p is None or (role == "enhancer" and not use_enh):
            continue
        spec = known_spec(role, p)
        if spec is not None and spec.non_commercial:
            out.append((role, p, spec))
    return out


def licence_problems(cfg: KioskConfig, enhance: bool | None = None) -> list[str]:
    """One line per non-commercial model the config runs without ``models.accept_noncommercial_licence:
    true``: which model, and the two fixes (accept the licence, or the licence-clean choice).
    ``enhance``: whether the enhancer runs (None: ``processing.enhance``)."""
    if cfg.models.accept_noncommercial_licence:
        return []
    return [
        f"models.{role}: {p.name} has non-commercial weights ({spec.licence}); set {LICENCE_KEY}: true "
        f"if this booth accepts that licence, else use {_clean_fix(cfg, role)}"
        for role, p, spec in noncommercial_models(cfg, enhance)
    ]


def _clean_fix(cfg: KioskConfig, role: Role) -> str:
    """The licence-clean choice for a role; ``detector: auto`` is det_10g only with the neural swap."""
    if role == "detector" and cfg.models.detector == AUTO:
        return _CLEAN_FIX["swapper"]
    return _CLEAN_FIX[role]


def licence_notice(cfg: KioskConfig) -> str:
    """The one-line notice of a kiosk asked to run non-commercial weights it may not; "" if none."""
    problems = noncommercial_models(cfg) if not cfg.models.accept_noncommercial_licence else []
    if not problems:
        return ""
    names = ", ".join(p.name for _, p, _ in problems)
    return f"not run: {names} non-commercial — set {LICENCE_KEY}: true to accept, or models.swapper: classic"


def read_image(path: str | Path) -> FrameBGR:
    """Read an image as BGR uint8 (a regular file only, sized from its header and decoded within
    the decode budget: :func:`kiosk.util.images.decode_image`); :class:`ImageError` with a
    one-line message naming the file if it cannot be used."""
    p = Path(path)
    try:
        data = read_regular_file(p, MAX_IMAGE_FILE_BYTES)
    except FileNotFoundError:
        raise ImageError(f"{shown(p)}: image file not found (check the path)") from None
    except OSError as exc:
        raise ImageError(f"{shown(p)}: cannot read the image: {exc.strerror or exc}") from None
    try:
        return decode_image(data)
    except ImageDecodeError as exc:
        raise ImageError(f"{shown(p)}: cannot decode the image: {exc}") from None


def open_detector(cfg: KioskConfig, max_faces: int | None = None) -> FaceDetector:
    """Only the configured detector (what ``kiosk detect`` needs). ``max_faces``: 0 keeps every
    face above the threshold; None uses ``processing.max_faces``."""
    p = model_paths(cfg)["detector"]
    assert p is not None
    if (
        not cfg.models.accept_noncommercial_licence
        and (spec := known_spec("detector", p))
        and spec.non_commercial
    ):
        raise LicenceError(
            f"models.detector: {p.name} has non-commercial weights ({spec.licence}); set "
            f"{LICENCE_KEY}: true if this booth accepts that licence, else use {_CLEAN_FIX['detector']}"
        )
    prov = ProviderOptions.of(cfg.models.providers)
    session, used = create_session(p, prov, base_dir=cfg.base_dir)
    proc = cfg.processing
    return make_detector(
        session,
        spec_for_file("detector", p),
        p,
        used,
        proc.det_size,
        proc.det_threshold,
        proc.max_faces if max_faces is None else max_faces,
        iobinding=prov.iobinding,
        device_id=prov.device_id,
    )


def open_parser(cfg: KioskConfig) -> FaceParser | None:
    """The occlusion face parser (``models.parser``) when ``mask.occlusion`` is on, else None.
    Raises :class:`ModelError` (missing, corrupt, wrong signature) naming the file and the fix."""
    p = model_paths(cfg)["parser"]
    if p is None:
        return None
    prov = ProviderOptions.of(cfg.models.providers)
    session, used = create_session(p, prov, base_dir=cfg.base_dir)
    return FaceParser(
        session, spec_for_file("parser", p), p, used, iobinding=prov.iobinding, device_id=prov.device_id
    )


def mesh_path(cfg: KioskConfig) -> Path | None:
    """The classic swap's face mesh file (``models.mesh``; None: off, or the neural swap)."""
    value = cfg.models.mesh
    if value is None or swapper_mode(cfg) != "classic":
        return None
    return _role_file(cfg, value)


def open_mesh(cfg: KioskConfig) -> FaceMesh | None:
    """The classic swap's dense face mesh (``models.mesh``), or None: off, the neural swap, or a
    file that cannot be used. That last is one ERROR line naming the file and the fix, and the
    classic swap runs on the five keypoints (the kiosk keeps swapping)."""
    p = mesh_path(cfg)
    if p is None:
        return None
    try:
        return open_face_mesh(p, ProviderOptions.of(cfg.models.providers), base_dir=cfg.base_dir)
    except ModelError as exc:
        log.error("%s; the classic swap uses the five keypoints (the photo's expression)", exc)
        return None


def missing_models_notice(cfg: KioskConfig, include_enhancer: bool | None = None) -> str:
    """One line naming the model files the config needs but lacks, and the fix; "" if none."""
    missing = missing_models(cfg, include_enhancer)
    if not missing:
        return ""
    names = ", ".join(p.name for p in missing)
    return f"models missing: {names} in {cfg.resolve(cfg.models.dir)} — run: kiosk models fetch"
