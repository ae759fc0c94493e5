#!/usr/bin/env bash
# What a booth with an NVIDIA GPU would see: kiosk bench on cost-matched stand-in models.
#
#   scripts/gpu_bench.sh [--cpu] [--out FILE] [--venv DIR] [--models DIR] [--wheels DIR]
#                        [--frames N] [--minutes M] [--no-trt]
#
# From a fresh checkout: makes its own virtualenv (default /tmp/kiosk-gpu-venv), installs the
# project (`pip install .`) and the GPU runtime from pip (onnxruntime-gpu[cuda,cudnn], and
# tensorrt-cu12-libs for the TensorRT provider), generates the cost-matched models there (about
# 1.1 GB, too big to copy; the folder is reused when its manifest matches), then runs
# `kiosk bench --cost-matched` at 1920x1080 for every variant:
#   provider CUDA | TensorRT fp16  x  faces 1 | 4  x  enhancer off | on
#   x  display.mode synced | live  x  processing.pipelined off | on
# Each variant is a generated config file, checked with `kiosk config check`; a variant whose key
# this build does not have (display.mode, processing.pipelined) is skipped with the reason.
# Writes one JSON (--out, default gpu_bench.json) and prints a Markdown table. Then the hot path's
# time outside session.run and its OpenCV floor at 1080p with six faces, CPU paste-back
# (benchmarks/hotpath_floor.py, OpenCV on 1 and on all cores) into <out>_hotpath.txt: the host's
# side of a GPU frame.
#
# --cpu: a dry run on the CPU, end to end: same venv and install (without the CUDA/TensorRT
#        wheels), the same generator at 1/16 width, every variant on the CPU provider with one
#        measured frame. It checks the script, not any speed.
# --wheels DIR: install from wheels in DIR only (a machine without internet).
# --minutes M: stop starting variants after M minutes (default 8 minus setup); the rest are
#        recorded as skipped.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CPU=0
OUT="gpu_bench.json"
VENV="/tmp/kiosk-gpu-venv"
MODELS=""
WHEELS=""
FRAMES=""
MINUTES="8"
TRT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) CPU=1 ;;
    --out) OUT="$2"; shift ;;
    --venv) VENV="$2"; shift ;;
    --models) MODELS="$2"; shift ;;
    --wheels) WHEELS="$2"; shift ;;
    --frames) FRAMES="$2"; shift ;;
    --minutes) MINUTES="$2"; shift ;;
    --no-trt) TRT=0 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
START=$(date +%s)
say() { echo "[gpu_bench $(( $(date +%s) - START ))s] $*" >&2; }

PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
[ -n "$WHEELS" ] && PIP+=(--no-index --find-links "$WHEELS")
say "installing the project (pip install .)"
"${PIP[@]}" "$ROOT"
if [ "$CPU" = 1 ]; then
  say "--cpu: not installing onnxruntime-gpu[cuda,cudnn] or tensorrt-cu12-libs (dry run on the CPU provider)"
else
  say "installing the GPU runtime: onnxruntime-gpu[cuda,cudnn]"
  "${PIP[@]}" "onnxruntime-gpu[cuda,cudnn]"
  if [ "$TRT" = 1 ]; then
    say "installing TensorRT libraries: ${TRT_SPEC:=tensorrt-cu12-libs}"
    "${PIP[@]}" "$TRT_SPEC" || say "TensorRT libraries not installed: TensorRT variants will report the provider they fell back to"
  fi
  # The CUDA/cuDNN/TensorRT libraries from pip live in site-packages; the dynamic loader must see
  # them before Python starts (ONNX Runtime dlopens its CUDA provider, which needs them).
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  LIBS=""
  for d in "$SITE"/nvidia/*/lib "$SITE"/tensorrt_libs; do
    if [ -d "$d" ]; then LIBS="$LIBS$d:"; fi
  done
  export LD_LIBRARY_PATH="${LIBS}${LD_LIBRARY_PATH:-}"
fi
# A system onnxruntime (CPU wheel) next to onnxruntime-gpu replaces its module: refuse that.
if "$VENV/bin/python" -m pip show -q onnxruntime >/dev/null 2>&1; then
  echo "gpu_bench.sh: the CPU 'onnxruntime' package is installed in $VENV beside onnxruntime-gpu; remove it: $VENV/bin/pip uninstall -y onnxruntime" >&2
  exit 1
fi
(cd /tmp && "$VENV/bin/python" -c 'import onnxruntime as o; print("onnxruntime", o.__version__, o.get_available_providers())') >&2

# Run from a scratch folder so that the installed package (not the checkout) is what runs.
WORK="$(mktemp -d /tmp/kiosk-gpu-bench.XXXXXX)"
# An installed kiosk whose wheel does not carry the shaders (package data) cannot render: point it
# at the checkout's, and say so, rather than fail every variant.
if ! (cd "$WORK" && "$VENV/bin/python" -c 'from kiosk.render.shaders import read_shader; read_shader("frame.vert")' ) >/dev/null 2>&1; then
  if [ -z "${KIOSK_SHADERS_DIR:-}" ] && [ -d "$ROOT/shaders" ]; then
    say "the installed package has no shaders: using KIOSK_SHADERS_DIR=$ROOT/shaders"
    export KIOSK_SHADERS_DIR="$ROOT/shaders"
  fi
fi

OUT_ABS="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
HOT="${OUT_ABS%.json}_hotpath.txt"
ARGS=(--work "$WORK" --out "$OUT_ABS"
      --deadline "$(( START + ${MINUTES%.*} * 60 ))" --generator-seconds-file "$WORK/gen_s")
[ "$CPU" = 1 ] && ARGS+=(--cpu)
[ -n "$FRAMES" ] && ARGS+=(--frames "$FRAMES")
if [ -z "$MODELS" ]; then
  MODELS="${XDG_CACHE_HOME:-$HOME/.cache}/faceswap-kiosk/cost-matched"
  [ "$CPU" = 1 ] && MODELS="$WORK/models-small"
fi
ARGS+=(--models "$MODELS")

WIDTH=1
[ "$CPU" = 1 ] && WIDTH=0.0625
say "generating the cost-matched models into $MODELS (width $WIDTH)"
G0=$(date +%s.%N)
(cd "$WORK" && "$VENV/bin/python" -m kiosk.tools.standins_cost --dir "$MODELS" --width "$WIDTH") > "$WORK/models_table.md"
G1=$(date +%s.%N)
"$VENV/bin/python" -c "print(round($G1 - $G0, 1))" > "$WORK/gen_s"
cat "$WORK/models_table.md" >&2
say "models ready in $(cat "$WORK/gen_s") s"

cd "$WORK"
"$VENV/bin/python" "$ROOT/scripts/gpu_bench_matrix.py" "${ARGS[@]}" --kiosk "$VENV/bin/kiosk" \
  --models-table "$WORK/models_table.md"
say "the hot path outside session.run and its floor (benchmarks/hotpath_floor.py) -> $HOT"
if [ "$CPU" = 1 ]; then HOTARGS=(--repeat 5 --threads 1); else HOTARGS=(--repeat 200 --threads 1 "$(nproc)"); fi
if "$VENV/bin/python" "$ROOT/benchmarks/hotpath_floor.py" "${HOTARGS[@]}" > "$HOT"; then
  cat "$HOT" >&2
else
  say "hotpath_floor.py failed (see above); the bench JSON is complete"
fi
say "done in $(( $(date +%s) - START )) s"
