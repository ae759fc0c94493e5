"""What the pipeline loads: the model files (present, published hashes), the face library and the
source face photo."""

from __future__ import annotations

import os
from pathlib import Path

from kiosk.appliance.doctor.core import CheckResult, DoctorContext, make_dir_fix, resolve, service_user


def check_models(ctx: DoctorContext) -> list[CheckResult]:
    """Presence and SHA-256 of each model the config needs, with the pipeline's own rules
    (the same as ``kiosk models verify``)."""
    fix_fetch = f"kiosk models fetch --config {ctx.config_path}"
    if not ctx.cfg.processing.enabled:
        return [CheckResult("models", True, "processing.enabled is false: no models needed (camera only)")]
    from kiosk.inference.fetch import check_file
    from kiosk.inference.specs import spec_for_file
    from kiosk.processing.models import licence_problems, model_paths, noncommercial_models, swapper_mode

    missing, corrupt, fine = [], [], []
    # not fetched, not run until the licence is accepted: the licence check names them instead
    refused = {p for _, p, _ in noncommercial_models(ctx.cfg)} if licence_problems(ctx.cfg) else set()
    if swapper_mode(ctx.cfg) == "classic":
        fine.append("swapper classic (built in, no file)")
    for role, path in model_paths(ctx.cfg).items():
        if path is None or path in refused or (role == "enhancer" and not ctx.cfg.processing.enhance):
            continue
        path = Path(os.path.normpath(path))
        status = check_file(role, spec_for_file(role, path), path)
        if not status.present:
            missing.append(f"{role} {path}")
        elif status.verified is False:
            corrupt.append(
                f"{role} {path} (sha256 {(status.sha256 or '')[:12]}... is not the published file)"
            )
        elif status.verified is True:
            fine.append(f"{role} verified")
        else:
            fine.append(f"{role} present (no published hash to verify)")
    results = []
    if missing:
        results.append(CheckResult("models", False, "missing: " + "; ".join(missing), fix_fetch))
    if corrupt:
        results.append(
            CheckResult(
                "models-verified",
                False,
                "corrupt or not the published file: " + "; ".join(corrupt),
                f"delete the file(s), then {fix_fetch}",
            )
        )
    if not results:
        results.append(CheckResult("models", True, ", ".join(fine)))
    results.append(check_licence(ctx))
    return results


def check_licence(ctx: DoctorContext) -> CheckResult:
    """Which licence the swapper (and the detector) the config runs have; a failure when the config
    names non-commercial weights without ``models.accept_noncommercial_licence: true`` (the kiosk
    does not run them then): a booth at a trade fair needs to know before it opens."""
    from kiosk.inference.specs import spec_for_file
    from kiosk.processing.models import LICENCE_KEY, licence_problems, model_paths, swapper_mode, swapper_spec

    spec = swapper_spec(ctx.cfg)
    detector = model_paths(ctx.cfg)["detector"]
    det = f"; detector {detector.name}: {spec_for_file('detector', detector).licence}" if detector else ""
    mode = "classic swap" if swapper_mode(ctx.cfg) == "classic" else f"neural swap ({spec.id})"
    detail = f"swapper: {mode} — {spec.licence}{det}"
    if problems := licence_problems(ctx.cfg):
        return CheckResult(
            "licence",
            False,
            f"{detail}; not run: " + "; ".join(problems),
            f"set {LICENCE_KEY}: true in {ctx.config_path} if the booth accepts the non-commercial "
            "licence, else models.swapper: classic",
        )
    if spec.non_commercial:
        detail += f" (accepted by {LICENCE_KEY}; licence-clean alternative: models.swapper: classic, MIT)"
    return CheckResult("licence", True, detail)


def check_faces_dir(ctx: DoctorContext) -> list[CheckResult]:
    """The ``faces.dir`` library of face photos, where the config has one, listed exactly as the booth
    lists it (:meth:`kiosk.booth.faces.FaceLibrary.photos`)."""
    if not ctx.cfg.faces.dir or not ctx.cfg.processing.enabled:
        return []
    from kiosk.booth.faces import make_library

    library = make_library(ctx.cfg)
    path = Path(os.path.normpath(library.folder)) if library.folder else resolve(ctx.cfg, ctx.cfg.faces.dir)
    if not path.is_dir():
        return [
            CheckResult(
                "faces-dir",
                False,
                f"the faces folder {path} does not exist",
                f"{make_dir_fix(path)} and copy JPEG/PNG portraits into it",
            )
        ]
    extra = set(library.extra_photos)  # processing.source_face: checked by check_source_face
    images = sorted(p for p in library.photos() if p not in extra)
    readable = [p for p in images if os.access(p, os.R_OK)]
    if not readable:
        return [
            CheckResult(
                "faces-dir",
                False,
                f"the faces folder {path} has no readable JPEG/PNG images",
                f"copy portraits into {path} (and `sudo chmod a+r {path}/*`)",
            )
        ]
    detail = f"{path}: {len(readable)} face image(s)"
    if len(readable) < len(images):
        detail += f", {len(images) - len(readable)} not readable"
        return [CheckResult("faces-dir", False, detail, f"sudo chmod a+r {path}/*", "warning")]
    return [CheckResult("faces-dir", True, detail)]


def check_source_face(ctx: DoctorContext) -> list[CheckResult]:
    proc = ctx.cfg.processing
    if not proc.enabled:
        return [CheckResult("source-face", True, "processing is off: no face image needed")]
    if not proc.source_face and ctx.cfg.faces.dir:
        return []  # the faces library is checked by check_faces_dir
    if not proc.source_face:
        return [
            CheckResult(
                "source-face",
                False,
                "processing.source_face is not set: there is no face to swap in",
                f"put a clear, front-facing photo in the faces folder and set processing.source_face in "
                f"{ctx.config_path}",
            )
        ]
    path = resolve(ctx.cfg, proc.source_face)
    if not path.is_file():
        user = service_user()
        readable = f" (readable by user {user})" if user else ""
        return [
            CheckResult(
                "source-face",
                False,
                f"the face image {path} does not exist",
                f"copy a JPEG/PNG portrait to {path}{readable} or fix processing.source_face",
            )
        ]
    if not os.access(path, os.R_OK):
        return [CheckResult("source-face", False, f"{path} is not readable", f"sudo chmod a+r {path}")]
    import cv2

    img = cv2.imread(str(path))
    if img is None:
        return [
            CheckResult("source-face", False, f"{path} is not a readable image", "use a JPEG or PNG file")
        ]
    return [CheckResult("source-face", True, f"{path} ({img.shape[1]}x{img.shape[0]})")]
