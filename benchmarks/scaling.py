"""How the kiosk's cost grows with its work (issue 27): a library of 10, 100, 1,000 face photos,
1 to 10 faces per frame, a 720p, 1080p or 4K camera.

    PYTHONPATH=TREE .venv/bin/python benchmarks/scaling.py library [--sizes 10 100 1000]
    PYTHONPATH=TREE .venv/bin/python benchmarks/scaling.py frames [--faces 1 3 6 10]
        [--resolutions 720p 1080p 4k] [--seconds 12]
    PYTHONPATH=TREE .venv/bin/python benchmarks/scaling.py plot RESULTS.json [--img docs/img]

Every figure is read from a running kiosk (``kiosk run --headless --stats-json``, rewritten twice a
second) with the booth's default config (``kiosk/configs/default.yaml``: the classic swap, the
bundled YuNet, tracking, mean_std colour, display mode auto), only the source, the window size, the
face folder, its cache and a loopback staff console changed.

``library``: N distinct face photos are made reproducibly (the eight faces of insightface's t1.jpg,
the NASA portrait and the Tom Hanks photo of ../shared/media, each photo flipped, scaled, turned,
recoloured and placed on its own background, 1024x1280 JPEG; seeded by its number), then the kiosk
starts on them twice: cold (an empty face cache) and warm (the cache the cold run wrote). Read
from its stats JSON: ``library.first_face_s`` (process start → the first library face swapped on
screen), ``library.loaded_s`` (→ every photo loaded), ``memory.rss_peak_mb``, and the face-switch
latency (``library.switch_ms``: the staff console's ``POST /api/face/next`` five times → the
newest result wears the new face).

``frames``: a picture of N faces (t1.jpg's faces tiled) at 720p, 1080p and 4K, as an image source
and as a 4-second mp4v video (looped), with a library of 3 photos and ``processing.max_faces: 10``;
after the faces are loaded, ``--seconds`` of running: the render rate (``fps.render``), the swap
rate (``fps.swap_results``), the frame time (``latency_ms.process_p50``) and the capture rate.

Writes RESULTS.json (``--out``; default ``scaling.json`` in the current folder) and prints a table;
``plot`` writes the SVG plots (no matplotlib needed) under ``--img``.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED_MEDIA = ROOT.parent / "shared" / "media"
PIN = "scaling-bench-1"
BASIC = {"Authorization": "Basic " + base64.b64encode(f"staff:{PIN}".encode()).decode()}
RESOLUTIONS = {"720p": (1280, 720), "1080p": (1920, 1080), "4k": (3840, 2160)}


# -- face photos ---------------------------------------------------------------------------------
def _t1_path() -> Path:
    import insightface

    return Path(insightface.__file__).parent / "data" / "images" / "t1.jpg"


def _base_faces() -> list[np.ndarray]:
    """Face crops (BGR, a margin around each face) from t1.jpg and ../shared/media."""

    pipe = _detector_pipe()
    out: list[np.ndarray] = []
    sources = [
        _t1_path(),
        _t1_path().with_name("Tom_Hanks_54745.png"),
        SHARED_MEDIA / "astronaut_eileen_collins_nasa.png",
    ]
    for path in sources:
        img = cv2.imread(str(path))
        if img is None:
            continue
        faces, _ = pipe.find_source_faces(img)
        print(f"{path.name}: {len(faces)} faces", file=sys.stderr)
        for f in faces:
            x0, y0, x1, y1 = (float(v) for v in f.box_xyxy)
            cx, cy, s = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0)
            half = 0.75 * s  # a tight margin: no neighbour's face in the crop
            a, b = int(max(cx - half, 0)), int(max(cy - half * 1.1, 0))
            c, d = int(min(cx + half, img.shape[1])), int(min(cy + half * 1.2, img.shape[0]))
            out.append(np.ascontiguousarray(img[b:d, a:c]))
    return out


def _detector_pipe() -> Any:
    from kiosk.config import parse_config
    from kiosk.processing.pipeline import SwapPipeline

    cfg = parse_config(
        "models: {swapper: classic, detector: auto, providers: {order: [cpu]}}\n", "<bench>", env=False
    )
    return SwapPipeline.from_config(cfg)


def make_photo(base: np.ndarray, i: int, size: tuple[int, int] = (1024, 1280)) -> np.ndarray:
    """Photo number ``i`` of one face: seeded by ``i`` (the same photo every run)."""
    rng = np.random.default_rng(1000 + i)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    c0, c1 = rng.uniform(30, 225, 3), rng.uniform(30, 225, 3)
    t = (xx / w * rng.uniform(0.2, 1.0) + yy / h * rng.uniform(0.2, 1.0))[..., None] / 2
    canvas = (c0 * (1 - t) + c1 * t).astype(np.float32)
    face = base[:, ::-1] if rng.random() < 0.5 else base
    scale = rng.uniform(0.45, 0.7) * w / face.shape[1]
    face = cv2.resize(
        face, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    )
    fh, fw = face.shape[:2]
    m = cv2.getRotationMatrix2D((fw / 2, fh / 2), rng.uniform(-8, 8), 1.0)
    face = cv2.warpAffine(face, m, (fw, fh), borderMode=cv2.BORDER_REFLECT)
    gain = rng.uniform(0.85, 1.15, 3) * rng.uniform(0.8, 1.15)
    face = np.clip(face.astype(np.float32) * gain, 0, 255)
    x = int(rng.uniform(0, max(w - fw, 1)))
    y = int(rng.uniform(0, max(h - fh, 1) * 0.6))
    fh, fw = min(fh, h - y), min(fw, w - x)
    canvas[y : y + fh, x : x + fw] = face[:fh, :fw]
    canvas += rng.normal(0, 3, canvas.shape).astype(np.float32)
    return np.clip(canvas, 0, 255).astype(np.uint8)


def write_photos(folder: Path, n: int, bases: list[np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = folder / f"face{i:04d}.jpg"
        if not path.exists():
            cv2.imwrite(str(path), make_photo(bases[i % len(bases)], i), [cv2.IMWRITE_JPEG_QUALITY, 90])


def tiled_frame(bases: list[np.ndarray], n_faces: int, size: tuple[int, int]) -> np.ndarray:
    """A frame of ``n_faces`` faces in a grid (each face about a fifth of the frame's height at
    10 faces, larger with fewer), at ``size`` (w, h)."""
    w, h = size
    cols = math.ceil(math.sqrt(n_faces * w / h))
    rows = math.ceil(n_faces / cols)
    frame = np.full((h, w, 3), 90, np.uint8)
    cw, ch = w // cols, h // rows
    for k in range(n_faces):
        r, c = divmod(k, cols)
        face = bases[k % len(bases)]
        s = min(cw / face.shape[1], ch / face.shape[0]) * 0.9
        f = cv2.resize(face, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
        y, x = r * ch + (ch - f.shape[0]) // 2, c * cw + (cw - f.shape[1]) // 2
        frame[y : y + f.shape[0], x : x + f.shape[1]] = f
    return frame


def write_video(path: Path, frame: np.ndarray, seconds: float = 4.0, fps: float = 30.0) -> None:
    h, w = frame.shape[:2]
    out = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
    for k in range(int(seconds * fps)):
        dx = int(round(6 * math.sin(k / fps * 2 * math.pi)))  # a little motion: the tracker works
        out.write(np.roll(frame, dx, axis=1))
    out.release()


# -- the kiosk -----------------------------------------------------------------------------------
def booth_config(
    folder: Path, source: dict[str, Any], faces: Path, cache: Path, port: int, **extra: Any
) -> Path:
    """The bundled booth config with only the source, window, faces, cache and console changed."""
    cfg = yaml.safe_load((ROOT / "kiosk" / "configs" / "default.yaml").read_text())
    cfg["source"] = source
    cfg["display"].update(fullscreen=False, width=1280, height=720)
    cfg["faces"] = {"dir": str(faces), "cache_dir": str(cache)}
    cfg["console"] = {"enabled": True, "listen": f"127.0.0.1:{port}", "pin": PIN, "allow": ["127.0.0.0/8"]}
    for section, values in extra.items():
        cfg.setdefault(section, {}).update(values)
    path = folder / "booth.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_stats(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _post(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", path, headers=BASIC)
        return conn.getresponse().status
    finally:
        conn.close()


class Kiosk:
    """``kiosk run --headless`` on a config, its stats JSON rewritten every 0.5 s."""

    def __init__(self, config: Path, folder: Path) -> None:
        self.stats_path = folder / "stats.json"
        self.stats_path.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "kiosk", "run", "--config", str(config), "--headless"]
        cmd += ["--stats-json", str(self.stats_path), "--stats-interval", "0.5"]
        self.log = (folder / "kiosk.log").open("w")
        # cwd: the folder, so that ``-m kiosk`` imports the tree PYTHONPATH names
        self.proc = subprocess.Popen(cmd, cwd=folder, stdout=self.log, stderr=subprocess.STDOUT)

    def wait(self, cond: Any, timeout_s: float, poll_s: float = 0.25) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the kiosk exited with {self.proc.returncode}; see {self.log.name}")
            s = _read_stats(self.stats_path)
            if s is not None and cond(s):
                return s
            time.sleep(poll_s)
        raise TimeoutError(f"not within {timeout_s:g} s; see {self.log.name}")

    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait; the final stats, with ``cpu_s``: the kiosk's CPU seconds (user + system,
        its threads; not the console's child), from its rusage."""
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        cpu_s = None
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                cpu_s = round(usage.ru_utime + usage.ru_stime, 1)
                break
            time.sleep(0.1)
        else:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        stats = _read_stats(self.stats_path) or {}
        stats["cpu_s"] = cpu_s
        return stats


def run_library(folder: Path, faces: Path, cache: Path, visitor: Path, timeout_s: float) -> dict[str, Any]:
    """One start of the kiosk on ``faces``: start-up, memory, five face switches."""
    port = _free_port()
    src = {"kind": "image", "path": str(visitor), "image_fps": 30, "mirror": False}
    config = booth_config(folder, src, faces, cache, port)
    t0 = time.monotonic()
    k = Kiosk(config, folder)
    try:
        s = k.wait(
            lambda s: s["library"].get("loaded_s") is not None and s["library"].get("first_face_s"), timeout_s
        )
        switches = []
        for n in range(1, 6):
            code = _post(port, "/api/face/next")
            if code != 202:
                raise RuntimeError(f"POST /api/face/next answered {code}")
            s = k.wait(lambda s, n=n: s["library"]["switches"] >= n, 30, poll_s=0.1)
            switches.append(s["library"]["switch_ms"])
            time.sleep(0.6)  # the next stats file: not the same frame twice
        time.sleep(1.0)
    finally:
        final = k.stop()
    lib = final.get("library", {})
    return {
        "first_face_s": lib.get("first_face_s"),
        "loaded_s": lib.get("loaded_s"),
        "rss_peak_mb": final.get("memory", {}).get("rss_peak_mb"),
        "faces_loaded": final.get("faces", {}).get("loaded"),
        "problems": len(final.get("faces", {}).get("problems", [])),
        "switch_ms": switches,
        "switch_ms_median": statistics.median(switches),
        "wall_s": round(time.monotonic() - t0, 1),
        "cpu_s": final.get("cpu_s"),
        "fps_render": final.get("fps", {}).get("render"),
    }


def run_frames(
    folder: Path, faces: Path, cache: Path, source: dict[str, Any], seconds: float
) -> dict[str, Any]:
    port = _free_port()
    config = booth_config(folder, source, faces, cache, port, processing={"max_faces": 10})
    k = Kiosk(config, folder)
    try:
        k.wait(lambda s: s["library"].get("first_face_s") is not None, 120)
        start = k.wait(lambda s: True, 5)
        time.sleep(seconds)
        end = k.wait(lambda s: s["duration_s"] > start["duration_s"] + seconds - 1, 10)
    finally:
        k.stop()
    dt = end["duration_s"] - start["duration_s"]

    def rate(a: str, b: str) -> float:
        return round((end[a][b] - start[a][b]) / dt, 2)

    lat = end["latency_ms"]
    frames_proc = end["latency_ms"]["process_samples"] - start["latency_ms"]["process_samples"]
    proc_ms = (lat["process_sum"] - start["latency_ms"]["process_sum"]) / max(frames_proc, 1)
    return {
        "render_fps": rate("frames", "rendered"),
        "capture_fps": rate("frames", "captured"),
        "processed_fps": rate("frames", "processed"),
        "process_ms_mean": round(proc_ms, 1),
        "process_ms_p50": lat["process_p50"],
        "screen": end["display"]["screen"],
        "active_mode": end["display"]["active_mode"],
        "rss_peak_mb": end["memory"]["rss_peak_mb"],
    }


def machine() -> dict[str, Any]:
    return {"nproc": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()]}


# -- commands ------------------------------------------------------------------------------------
def cmd_library(args: argparse.Namespace, results: dict[str, Any]) -> None:
    bases = _base_faces()
    work = Path(args.work)
    visitor = work / "visitor.jpg"
    nasa = cv2.imread(str(SHARED_MEDIA / "astronaut_eileen_collins_nasa.png"))
    cv2.imwrite(str(visitor), tiled_frame([nasa], 1, RESOLUTIONS["720p"]))
    rows = results.setdefault("library", [])
    for n in args.sizes:
        faces = work / f"faces{n}"
        write_photos(faces, n, bases)
        cache = work / f"cache{n}"
        for kind in args.runs:
            if kind == "cold" and cache.exists():
                for p in cache.iterdir():
                    p.unlink()
            run_dir = work / f"run{n}{kind}"
            run_dir.mkdir(exist_ok=True)
            before = machine()
            r = run_library(run_dir, faces, cache, visitor, args.timeout)
            r.update(photos=n, cache=kind, load_before=before["loadavg"], load_after=machine()["loadavg"])
            rows.append(r)
            print(json.dumps(r), flush=True)


def cmd_frames(args: argparse.Namespace, results: dict[str, Any]) -> None:
    bases = _base_faces()[:8]
    work = Path(args.work)
    faces = work / "faces3"
    write_photos(faces, 3, bases)
    cache = work / "cache3"
    rows = results.setdefault("frames", [])
    for res in args.resolutions:
        for n in args.faces:
            frame = tiled_frame(bases, n, RESOLUTIONS[res])
            for kind in args.kinds:
                run_dir = work / f"frames_{res}_{n}_{kind}"
                run_dir.mkdir(exist_ok=True)
                if kind == "image":
                    path = run_dir / "scene.png"
                    cv2.imwrite(str(path), frame)
                    src = {"kind": "image", "path": str(path), "image_fps": 30, "mirror": False}
                else:
                    path = run_dir / "scene.mp4"
                    write_video(path, frame)
                    src = {"kind": "video", "path": str(path), "mirror": False}
                before = machine()
                r = run_frames(run_dir, faces, cache, src, args.seconds)
                r.update(resolution=res, faces=n, source=kind, load_before=before["loadavg"])
                rows.append(r)
                print(json.dumps(r), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lib = sub.add_parser("library")
    lib.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    lib.add_argument("--runs", nargs="+", default=["cold", "warm"], choices=("cold", "warm"))
    lib.add_argument("--timeout", type=float, default=600.0, help="seconds for all photos to load")
    fr = sub.add_parser("frames")
    fr.add_argument("--faces", type=int, nargs="+", default=[1, 3, 6, 10])
    fr.add_argument("--resolutions", nargs="+", default=["720p", "1080p", "4k"], choices=list(RESOLUTIONS))
    fr.add_argument("--kinds", nargs="+", default=["image", "video"], choices=("image", "video"))
    fr.add_argument("--seconds", type=float, default=12.0)
    pl = sub.add_parser("plot")
    pl.add_argument("results", type=Path)
    pl.add_argument("--img", type=Path, default=ROOT / "docs" / "img")
    for p in (lib, fr):
        p.add_argument("--out", type=Path, default=Path("scaling.json"))
        p.add_argument(
            "--work", default="", help="folder for photos, caches and runs (default: a temporary one)"
        )
    args = ap.parse_args()
    if args.cmd == "plot":
        from scaling_plots import write_plots  # beside this file

        for path in write_plots(json.loads(args.results.read_text()), args.img):
            print(path)
        return 0
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.setdefault("machine", []).append(
        {**machine(), "cmd": args.cmd, "t": time.strftime("%Y-%m-%d %H:%M")}
    )
    with tempfile.TemporaryDirectory() as tmp:
        if not args.work:
            args.work = tmp
        Path(args.work).mkdir(parents=True, exist_ok=True)
        try:
            (cmd_library if args.cmd == "library" else cmd_frames)(args, results)
        finally:
            results["machine"][-1]["loadavg_end"] = list(os.getloadavg())
            args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
