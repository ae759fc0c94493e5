"""Cost-matched stand-in models: the real files' contracts AND their compute, random weights.

The small stand-ins of :mod:`kiosk.tools.standins` are about a thousand times cheaper than the
real models, so a bench on them says nothing about what a booth would see. The models here have
the same input/output names, shapes and dtypes as the real files (and ``emap`` as the swapper's
last initializer), the same kinds of layers in the same arrangement, and parameter counts and
multiply-accumulates within a few per cent of the real ones. Their weights are seeded random
numbers, so their pictures are noise; what they cost is the point.

- ``inswapper_128.onnx``: the InSwapper layout (as reproduced layer for layer by
  somanchiu/ReSwapper ``StyleTransferModel_128.py``): reflect-padded 7x7 conv, encoder to
  1024x32x32, six residual style blocks (conv, instance norm, AdaIN scale/shift from the 512-d
  latent by Gemm), bilinear-upsampling decoder, tanh, ``(x+1)/2``.
- ``w600k_r50.onnx``: iresnet-50 (arcface_torch ``iresnet.py``: BN-conv-BN-PReLU-conv-BN basic
  blocks [3, 4, 14, 3], widths 64..512, BN, FC 25088→512, BN).
- ``det_10g.onnx``: an SCRFD-10G-sized detector (ResNet-v1e basic-block backbone with a deep stem,
  a PAFPN-style neck, three-conv shared heads at strides 8/16/32, BN folded into the convs as in
  the insightface export). The 9 outputs are the real contract. So that the bench finds faces,
  each output also carries the small stand-in detector's answer (bright squares, see
  :func:`kiosk.tools.standins.make_detector`): ``output = standin + 1e-3 * tanh(head)``, the
  heavy network still computed in full.
- ``GFPGANv1.4.onnx``: GFPGANv1Clean with v1.4's arguments (gfpgan/utils.py: out_size 512,
  channel_multiplier 2, different_w, sft_half, latent input): U-Net of bilinear down/up
  residual blocks, SFT scale/shift branches, a linear layer to 16 style vectors, and a StyleGAN2
  decoder of modulated, demodulated convolutions (the weight is computed per call from the style,
  as in the real export) with fixed noise, ToRGB skips, output clipped to [-1, 1].

``python -m kiosk.tools.standins_cost`` writes them into a cache folder (reused when its
manifest matches) and prints parameters and GMACs counted from the ONNX graphs beside the
published figures. :func:`count_macs` is the counter: Conv, ConvTranspose, Gemm and MatMul nodes,
shapes from ONNX shape inference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from kiosk.tools.cost_graphs import BUILDERS, count_macs, count_params

#: Bump when any builder changes what it writes: cached files of another version are rebuilt.
BUILDER_VERSION = 1
COST_FILES = ("det_10g.onnx", "w600k_r50.onnx", "inswapper_128.onnx", "GFPGANv1.4.onnx")
MANIFEST = "manifest.json"
#: doc_string of a skeleton graph's weight inputs (counted as parameters).


# -- published figures ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Published:
    """The real file's figures and where each comes from. ``gmacs``: multiply-accumulates
    (what the published tables call "FLOPs"; one MAC is two floating-point operations)."""

    file: str
    params_m: float
    gmacs: float
    size_bytes: int
    input_desc: str
    params_source: str
    gmacs_source: str


PUBLISHED: dict[str, Published] = {
    "swapper": Published(
        "inswapper_128.onnx",
        138.56,
        174.7,
        554_253_681,
        "target 1x3x128x128 + source 1x512",
        "file size 554,253,681 B / 4 (fp32) = 138.56 M (size recorded in kiosk.inference.specs)",
        "174.7 G as given in issue 12; the same sum (174.6 G) follows from the layer list of "
        "somanchiu/ReSwapper StyleTransferModel_128.py, which reproduces the file layer for layer",
    ),
    "embedder": Published(
        "w600k_r50.onnx",
        43.576,
        6.3185,
        174_383_860,
        "input.1 1x3x112x112",
        "OpenVINO Open Model Zoo face-recognition-resnet50-arcface (LResNet50E-IR, same network): "
        "43.576 MParams",
        "same page: 12.637 GFLOPs, counted as 2 per multiply-accumulate = 6.32 GMACs",
    ),
    "detector": Published(
        "det_10g.onnx",
        4.23,
        10.0,
        16_923_827,
        "input.1 1x3x480x640, VGA",
        "insightface detection/scrfd README, SCRFD_10G_KPS: 4.23 M params",
        "same table: 10 G 'FLOPs' (mmcv's counter, i.e. MACs) at VGA, 640x480; the kiosk's 640x640 "
        "letterbox costs 4/3 of that",
    ),
    "enhancer": Published(
        "GFPGANv1.4.onnx",
        85.06,
        0.0,  # filled below: no GMACs figure is published by TencentARC
        340_256_686,
        "input 1x3x512x512",
        "widely mirrored export of 340,256,686 B / 4 (fp32) = 85.06 M (size recorded in "
        "kiosk.inference.specs)",
        "no figure published by TencentARC; the reference here is summed by hand per layer from "
        "gfpgan/archs/gfpganv1_clean_arch.py + stylegan2_clean_arch.py with v1.4's arguments "
        "(see gfpgan_reference_gmacs)",
    ),
}


def gfpgan_reference_gmacs() -> float:
    """GFPGANv1Clean (v1.4 arguments) multiply-accumulates, summed per layer from the published
    architecture, independently of the graph builder below (only convolutions and linears)."""
    unet = {4: 256, 8: 256, 16: 256, 32: 256, 64: 256, 128: 128, 256: 64, 512: 32}
    sg = {4: 512, 8: 512, 16: 512, 32: 512, 64: 512, 128: 256, 256: 128, 512: 64}
    macs = 3 * 32 * 512 * 512  # conv_body_first 1x1
    res = 512
    while res > 4:  # down ResBlocks: conv1 at res, conv2 + 1x1 skip at res/2
        cin, cout, lo = unet[res], unet[res // 2], res // 2
        macs += cin * cin * 9 * res * res + (cin * cout * 9 + cin * cout) * lo * lo
        res = lo
    macs += 256 * 256 * 9 * 16 + 4096 * 8192  # final_conv, final_linear
    res = 4
    while res < 512:  # up ResBlocks + condition scale/shift (two 3x3 convs each)
        cin, cout, hi = unet[res], unet[res * 2], res * 2
        macs += cin * cin * 9 * res * res + (cin * cout * 9 + cin * cout) * hi * hi
        macs += 2 * (cout * cout * 9 + cout * cout * 9) * hi * hi
        res = hi
    # StyleGAN2 decoder: style_conv1 + to_rgb1 at 4, two style convs + to_rgb per level
    macs += 512 * 512 * 9 * 16 + 512 * 3 * 16 + 2 * 512 * 512
    res = 4
    while res < 512:
        cin, cout, hi = sg[res], sg[res * 2], res * 2
        macs += (cin * cout * 9 + cout * cout * 9 + cout * 3) * hi * hi
        macs += 512 * (cin + cout + cout)  # modulation linears
        res = hi
    return macs / 1e9


PUBLISHED["enhancer"] = Published(
    **{**PUBLISHED["enhancer"].__dict__, "gmacs": round(gfpgan_reference_gmacs(), 2)}
)


# -- cache ------------------------------------------------------------------------------------------
def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "faceswap-kiosk" / "cost-matched"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def cached(folder: Path, role: str, verify: bool = False, width: float = 1.0) -> bool:
    """Whether ``folder`` holds this role's file as this builder version wrote it at ``width``
    (size, and with ``verify`` the SHA-256 recorded in the manifest)."""
    file = BUILDERS[role][0]
    entry = _manifest(folder).get("files", {}).get(file)
    p = folder / file
    if not entry or entry.get("version") != BUILDER_VERSION or entry.get("width") != width or not p.is_file():
        return False
    if p.stat().st_size != entry.get("size"):
        return False
    return not verify or _sha256(p) == entry.get("sha256")


def folder_width(folder: Path) -> float:
    """The smallest channel width among the files in ``folder``'s manifest (1.0: cost-matched)."""
    widths = [float(e.get("width", 1.0)) for e in _manifest(folder).get("files", {}).values()]
    return min(widths) if widths else 1.0


@dataclass
class Generated:
    role: str
    path: Path
    params: int
    macs: int
    seconds: float
    reused: bool
    width: float = 1.0


def _count_input_shapes(role: str) -> dict[str, list[int]]:
    if role == "detector":  # the published figure's VGA frame
        return {"input.1": [1, 3, 480, 640]}
    if role == "embedder":
        return {"input.1": [1, 3, 112, 112]}
    return {}


def generate(
    folder: Path | None = None,
    roles: tuple[str, ...] = tuple(BUILDERS),
    force: bool = False,
    verify: bool = False,
    log: Callable[[str], None] = lambda _m: None,
    width: float | None = 1.0,
) -> dict[str, Generated]:
    """Write (or reuse) the cost-matched models in ``folder`` (default :func:`default_dir`).
    ``width`` < 1 scales every layer's channels (the tests' and dry runs' small copies; not
    cost-matched); ``None`` reuses whatever width the folder holds and builds full size where
    nothing valid is there."""
    folder = Path(folder) if folder is not None else default_dir()
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Generated] = {}
    for role in roles:
        file, builder, seed = BUILDERS[role]
        path = folder / file
        t0 = time.perf_counter()
        entry = _manifest(folder).get("files", {}).get(file, {})
        want = entry.get("width", 1.0) if width is None else width
        if not force and cached(folder, role, verify=verify, width=want):
            out[role] = Generated(role, path, entry["params"], entry["macs"], 0.0, True, want)
            log(f"{file}: reusing {path} ({entry['size'] / 1e6:.1f} MB)")
            continue
        want = 1.0 if width is None else width
        log(f"{file}: building ...")
        model = builder(np.random.default_rng(seed), want)
        params = count_params(model)
        macs = count_macs(model, _count_input_shapes(role))
        onnx.checker.check_model(model)
        fd, tmp = tempfile.mkstemp(prefix=f".{file}.", dir=folder)
        os.close(fd)
        try:
            with open(tmp, "wb") as f:
                f.write(model.SerializeToString())
            del model
            size = os.path.getsize(tmp)
            digest = _sha256(Path(tmp))
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        seconds = time.perf_counter() - t0
        man = _manifest(folder)
        man.setdefault("files", {})[file] = {
            "version": BUILDER_VERSION,
            "seed": seed,
            "width": want,
            "size": size,
            "sha256": digest,
            "params": params,
            "macs": macs,
            "build_s": round(seconds, 1),
        }
        (folder / MANIFEST).write_text(json.dumps(man, indent=2))
        out[role] = Generated(role, path, params, macs, seconds, False, want)
        log(f"{file}: {size / 1e6:.1f} MB in {seconds:.1f} s")
    return out


# -- table ------------------------------------------------------------------------------------------
def figures_table(counts: dict[str, tuple[int, int]]) -> str:
    """Markdown table: ours (params, GMACs counted from the graph) beside the published figures."""
    rows = [
        "| model | params ours (M) | params published (M) | Δ | GMACs ours | GMACs published | Δ | GFLOPs ours (2/MAC) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for role, (params, macs) in counts.items():
        p = PUBLISHED[role]
        dp = 100 * (params / 1e6 / p.params_m - 1)
        dm = 100 * (macs / 1e9 / p.gmacs - 1)
        rows.append(
            f"| {p.file} ({p.input_desc}) | {params / 1e6:.2f} | {p.params_m:.2f} | {dp:+.1f} % "
            f"| {macs / 1e9:.2f} | {p.gmacs:.2f} | {dm:+.1f} % | {2 * macs / 1e9:.1f} |"
        )
    rows.append("")
    for role in counts:
        p = PUBLISHED[role]
        rows.append(f"- {p.file}: params: {p.params_source}; MACs: {p.gmacs_source}.")
    return "\n".join(rows)


def skeleton_counts(width: float = 1.0) -> dict[str, tuple[int, int]]:
    """Parameters and MACs of each full-size graph without weights (fast; used by the tests)."""
    out = {}
    for role, (_file, builder, _seed) in BUILDERS.items():
        m = builder(None, width)
        out[role] = (count_params(m), count_macs(m, _count_input_shapes(role)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kiosk.tools.standins_cost",
        description="Generate cost-matched stand-in models (real contracts, real compute, random "
        "weights) into a cache folder and print their parameters and MACs beside the published figures.",
    )
    ap.add_argument("--dir", help=f"output folder (default {default_dir()})")
    ap.add_argument("--only", nargs="+", choices=tuple(BUILDERS), help="roles to generate (default all)")
    ap.add_argument("--force", action="store_true", help="rebuild even when the cache is valid")
    ap.add_argument("--verify", action="store_true", help="re-hash cached files against the manifest")
    ap.add_argument("--count-only", action="store_true", help="count the graphs without writing weights")
    ap.add_argument(
        "--width",
        type=float,
        default=1.0,
        help="scale every layer's channels (default 1: cost-matched; < 1: small copies for dry runs)",
    )
    args = ap.parse_args(argv)
    roles = tuple(args.only) if args.only else tuple(BUILDERS)
    if args.count_only:
        counts = {r: c for r, c in skeleton_counts().items() if r in roles}
        print(figures_table(counts))
        return 0
    gen = generate(
        Path(args.dir) if args.dir else None,
        roles,
        force=args.force,
        verify=args.verify,
        log=lambda m: print(m, file=sys.stderr, flush=True),
        width=args.width,
    )
    if args.width != 1.0:
        print(f"width {args.width:g}: small copies, NOT cost-matched (the published figures are for width 1)")
    print(figures_table({r: (g.params, g.macs) for r, g in gen.items()}))
    built = [g for g in gen.values() if not g.reused]
    if built:
        print(
            f"\nbuilt {len(built)} file(s) in {sum(g.seconds for g in built):.1f} s into {next(iter(gen.values())).path.parent}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
