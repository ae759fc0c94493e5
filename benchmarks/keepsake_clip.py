"""What building a clip (keepsake.clip) costs a render loop in the same process.

A render-like loop (per frame: Python bookkeeping, a 1280x720 numpy blend, and the ring's offer of
the picture on screen, as the kiosk's keepsake host does) runs paced to ``--fps`` (vsync; 0: unpaced) for ``--seconds``, in windows
that alternate without and with clips being built back to back on the clip thread (composite,
H.264 MP4, boomerang GIF: what one kept photo costs). Prints the loop's rate in each window and the
ratio with/without (medians of ``--rounds``).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/keepsake_clip.py [--rounds 3] [--seconds 3] [--fps 60|0]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from kiosk.keepsake.brand import NO_FRAME
from kiosk.keepsake.clip import ClipMaker, ClipRing, small_frame
from kiosk.types import Face, SwappedFace


def picture(i: int) -> tuple[np.ndarray, tuple[SwappedFace, ...]]:
    frame = np.full((720, 1280, 3), 90, np.uint8)
    crop = np.full((128, 128, 3), (0, 0, 230), np.uint8)
    s = 128 / 320
    affine = np.array([[s, 0, -(400 + i % 50) * s], [0, s, -200 * s]])
    face = Face(np.zeros(4, np.float32), 1.0, np.zeros((5, 2), np.float32))
    return frame, (SwappedFace(crop, affine, face),)


def loop_rate(seconds: float, ring: ClipRing, fps: float = 0.0) -> float:
    a = np.zeros((720, 1280, 3), np.uint8)
    b = np.full((720, 1280, 3), 200, np.uint8)
    shown = picture(0)
    n, t0 = 0, time.perf_counter()
    while (now := time.perf_counter()) - t0 < seconds:
        np.add(a >> 1, b >> 1, out=a)  # the frame's pixel work
        ring.offer(now, lambda: shown)
        n += 1
        if fps:  # paced like vsync
            time.sleep(max(0.0, t0 + n / fps - time.perf_counter()))
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--fps", type=float, default=60.0, help="pace the loop (0: unpaced)")
    args = ap.parse_args()
    maker = ClipMaker()
    for i in range(40):
        maker.ring.add(small_frame(*picture(i), 480))
    frames = maker.ring.snapshot()
    maker.make("A" * 22, frames, NO_FRAME, lambda t, f: None)
    maker.wait(60)  # warm: numba, libx264
    without, with_, built = [], [], [0]
    for _ in range(args.rounds):
        without.append(loop_rate(args.seconds, ClipRing(), args.fps))
        stop = threading.Event()

        def keep(token: str, files: dict[str, bytes]) -> None:
            built[0] += 1

        def feed(stop: threading.Event) -> None:
            while not stop.is_set():
                maker.make("A" * 22, frames, NO_FRAME, keep).result()

        feeder = threading.Thread(target=feed, args=(stop,), daemon=True)
        feeder.start()
        with_.append(loop_rate(args.seconds, ClipRing(), args.fps))
        stop.set()
        feeder.join(60)
    w, wo = statistics.median(with_), statistics.median(without)
    print(f"render-like loop without clips: {[round(x) for x in without]} fps (median {wo:.0f})")
    print(
        f"while clips are built:          {[round(x) for x in with_]} fps (median {w:.0f}); {built[0]} clips"
    )
    print(f"ratio with/without: {w / wo:.2f}")
    maker.close()


if __name__ == "__main__":
    main()
