"""The one ONNX Runtime session factory, and a probe of which providers really run.

``onnxruntime-gpu`` lists CUDA and TensorRT even on a machine without a driver or without the CUDA
libraries; creating a session then quietly falls back to the CPU. We check which provider a
session actually got and say so loudly (log WARNING, and the provider name is returned so the
debug overlay can show it).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from kiosk.config import ProvidersConfig
from kiosk.inference.errors import ModelCorruptError, ModelMissingError

log = logging.getLogger(__name__)

#: Config names → ONNX Runtime provider names.
PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
CPU = PROVIDER_NAMES["cpu"]


def provider_options(name: str, cfg: ProvidersConfig, base_dir: Path | None = None) -> dict[str, Any]:
    """ONNX Runtime options for config provider ``name`` ("tensorrt", "cuda", "cpu")."""
    if name == "tensorrt":
        cache = Path(cfg.trt_cache_dir).expanduser()
        if not cache.is_absolute() and base_dir is not None:
            cache = base_dir / cache
        return {
            "device_id": cfg.device_id,
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": str(cache),
            "trt_fp16_enable": cfg.trt_fp16,
        }
    if name == "cuda":
        return {"device_id": cfg.device_id, "cudnn_conv_algo_search": cfg.cudnn_conv_algo_search}
    return {}


def _requested(cfg: ProvidersConfig, base_dir: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """Providers from config that this onnxruntime build has, CPU always last as the safety net."""
    available = set(ort.get_available_providers())
    out: list[tuple[str, dict[str, Any]]] = []
    for short in cfg.order:
        name = PROVIDER_NAMES[short]
        if name == CPU:
            continue
        if name not in available:
            log.warning(
                "WARNING: provider %s requested in config but this onnxruntime build lacks it "
                "(install onnxruntime-gpu); it is skipped",
                name,
            )
            continue
        out.append((name, provider_options(short, cfg, base_dir)))
    out.append((CPU, {}))
    return out


def _session_options(cfg: ProvidersConfig) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = cfg.intra_op_threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # ONNX Runtime's own chatter; our fallback warning is explicit
    # Idle worker threads must not spin after a run: between model runs the pipeline does its own
    # CPU work (letterbox, warps, paste-back) and spinning threads would steal the cores from it.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return so


def create_session(
    path: str | Path, providers_cfg: ProvidersConfig, base_dir: Path | None = None
) -> tuple[ort.InferenceSession, str]:
    """Open ``path`` with the configured providers. Returns the session and the provider it really
    uses. A requested GPU provider that cannot run falls back to CPU with a loud WARNING.

    Raises :class:`ModelMissingError` / :class:`ModelCorruptError` with a one-line message."""
    p = Path(path)
    if not p.is_file():
        raise ModelMissingError(f"{p}: model file not found — run: kiosk models fetch")
    requested = _requested(providers_cfg, base_dir)
    so = _session_options(providers_cfg)
    try:
        session = ort.InferenceSession(str(p), sess_options=so, providers=requested)
    except Exception as exc:  # onnxruntime raises several unrelated exception types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if len(requested) > 1:
            # A GPU provider may fail while building (e.g. TensorRT); try CPU before blaming the file.
            try:
                session = ort.InferenceSession(str(p), sess_options=so, providers=[CPU])
            except Exception:
                raise ModelCorruptError(
                    f"{p}: not a loadable ONNX model ({first[:160]}) — delete it and run: kiosk models fetch"
                ) from None
            log.warning(
                "WARNING: %s failed on %s (%s); running it on the CPU", p.name, requested[0][0], first
            )
        else:
            raise ModelCorruptError(
                f"{p}: not a loadable ONNX model ({first[:160]}) — delete it and run: kiosk models fetch"
            ) from None
    used = session.get_providers()[0]
    wanted = requested[0][0]
    if used != wanted:
        log.warning(
            "WARNING: %s requested for %s but it cannot run here (driver, CUDA/cuDNN libraries or GPU "
            "missing); FALLING BACK TO %s — expect much lower frame rates. `kiosk doctor` explains.",
            wanted,
            p.name,
            used,
        )
    return session, used


def _tiny_model_bytes() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("Add", ["x", "x"], ["y"])
    graph = helper.make_graph([node], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


@lru_cache(maxsize=16)
def _probe_one(name: str, options: tuple[tuple[str, Any], ...]) -> str | None:
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        session = ort.InferenceSession(
            _tiny_model_bytes(), sess_options=so, providers=[(name, dict(options))]
        )
        if session.get_providers()[0] != name:
            return (
                f"{name} is listed by onnxruntime but could not be created "
                "(no GPU driver, or CUDA/cuDNN/TensorRT libraries missing)"
            )
        x = np.ones((1, 4), np.float32)
        y = session.run(None, {"x": x})[0]
        if not np.allclose(y, 2 * x):
            return f"{name} ran a test graph but returned wrong values"
    except Exception as exc:  # any failure means "does not run"
        return (
            f"{name} failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        )
    return None


def probe_providers(providers_cfg: ProvidersConfig) -> dict[str, str | None]:
    """For each configured provider (and the CPU): ``None`` if it really runs a tiny session, else
    the reason it does not."""
    available = set(ort.get_available_providers())
    out: dict[str, str | None] = {}
    shorts = list(providers_cfg.order) + ([] if "cpu" in providers_cfg.order else ["cpu"])
    for short in shorts:
        name = PROVIDER_NAMES[short]
        if name not in available:
            out[name] = f"{name} is not in this onnxruntime build (install onnxruntime-gpu)"
            continue
        opts = provider_options(short, providers_cfg)
        if short == "tensorrt":  # no engine cache for a probe
            opts = {"device_id": providers_cfg.device_id}
        out[name] = _probe_one(name, tuple(sorted(opts.items())))
    return out
