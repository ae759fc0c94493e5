"""Fault injection into a running kiosk: ONNX Runtime calls of the swapper fail or hang, and the
screen is sampled to tell whether the swap is on (the stand-in swapper tints the white square the
stand-in detector takes for a face).

In-process: ``Faults.install(monkeypatch)`` and ``ScreenSampler.install(monkeypatch)``.
As a program (a real ``kiosk`` process, for exit status and the watchdog)::

    python tests/fault_inject.py --hang-after 30 --mark FILE -- run --config booth.yaml --headless

hangs every swapper call after the first 30 and writes ``time.time()`` of the first hang to FILE.
``--native-hang-after N`` hangs them inside ONNX Runtime instead (a model whose ``Loop`` never
ends: the thread sits in native code, which no interpreter teardown survives), and
``--slow-s S`` makes every swapper call take S seconds longer (a slow but progressing stage).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime as ort

from kiosk.tools.standins import make_detector, make_embedder, make_swapper, white_square_frame

#: The square the stand-in detector finds (x, y, side) in the 640x360 scene, and the probe inside it.
SQUARE = (256, 112, 128)
PROBE = (SQUARE[0] + 40, SQUARE[1] + 40, 48)


class Faults:
    """What the wrapped ``InferenceSession.run`` / ``run_with_iobinding`` do to swapper calls."""

    def __init__(self, seed: int = 1) -> None:
        self.rate = 0.0  # probability that a call raises
        self.every = 0  # every N-th call raises (50: 2 % of calls, deterministically)
        self.t_hang = 0.0  # perf_counter of the first hang
        self.fail_next = 0  # the next N calls raise
        self.persistent = False  # every call raises
        self.hang_next = 0  # the next N calls never return (until release)
        self.hang_after = -1  # every call after this many calls hangs (-1: off)
        self.mark: Path | None = None  # file that gets time.time() of the first hang
        #: A hang runs a never-ending model in ONNX Runtime (native code), on inference threads only.
        self.native = False
        self.slow_s = 0.0  # every swapper call sleeps this long first (slow, not hung)
        self.calls = 0
        self.failed = 0
        self.hung = 0
        self.release = threading.Event()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def before(self, session: Any) -> None:
        flag = getattr(session, "_fault_is_swapper", None)
        if flag is None:
            flag = any(i.name == "source" for i in session.get_inputs())
            session._fault_is_swapper = flag
        if not flag:
            return
        if self.native and threading.current_thread().name != "inference":
            return  # native hangs hit the stage's calls, not a loader's warm-up: the rebuild works
        with self._lock:
            self.calls += 1
            hang = self.hang_next > 0 or (self.hang_after >= 0 and self.calls > self.hang_after)
            if self.hang_next > 0:
                self.hang_next -= 1
            fail = not hang and (
                self.persistent
                or self.fail_next > 0
                or (self.every > 0 and self.calls % self.every == 0)
                or (self.rate > 0 and self._rng.random() < self.rate)
            )
            if fail and self.fail_next > 0:
                self.fail_next -= 1
            if hang:
                self.hung += 1
                self.t_hang = self.t_hang or time.perf_counter()
                if self.mark is not None and self.hung == 1:
                    self.mark.write_text(f"{time.time():.6f}\n")
            if fail:
                self.failed += 1
        if hang:
            if self.native:
                native_hang()  # never returns
            self.release.wait()
            raise RuntimeError("injected hang released")
        if self.slow_s:
            native_busy(self.slow_s)
        if fail:
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : injected failure")

    def install(self, monkeypatch: Any = None) -> None:
        faults = self
        run, run_bound = ort.InferenceSession.run, ort.InferenceSession.run_with_iobinding

        def wrapped_run(session: Any, *a: Any, **k: Any) -> Any:
            faults.before(session)
            return run(session, *a, **k)

        def wrapped_bound(session: Any, *a: Any, **k: Any) -> Any:
            faults.before(session)
            return run_bound(session, *a, **k)

        if monkeypatch is None:
            ort.InferenceSession.run = wrapped_run  # type: ignore[method-assign]
            ort.InferenceSession.run_with_iobinding = wrapped_bound  # type: ignore[method-assign]
        else:
            monkeypatch.setattr(ort.InferenceSession, "run", wrapped_run)
            monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", wrapped_bound)


def loop_model() -> bytes:
    """An ONNX graph whose ``Loop`` runs ``M`` times (an int64 input; about a microsecond each):
    ``session.run`` stays in native code as long as asked."""
    from onnx import TensorProto, helper

    def value(name: str, kind: int) -> Any:
        return helper.make_tensor_value_info(name, kind, [])

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [value("i", TensorProto.INT64), value("cond_in", TensorProto.BOOL), value("v_in", TensorProto.FLOAT)],
        [value("cond_out", TensorProto.BOOL), value("v_out", TensorProto.FLOAT)],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "C", "x"], ["y"], body=body)],
        "loop",
        [value("M", TensorProto.INT64), value("x", TensorProto.FLOAT)],
        [value("y", TensorProto.FLOAT)],
        [helper.make_tensor("C", TensorProto.BOOL, [], [True])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


_run = ort.InferenceSession.run  # the real one, whatever is wrapped later
_busy_session: Any = None


def native_busy(seconds: float) -> None:
    """Spend about ``seconds`` inside ONNX Runtime (a slow model call that returns: a CPU fallback),
    in runs of about 20 ms of one session that the module holds, as a stage holds its models."""
    global _busy_session
    if _busy_session is None:
        _busy_session = ort.InferenceSession(loop_model(), providers=["CPUExecutionProvider"])
    feeds = {"M": np.array(20_000, np.int64), "x": np.array(0.0, np.float32)}
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        _run(_busy_session, None, feeds)


def native_hang() -> None:
    """Keep the calling thread inside ONNX Runtime for good (:func:`native_busy` without end). At
    interpreter teardown its session is destroyed under the thread (``terminate called without an
    active exception``, status 134), which a clean exit never lets happen."""
    native_busy(float("inf"))


def swapped(rgb: np.ndarray) -> bool:
    """The swap is on screen: the probe inside the white square is tinted (camera: 255 there)."""
    x, y, s = PROBE
    probe = rgb[y : y + s, x : x + s].astype(np.float32)
    return 100.0 < float(probe.mean()) < 235.0  # not the camera's white, not a blank screen


#: A block of the scene the counting source paints with the frame number: frozen screen or live.
TICK = (0, 296, 16)


class CountingSource:
    """The still scene at a camera's rate, with the frame number painted into :data:`TICK`."""

    description = "counting still scene"

    def __init__(self, scene: np.ndarray, fps: float = 30.0) -> None:
        self.scene = scene
        self.period = 1.0 / fps
        self.seq = 0

    def open(self) -> None:
        pass

    def read(self, out: np.ndarray | None) -> np.ndarray:
        time.sleep(self.period)
        self.seq += 1
        frame = self.scene.copy()
        x, y, s = TICK
        frame[y : y + s, x : x + s] = (self.seq * 37) % 200 + 30
        return frame

    def close(self) -> None:
        pass


def tick(rgb: np.ndarray) -> int:
    x, y, s = TICK
    return int(rgb[y + s // 2, x + s // 2, 0])


class ScreenSampler:
    """Reads the rendered frame (before it is presented) every ``interval_s`` and records
    (time.perf_counter(), swap on screen) pairs."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, bool]] = []
        self.ticks: list[int] = []  # the TICK block's value in each sample
        self._next = 0.0

    def install(self, monkeypatch: Any) -> None:
        import kiosk.render.window as window

        real = window.open_surface
        sampler = self

        def open_surface(*a: Any, **k: Any) -> Any:
            surface = real(*a, **k)
            end = surface.end_frame

            def end_frame() -> None:
                now = time.perf_counter()
                if now >= sampler._next:
                    sampler._next = now + sampler.interval_s
                    rgb = surface.read_rgb()
                    sampler.samples.append((now, swapped(rgb)))
                    sampler.ticks.append(tick(rgb))
                end()

            surface.end_frame = end_frame
            return surface

        monkeypatch.setattr(window, "open_surface", open_surface)

    def between(self, t0: float, t1: float = float("inf")) -> list[bool]:
        return [on for t, on in self.samples if t0 <= t < t1]

    def first_on_after(self, t0: float) -> float | None:
        return next((t for t, on in self.samples if t >= t0 and on), None)

    def first_live_on_after(self, t0: float) -> float | None:
        """The first sample with the swap on and a newer camera frame than the sample before it,
        both taken after ``t0`` (a frozen screen keeps its TICK value)."""
        for i in range(1, len(self.samples)):
            t, on = self.samples[i]
            if self.samples[i - 1][0] >= t0 and on and self.ticks[i] != self.ticks[i - 1]:
                return t
        return None

    def wait_on(self, timeout_s: float = 30.0) -> float:
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.samples and self.samples[-1][1]:
                return self.samples[-1][0]
            time.sleep(0.05)
        raise AssertionError("the swap never came on screen")


def booth_folder(root: Path, extra: str = "") -> Path:
    """A booth with stand-in models, one face photo and a still scene; returns its config file."""
    models = root / "models"
    models.mkdir(parents=True, exist_ok=True)
    make_detector(models / "det_10g.onnx")
    make_embedder(models / "w600k_r50.onnx")
    make_swapper(models / "inswapper_128.onnx")
    faces = root / "faces"
    faces.mkdir(exist_ok=True)
    cv2.imwrite(str(faces / "ann.png"), white_square_frame(360, 640))
    cv2.imwrite(str(root / "scene.png"), white_square_frame(360, 640, (SQUARE,)))
    cfg = root / "booth.yaml"
    cfg.write_text(booth_yaml(extra))
    return cfg


def booth_yaml(extra: str = "", swapper: str = "inswapper_128.onnx") -> str:
    return f"""
source: {{kind: image, path: scene.png, image_fps: 30, mirror: false}}
display: {{width: 640, height: 360, max_fps: 60}}
models: {{dir: models, detector: det_10g.onnx, swapper: {swapper}, accept_noncommercial_licence: true, enhancer: null,
          providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache, rescan_s: 600}}
ui: {{attract_after_s: 0, carousel: false}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: false, status_line: false}}
{extra}
"""


def main(argv: list[str]) -> int:
    faults = Faults()
    args = argv[: argv.index("--")]
    kiosk_args = argv[argv.index("--") + 1 :]
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag == "--hang-after":
            faults.hang_after = int(value)
        elif flag == "--native-hang-after":
            faults.hang_after = int(value)
            faults.native = True
        elif flag == "--slow-s":
            faults.slow_s = float(value)
        elif flag == "--mark":
            faults.mark = Path(value)
    faults.install()
    from kiosk.cli import main as kiosk_main

    return int(kiosk_main(kiosk_args) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
