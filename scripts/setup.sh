#!/usr/bin/env bash
# Set up a virtual environment in .venv with the kiosk and its test tools.
# insightface (the reference implementation the tests compare against) is installed with
# --no-deps: its wheel asks for the CPU `onnxruntime`, which would silently replace the
# `onnxruntime` module of `onnxruntime-gpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/python -m pip install -q --no-deps 'insightface==2.1'
# Refuse to continue with a broken ONNX Runtime (the CPU wheel installed over the GPU one).
if .venv/bin/python -m pip show -q onnxruntime >/dev/null 2>&1; then
  echo "setup: the CPU 'onnxruntime' package is installed beside 'onnxruntime-gpu'; run: .venv/bin/pip uninstall -y onnxruntime && .venv/bin/pip install --force-reinstall onnxruntime-gpu" >&2
  exit 1
fi
echo "setup: ready (.venv)"
