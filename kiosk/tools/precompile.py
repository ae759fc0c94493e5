"""Compile the kiosk's pixel kernels into its cache (``python -m kiosk.tools.precompile``).

numba compiles each kernel the first time it runs and keeps it in the kernel cache
(``<cache_dir>/numba``); an install runs this once (``scripts/setup.sh``, ``deploy/install.sh``,
``scripts/check_wheel.sh``) so that the first ``kiosk run`` does not spend its first seconds
compiling. Besides every kernel's own warm-up, it runs the bundled demo's classic swap (the bundled
YuNet and pictures, nothing downloaded) on one frame, which compiles the specializations a running
pipeline uses. Prints the seconds it took.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    t0 = time.perf_counter()
    from kiosk.inference import color, kernels, mask

    kernels.warm_up()
    mask.warm_up()
    color.warm_up()
    from kiosk.capture.demo_visitor import DemoVisitorSource, source_face_path
    from kiosk.config import parse_config
    from kiosk.processing.models import read_image
    from kiosk.processing.pipeline import SwapPipeline

    cfg = parse_config(
        "models: {swapper: classic, enhancer: null, providers: {order: [cpu], warmup: false}}\n"
        "processing: {tracking: true, color_correction: mean_std}\nmask: {shape: face, mouth: 0.5}\n",
        "<precompile>",
        env=False,
    )
    pipe = SwapPipeline.from_config(cfg)
    pipe.warm_up()
    pipe.set_source(read_image(source_face_path()))
    visitor = DemoVisitorSource(640, 360, 30)
    visitor.open()
    for t in (3.0, 3.1):
        frame = visitor.frame_at(t)
        pipe.process(frame)
        pipe.process_into(frame, None, paste=False)
    print(f"kiosk kernels compiled into the cache in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
