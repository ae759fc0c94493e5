"""The one ONNX Runtime session factory, and a probe of which providers really run.

``onnxruntime-gpu`` lists CUDA and TensorRT even on a machine without a driver or without the CUDA
libraries; creating a session then quietly falls back to the CPU. We check which provider a
session actually got and say so loudly (log WARNING, and the provider name is returned so the
debug overlay can show it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from kiosk.inference import ortlog
from kiosk.inference.errors import ModelCorruptError, ModelMissingError, ModelResourceError
from kiosk.inference.gpu_runtime import GPU_PROVIDERS, preload_gpu_libraries
from kiosk.util import heartbeat, limits
from kiosk.util.errors import one_line
from kiosk.util.files import regular_file_kind, shown
from kiosk.util.options import copy_fields

log = logging.getLogger(__name__)
ortlog.quiet_default_logger()

#: Provider notices already given in this process: each fallback is stated once, not per model.
_stated: set[tuple[str, ...]] = set()


def _state_once(key: tuple[str, ...], message: str, *args: object) -> None:
    """Log ``message`` at WARNING the first time for ``key``, at DEBUG after that."""
    if key in _stated:
        log.debug(message, *args)
        return
    _stated.add(key)
    log.warning(message, *args)


def reset_notices() -> None:
    """Forget the provider notices already given (tests; a rebuilt stage says them again)."""
    _stated.clear()
    ortlog.reset()


def _telemetry_off() -> None:
    """No ONNX Runtime telemetry from a booth (ORT's events go to Windows ETW; off everywhere)."""
    off = getattr(ort, "disable_telemetry_events", None)
    if callable(off):
        off()


_telemetry_off()

#: Config names → ONNX Runtime provider names.
PROVIDER_NAMES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
CPU = PROVIDER_NAMES["cpu"]


@dataclass(frozen=True)
class ProviderOptions:
    """How sessions are created: the fields of the config's ``models.providers`` (same names, same
    defaults; a test keeps them in step). Build one from config with :meth:`of`."""

    order: tuple[str, ...] = ("cuda", "cpu")
    device_id: int = 0
    intra_op_threads: int = 0
    trt_cache_dir: str = "models/trt_cache"
    trt_fp16: bool = True
    cudnn_conv_algo_search: str = "HEURISTIC"
    iobinding: bool = True
    cuda_graph: bool = False
    warmup: bool = True

    @classmethod
    def of(cls, section: Any) -> ProviderOptions:
        """From a ``models.providers`` config section (or anything with these attributes)."""
        return copy_fields(cls, section)


def provider_options(
    name: str, cfg: ProviderOptions, base_dir: Path | None = None, cuda_graph: bool = False
) -> dict[str, Any]:
    """ONNX Runtime options for config provider ``name`` ("tensorrt", "cuda", "cpu").

    ``cuda_graph``: this session has fixed shapes and is run through IOBinding with fixed device
    buffers (the swapper), so it may be captured once in a CUDA graph and replayed; honoured only
    when ``cfg.cuda_graph`` and ``cfg.iobinding`` are both on.
    """
    graph = bool(cuda_graph and cfg.cuda_graph and cfg.iobinding)
    if name == "tensorrt":
        cache = Path(cfg.trt_cache_dir).expanduser()
        if not cache.is_absolute() and base_dir is not None:
            cache = base_dir / cache
        opts: dict[str, Any] = {
            "device_id": cfg.device_id,
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": str(cache),
            "trt_timing_cache_enable": True,
            "trt_timing_cache_path": str(cache),
            "trt_fp16_enable": cfg.trt_fp16,
        }
        if graph:
            opts["trt_cuda_graph_enable"] = True
        return opts
    if name == "cuda":
        opts = {"device_id": cfg.device_id, "cudnn_conv_algo_search": cfg.cudnn_conv_algo_search}
        if graph:
            opts["enable_cuda_graph"] = "1"
        return opts
    return {}


def _requested(
    cfg: ProviderOptions, base_dir: Path | None, cuda_graph: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """Providers from config that this onnxruntime build has, CPU always last as the safety net."""
    available = set(ort.get_available_providers())
    out: list[tuple[str, dict[str, Any]]] = []
    for short in cfg.order:
        name = PROVIDER_NAMES[short]
        if name == CPU:
            continue
        if name not in available:
            _state_once(
                ("missing", name),
                "provider %s requested in config but this onnxruntime build lacks it "
                "(install onnxruntime-gpu); it is skipped",
                name,
            )
            continue
        out.append((name, provider_options(short, cfg, base_dir, cuda_graph)))
    out.append((CPU, {}))
    return out


def _session_options(cfg: ProviderOptions) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = cfg.intra_op_threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # ONNX Runtime's own chatter; our fallback warning is explicit
    # Idle worker threads must not spin after a run: between model runs the pipeline does its own
    # CPU work (letterbox, warps, paste-back) and spinning threads would steal the cores from it.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return so


def _raise_if_limit(exc: BaseException, path: Path) -> None:
    """A failed load that a system limit explains (ONNX Runtime says "system error number 24" for
    EMFILE, "bad allocation" for ENOMEM) is that limit, not a corrupt file."""
    problem = limits.limit_problem(exc, what=f"{shown(path)}: cannot load the model", fds=limits.MODEL_FDS)
    if problem:
        raise ModelResourceError(problem) from None


def create_session(
    path: str | Path,
    providers_cfg: ProviderOptions,
    base_dir: Path | None = None,
    cuda_graph: bool = False,
) -> tuple[ort.InferenceSession, str]:
    """Open ``path`` with the configured providers. Returns the session and the provider it really
    uses. A requested GPU provider that cannot run falls back to CPU with a loud WARNING.
    ``cuda_graph``: see :func:`provider_options` (only for fixed-shape models).

    Raises :class:`ModelMissingError` / :class:`ModelCorruptError` with a one-line message."""
    p = Path(path)
    what = regular_file_kind(p)
    if what:  # a FIFO or device would block ONNX Runtime's open of the path
        raise ModelCorruptError(
            f"{shown(p)}: is {what}, not a model file — delete it and run: kiosk models fetch"
        )
    if not p.is_file():
        raise ModelMissingError(f"{shown(p)}: model file not found — run: kiosk models fetch")
    requested = _requested(providers_cfg, base_dir, cuda_graph)
    if GPU_PROVIDERS & {name for name, _ in requested}:
        preload_gpu_libraries()  # pip's CUDA/cuDNN/TensorRT libraries, once, before the first GPU session
    so = _session_options(providers_cfg)
    # ONNX Runtime's records are logged below: at their level, unless the fallback line says why.
    try:
        with ortlog.capture(quiet=True) as captured:
            try:
                session = ort.InferenceSession(str(p), sess_options=so, providers=requested)
            except Exception as exc:  # onnxruntime raises several unrelated exception types
                _raise_if_limit(exc, p)
                first = one_line(exc)
                if len(requested) <= 1:
                    raise ModelCorruptError(
                        f"{p}: not a loadable ONNX model ({first[:160]}) — delete it and run: kiosk models fetch"
                    ) from None
                # A GPU provider may fail while building (e.g. TensorRT); try CPU before blaming the file.
                try:
                    session = ort.InferenceSession(str(p), sess_options=so, providers=[CPU])
                except Exception as cpu_exc:
                    _raise_if_limit(cpu_exc, p)
                    raise ModelCorruptError(
                        f"{p}: not a loadable ONNX model ({first[:160]}) — delete it and run: kiosk models fetch"
                    ) from None
                _state_once(
                    ("failed", p.name, requested[0][0]),
                    "%s failed on %s (%s); running it on the CPU",
                    p.name,
                    requested[0][0],
                    first,
                )
    except OSError as exc:  # the log capture's temporary file, before ONNX Runtime ran
        _raise_if_limit(exc, p)
        raise
    used = session.get_providers()[0]
    wanted = requested[0][0]
    if used == wanted:
        ortlog.emit(captured.records)
    else:  # one line, with ONNX Runtime's reason (its own records stay at DEBUG)
        reason = captured.reason()
        _state_once(
            ("fallback", wanted, used),
            "%s requested but it cannot run here (%s); FALLING BACK TO %s for every model "
            "(first: %s) — expect much lower frame rates. `kiosk doctor` explains.",
            wanted,
            reason or "driver, CUDA/cuDNN libraries or GPU missing",
            used,
            p.name,
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
        with ortlog.capture(quiet=True) as captured:
            session = ort.InferenceSession(
                _tiny_model_bytes(), sess_options=so, providers=[(name, dict(options))]
            )
        if session.get_providers()[0] != name:
            reason = captured.reason()
            return (
                f"{name} is listed by onnxruntime but could not be created "
                "(no GPU driver, or CUDA/cuDNN/TensorRT libraries missing"
                + (f": {reason})" if reason else ")")
            )
        x = np.ones((1, 4), np.float32)
        y = session.run(None, {"x": x})[0]
        if not np.allclose(y, 2 * x):
            return f"{name} ran a test graph but returned wrong values"
    except Exception as exc:  # any failure means "does not run"
        return f"{name} failed: {one_line(exc)}"
    return None


def probe_providers(providers_cfg: ProviderOptions) -> dict[str, str | None]:
    """For each configured provider (and the CPU): ``None`` if it really runs a tiny session, else
    the reason it does not."""
    available = set(ort.get_available_providers())
    out: dict[str, str | None] = {}
    shorts = list(providers_cfg.order) + ([] if "cpu" in providers_cfg.order else ["cpu"])
    if GPU_PROVIDERS & available & {PROVIDER_NAMES[s] for s in shorts}:
        preload_gpu_libraries()  # probe what a booth session would get
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


# -- running a session -----------------------------------------------------------------------------
_DEVICE_OF = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "cuda"}


@dataclass
class _Bound:
    """One IOBinding with the arrays (host) or device values its inputs and outputs live in."""

    key: tuple[tuple[str, int, tuple[int, ...], Any], ...]
    binding: Any
    feeds: tuple[NDArray[Any], ...]
    device_inputs: tuple[Any, ...]
    outputs: list[NDArray[Any]]
    device_outputs: tuple[Any, ...]


_NUMPY_OF_ONNX = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


def _fixed_output_signature(session: Any, names: Sequence[str]) -> list[tuple[tuple[int, ...], Any]] | None:
    """(shape, dtype) of each output when every one is fully fixed in the graph, else None."""
    try:
        outs = {o.name: o for o in session.get_outputs()}
        sig = []
        for name in names:
            o = outs[name]
            dims = list(o.shape or [])
            if (
                not dims
                or not all(isinstance(d, int) and d > 0 for d in dims)
                or o.type not in _NUMPY_OF_ONNX
            ):
                return None
            sig.append((tuple(int(d) for d in dims), _NUMPY_OF_ONNX[o.type]))
        inputs_fixed = all(
            all(isinstance(d, int) and d > 0 for d in (i.shape or [])) for i in session.get_inputs()
        )
        return sig if inputs_fixed else None
    except Exception:  # stand-ins for sessions in tests may not describe their outputs
        return None


class SessionRunner:
    """Runs one ONNX Runtime session, plainly or through IOBinding, and times what it spends inside.

    Plain: ``session.run`` (ONNX Runtime allocates new output arrays every call).

    IOBinding on the CPU: the caller's preallocated input arrays are bound once (zero-copy; the
    caller refills them in place between runs) and the outputs are written straight into arrays
    preallocated here and returned again on every run: nothing is allocated per frame. The first
    run for a new set of input shapes runs plainly to learn the output shapes.

    IOBinding on a GPU (CUDA/TensorRT): inputs and outputs live in fixed device buffers; each run
    copies the inputs in place (``update_inplace``), runs, and copies the outputs into the same host
    arrays. Fixed addresses are what a CUDA graph needs (``cuda_graph``: captured on the first
    bound run, replayed after).

    ``run_ms`` accumulates the wall time inside ONNX Runtime (for ``kiosk bench``'s share of time
    in ``session.run``); ``runs`` counts calls. Outputs are valid until the next call.
    """

    def __init__(
        self,
        session: Any,
        provider: str = CPU,
        *,
        iobinding: bool = False,
        device_id: int = 0,
        output_names: Sequence[str] | None = None,
    ) -> None:
        self.session = session
        self.provider = provider
        self.output_names = list(output_names or [o.name for o in session.get_outputs()])
        self.device = _DEVICE_OF.get(provider, "cpu")
        self.device_id = int(device_id)
        self.iobinding = bool(iobinding) and hasattr(session, "io_binding")
        self.run_ms = 0.0
        self.runs = 0
        self._bound: _Bound | None = None
        self._out_cache: dict[tuple[tuple[int, ...], ...], list[NDArray[Any]]] = {}
        self._plain_shapes: set[tuple[tuple[int, ...], ...]] = set()
        self._fixed_outputs = _fixed_output_signature(session, self.output_names)

    def run(self, feeds: Mapping[str, NDArray[Any]]) -> list[NDArray[Any]]:
        """The outputs, in ``output_names`` order. The call is one unit of the calling thread's
        heartbeat (:mod:`kiosk.util.heartbeat`): the stall supervisor bounds it by what this
        model's recent calls took, not the whole frame by ``stall_s``."""
        hb = heartbeat.current()
        if hb is not None and hb.in_unit:
            hb = None  # nested: counted as the outer unit
        t0 = hb.begin_unit(self, self.name) if hb is not None else time.perf_counter()
        try:
            if not self.iobinding:
                return list(self.session.run(self.output_names, dict(feeds)))
            return self._run_bound(feeds)
        finally:
            t1 = time.perf_counter()
            if hb is not None:
                hb.end_unit(self, t0, t1)
            self.run_ms += (t1 - t0) * 1e3
            self.runs += 1

    @property
    def name(self) -> str:
        """The model's file name (for the stall supervisor's log line), else its provider."""
        path = getattr(self.session, "_model_path", None)
        return Path(path).name if isinstance(path, str) and path else self.provider

    def _run_bound(self, feeds: Mapping[str, NDArray[Any]]) -> list[NDArray[Any]]:
        key = tuple((k, id(v), v.shape, v.dtype) for k, v in feeds.items())
        bound = self._bound
        if bound is None or bound.key != key:
            shapes = tuple(k[2] for k in key)
            if shapes in self._plain_shapes or not all(v.flags.c_contiguous for v in feeds.values()):
                return list(self.session.run(self.output_names, dict(feeds)))
            bound = self._bind(feeds, key)
            if bound is None:  # first run for these shapes: a plain run told us the output shapes
                return [o.copy() for o in self._out_cache[shapes]]
        if self.device != "cpu":
            for value, arr in zip(bound.device_inputs, bound.feeds, strict=True):
                value.update_inplace(arr)
        self.session.run_with_iobinding(bound.binding)
        if self.device != "cpu":
            for value, host in zip(bound.device_outputs, bound.outputs, strict=True):
                np.copyto(host, value.numpy())
        return bound.outputs

    def _bind(
        self, feeds: Mapping[str, NDArray[Any]], key: tuple[tuple[str, int, tuple[int, ...], Any], ...]
    ) -> _Bound | None:
        shapes = tuple(k[2] for k in key)
        outputs = self._out_cache.get(shapes)
        first = outputs is None
        if outputs is None and self._fixed_outputs is not None:
            # Fixed-shape model (the swapper): allocate from the signature, no plain run first; a
            # CUDA graph is then captured on the first bound run, with the fixed buffers.
            outputs = [np.zeros(shape, dtype) for shape, dtype in self._fixed_outputs]
            self._out_cache[shapes] = outputs
            first = False
        if outputs is None:
            outputs = [np.ascontiguousarray(o) for o in self.session.run(self.output_names, dict(feeds))]
            self._out_cache[shapes] = outputs
            declared = {o.name: o.shape for o in self.session.get_outputs()}
            for name, arr in zip(self.output_names, outputs, strict=True):
                dims = declared.get(name)
                if dims and all(isinstance(d, int) for d in dims) and tuple(dims) != arr.shape:
                    # A graph exported with fixed output shapes for one input size (det_500m at
                    # 640) runs at other sizes, but ONNX Runtime rejects preallocated outputs of
                    # the real shape: these input shapes are run plainly.
                    self._plain_shapes.add(shapes)
                    return None
        binding = self.session.io_binding()
        device_inputs: list[Any] = []
        device_outputs: list[Any] = []
        for name, arr in feeds.items():
            if self.device == "cpu":
                binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr))
            else:
                value = ort.OrtValue.ortvalue_from_numpy(arr, self.device, self.device_id)
                device_inputs.append(value)
                binding.bind_ortvalue_input(name, value)
        for name, arr in zip(self.output_names, outputs, strict=True):
            if self.device == "cpu":
                binding.bind_ortvalue_output(name, ort.OrtValue.ortvalue_from_numpy(arr))
            else:
                value = ort.OrtValue.ortvalue_from_shape_and_type(
                    arr.shape, arr.dtype, self.device, self.device_id
                )
                device_outputs.append(value)
                binding.bind_ortvalue_output(name, value)
        self._bound = _Bound(
            key, binding, tuple(feeds.values()), tuple(device_inputs), outputs, tuple(device_outputs)
        )
        return None if first else self._bound

    def warm_up(self, feeds: Mapping[str, NDArray[Any]]) -> float:
        """Run twice on ``feeds`` (plain, then bound); return the milliseconds it took."""
        t0 = time.perf_counter()
        self.run(feeds)
        self.run(feeds)
        return (time.perf_counter() - t0) * 1e3
