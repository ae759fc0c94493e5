"""Sub-commands ``kiosk detect``, ``kiosk swap`` and ``kiosk models list|fetch|verify``.

Every error is one line on stderr naming the file and the fix, with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import cv2

from kiosk.config import ConfigError, KioskConfig, default_config_path, load_config
from kiosk.inference.errors import ImageError, ModelError, NoFaceError
from kiosk.inference.fetch import FetchError, check_file, fetch_model
from kiosk.inference.specs import spec_for_file


class _CliError(Exception):
    pass


def _config(path: str | None) -> KioskConfig:
    if path:
        return load_config(path)
    default = default_config_path()
    if default.is_file():
        return load_config(default)
    return KioskConfig()


def _err(cmd: str, msg: str) -> int:
    print(f"kiosk {cmd}: error: {msg}", file=sys.stderr)
    return 1


def _guard(cmd: str, args: argparse.Namespace, fn: Any) -> int:
    try:
        return int(fn(args) or 0)
    except ConfigError as exc:
        return _err(cmd, "; ".join(exc.problems))
    except (ModelError, ImageError, NoFaceError, FetchError, _CliError) as exc:
        return _err(cmd, str(exc))


# -- detect ----------------------------------------------------------------------------------------
def _cmd_detect(args: argparse.Namespace) -> int:
    from kiosk.processing.models import open_detector, read_image

    cfg = _config(args.config)
    image = read_image(args.image)
    detector = open_detector(cfg, max_faces=0)  # report every face, not only those the kiosk swaps
    faces = detector.detect(image)
    if args.json:
        data = [
            {
                "box_xyxy": [round(float(v), 2) for v in f.box_xyxy],
                "score": round(f.score, 4),
                "kps": [[round(float(x), 2), round(float(y), 2)] for x, y in f.kps],
            }
            for f in faces
        ]
        print(json.dumps({"image": str(args.image), "faces": data}, indent=2))
        return 0
    print(f"{args.image}: {len(faces)} face(s) [{detector.spec.id} on {detector.provider}]")
    for i, f in enumerate(faces, 1):
        box = ", ".join(f"{v:.1f}" for v in f.box_xyxy)
        kps = " ".join(f"({x:.1f},{y:.1f})" for x, y in f.kps)
        print(f"  {i}: score {f.score:.3f}  box [{box}]  kps {kps}")
    return 0


# -- swap ------------------------------------------------------------------------------------------
def _cmd_swap(args: argparse.Namespace) -> int:
    from kiosk.processing.models import licence_notice, read_image
    from kiosk.processing.pipeline import SwapPipeline

    cfg = _config(args.config)
    if notice := licence_notice(cfg):  # non-commercial weights the config has not accepted
        raise _CliError(notice)
    source = read_image(args.source)
    frame = read_image(args.input)
    out_path = Path(args.output)
    if out_path.suffix.lower() not in (".jpg", ".jpeg", ".png", ".bmp", ".webp"):
        raise _CliError(f"{out_path}: unknown image type — end the file name with .jpg or .png")
    pipe = SwapPipeline.from_config(cfg, enhance=True if args.enhance else None)
    try:
        pipe.set_source(source)
    except NoFaceError:
        raise NoFaceError(f"{args.source}: no face found — use a clear, frontal photo of one face") from None
    result = pipe.process(frame)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(out_path), result):
        raise _CliError(f"{out_path}: cannot write the image (check the folder and permissions)")
    t = pipe.times
    print(
        f"{out_path}: swapped {t.faces} face(s) on {pipe.provider} "
        f"(detect {t.detect_ms:.0f} ms, align {t.align_ms:.1f} ms, swap {t.swap_ms:.0f} ms, enhance {t.enhance_ms:.0f} ms, "
        f"mask {t.mask_ms:.1f} ms, colour {t.color_ms:.1f} ms, paste {t.paste_ms:.1f} ms)"
    )
    if t.faces == 0:
        print(f"  note: no face found in {args.input}; the output is the input unchanged", file=sys.stderr)
    return 0


# -- models ----------------------------------------------------------------------------------------
def _roles(cfg: KioskConfig) -> list[tuple[str, Path]]:
    from kiosk.processing.models import model_paths

    return [(role, p) for role, p in model_paths(cfg).items() if p is not None]


def _bundled_note(path: Path) -> str:
    """``source:`` line of a model shipped inside the package (the bundled YuNet)."""
    from kiosk.paths import package_file

    try:
        path.resolve().relative_to(package_file().resolve())
    except ValueError:
        return ""
    return f"bundled in the kiosk package ({path.parent / 'PROVENANCE.md'})"


def _cmd_models(args: argparse.Namespace) -> int:
    from kiosk.processing.models import swapper_mode, swapper_spec

    cfg = _config(args.config)
    action = args.action
    classic = swapper_mode(cfg) == "classic"
    if action == "list":
        rows = []
        sources: list[str] = []
        for role, path in _roles(cfg):
            st = check_file(role, spec_for_file(role, path), path)  # type: ignore[arg-type]
            size = f"{st.size_bytes / 1e6:.1f} MB" if st.size_bytes is not None else "-"
            verified = {
                True: "yes",
                False: "NO (sha256 mismatch)",
                None: "-" if not st.present else "unknown",
            }[st.verified]
            rows.append((role, path.name, "yes" if st.present else "no", verified, size, st.spec.licence))
            sources.append(st.spec.source or _bundled_note(path))
            if role == "detector" and classic:  # the classic swap has no file and no embedder
                spec = swapper_spec(cfg)
                rows.append(("swapper", "classic (built in)", "yes", "-", "-", spec.licence))
                sources.append("no file: the library photo's own face (docs/classic-swap.md)")
        header = ("role", "file", "present", "verified", "size", "licence")
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
        print(f"models folder: {cfg.resolve(cfg.models.dir)}")
        for r, source in zip([header, *rows], ["", *sources], strict=True):
            print("  ".join(str(v).ljust(w) for v, w in zip(r[:5], widths, strict=True)) + "  " + r[5])
            if source:  # a file taken from a repository rather than a release: say which one
                print(" " * (widths[0] + 2) + f"source: {source}")
        from kiosk.processing.models import licence_problems

        problems = licence_problems(cfg)
        for line in problems:  # named, but the kiosk does not run them
            print(f"not run: {line}")
        spec = swapper_spec(cfg)
        if problems:
            print(f"swapper in use: none — {spec.title} is named, its licence not accepted (see above)")
        else:
            print(f"swapper in use: {spec.title} — licence: {spec.licence}")
        return 0
    if action == "verify":
        bad = []
        for role, path in _roles(cfg):
            st = check_file(role, spec_for_file(role, path), path)  # type: ignore[arg-type]
            print(f"{role:9s} {path}: {st.state}")
            if not st.present or st.verified is False:
                bad.append(f"{path.name} ({st.state})")
        if bad:
            return _err(
                "models verify",
                f"{', '.join(bad)} in {cfg.resolve(cfg.models.dir)} — run: kiosk models fetch",
            )
        return 0
    # fetch
    from kiosk.processing.models import licence_problems, noncommercial_models

    failures = licence_problems(cfg)  # never downloaded until the booth accepts their licence
    refused = {p for _, p, _ in noncommercial_models(cfg)} if failures else set()
    for line in failures:
        print(f"kiosk models fetch: not fetched: {line}", file=sys.stderr)
    unreached = False
    for role, path in _roles(cfg):
        if path in refused:
            continue
        spec = spec_for_file(role, path)  # type: ignore[arg-type]
        try:
            state = fetch_model(spec, path, source=args.source, show_progress=not args.quiet, log=print)
            print(f"{role:9s} {path}: {state}  [{spec.licence}]")
        except FetchError as exc:
            failures.append(str(exc))
            unreached = unreached or exc.no_network
            print(f"kiosk models fetch: error: {exc}", file=sys.stderr)
    if unreached:
        print(f"kiosk models fetch: {_offline_hint(args.source)}", file=sys.stderr)
    return 1 if failures else 0


def _offline_hint(source: str | None) -> str:
    """What to do when the download sources cannot be reached (a booth without internet)."""
    if source is None:
        return (
            "no network? fetch from a LAN mirror or a USB stick holding the files: "
            "kiosk models fetch --from URL_OR_DIR (e.g. --from http://lan-box:8000/models/ or --from /media/usb/models)"
        )
    return f"cannot reach {source}: check the address and that the mirror is serving, or use --from FOLDER (a USB stick)"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("detect", help="detect faces in an image (boxes, scores, keypoints)")
    p.add_argument("image", help="image file")
    p.add_argument(
        "--config",
        help="config file (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, the bundled default.yaml)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=lambda a: _guard("detect", a, _cmd_detect))

    p = subparsers.add_parser("swap", help="swap a face into a still image (test a face before the event)")
    p.add_argument("--source", required=True, help="photo of the face to swap in")
    p.add_argument("--input", required=True, help="image whose faces are replaced")
    p.add_argument("--output", required=True, help="where to write the result (.jpg/.png)")
    p.add_argument(
        "--config",
        help="config file (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, the bundled default.yaml)",
    )
    p.add_argument("--enhance", action="store_true", help="restore the swapped faces with GFPGAN")
    p.set_defaults(func=lambda a: _guard("swap", a, _cmd_swap))

    p = subparsers.add_parser("models", help="list, fetch or verify the model files")
    msub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (
        ("list", "role, file, present, verified, size, licence"),
        ("fetch", "download missing models (resume, sha256 check, atomic)"),
        ("verify", "re-check every model's sha256; non-zero exit naming bad files"),
    ):
        q = msub.add_parser(name, help=text)
        q.add_argument(
            "--config",
            help="config file (default: $KIOSK_CONFIG, /etc/faceswap-kiosk/kiosk.yaml, the bundled default.yaml)",
        )
        if name == "fetch":
            q.add_argument(
                "--from",
                dest="source",
                metavar="URL_OR_DIR",
                help="LAN mirror base URL or folder (USB stick)",
            )
            q.add_argument("--quiet", action="store_true", help="no progress bar")
        q.set_defaults(func=lambda a: _guard(f"models {a.action}", a, _cmd_models))
