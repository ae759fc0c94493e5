"""What a burst of phone requests to the keepsake server costs a render loop in the same process.

The kiosk's process runs the keepsake web server (kiosk/keepsake/server.py) in a thread of its own;
here a render-like loop thread (per frame: Python bookkeeping plus a 1280x720 numpy blend, paced to
``--fps`` like vsync, or unpaced with ``--fps 0``) runs beside it. Another process (the phones) sends
bursts of ``--burst`` concurrent requests, half pages and half JPEGs of a 300 KB photo, either all
from 127.0.0.1 (one client: the rate limit answers most with 429) or spread over 127.0.0.2-127.0.0.254
(``--spread``: many phones, every request served). Windows of ``--seconds`` alternate without and
with the burst; it prints the loop's rate in each, the ratio with/without (medians), every status
seen, and resident memory: the measuring process before the keepsake modules are imported, with
the server up and at the end (it also holds the render-like loop's arrays), and the server process's.

    .venv/bin/python benchmarks/keepsake_burst.py [--rounds 3] [--seconds 3] [--burst 300] [--spread]
        [--mode process|thread] [--kiosk: the real kiosk headless, its render rate from --stats-json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

PORT = 18195  # this worktree's ports: 18150-18199

CLIENT = r"""
import asyncio, json, sys, time
import aiohttp
port, token, burst, seconds, spread = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
async def main():
    seen = {}
    sent = 0
    end = time.monotonic() + seconds
    sessions = []
    for i in range(64 if spread else 1):
        src = (f"127.0.0.{2 + i}", 0) if spread else None
        conn = aiohttp.TCPConnector(limit=0, force_close=True, local_addr=src)
        sessions.append(aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=10)))
    async def one(i):
        path = f"/p/{token}.jpg" if i % 2 else f"/p/{token}"
        s = sessions[i % len(sessions)]
        try:
            async with s.get(f"http://127.0.0.1:{port}{path}") as r:
                await r.read()
                seen[r.status] = seen.get(r.status, 0) + 1
        except Exception as exc:
            k = type(exc).__name__
            seen[k] = seen.get(k, 0) + 1
    while time.monotonic() < end:
        t0 = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(burst)))
        sent += burst
        await asyncio.sleep(max(0.0, 0.25 - (time.monotonic() - t0)))
    for s in sessions:
        await s.close()
    print(json.dumps({"sent": sent, "seen": {str(k): v for k, v in seen.items()}}))
asyncio.run(main())
"""


def rss_mib(pid: int | str = "self", key: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_rss_mib(server: object) -> tuple[float, float]:
    """(RSS, peak RSS) of the server process; NaN for a thread."""
    pid = getattr(server, "pid", None)
    if pid is None:
        return float("nan"), float("nan")
    return rss_mib(pid), rss_mib(pid, "VmHWM:")


class RenderLike(threading.Thread):
    """Per frame: ~200 Python-level operations and a 1280x720x3 blend; paced to ``fps`` (0: as fast
    as it goes). ``frames`` counts them."""

    def __init__(self, fps: float) -> None:
        super().__init__(daemon=True, name="render-like")
        self.period = 1.0 / fps if fps > 0 else 0.0
        self.frames = 0
        self.stop = threading.Event()
        rng = np.random.default_rng(0)
        self.a = rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8)
        self.b = rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8)
        self.out = np.empty_like(self.a)

    def run(self) -> None:
        t_next = time.perf_counter()
        while not self.stop.is_set():
            state = {"i": self.frames}
            for k in range(200):  # the loop body's bookkeeping: input, counters, overlay texts
                state[f"k{k % 20}"] = k * 2
            np.add(self.a >> 1, self.b >> 1, out=self.out)
            self.frames += 1
            if self.period:
                t_next += self.period
                delay = t_next - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                else:
                    t_next = time.perf_counter()


def rate(loop: RenderLike, seconds: float) -> float:
    f0, t0 = loop.frames, time.perf_counter()
    time.sleep(seconds)
    return (loop.frames - f0) / (time.perf_counter() - t0)


KIOSK_CONFIG = """
source: {{kind: synthetic, synthetic: {{width: 640, height: 360, fps: 30}}}}
processing: {{enabled: false}}
display: {{width: 640, height: 360, vsync: false, max_fps: 60}}
controls: {{gamepad_enabled: false}}
keepsake: {{enabled: true, listen: "127.0.0.1:{port}", keep_on_disk: true}}
"""


def kiosk_run(args: argparse.Namespace) -> None:
    """The real kiosk (``kiosk run --headless``, keepsakes on, one photo kept): its render rate
    (``fps_now.render`` of the stats file, every 0.25 s) without and with the bursts."""
    work = Path(tempfile.mkdtemp(prefix="keepsake-kiosk-"))
    photos = work / "keepsakes"
    photos.mkdir()
    token = "Kiosk" + "k" * 17  # a keepsake left on disk (keep_on_disk: true takes it back)
    (photos / f"{token}.jpg").write_bytes(b"\xff\xd8" + os.urandom(300_000) + b"\xff\xd9")
    (work / "k.yaml").write_text(KIOSK_CONFIG.format(port=PORT))
    stats = work / "s.json"
    env = {**os.environ, "KIOSK_KEEPSAKE_DIR": str(photos)}
    total = 8 + args.rounds * (2 * args.seconds + 1.5)
    kiosk = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(work / "k.yaml"), "--headless",
         "--seconds", str(total), "--stats-json", str(stats), "--stats-interval", "0.25"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def sample(seconds: float) -> float:
        values = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.25)
            with contextlib.suppress(OSError, ValueError, KeyError):
                values.append(json.loads(stats.read_text())["fps_now"]["render"])
        return statistics.median(values) if values else float("nan")

    time.sleep(6)  # start-up
    without, with_burst, seen_all = [], [], {}
    for _ in range(args.rounds):
        without.append(sample(args.seconds))
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(PORT), token, str(args.burst), str(args.seconds + 0.5),
             "1" if args.spread else "0"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(0.5)
        with_burst.append(sample(args.seconds))
        out, _ = client.communicate(timeout=60)
        for k, v in json.loads(out)["seen"].items():
            seen_all[k] = seen_all.get(k, 0) + v
    kiosk.terminate()
    _, err = kiosk.communicate(timeout=30)
    w, b = statistics.median(without), statistics.median(with_burst)
    print("kiosk run --headless 640x360, max_fps 60, keepsakes on; machine shared and loaded")
    print(f"  render fps without burst: {[round(x, 1) for x in without]}, median {w:.1f}")
    print(f"  render fps with burst:    {[round(x, 1) for x in with_burst]}, median {b:.1f}")
    print(f"  ratio with/without: {b / w:.3f}; answers: {seen_all}; kiosk exit {kiosk.returncode}")
    if kiosk.returncode != 0:
        print(err[-2000:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--burst", type=int, default=300)
    ap.add_argument("--fps", type=float, default=60.0, help="render-like loop pacing; 0: unpaced")
    ap.add_argument("--spread", action="store_true", help="requests from 64 loopback addresses (many phones)")
    ap.add_argument("--mode", choices=["process", "thread"], default="process", help="where the server runs")
    ap.add_argument(
        "--kiosk", action="store_true", help="measure the real kiosk (kiosk run --headless) instead"
    )
    args = ap.parse_args()
    if args.kiosk:
        kiosk_run(args)
        return

    rss0 = rss_mib()
    from kiosk.config import KeepsakeConfig
    from kiosk.keepsake.process import KeepsakeServerProcess
    from kiosk.keepsake.store import KeepsakeStore, StoreLimits

    folder = Path(tempfile.mkdtemp(prefix="keepsake-bench-"))
    store = KeepsakeStore(folder, StoreLimits(900, 50, 200)).open()
    photo = b"\xff\xd8" + os.urandom(300_000) + b"\xff\xd9"
    cfg = KeepsakeConfig(enabled=True, listen=f"127.0.0.1:{PORT}")
    server: Any
    if args.mode == "thread":
        from kiosk.keepsake.server import KeepsakeServer  # aiohttp in this process

        server = KeepsakeServer(store, cfg).start()
        rec = store.add(photo)
    else:
        server = KeepsakeServerProcess(store, cfg).start()
        rec = store.add(photo)  # told to the server process
    rss_up = rss_mib()
    child_up = child_rss_mib(server)

    loop = RenderLike(args.fps)
    loop.start()
    time.sleep(0.5)
    without, with_burst, seen_all, sent = [], [], {}, 0
    for _ in range(args.rounds):
        without.append(rate(loop, args.seconds))
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(PORT), rec.token, str(args.burst), str(args.seconds + 0.5),
             "1" if args.spread else "0"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(0.5)  # the client's start-up (imports) is not the burst
        with_burst.append(rate(loop, args.seconds))
        out, _ = client.communicate(timeout=60)
        res = json.loads(out)
        sent += res["sent"]
        for k, v in res["seen"].items():
            seen_all[k] = seen_all.get(k, 0) + v
    loop.stop.set()
    loop.join()
    rss_end = rss_mib()
    child_end = child_rss_mib(server)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    server.stop()
    store.close()

    w, b = statistics.median(without), statistics.median(with_burst)
    pacing = f"paced to {args.fps:g} fps" if args.fps else "unpaced"
    print(f"render-like loop ({pacing}), server in a {args.mode}, machine shared and loaded")
    print(f"  without burst: {[round(x, 1) for x in without]} fps, median {w:.1f}")
    print(f"  with burst:    {[round(x, 1) for x in with_burst]} fps, median {b:.1f}")
    print(f"  ratio with/without: {b / w:.3f}")
    print(
        f"requests sent: {sent} ({'64 loopback addresses' if args.spread else 'one client, 127.0.0.1'}), answers: {seen_all}"
    )
    print(
        f"server counts: pages {server.counts.pages}, JPEGs {server.counts.downloads}, refused {server.counts.refused}"
    )
    print(
        f"kiosk-side RSS MiB: before the keepsake modules {rss0:.1f}, server up {rss_up:.1f} (+{rss_up - rss0:.1f}), "
        f"after the bursts {rss_end:.1f} (+{rss_end - rss0:.1f}), peak {peak:.1f}"
    )
    if args.mode == "process":
        print(
            f"server process RSS MiB: up {child_up[0]:.1f}, after the bursts {child_end[0]:.1f}, "
            f"peak {child_end[1]:.1f}"
        )


if __name__ == "__main__":
    main()
