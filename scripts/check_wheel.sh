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
"$kiosk" run --demo --headless --frames 60 --screenshot s.png --stats-json stats.json >run.log 2>&1 \
    || { cat run.log >&2; exit 1; }
"$venv/bin/python" - <<'EOF'
import json
import numpy as np
from PIL import Image
img = np.asarray(Image.open("s.png").convert("RGB"), dtype=np.float32)
assert img.shape[0] >= 120 and img.shape[1] >= 160, img.shape
assert img.mean() > 20 and img.std() > 20, f"screenshot is blank: mean {img.mean():.1f}, std {img.std():.1f}"
stats = json.load(open("stats.json"))
assert stats["frames"]["rendered"] >= 60, stats["frames"]
print(f"check_wheel: demo screenshot {img.shape[1]}x{img.shape[0]}, mean {img.mean():.0f}, std {img.std():.0f}")
EOF
"$kiosk" config init x.yaml --demo >/dev/null
"$kiosk" config check x.yaml
if "$kiosk" config init x.yaml >/dev/null 2>&1; then echo "check_wheel: config init overwrote x.yaml" >&2; exit 1; fi
# No camera/GPU here: doctor exits non-zero; its report must still be valid JSON.
"$kiosk" doctor --json >doctor.json 2>doctor.err || true
"$venv/bin/python" -c 'import json; r = json.load(open("doctor.json")); print("check_wheel: doctor --json OK:", type(r).__name__)'
say "OK ($wheel)"
