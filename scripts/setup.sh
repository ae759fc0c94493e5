#!/usr/bin/env bash
# Set up a virtual environment in .venv with the kiosk and its test tools.
# insightface (the reference implementation the tests compare against) is installed with
# --no-deps: its wheel asks for the CPU `onnxruntime`, which would silently replace the
# `onnxruntime` module of `onnxruntime-gpu`.
#
# GPU: where an NVIDIA driver is present it also installs onnxruntime-gpu's CUDA and cuDNN libraries from
# pip (no CUDA toolkit needed); --gpu forces that, --no-gpu skips it, --tensorrt adds TensorRT's libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
GPU_ARGS=()
for arg in "$@"; do
  case "$arg" in
    --gpu | --no-gpu | --tensorrt) GPU_ARGS+=("$arg") ;;
    *) echo "usage: $0 [--gpu | --no-gpu] [--tensorrt]" >&2; exit 2 ;;
  esac
done
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# clip: PyAV, the H.264 encoder of keepsake.clip (its tests skip without it)
.venv/bin/python -m pip install -q -e '.[test,clip]'
.venv/bin/python -m pip install -q --no-deps 'insightface==2.1'
# The GPU runtime (CUDA, cuDNN, optionally TensorRT) from pip, matched to the installed onnxruntime-gpu.
mapfile -t gpu_specs < <(bash deploy/gpu-runtime.sh .venv/bin/python "${GPU_ARGS[@]}")
if [ "${#gpu_specs[@]}" -gt 0 ]; then
  echo "setup: pip install ${gpu_specs[*]}"
  .venv/bin/python -m pip install -q "${gpu_specs[@]}"
fi
# Refuse to continue with a broken ONNX Runtime (the CPU wheel installed over the GPU one).
if .venv/bin/python -m pip show -q onnxruntime >/dev/null 2>&1; then
  echo "setup: the CPU 'onnxruntime' package is installed beside 'onnxruntime-gpu'; run: .venv/bin/pip uninstall -y onnxruntime && .venv/bin/pip install --force-reinstall onnxruntime-gpu" >&2
  exit 1
fi
# Compile the kiosk's pixel kernels into its cache now, so the first `kiosk run` starts in seconds.
.venv/bin/python -m kiosk.tools.precompile \
  || echo "setup: kernel compile failed; the kiosk compiles them at its first start" >&2
echo "setup: ready (.venv)"
