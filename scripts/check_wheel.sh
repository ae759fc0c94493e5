#!/usr/bin/env bash
# Build the sdist and the wheel (the wheel from the sdist), install the wheel into a clean virtualenv
# and run the installed kiosk from a folder outside the checkout: --version, the headless demo
# (the screenshot must show the demo, not a black frame), config init + check, doctor --json.
#
#   bash scripts/check_wheel.sh                 # clean venv, dependencies from the package index (CI)
#   bash scripts/check_wheel.sh --offline       # no network: the venv reuses .venv's dependencies
#   bash scripts/check_wheel.sh --workdir DIR   # keep everything in DIR (default: a temp folder)
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
OFFLINE=0
WORK=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --offline) OFFLINE=1 ;;
        --workdir) WORK=${2:?}; shift ;;
        *) echo "usage: $0 [--offline] [--workdir DIR]" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$WORK" ]; then
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
PY=$SRC/.venv/bin/python
say() { printf 'check_wheel: %s\n' "$*"; }

# A fresh copy of the tracked sources (what a clone has), so the build leaves nothing in the checkout.
mkdir -p "$WORK/src"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$SRC" ls-files -z --cached --others --exclude-standard -- pyproject.toml README.md kiosk \
        | (cd "$SRC" && xargs -0 cp --parents -t "$WORK/src")
else
    cp -r pyproject.toml README.md kiosk "$WORK/src/"
fi
"$PY" -m build --no-isolation --outdir "$WORK/dist" "$WORK/src" >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log" >&2; exit 1; }
wheel=$(ls "$WORK"/dist/*.whl)
say "built $(basename "$wheel") from $(basename "$(ls "$WORK"/dist/*.tar.gz)")"

venv=$WORK/venv
if [ "$OFFLINE" = 1 ]; then
    "$PY" -m venv --without-pip "$venv"
    # The dependencies come from .venv (a plain path entry: .venv's own .pth files, such as an
    # editable install of the checkout, are not processed, so `kiosk` can only come from the wheel).
    "$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
        >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-deps.pth"
    "$PY" -m pip --python "$venv/bin/python" install -q --no-deps --no-index "$wheel"
else
    "$PY" -m venv "$venv"
    "$venv/bin/pip" install -q "$wheel"
fi

# From a folder outside the checkout, with nothing of the checkout on the path.
run_dir=$WORK/run
mkdir -p "$run_dir"
cd "$run_dir"
unset PYTHONPATH KIOSK_SHADERS_DIR KIOSK_CONFIG KIOSK_DATA_DIR KIOSK_MODELS_DIR NUMBA_CACHE_DIR
export XDG_DATA_HOME=$WORK/data XDG_CACHE_HOME=$WORK/cache
kiosk=$venv/bin/kiosk
where=$("$venv/bin/python" -c 'import kiosk; print(kiosk.__file__)')
case "$where" in "$venv"/*) ;; *) echo "check_wheel: kiosk imported from $where, not the wheel" >&2; exit 1 ;; esac
"$kiosk" --version | tee version.txt
grep -qx "kiosk [0-9][0-9.a-z+]*" version.txt
# Compile the pixel kernels into the (fresh) cache as an install does (deploy/install.sh,
# scripts/setup.sh), so the demo below starts as it does on an installed booth.
start=$SECONDS
"$venv/bin/python" -c 'from kiosk.inference import color, kernels, mask; kernels.warm_up(); mask.warm_up(); color.warm_up()'
say "kernels compiled into the cache in $((SECONDS - start)) s"
"$kiosk" run --demo --headless --frames 120 --screenshot s.png --stats-json stats.json >run.log 2>&1 \
    || { cat run.log >&2; exit 1; }
# The installed demo swaps a face with nothing downloaded: the classic swap with the bundled YuNet,
# the bundled face on the bundled visitor, on most frames; the face on the screen is the source's.
"$venv/bin/python" - <<'EOF'
import json
import cv2
import numpy as np
from PIL import Image
from kiosk.inference.align import align_matrix
from kiosk.paths import package_file
from kiosk.config import parse_config
from kiosk.processing.pipeline import open_detector
img = np.asarray(Image.open("s.png").convert("RGB"), dtype=np.float32)
assert img.shape[0] >= 120 and img.shape[1] >= 160, img.shape
assert img.mean() > 20 and img.std() > 20, f"screenshot is blank: mean {img.mean():.1f}, std {img.std():.1f}"
stats = json.load(open("stats.json"))
frames = stats["frames"]
assert frames["rendered"] >= 120, frames
assert stats["processing"]["stage"].startswith("classic swap ("), stats["processing"]
assert stats["processing"]["notice"] == "", stats["processing"]
assert frames["with_swapped_faces"] > frames["rendered"] / 2, f"faces pasted on too few frames: {frames}"
det = open_detector(parse_config("models: {swapper: classic, providers: {order: [cpu]}}", "<check>"))
def aligned(bgr):
    faces = det.detect(bgr)
    assert faces, "no face found"
    crop = cv2.warpAffine(bgr, align_matrix(faces[0].kps, "arcface_112", 112), (112, 112))
    g = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY).astype(np.float32)[36:104, 24:88]
    return (g - g.mean()) / max(float(g.std()), 1e-6)
screen = aligned(np.ascontiguousarray(img[:, :, ::-1].astype(np.uint8)))
demo = package_file("data", "demo")
to_source = float((screen * aligned(cv2.imread(str(demo / "source_face_fred_marshall_1961.jpg")))).mean())
to_visitor = float((screen * aligned(cv2.imread(str(demo / "visitor_eileen_collins_nasa.jpg")))).mean())
assert to_source > to_visitor + 0.1, f"the face on the screen is not the source's: {to_source:.2f} vs {to_visitor:.2f}"
print(
    f"check_wheel: demo screenshot {img.shape[1]}x{img.shape[0]}, swapped faces on "
    f"{frames['with_swapped_faces']}/{frames['rendered']} frames, face like the source {to_source:.2f} "
    f"vs the visitor {to_visitor:.2f}"
)
EOF
"$kiosk" config init x.yaml --demo >/dev/null
"$kiosk" config check x.yaml
if "$kiosk" config init x.yaml >/dev/null 2>&1; then echo "check_wheel: config init overwrote x.yaml" >&2; exit 1; fi
# No camera/GPU here: doctor exits non-zero; its report must still be valid JSON.
"$kiosk" doctor --json >doctor.json 2>doctor.err || true
"$venv/bin/python" -c 'import json; r = json.load(open("doctor.json")); print("check_wheel: doctor --json OK:", type(r).__name__)'
say "OK ($wheel)"
