#!/usr/bin/env bash
# Which pip packages give onnxruntime-gpu its GPU runtime on this machine: the CUDA and cuDNN
# libraries (onnxruntime-gpu[cuda,cudnn], pinned to the onnxruntime-gpu already installed) and, with
# --tensorrt, TensorRT's. Prints one pip requirement a line (nothing for a CPU-only machine); the
# caller installs them (deploy/install.sh, scripts/setup.sh). The booth then needs only the NVIDIA
# driver, no CUDA toolkit: the kiosk loads these libraries itself (onnxruntime.preload_dlls).
#
#   deploy/gpu-runtime.sh PYTHON [--gpu | --no-gpu] [--tensorrt]
#
#   (default)   only where an NVIDIA driver is present (nvidia-smi, or /proc/driver/nvidia)
#   --gpu       also without a driver (an image built before the driver goes in)
#   --no-gpu    never (CPU only)
#   --tensorrt  add TensorRT's libraries (for models.providers.order: [tensorrt, ...])
set -euo pipefail

# onnxruntime-gpu 1.31's TensorRT provider links libnvinfer.so.10 and libnvonnxparser.so.10 (TensorRT 10,
# CUDA 13); PyPI's newest TensorRT is 11 (libnvinfer.so.11), which that provider cannot load.
# tests/test_doctor_gpu.py checks this pin against the installed provider library.
TENSORRT_SPEC='tensorrt-cu13-libs>=10,<11'
NVIDIA_PROC=${NVIDIA_PROC:-/proc/driver/nvidia}
NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}

python=${1:?usage: $0 PYTHON [--gpu | --no-gpu] [--tensorrt]}
shift
mode=auto
tensorrt=0
for arg in "$@"; do
    case "$arg" in
        --gpu) mode=gpu ;;
        --no-gpu) mode=none ;;
        --tensorrt) tensorrt=1 ;;
        *) echo "gpu-runtime: unknown option: $arg" >&2; exit 2 ;;
    esac
done

driver_present() { command -v "$NVIDIA_SMI" >/dev/null 2>&1 || [ -e "$NVIDIA_PROC/version" ]; }

case "$mode" in
    none) echo "gpu-runtime: --no-gpu: CPU only" >&2; exit 0 ;;
    auto)
        if ! driver_present; then
            echo "gpu-runtime: no NVIDIA driver ($NVIDIA_SMI, $NVIDIA_PROC): CPU only (--gpu installs the GPU libraries anyway)" >&2
            exit 0
        fi
        ;;
    gpu)
        driver_present || echo "gpu-runtime: WARNING: no NVIDIA driver yet; the GPU needs one: sudo ubuntu-drivers install, then reboot" >&2
        ;;
esac

ort=$("$python" -c 'import importlib.metadata as m; print(m.version("onnxruntime-gpu"))' 2>/dev/null || true)
echo "onnxruntime-gpu[cuda,cudnn]${ort:+==$ort}"
if [ "$tensorrt" = 1 ]; then echo "$TENSORRT_SPEC"; fi
