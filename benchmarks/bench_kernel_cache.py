"""First start vs restart: milliseconds the kiosk spends compiling or loading its numba kernels.

Each round starts two fresh processes side by side: one with an empty kernel cache (a booth's first
start, or every start when no cache folder is writable) and one with the cache the previous
process left (a restart). Both run ``kiosk.inference.kernels.warm_up()``, which the pipeline calls
when models load. Prints the medians and their ratio.

    .venv/bin/python benchmarks/bench_kernel_cache.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = """
import json, time
t0 = time.perf_counter()
import numba  # noqa: F401
t1 = time.perf_counter()
from kiosk.inference import kernels
kernels.warm_up()
t2 = time.perf_counter()
print(json.dumps({"import_numba_ms": (t1 - t0) * 1e3, "kernels_ms": (t2 - t1) * 1e3}))
"""


def _run(cache_home: Path) -> dict[str, float]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NUMBA_CACHE_DIR", "KIOSK_CACHE_DIR", "CACHE_DIRECTORY")
    }
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache_home))
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    first: list[float] = []
    restart: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kiosk-kcache-") as tmp:
        for i in range(args.rounds):
            cache = Path(tmp) / f"r{i}"
            first.append(_run(cache)["kernels_ms"])  # empty cache: compiles, then writes the cache
            restart.append(_run(cache)["kernels_ms"])  # the cache the first one wrote
    f, r = statistics.median(first), statistics.median(restart)
    print(f"kernels compiled (first start), median of {args.rounds}: {f:.0f} ms  {[round(x) for x in first]}")
    print(
        f"kernels loaded from cache (restart), median of {args.rounds}: {r:.0f} ms  {[round(x) for x in restart]}"
    )
    print(f"restart / first start: {r / f:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
