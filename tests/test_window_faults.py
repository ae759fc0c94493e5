"""Faults injected into a kiosk running in a REAL glfw window under Xvfb, staff keys pressed with real
X key presses (``xdotool key --window``), the result judged from the pixels the kiosk draws
(``--screenshot P --screenshot-every S``, written atomically) and from the exit status.

The booth is the fault soak's (``scripts/soak.py``): stand-in models, a looping 640x360 video with
two white-square "faces" the stand-in detector finds and a 6-bit frame counter in the corner. A
screenshot shows the swap when both squares carry the stand-in swapper's tint
(:func:`soak.classify_shot`); the counter moving between screenshots tells a live window from a
frozen one. Model calls fail through ``scripts/soak_inject.py`` (the child's ``sitecustomize``,
which wraps ``InferenceSession.run``/``run_with_iobinding`` as a JSON control file says).

Each test starts its own kiosk (one crash must not hide the other faults) and fails on: the process
exiting, a traceback on stderr, a frozen picture, a swap that does not come back, a staff notice
that is not drawn, a non-zero exit status."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from egl_helpers import skip_module_without_egl

from kiosk.tools.standins import white_square_frame

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.gl, pytest.mark.slow]

skip_module_without_egl()

sys.path.insert(0, str(ROOT / "scripts"))
import soak  # noqa: E402

XDOTOOL = shutil.which("xdotool")
if XDOTOOL is None:
    pytest.skip("xdotool not installed (apt-get install xdotool)", allow_module_level=True)

#: Good face photos: the soak's white squares (each in its own place, so each photo has its own
#: embedding and the swap its own tint; 64 px on the 64 px grid, so that the stand-in finds exactly
#: one face), named p1…p7 here, and one more.
PHOTO_SQUARES = {
    **{f"p{i}": square for i, square in enumerate(soak.PHOTO_SQUARES.values(), 1)},
    "p8": (384, 256, 64),
}

#: The face keys of the default bindings (kiosk/bindings.py), as X keysyms.
FACE_KEYS = [*(str(n) for n in range(1, 10)), "Right", "Left", "Next", "Prior", "n", "p"]

BOOTH = """\
source: {{kind: video, path: scene.mp4, mirror: false, reconnect_initial_s: 0.5, reconnect_max_s: 2}}
display: {{width: 640, height: 360, vsync: false, max_fps: 30, title: {title}, composite: {composite}}}
processing: {{tracking: false}}
models: {{dir: models, swapper: inswapper_128.onnx, accept_noncommercial_licence: true, enhancer: null, providers: {{order: [cpu], intra_op_threads: 1}}}}
faces: {{dir: faces, cache_dir: cache, rescan_s: 0.2}}
ui: {{attract_after_s: 0, carousel: false, banner: ""}}
controls: {{gamepad_enabled: false}}
overlay: {{debug: {debug}, status_line: false}}
"""


def booth_yaml(title: str, composite: str = "gpu", debug: str = "false") -> str:
    return BOOTH.format(title=title, composite=composite, debug=debug)


def photo(name: str) -> bytes:
    data = soak.photo_png(name, PHOTO_SQUARES)
    assert data
    return data


def make_booth(folder: Path, title: str, photos: tuple[str, ...] = ("p1",), **yaml: str) -> Path:
    return soak.make_booth(folder, photos, squares=PHOTO_SQUARES, yaml=booth_yaml(title, **yaml))


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# -- reading the screen ------------------------------------------------------------------------------
def amber_pixels(bgr: np.ndarray) -> int:
    """Pixels of the staff notice/warning text colours (overlay.NOTICE_RGBA, WARNING_RGBA: amber).
    The camera picture (grey texture, white squares) and the swap's tint have none."""
    b, g, r = (bgr[..., i].astype(np.int16) for i in range(3))
    return int(np.count_nonzero((r > 200) & (g > 140) & (g < 225) & (b < 140) & (r - b > 100)))


def marker_shown(bgr: np.ndarray) -> bool:
    """The staff marker (overlay.marker_rect, no banner: top-left) is orange (overlay.MARKER_RGBA)."""
    from kiosk.render.overlay import marker_rect

    x0, y0, x1, y1 = (round(v) for v in marker_rect((bgr.shape[1], bgr.shape[0]), 1.0))
    b, g, r = (bgr[y0:y1, x0:x1, i].astype(np.int16) for i in range(3))
    return float(((r > 220) & (g > 105) & (g < 150) & (b < 40)).mean()) > 0.8


#: Where the debug block's box (overlay.BOX_RGBA, 62 % black) lies when no notice is above it:
#: top-left, below the notice line's band (x0, y0, x1, y1).
DEBUG_PROBE = (0, 40, 260, 110)


def debug_box_shown(bgr: np.ndarray) -> bool:
    """A fifth of the probe is darker than anything in the camera picture (its grey texture is
    40-110 and the swap's tint is brighter): the debug box is drawn."""
    x0, y0, x1, y1 = DEBUG_PROBE
    return float((bgr[y0:y1, x0:x1].max(axis=2) < 36).mean()) > 0.2


@dataclass
class Shot:
    t: float  # time.monotonic() when read
    tinted: bool  # both face squares carry the swap's tint
    counter: int  # the video's frame counter
    amber: int  # notice/warning text pixels
    debug: bool  # the debug block's box is drawn
    marker: bool  # the staff marker is drawn (a warning waits; the debug block is closed)
    tint: tuple[float, float, float]  # mean BGR inside the first face square
    image: np.ndarray


def read_shot(bgr: np.ndarray) -> Shot:
    tinted, counter = soak.classify_shot(bgr)
    x, y, s = soak.FACE_SQUARES[0]
    mean = bgr[y + 8 : y + s - 8, x + 8 : x + s - 8].reshape(-1, 3).astype(np.float32).mean(axis=0)
    tint = (float(mean[0]), float(mean[1]), float(mean[2]))
    amber, debug, marker = amber_pixels(bgr), debug_box_shown(bgr), marker_shown(bgr)
    return Shot(time.monotonic(), tinted, counter, amber, debug, marker, tint, bgr)


def live_swapped_share(shots: list[Shot]) -> float:
    """Share of consecutive screenshot pairs where the second shows the swap AND a newer frame."""
    pairs = list(zip(shots, shots[1:], strict=False))
    if not pairs:
        return 0.0
    return sum(b.tinted and b.counter != a.counter for a, b in pairs) / len(pairs)


def moving_share(shots: list[Shot]) -> float:
    """Share of consecutive screenshot pairs whose frame counter moved (the window keeps drawing)."""
    pairs = list(zip(shots, shots[1:], strict=False))
    return sum(b.counter != a.counter for a, b in pairs) / len(pairs) if pairs else 0.0


class WindowKiosk:
    """``kiosk run`` in a real window on ``display``; model faults through ``scripts/soak_inject.py``."""

    def __init__(self, folder: Path, display: str, title: str) -> None:
        self.folder = folder
        self.display = display
        self.title = title
        self.cfg = folder / "kiosk.yaml"
        self.shot_path = folder / "shot.png"
        self.stats_path = folder / "stats.json"
        self.control = folder / "faults.json"
        self.control.write_text("{}")
        inject = folder / "inject"
        inject.mkdir()
        shutil.copy(ROOT / "scripts" / "soak_inject.py", inject / "sitecustomize.py")
        self.env = dict(
            os.environ, DISPLAY=display, PYTHONUNBUFFERED="1", KIOSK_SOAK_FAULTS=str(self.control)
        )
        self.env["PYTHONPATH"] = os.pathsep.join([str(inject), str(ROOT)])
        self.env.pop("WAYLAND_DISPLAY", None)
        self.env.pop("KIOSK_CONFIG", None)
        self.log: list[str] = []
        self.shots: list[Shot] = []
        self._last_mtime: int | None = None
        self._wid = ""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kiosk", "run", "--config", str(self.cfg), "--seconds", "150",
             "--screenshot", str(self.shot_path), "--screenshot-every", "0.2",
             "--stats-json", str(self.stats_path), "--stats-interval", "0.25"],
            cwd=folder, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def tail(self, n: int = 25) -> str:
        return "".join(self.log[-n:])

    def assert_alive(self, when: str) -> None:
        rc = self.proc.poll()
        assert rc is None, f"the kiosk exited with status {rc} {when}:\n{self.tail(40)}"

    def assert_no_traceback(self, allowed: str = "") -> None:
        """No traceback on stderr (no uncaught exception, no abort); with ``allowed``, a traceback
        the kiosk logs on purpose (a failed model call, once per burst) must end in an exception
        line containing it: the injected fault, nothing else."""
        text = "".join(self.log)
        assert "terminate called" not in text, self.tail(60)
        for chunk in text.split("Traceback (most recent call last):")[1:]:
            lines = [ln for ln in chunk.splitlines()[1:] if ln and not ln.startswith((" ", "\t"))]
            last = lines[0] if lines else ""
            assert allowed and allowed in last, f"traceback on stderr ending in {last!r}:\n{self.tail(60)}"

    # -- the screen --------------------------------------------------------------------------
    def poll_shot(self) -> Shot | None:
        """The newest screenshot if it is new since the last call (recorded in ``shots``)."""
        try:
            mtime = self.shot_path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self._last_mtime:
            return None
        img = cv2.imread(str(self.shot_path))
        if img is None or img.shape[:2] != (soak.SIZE[1], soak.SIZE[0]):
            return None
        self._last_mtime = mtime
        shot = read_shot(img)
        self.shots.append(shot)
        return shot

    def watch(self, seconds: float, min_shots: int = 5, timeout_s: float = 20.0) -> list[Shot]:
        """Screenshots over ``seconds``, and at least ``min_shots`` of them (a loaded machine renders
        slowly) within ``timeout_s``; the kiosk must stay alive."""
        out: list[Shot] = []
        t0 = time.monotonic()
        while (time.monotonic() - t0 < seconds or len(out) < min_shots) and time.monotonic() - t0 < timeout_s:
            self.assert_alive("while the screen was watched")
            shot = self.poll_shot()
            if shot is not None:
                out.append(shot)
            time.sleep(0.05)
        return out

    def wait_for(self, what: str, ok: Any, timeout_s: float) -> tuple[float, list[Shot]]:
        """Watch until ``ok(shots so far)`` holds; returns (seconds it took, the shots)."""
        t0 = time.monotonic()
        seen: list[Shot] = []
        while time.monotonic() - t0 < timeout_s:
            self.assert_alive(f"while waiting for {what}")
            shot = self.poll_shot()
            if shot is not None:
                seen.append(shot)
                if ok(seen):
                    return time.monotonic() - t0, seen
            time.sleep(0.05)
        self.save_last("timeout")
        raise AssertionError(
            f"{what}: not seen within {timeout_s:.0f} s ({len(seen)} screenshots)\n{self.tail()}"
        )

    def wait_live_swap(self, timeout_s: float) -> float:
        """Until two screenshots in a row show the swap on newer frames."""

        def ok(seen: list[Shot]) -> bool:
            return len(seen) >= 3 and all(
                b.tinted and b.counter != a.counter for a, b in zip(seen[-3:], seen[-2:], strict=False)
            )

        return self.wait_for("a live swap", ok, timeout_s)[0]

    def save_last(self, name: str) -> None:
        """Keep the last screenshot next to the booth (for a failing test's report)."""
        if self.shots:
            cv2.imwrite(str(self.folder / f"last-{name}.png"), self.shots[-1].image)

    def stats(self) -> dict[str, Any]:
        for _ in range(20):
            with contextlib.suppress(OSError, ValueError):
                return dict(json.loads(self.stats_path.read_text()))
            time.sleep(0.05)
        return {}

    # -- the keyboard ------------------------------------------------------------------------
    def window_id(self, title: str | None = None, timeout_s: float = 10.0) -> str:
        title = title or self.title
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = subprocess.run(
                [XDOTOOL, "search", "--name", f"^{title}$"], env=self.env, capture_output=True, text=True, timeout=10
            )  # fmt: skip
            ids = r.stdout.split()
            if ids:
                return ids[-1]
            time.sleep(0.2)
        raise AssertionError(f"no X window titled {title!r}")

    def keys(self, keys: list[str], delay_ms: int = 15, title: str | None = None) -> None:
        """Real X key presses into the kiosk's window (xdotool key --window)."""
        wid = self.window_id(title)
        subprocess.run(
            [XDOTOOL, "key", "--window", wid, "--delay", str(delay_ms), *keys], env=self.env, check=True, timeout=30
        )  # fmt: skip

    # -- faults and the end ------------------------------------------------------------------
    def model_faults(self, **control: Any) -> None:
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps(control))
        tmp.replace(self.control)

    def exit_cleanly(self, allowed: str = "") -> float:
        """SIGTERM: the kiosk must exit 0 with no traceback on stderr (:meth:`assert_no_traceback`);
        the seconds it took."""
        rc, took = self.terminate()
        assert rc == 0, f"exit status {rc}:\n{self.tail(40)}"
        self.assert_no_traceback(allowed)
        return took

    def terminate(self, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> tuple[int | None, float]:
        """Send ``sig``; (exit status, seconds until exit)."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc: int | None = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0

    def reap(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def kiosk_in_window(tmp_path: Path, xvfb_display: str) -> Any:
    started: list[WindowKiosk] = []

    def start(title: str, photos: tuple[str, ...] = ("p1",), **yaml: str) -> WindowKiosk:
        booth = tmp_path / "booth"
        booth.mkdir()
        make_booth(booth, title, photos, **yaml)
        k = WindowKiosk(booth, xvfb_display, title)
        started.append(k)
        return k

    yield start
    for k in started:
        k.reap()


# -- a. face keys while the faces folder changes -----------------------------------------------------
def test_face_keys_pressed_while_the_faces_folder_changes(kiosk_in_window):
    """Staff mash the face keys (pick_face_1..9, next/prev) while photos are added and removed and
    bad files (random bytes, a truncated JPEG, an empty file) come and go.

    FAILS on main as of c76c2b6 (on purpose, not xfailed): ``KioskApp._handle_input`` applies a key
    against ``controls.face_count`` of the last ``_sync_library`` while the library has already
    shrunk, and ``entries[selected_face]`` raises IndexError in the render loop: the kiosk exits 1.
    It passes once the selection is one key resolved against the snapshot it is applied to (issue 9,
    "one owner per piece of state")."""
    start_photos = ("p1", "p2", "p3", "p4")
    k = kiosk_in_window("wf-keys", start_photos)
    k.wait_live_swap(60)
    faces = k.folder / "faces"
    rng = random.Random(9)
    stop = threading.Event()
    presses = [0]
    errors: list[BaseException] = []

    def mash() -> None:
        try:
            while not stop.is_set() and k.proc.poll() is None:
                batch = [rng.choice(FACE_KEYS) for _ in range(12)]
                k.keys(batch, delay_ms=12)
                presses[0] += len(batch)
        except BaseException as exc:
            if k.proc.poll() is None:  # else the window went with the kiosk: assert_alive says why
                errors.append(exc)

    masher = threading.Thread(target=mash, daemon=True)
    masher.start()
    jpeg = cv2.imencode(".jpg", white_square_frame(360, 640))[1].tobytes()
    bad = {
        "zz_random.jpg": os.urandom(30_000),
        "zz_truncated.jpg": jpeg[: len(jpeg) // 3],
        "zz_empty.png": b"",
    }
    t_end = time.monotonic() + 10.0
    cycles = 0
    try:
        while time.monotonic() < t_end and k.proc.poll() is None:
            cycles += 1
            for name in ("p5", "p6", "p7", "p8"):  # grow to 8 faces, bad files beside them
                write_atomically(faces / f"{name}.png", photo(name))
            for name, data in bad.items():
                (faces / name).write_bytes(data)
            time.sleep(rng.uniform(0.3, 0.7))
            for name in ("p3", "p4", "p5", "p6", "p7", "p8"):  # shrink to 2 under the selection
                (faces / f"{name}.png").unlink()
            time.sleep(rng.uniform(0.3, 0.7))
            for name in ("p3", "p4"):
                write_atomically(faces / f"{name}.png", photo(name))
            for name in bad:
                (faces / name).unlink()
            time.sleep(rng.uniform(0.2, 0.5))
    finally:
        stop.set()
        masher.join(30)
    k.assert_alive(f"after {presses[0]} face-key presses in {cycles} faces-folder changes")
    assert not errors, errors
    assert presses[0] >= 80 and cycles >= 4, (presses, cycles)

    # The booth settles on p1..p4; pick_face_3 picks p3 and the swap carries its identity.
    time.sleep(1.0)
    k.keys(["1"])
    k.wait_live_swap(10)
    tint_p1 = k.watch(0.6, min_shots=2)[-1].tint
    k.keys(["3"])
    time.sleep(1.0)
    seen = k.watch(2.0)
    share = live_swapped_share(seen)
    stats = k.stats()
    k.save_last("keys")
    assert stats["faces"]["names"] == list(start_photos), stats["faces"]
    assert stats["controls"]["selected_face"] == "p3", stats["controls"]
    assert share >= 0.75, f"swap on live frames in {share:.0%} of {len(seen)} screenshots after the churn"
    tint_p3 = seen[-1].tint
    assert max(abs(a - b) for a, b in zip(tint_p1, tint_p3, strict=True)) > 4.0, (tint_p1, tint_p3)
    k.exit_cleanly()
    print(
        f"\n{presses[0]} face keys in {cycles} folder cycles; swap on {share:.0%} after; p1 {tint_p1} p3 {tint_p3}"
    )


# -- b. model calls failing now and then; a model file corrupted, then repaired ----------------------
def test_model_faults_keep_the_window_drawing_and_the_swap_comes_back(kiosk_in_window):
    """1. 8 % of the ONNX Runtime calls raise for 4 s: the swap stays on screen, the window live.
    2. The swapper file is corrupted on disk and every call raises: the stage is dropped and cannot
       be rebuilt; the window keeps drawing new frames, the stats' notice says why and the
       visitor's screen shows the staff marker, no text (issue 29.4; before: the amber notice).
    3. The calls work again, the file is still corrupt; 4. the right file is copied in: the swap
       comes back without a restart and the notice and marker go."""
    k = kiosk_in_window("wf-models")
    k.wait_live_swap(60)
    k.model_faults(errors={"until": time.time() + 4.0, "rate": 0.08})
    flaky = k.watch(4.0)
    k.model_faults()
    share_flaky = live_swapped_share(flaky)
    assert share_flaky >= 0.75, f"swap on live frames in {share_flaky:.0%} with 8 % failing calls"
    assert not any(s.amber or s.marker for s in flaky[-3:])

    swapper = k.folder / "models" / "inswapper_128.onnx"
    good = swapper.read_bytes()
    write_atomically(swapper, b"\x08\x01garbage, not a model" * 100)
    k.model_faults(errors={"until": time.time() + 600, "rate": 1.0})
    t_out, _ = k.wait_for(
        "the swap off screen", lambda s: len(s) >= 2 and not s[-1].tinted and not s[-2].tinted, 15
    )
    out = k.watch(3.0)
    stats_out = k.stats()
    notice_out = stats_out["processing"]["notice"]
    k.save_last("models-out")
    assert moving_share(out) >= 0.75, "the window froze while the swap was out"
    assert not any(s.tinted for s in out[2:]), "a broken stage still showed a swap"
    assert all(s.marker for s in out[2:]), "no staff marker on screen while the swap was out"
    assert not any(s.amber for s in out), "the notice's text on the visitor's screen"
    assert "inswapper_128.onnx" in notice_out, notice_out  # names the file
    assert notice_out in stats_out["warnings"], stats_out["warnings"]  # where the staff console reads it

    k.model_faults()  # the calls work again; the file is still corrupt
    mid = k.watch(2.0)
    write_atomically(swapper, good)  # the operator copies the right file in
    t_back, _ = k.wait_for("the swap back", lambda s: len(s) >= 2 and s[-1].tinted and s[-2].tinted, 15)
    k.wait_live_swap(5)
    after = k.watch(2.0)
    k.save_last("models-back")
    assert live_swapped_share(after) >= 0.75
    assert not any(s.amber or s.marker for s in after), (
        f"the notice stayed: {k.stats()['processing']['notice']!r}"
    )
    stats = k.stats()["processing"]
    k.exit_cleanly(allowed="[soak] injected model fault")
    print(
        f"\nflaky calls: swap {share_flaky:.0%}; out {t_out:.1f} s after the fault, notice {notice_out!r}; "
        f"corrupt file, calls fixed: swap {sum(s.tinted for s in mid)}/{len(mid)}; back {t_back:.1f} s after "
        f"the repair; errors {stats['errors']}, restarts {stats['restarts']}, build failures {stats['build_failures']}"
    )


# -- c. the YAML edited live into invalid text and back, with a display-section change ---------------
def test_yaml_broken_live_then_healed_with_a_display_change(kiosk_in_window):
    """The YAML becomes invalid while the window is open: the kiosk keeps running the last good
    config (swap on, live) and shows the staff marker, no text (issue 29.4; before: the amber
    notice). Then it is written valid with a display-section change (display.composite gpu → cpu, a
    new display.title: the window is reopened) and overlay.debug on: the marker goes, the debug
    block appears, the swap stays, and a key pressed into the NEW window still works."""
    k = kiosk_in_window("wf-yaml")
    k.wait_live_swap(60)
    text = k.cfg.read_text()
    broken = text.replace("overlay: {debug: false", "overlay: {debug: [false")
    assert broken != text
    write_atomically(k.cfg, broken.encode())
    t_problem, _ = k.wait_for("the staff marker on screen", lambda s: s[-1].marker, 10)
    during = k.watch(2.0)
    k.save_last("yaml-broken")
    assert all(s.marker for s in during), "the marker went away while the file was broken"
    assert not any(s.amber for s in during), "the config problem's text on the visitor's screen"
    assert any("config" in w for w in k.stats()["warnings"]), k.stats()["warnings"]
    assert live_swapped_share(during) >= 0.75, [(round(s.t, 2), s.tinted, s.counter) for s in during]

    write_atomically(k.cfg, booth_yaml("wf-yaml-2", composite="cpu", debug="true").encode())

    def healed(seen: list[Shot]) -> bool:
        return len(seen) >= 3 and all(
            s.tinted and s.debug and not s.amber and not s.marker for s in seen[-2:]
        )

    t_healed, _ = k.wait_for("the healed config (debug block, no notice, swap on)", healed, 15)
    k.window_id("wf-yaml-2")  # the display change reopened the window under its new title
    after = k.watch(1.5)
    k.save_last("yaml-healed")
    assert live_swapped_share(after) >= 0.75
    assert all(s.debug and not s.amber for s in after)
    k.keys(["d"], title="wf-yaml-2")  # toggle_debug into the reopened window
    k.wait_for("the debug block off after the key", lambda s: not s[-1].debug and s[-1].tinted, 5)
    k.exit_cleanly()
    print(
        f"\nproblem on screen {t_problem:.1f} s after the bad write; healed {t_healed:.1f} s after the good one"
    )


# -- d. SIGHUP and SIGTERM to the real-window kiosk -------------------------------------------------
def test_sighup_reloads_and_sigterm_exits_0_in_a_real_window(kiosk_in_window):
    """A change the file watcher cannot see (same size and mtime) is applied at once on SIGHUP
    (overlay.debug on: the debug block appears on screen); SIGTERM then exits 0, promptly."""
    k = kiosk_in_window("wf-signals")
    k.wait_live_swap(60)
    st = k.cfg.stat()
    k.cfg.write_text(k.cfg.read_text().replace("debug: false", "debug: true "))
    os.utime(k.cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert k.cfg.stat().st_size == st.st_size
    before = k.watch(2.0)
    assert before and not any(s.debug for s in before), "applied without SIGHUP: the test cannot tell"
    k.proc.send_signal(signal.SIGHUP)
    t_reload, _ = k.wait_for("the debug block after SIGHUP", lambda s: s[-1].debug, 5)
    after = k.watch(1.5)
    k.save_last("sighup")
    assert all(s.debug for s in after)
    assert live_swapped_share(after) >= 0.75, [(round(s.t, 2), s.tinted, s.counter) for s in after]
    took = k.exit_cleanly()
    # The 2 s bound is asserted headless by test_booth_signals. A window kiosk on the shared 2-core VM
    # measured 1.5 s at load 7; at load ~12, 0.6-3.5 s without screenshots and 2.5 to over 5 s with
    # them (each stalls the render loop). Only a hang or an abort fails here (and terminate()'s 10 s).
    assert took < 8.0, f"SIGTERM took {took:.2f} s:\n{k.tail(10)}"
    print(f"\nSIGHUP applied {t_reload:.2f} s after the signal; SIGTERM: exit 0 in {took:.2f} s")
