"""A decompression-bomb photo in a running kiosk, for any checkout side by side: the fault soak's
booth (stand-in models, a looping video of two white "faces") runs ``kiosk run --headless`` from
the tree given; once the swap is on screen a 30000x30000 progressive JPEG of a few hundred bytes
(``scripts/soak.py`` ``bomb_jpeg``) is dropped into the faces folder, and for the next 25 s the
share of new screenshots that show the swap and the kiosk's peak RSS (``VmHWM``) are printed, with
the kiosk's log lines about it.

    .venv/bin/python benchmarks/bomb_photo.py .            # this checkout
    .venv/bin/python benchmarks/bomb_photo.py /tmp/old     # e.g. git archive 119d615 | tar -x -C /tmp/old

Measured on the 2-core VM (loaded): before the decode budget 83 of 108 screenshots swapped, peak
RSS 3165 MB, the inference thread abandoned after 5.1 s, recovered 11.6 s after the stall, the
bomb reported as "no face found"; with it 112 of 112, peak RSS 437 MB, the bomb named at once.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import soak  # noqa: E402


def tinted(shot: Path) -> bool | None:
    img = cv2.imread(str(shot)) if shot.is_file() else None
    return None if img is None else bool(soak.classify_shot(img)[0])


def peak_rss_mb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def main() -> int:
    tree = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="kiosk-bomb-"))
    cfg = soak.make_booth(tmp, ("ann", "ben"))
    shot, log_path = tmp / "shot.png", tmp / "kiosk.log"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless", "--seconds", "70",
           "--screenshot", str(shot), "--screenshot-every", "0.2"]  # fmt: skip
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and not tinted(shot):
        time.sleep(0.2)
    print(f"{tree}: first swap on screen after {time.monotonic() - t0:.1f} s")
    (tmp / "faces" / "bomb.jpg").write_bytes(soak.bomb_jpeg())
    t1, on, peak, last = time.monotonic(), [], 0, None
    while time.monotonic() - t1 < 25 and proc.poll() is None:
        peak = max(peak, peak_rss_mb(proc.pid))
        try:
            mtime: int | None = shot.stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime != last:
            last, t = mtime, tinted(shot)
            if t is not None:
                on.append(t)
        time.sleep(0.2)
    died = proc.poll()
    print(f"after the bomb: the swap in {sum(on)} of {len(on)} new screenshots; peak RSS {peak} MB"
          + (f"; the kiosk exited with {died}" if died is not None else ""))  # fmt: skip
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    for line in log_path.read_text(errors="replace").splitlines():
        if any(w in line for w in ("bomb", "abandon", "stall", "terminate", "Traceback")):
            print("  log:", line[:200])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
