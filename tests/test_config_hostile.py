"""Any bytes as a config: `kiosk config check` and live reload give one line, in bounded time and
memory, never a traceback or a hang (alias bombs, deep nesting, huge numbers and files, non-UTF-8)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from kiosk.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent


def _laughs(levels: int = 10, fan: int = 10) -> str:
    names = [f"l{i}" for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * fan)}]"]
    for prev, name in zip(names, names[1:], strict=False):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * fan)}]")
    return "\n".join(lines) + "\n"  # 10**10 values once expanded


HOSTILE: dict[str, bytes] = {
    "billion_laughs": _laughs().encode(),
    "laughs_inside_a_section": (
        "controls:\n  keyboard:\n    next_face: &a [A, A, A, A, A, A, A, A]\n"
        + "".join(
            f"    k{i}: &a{i} [*{'a' if i == 0 else f'a{i - 1}'}, *{'a' if i == 0 else f'a{i - 1}'}]\n"
            for i in range(40)
        )
    ).encode(),
    "deep_flow_nesting": b"[" * 200_000 + b"]" * 200_000,
    "deep_block_nesting": "".join(f"{'  ' * i}k{i}:\n" for i in range(3000)).encode() + b"  " * 3000 + b"1\n",
    "float_overflow": b"display: {max_fps: 1e999}\n",
    "nan": b"display: {max_fps: .nan}\n",
    "huge_int": b"display: {width: " + b"9" * 100_000 + b"}\n",
    "int_over_python_limit": b"camera: " + b"1" * 5000 + b"\n",
    "huge_file": b"# " + b"x" * 20_000_000 + b"\n",
    "not_utf8": b"display: {title: \xff\xfe\x80}\n",
    "utf16_bom": "display: {fit: fill}\n".encode("utf-16"),
    "nul_bytes": b"display:\x00\x00\x01\n",
    "tabs": b"display:\n\twidth: 640\n",
    "a_list": b"- source\n- display\n",
    "a_scalar": b"just some words\n",
    "complex_key": b"? [a, b]\n: c\n",
    "python_tag": b"source: !!python/object/apply:os.system [echo pwned]\n",
    "unclosed": b"display: {width: 640\n",
    "random_bytes": bytes(range(256)) * 64,
    "long_bad_value": b"display: {fit: " + b"A" * 200_000 + b"}\n",
}


def _check_bounded(path: Path) -> str:
    """load_config(path) within 10 s and 64 MB of Python allocations; returns the one problem line."""
    out: dict[str, object] = {}

    def work() -> None:
        tracemalloc.start()
        try:
            load_config(path)
            out["result"] = "loaded"
        except ConfigError as exc:
            out["result"] = exc.problems
        except BaseException as exc:  # what the old code let through
            out["result"] = exc
        finally:
            out["peak"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(10.0)
    assert not t.is_alive(), f"{path.name}: still parsing after 10 s"
    result = out["result"]
    assert isinstance(result, list), f"{path.name}: {result!r}"
    assert int(out["peak"]) < 64 << 20, f"{path.name}: {int(out['peak']) >> 20} MB"  # type: ignore[call-overload]
    assert len(result) >= 1 and all("\n" not in line and len(line) < 400 for line in result)
    assert result[0].startswith(str(path)), result[0]  # names the file
    return result[0]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_config_gives_one_line_in_bounded_time(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(HOSTILE[name])
    _check_bounded(path)


def test_cli_check_never_tracebacks(tmp_path):
    for name in ("billion_laughs", "huge_int", "not_utf8", "deep_flow_nesting"):
        path = tmp_path / f"{name}.yaml"
        path.write_bytes(HOSTILE[name])
        proc = subprocess.run(
            [sys.executable, "-m", "kiosk", "config", "check", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 1, (name, proc.stderr[-500:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(str(path)), (name, proc.stderr[-500:])


@pytest.mark.gl
def test_running_kiosk_survives_hostile_reloads_and_applies_the_next_good_file(tmp_path):
    """Live reload of every hostile text: the kiosk keeps rendering, shows the one-line problem,
    keeps the running config, and still applies a good file afterwards."""
    try:
        import moderngl

        moderngl.create_standalone_context(backend="egl").release()
    except Exception:
        pytest.skip("no EGL/OpenGL context available")
    from kiosk.app.kiosk_app import KioskApp, RunOptions

    small = (
        "source: {kind: synthetic, synthetic: {width: 160, height: 120, fps: 30}, mirror: false}\n"
        "display: {width: 160, height: 120, max_fps: 30}\nprocessing: {enabled: false}\n"
    )
    path = tmp_path / "k.yaml"
    path.write_text(small)
    app = KioskApp(load_config(path), RunOptions(headless=True, seconds=120), config_path=path)
    assert app.reload.watcher is not None
    app.reload.watcher.interval_s, app.reload.watcher.settle_s = 0.05, 0.05
    seen: dict[str, object] = {}

    def edit() -> None:
        try:
            names = ("billion_laughs", "huge_int", "not_utf8", "deep_flow_nesting", "a_list", "tabs")
            for bump, name in enumerate(names, start=1):
                path.write_bytes(HOSTILE[name])
                st = path.stat()
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))
                frames = app.render_rate.count
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and "config change ignored" not in app.reload.problem:
                    time.sleep(0.02)
                notice = app.overlay_texts(time.perf_counter())["notice"]
                time.sleep(0.2)
                seen[name] = (notice, app.render_rate.count > frames, app.cfg.display.width)
                app.reload.problem = ""
            path.write_text(
                small.replace("width: 160, height: 120, max_fps", "width: 200, height: 120, max_fps")
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and app.cfg.display.width != 200:
                time.sleep(0.02)
            seen["good"] = app.cfg.display.width
        finally:
            app.stop.set()

    t = threading.Thread(target=edit)
    t.start()
    assert app.run() == 0
    t.join()
    for name in ("billion_laughs", "huge_int", "not_utf8", "deep_flow_nesting", "a_list", "tabs"):
        notice, rendering, width = seen[name]  # type: ignore[misc]
        assert "config change ignored" in notice and str(path) in notice and "\n" not in notice, (
            name,
            notice,
        )
        assert rendering and width == 160, name
    assert seen["good"] == 200
