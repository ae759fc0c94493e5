"""Keepsakes in a running kiosk: `kiosk run` starts the web server only when keepsake.enabled, deletes a
previous run's photos at start and its own at a clean exit, reports keepsake figures in the Prometheus
file, shows a keepsake failure on the staff line, and follows a reloaded config's limits."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from egl_helpers import egl_available
from net_helpers import free_port

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.appliance.monitoring import render_metrics
from kiosk.config import parse_config
from kiosk.keepsake.privacy import GONE_FILE
from kiosk.keepsake.service import KeepsakeService
from kiosk.keepsake.store import Found, KeepsakeError

prom_parser = pytest.importorskip(
    "prometheus_client.parser", reason="pip install prometheus_client (test extra)"
)

ROOT = Path(__file__).resolve().parent.parent
JPEG = b"\xff\xd8\xff\xe0" + b"k" * 2000 + b"\xff\xd9"
OLD_TOKEN = "Aaaaaaaaaaaaaaaaaaaaaa"  # a keepsake a previous run left behind


def _status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def _until(fn, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not fn():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _answers(port: int) -> bool:
    try:
        _status(port, "/")
    except ConnectionRefusedError:
        return False
    return True


def _families(text: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        out[fam.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in fam.samples}
    return out


@pytest.mark.gl
@pytest.mark.slow
@pytest.mark.parametrize("enabled", [True, False])
def test_kiosk_run_serves_keepsakes_only_when_enabled_and_cleans_up(tmp_path: Path, enabled: bool) -> None:
    if not egl_available():
        pytest.skip("no EGL/OpenGL context available (install libegl1 and Mesa)")
    port = free_port()
    folder = tmp_path / "keepsakes"
    folder.mkdir()
    (folder / f"{OLD_TOKEN}.jpg").write_bytes(JPEG)
    cfg = tmp_path / "booth.yaml"
    cfg.write_text(
        f"""
source: {{kind: synthetic}}
processing: {{enabled: false}}
display: {{width: 160, height: 120, vsync: false, max_fps: 30}}
controls: {{gamepad_enabled: false}}
monitoring: {{textfile: kiosk.prom, interval_s: 1}}
keepsake: {{enabled: {str(enabled).lower()}, listen: "127.0.0.1:{port}"}}
"""
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KIOSK_KEEPSAKE_DIR": str(folder)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kiosk", "run", "--config", str(cfg), "--headless", "--seconds", "40"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    prom = tmp_path / "kiosk.prom"
    fams = None
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and not prom.exists():
            time.sleep(0.2)
        assert prom.exists(), "the kiosk did not start"
        if enabled:
            assert _until(lambda: _answers(port)), "the keepsake server did not come up"
            assert _status(port, "/") == 404
            assert _status(port, f"/p/{OLD_TOKEN}.jpg") == 410  # the old photo went at start-up: gone
            assert not (folder / f"{OLD_TOKEN}.jpg").exists()
            proc.send_signal(signal.SIGUSR1)  # before: the kiosk died with 138, no clean-up
            time.sleep(0.5)
            assert proc.poll() is None and _status(port, "/") == 404, "SIGUSR1 ended the kiosk"
            while time.monotonic() < deadline:
                fams = _families(prom.read_text())
                refused = fams.get("faceswap_kiosk_keepsake_refused_requests")
                if (
                    refused
                    and refused[("faceswap_kiosk_keepsake_refused_requests_total", (("how", "answer"),))] >= 2
                ):
                    break
                time.sleep(0.3)
        else:
            with pytest.raises(ConnectionRefusedError):
                _status(port, "/")
            assert (folder / f"{OLD_TOKEN}.jpg").exists()  # keepsakes off: the folder is not touched
            fams = _families(prom.read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err[-2000:]
    assert fams is not None
    if enabled:
        taken = fams["faceswap_kiosk_keepsakes"][("faceswap_kiosk_keepsakes_total", (("event", "taken"),))]
        assert taken == 0
        with pytest.raises(ConnectionRefusedError):  # the server stopped with the kiosk
            _status(port, "/")
    else:
        assert "faceswap_kiosk_keepsakes" not in fams
    assert "Traceback" not in err


@pytest.mark.parametrize("separate_process", [True, False])
def test_the_service_keeps_a_photo_reports_it_and_applies_a_reload(
    tmp_path: Path, separate_process: bool
) -> None:
    port = free_port()
    cfg = parse_config(f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}", ttl_s: 600}}\n')
    svc = KeepsakeService(cfg.keepsake, tmp_path / "k", separate_process=separate_process).start()
    try:
        assert svc.wait_ready() and svc.available and svc.staff_line() == ""
        kept = svc.keep(JPEG)
        assert kept.url == f"http://127.0.0.1:{port}/p/{kept.record.token}"
        answers: list[int] = []  # the child may answer 404 until it has seen the new photo
        assert _until(
            lambda: answers.append(_status(port, f"/p/{kept.record.token}.jpg")) or answers[-1] == 200
        )
        assert _status(port, "/p/../x") == 404
        want = {"taken": 1, "downloaded": 1, "refused": len(answers), "stored": 1}  # every non-200 counted
        assert _until(lambda: {k: svc.metrics()[k] for k in want} == want), svc.metrics()
        second = svc.keep(JPEG)
        svc.apply(cfg.keepsake.model_copy(update={"max_photos": 1}))
        assert svc.store.lookup(kept.record.token).found is Found.GONE  # the new limit at once
        assert svc.store.lookup(second.record.token).found is Found.OK
        assert svc.metrics()["evicted"] == 1 and svc.full()
    finally:
        svc.close()
    assert [p.name for p in (tmp_path / "k").iterdir()] == [GONE_FILE]  # no photo, no address


def test_a_service_that_cannot_start_says_so_on_the_staff_line(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        cfg = parse_config(f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}"}}\n')
        svc = KeepsakeService(cfg.keepsake, tmp_path / "k").start()
        assert not svc.wait_ready()
    assert not svc.available
    assert svc.staff_line().startswith(f"keepsake: cannot listen on 127.0.0.1:{port}")
    with pytest.raises(KeepsakeError):
        svc.keep(JPEG)
    svc.close()


def test_the_staff_line_shows_a_keepsake_problem_unless_a_config_problem_is_shown(tmp_path: Path) -> None:
    cfg = parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n")
    app = KioskApp(cfg, RunOptions(headless=True))
    try:

        class Broken:
            def staff_line(self) -> str:
                return "print failed: lp exited 1: no such printer"

        app.keepsake.service = Broken()  # type: ignore[assignment]
        assert app.session.view(0.0, app.staff_problem()).booth.warnings[0].startswith("print failed")
        app.reload.problem = "config change ignored: x"
        assert app.staff_problem() == "config change ignored: x"
    finally:
        app.keepsake.service = None
        app.shutdown(0.5)


def test_the_prometheus_file_counts_keepsakes() -> None:
    cfg = parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n")
    app = KioskApp(cfg, RunOptions(headless=True))
    try:
        stats = app.stats()
    finally:
        app.shutdown(0.5)
    assert stats["keepsakes"] is None
    assert "keepsake" not in render_metrics(stats, up=True, now_unix=1.0)
    stats["keepsakes"] = {
        "taken": 5, "stored": 3, "page_views": 9, "downloaded": 4, "printed": 2, "print_failed": 1,
        "expired": 1, "evicted": 1, "refused": 7, "connections_refused": 2, "server_up": 0,
        "consent_declined": 3, "clips_made": 2, "clips_downloaded": 6,
    }  # fmt: skip
    fams = _families(render_metrics(stats, up=True, now_unix=1.0))
    total = fams["faceswap_kiosk_keepsakes"]
    got = {dict(labels)["event"]: v for (_, labels), v in total.items()}
    assert got == {
        "taken": 5, "downloaded": 4, "printed": 2, "print_failed": 1, "expired": 1, "evicted": 1,
        "consent_declined": 3, "clips_made": 2, "clips_downloaded": 6,
    }  # fmt: skip
    refused = fams["faceswap_kiosk_keepsake_refused_requests"]
    assert {dict(labels)["how"]: v for (_, labels), v in refused.items()} == {"answer": 7, "connection": 2}
    assert fams["faceswap_kiosk_keepsakes_stored"] == {("faceswap_kiosk_keepsakes_stored", ()): 3}
    assert fams["faceswap_kiosk_keepsake_server_up"] == {("faceswap_kiosk_keepsake_server_up", ()): 0}
    stats["keepsakes"]["server_up"] = 1
    up = _families(render_metrics(stats, up=True, now_unix=1.0))["faceswap_kiosk_keepsake_server_up"]
    assert up == {("faceswap_kiosk_keepsake_server_up", ()): 1}
