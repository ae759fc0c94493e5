"""The variant matrix of ``scripts/gpu_bench.sh``: one generated config and one ``kiosk bench
--cost-matched --json`` process per variant, one JSON for all, and a Markdown table.

Run by ``gpu_bench.sh`` (which makes the virtualenv and the models); by hand::

    python scripts/gpu_bench_matrix.py --kiosk VENV/bin/kiosk --models DIR --work DIR --out FILE [--cpu]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

PROVIDERS = {  # label -> providers section of the config
    "cuda": {"order": ["cuda", "cpu"]},
    "tensorrt-fp16": {"order": ["tensorrt", "cuda", "cpu"], "trt_fp16": True},
}
PROVIDER_NAMES = {"cuda": "CUDAExecutionProvider", "tensorrt-fp16": "TensorrtExecutionProvider"}


@dataclass
class Variant:
    provider: str
    faces: int
    enhance: bool
    mode: str  # synced | live
    pipelined: bool

    @property
    def name(self) -> str:
        return (
            f"{self.provider}_{self.faces}f_enh-{'on' if self.enhance else 'off'}_{self.mode}"
            f"_pipe-{'on' if self.pipelined else 'off'}"
        )


def variants() -> list[Variant]:
    """Most telling first, so that a time limit cuts the least: the baseline of each provider,
    then the enhancer, faces, display mode, pipelined detection."""
    out = [
        Variant(p, f, e, m, pl)
        for p, f, e, m, pl in itertools.product(
            PROVIDERS, (1, 4), (False, True), ("synced", "live"), (False, True)
        )
    ]
    return sorted(out, key=lambda v: (v.pipelined, v.mode != "synced", v.faces, v.enhance, v.provider))


def config_for(v: Variant, work: Path, keys: dict[str, bool]) -> tuple[dict[str, Any], list[str]]:
    """The variant's config; and the keys it needs that this build lacks (then it is skipped).
    A variant's default value (synced, not pipelined) is written only where the key exists."""
    prov = {**PROVIDERS[v.provider], "trt_cache_dir": str(work / "trt_cache")}
    cfg: dict[str, Any] = {
        "models": {"providers": prov},
        "processing": {"enhance": v.enhance, "max_faces": v.faces, "tracking": False},
        "display": {},
    }
    missing = []
    if keys["display.mode"]:
        cfg["display"]["mode"] = v.mode
    elif v.mode != "synced":
        missing.append("display.mode")
    if keys["processing.pipelined"]:
        cfg["processing"]["pipelined"] = v.pipelined
    elif v.pipelined:
        missing.append("processing.pipelined")
    return cfg, missing


def probe_keys(kiosk: str, work: Path) -> dict[str, bool]:
    """Which optional keys this build's config accepts, asked of ``kiosk config check``."""
    out = {}
    for key, doc in (
        ("display.mode", {"display": {"mode": "live"}}),
        ("processing.pipelined", {"processing": {"pipelined": True}}),
    ):
        p = work / f"probe_{key}.yaml"
        p.write_text(yaml.safe_dump(doc))
        r = subprocess.run([kiosk, "config", "check", str(p)], capture_output=True, text=True)
        out[key] = r.returncode == 0
        if r.returncode != 0:
            first = (r.stdout + r.stderr).strip().splitlines()
            print(
                f"note: {key} is not in this build's config ({first[-1] if first else 'rejected'})",
                file=sys.stderr,
            )
    return out


def run_variant(
    v: Variant, args: argparse.Namespace, work: Path, keys: dict[str, bool], size: str, frames: int
) -> dict[str, Any]:
    cfg, missing = config_for(v, work, keys)
    entry: dict[str, Any] = {"variant": asdict(v), "name": v.name}
    if missing:
        entry.update(status="skipped", reason=f"{', '.join(missing)} not in this build's config")
        return entry
    path = work / f"{v.name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    check = subprocess.run([args.kiosk, "config", "check", str(path)], capture_output=True, text=True)
    if check.returncode != 0:
        entry.update(status="skipped", reason=f"config check failed: {(check.stdout + check.stderr).strip()}")
        return entry
    cmd = [
        args.kiosk, "bench", "--cost-matched", "--cost-matched-dir", str(args.models), "--config", str(path),
        "--size", size, "--max-faces", str(v.faces), "--frames", str(frames), "--json",
        "--camera-fps", "60",
    ]  # fmt: skip
    if args.cpu:
        cmd += ["--cpu", "--skip-frames", "1", "--alloc-frames", "0"]
    else:
        cmd += ["--skip-frames", "10", "--alloc-frames", "0"]
    entry["command"] = " ".join(cmd)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    entry["wall_s"] = round(time.time() - t0, 1)
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        entry.update(status="failed", reason=f"rc {r.returncode}: {last[:160]}", stderr=r.stderr[-2000:])
        return entry
    result = json.loads(r.stdout)
    entry.update(status="ok", result=result)
    used = result["machine"]["provider"]
    if not args.cpu and used != PROVIDER_NAMES[v.provider]:
        entry["fallback"] = f"requested {v.provider}, ran on {used}"
    return entry


def table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| provider | faces | enhancer | mode | pipelined | ran on | processing fps | render fps "
        "| latency p50 ms | detect ms | swap ms | enhance ms | total ms p50 | p95 |",
        "|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in runs:
        v = e["variant"]
        head = (
            f"| {v['provider']} | {v['faces']} | {'on' if v['enhance'] else 'off'} | {v['mode']} "
            f"| {'on' if v['pipelined'] else 'off'} "
        )
        if e["status"] != "ok":
            rows.append(head + f"| {e['status']}: {e.get('reason', '')} |" + " |" * 8)
            continue
        r = e["result"]
        st, rt = r["stages_ms"], r["runtime"]
        rows.append(
            head
            + f"| {r['machine']['provider'].replace('ExecutionProvider', '')} "
            + f"| {rt['fps']['processing']:.1f} | {rt['fps']['render']:.1f} "
            + f"| {rt['latency_ms']['capture_to_display_p50']} | {st['detect']['p50']:.1f} "
            + f"| {st['swap']['p50']:.1f} | {st['enhance']['p50']:.1f} "
            + f"| {st['total']['p50']:.1f} | {st['total']['p95']:.1f} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiosk", required=True, help="the kiosk command of the virtualenv")
    ap.add_argument("--models", type=Path, required=True, help="cost-matched models folder")
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (configs, TensorRT cache)")
    ap.add_argument("--out", type=Path, required=True, help="JSON written here")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU provider")
    ap.add_argument(
        "--frames", type=int, default=None, help="measured frames per variant (default 90; 1 with --cpu)"
    )
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--deadline", type=float, default=0.0, help="epoch seconds after which no variant starts")
    ap.add_argument("--generator-seconds-file", type=Path, help="file holding the model generation time")
    ap.add_argument("--models-table", type=Path, help="the generator's parameter/MAC table (Markdown)")
    args = ap.parse_args()
    frames = args.frames or (1 if args.cpu else 90)
    args.work.mkdir(parents=True, exist_ok=True)
    keys = probe_keys(args.kiosk, args.work)
    runs = []
    for v in variants():
        if args.deadline and time.time() > args.deadline:
            runs.append(
                {
                    "variant": asdict(v),
                    "name": v.name,
                    "status": "skipped",
                    "reason": "time limit (--minutes)",
                }
            )
            continue
        print(f"variant {v.name} ...", file=sys.stderr, flush=True)
        e = run_variant(v, args, args.work, keys, args.size, frames)
        msg = (
            e["status"]
            + (f" ({e['reason']})" if "reason" in e else "")
            + (f" [{e['fallback']}]" if "fallback" in e else "")
        )
        print(f"  {msg}" + (f" in {e['wall_s']} s" if "wall_s" in e else ""), file=sys.stderr, flush=True)
        if e["status"] == "failed":
            print(e["stderr"], file=sys.stderr)
        runs.append(e)
    gen_s = None
    if args.generator_seconds_file and args.generator_seconds_file.is_file():
        gen_s = float(args.generator_seconds_file.read_text().strip() or "nan")
    doc = {
        "dry_run_cpu": args.cpu,
        "host": {"machine": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "size": args.size,
        "frames_per_variant": frames,
        "config_keys": keys,
        "models_dir": str(args.models),
        "model_generation_s": gen_s,
        "models_table": args.models_table.read_text()
        if args.models_table and args.models_table.is_file()
        else None,
        "runs": runs,
    }
    args.out.write_text(json.dumps(doc, indent=2))
    print(table(runs))
    ok = sum(e["status"] == "ok" for e in runs)
    print(
        f"\n{ok} of {len(runs)} variants ran; {sum(e['status'] == 'skipped' for e in runs)} skipped, "
        f"{sum(e['status'] == 'failed' for e in runs)} failed; JSON: {args.out}"
    )
    return 1 if any(e["status"] == "failed" for e in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
