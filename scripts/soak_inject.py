"""Model-fault injection for ``scripts/soak.py --faults``, loaded into the kiosk child as ``sitecustomize``.

The harness copies this file as ``sitecustomize.py`` into a temp folder put first on the child's
``PYTHONPATH`` and names a JSON control file in ``$KIOSK_SOAK_FAULTS``. Once ``onnxruntime`` is
imported, ``InferenceSession.run`` and ``run_with_iobinding`` are wrapped; each call reads the
control file (at most every 0.1 s) and

- ``{"errors": {"until": UNIX_S, "rate": P}}``: raises ONNX Runtime's own ``Fail`` for a share
  ``P`` of the calls until ``UNIX_S``;
- ``{"hang": {"id": N, "seconds": S}}``: the first call that sees a new ``N`` blocks for ``S``
  seconds (sooner if the harness removes the entry), once per id;
- ``{"slow": {"until": UNIX_S, "seconds": S}}``: every swapper call (the session with an input
  named ``source``) takes ``S`` seconds longer until ``UNIX_S``: slow but returning, as a CPU
  fallback or an enhancer on a slow PC (never to be taken for a hung call).

No kiosk code knows about it; without ``$KIOSK_SOAK_FAULTS`` it does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import random
import sys
import threading
import time
from typing import Any

_CONTROL = os.environ.get("KIOSK_SOAK_FAULTS", "")
_state: dict[str, Any] = {"checked": 0.0, "mtime": None, "control": {}, "hangs_done": set()}
_lock = threading.Lock()
_rng = random.Random(1234)
_counts = {"calls": 0, "raised": 0, "hung": 0, "slowed": 0}


def _is_swapper(session: Any) -> bool:
    flag = getattr(session, "_soak_is_swapper", None)
    if flag is None:
        try:
            flag = any(i.name == "source" for i in session.get_inputs())
        except Exception:
            flag = False
        session._soak_is_swapper = flag
    return bool(flag)


def _control() -> dict[str, Any]:
    now = time.monotonic()
    with _lock:
        if now - _state["checked"] < 0.1:
            return dict(_state["control"])
        _state["checked"] = now
        try:
            mtime = os.stat(_CONTROL).st_mtime_ns
            if mtime != _state["mtime"]:
                with open(_CONTROL) as f:
                    _state["control"] = json.load(f)
                _state["mtime"] = mtime
        except (OSError, ValueError):
            pass  # absent or mid-rewrite: keep the last one
        return dict(_state["control"])


def _before_call(session: Any) -> None:
    ctl = _control()
    _counts["calls"] += 1
    slow = ctl.get("slow")
    if slow and time.time() < float(slow["until"]) and _is_swapper(session):
        _counts["slowed"] += 1
        time.sleep(float(slow["seconds"]))
    hang = ctl.get("hang")
    if hang:
        with _lock:
            fresh = hang["id"] not in _state["hangs_done"]
            if fresh:
                _state["hangs_done"].add(hang["id"])
        if fresh:
            _counts["hung"] += 1
            end = time.monotonic() + float(hang["seconds"])
            while time.monotonic() < end:
                time.sleep(0.1)
                if (_control().get("hang") or {}).get("id") != hang["id"]:
                    break  # released early by the harness
    errors = ctl.get("errors")
    if errors and time.time() < float(errors["until"]):
        with _lock:
            hit = _rng.random() < float(errors["rate"])
        if hit:
            _counts["raised"] += 1
            from onnxruntime.capi.onnxruntime_pybind11_state import Fail

            raise Fail("[soak] injected model fault")


def _patch(module: Any) -> None:
    cls = module.InferenceSession
    if getattr(cls, "_soak_patched", False):
        return
    run, run_io = cls.run, cls.run_with_iobinding

    def wrapped_run(self: Any, *a: Any, **kw: Any) -> Any:
        _before_call(self)
        return run(self, *a, **kw)

    def wrapped_run_io(self: Any, *a: Any, **kw: Any) -> Any:
        _before_call(self)
        return run_io(self, *a, **kw)

    cls.run, cls.run_with_iobinding, cls._soak_patched = wrapped_run, wrapped_run_io, True


class _Finder(importlib.abc.MetaPathFinder):
    """Patch ``onnxruntime`` right after it is imported (the kiosk imports it lazily, if at all)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "onnxruntime":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            _patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if _CONTROL:
    sys.meta_path.insert(0, _Finder())
