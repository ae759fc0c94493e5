"""What fleet monitoring (``monitoring.textfile``) costs the render loop.

Per ``monitoring.interval_s`` the render loop calls ``KioskApp.stats()`` and ``TextfileMonitor.submit``;
rendering the text and the atomic write run on the writer thread. Prints the median of each (µs),
with the latency rings full (4096 / 1024 samples, the worst case for the percentiles), and the
render loop's share at the shortest interval (1 s).

    .venv/bin/python benchmarks/monitoring_cost.py [--repeat 300]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.appliance.monitoring import TextfileMonitor, render_metrics
from kiosk.config import parse_config
from kiosk.util.atomic import atomic_write


def median_us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    app = KioskApp(parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n"), RunOptions())
    app.stop.set()
    for i in range(5000):
        app.screen.latency_ms.add(10.0 + i % 7)
        app.inference.meters.process_ms.add(3.0 + i % 5)
    stats = app.stats()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        monitor = TextfileMonitor(folder / "faceswap_kiosk.prom", interval_s=1.0)
        loop_stats = median_us(app.stats, args.repeat)
        loop_submit = median_us(lambda: monitor.submit(stats), args.repeat)
        text = median_us(lambda: render_metrics(stats, True, 0.0), args.repeat)
        write = median_us(
            lambda: atomic_write(folder / "x.prom", render_metrics(stats, True, 0.0)), args.repeat
        )
        monitor.close(None)
    app.shutdown()
    loop = loop_stats + loop_submit
    print(f"render loop, once per interval: stats() {loop_stats:.0f} µs + submit() {loop_submit:.1f} µs")
    print(
        f"writer thread, once per interval: render_metrics {text:.0f} µs, render + atomic write {write:.0f} µs"
    )
    print(
        f"render loop: {loop / 1e6 * 100:.3f} % of its time at interval 1 s; the frame that submits takes "
        f"{loop / 1e3:.2f} ms more ({loop / (1e6 / 60) * 100:.1f} % of a 60 fps frame)"
    )


if __name__ == "__main__":
    main()
