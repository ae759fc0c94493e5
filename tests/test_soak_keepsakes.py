"""scripts/soak.py --keepsakes helpers, without a long run: the booth's keepsake config, the
keepsake fault kinds' allowances, the token grep of the kiosk's log, the server child lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import soak  # noqa: E402


def test_keepsake_booth_yaml_turns_keepsakes_on_on_loopback():
    cfg = yaml.safe_load(soak.booth_yaml(0, keepsake_port=18765))
    assert cfg["keepsake"]["enabled"] is True
    assert cfg["keepsake"]["listen"] == "127.0.0.1:18765"
    assert cfg["keepsake"]["url_base"] == "http://127.0.0.1:18765"
    # The harness is one visitor pressing all run long: no per-visitor cap (5 photos, then none)
    assert cfg["keepsake"]["takes_per_visitor"] == 0
    assert "keepsake" not in yaml.safe_load(soak.booth_yaml(0))


def test_keepsake_fault_kinds_each_have_an_allowance():
    assert soak.KEEPSAKE_FAULT_KINDS == ("server_kill", "server_stop", "keepsake_dir_gone", "stray_signal")
    assert all(soak.ALLOWANCE_S[k] > 0 for k in soak.KEEPSAKE_FAULT_KINDS)


def test_tokens_in_log_finds_a_leaked_token_only():
    log = "keepsake: stored photo\nGET /k/abcDEF123 200\n"
    assert soak.tokens_in_log(log, {"abcDEF123", "zzzNOTTHERE"}) == ["abcDEF123"]
    assert soak.tokens_in_log(log, {"zzzNOTTHERE", ""}) == []


def test_child_pids_finds_a_child_process():
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys; subprocess.run([sys.executable,'-c','import time; time.sleep(5)'])",
        ]
    )
    try:
        import time

        deadline = time.time() + 5
        kids: list[int] = []
        while time.time() < deadline and not kids:
            kids = soak.child_pids(parent.pid)
            time.sleep(0.05)
        assert len(kids) == 1
    finally:
        for k in soak.child_pids(parent.pid):
            subprocess.run(["kill", str(k)])
        parent.kill()
        parent.wait()


def _kiosk_with_child() -> subprocess.Popen:
    """A stand-in kiosk: ignores SIGHUP/SIGUSR1 (as the kiosk must) and has two children as the
    kiosk does: first multiprocessing's resource tracker, then the server (``spawn_main`` in its
    command line, as multiprocessing's spawn writes it)."""
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN); signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
        "tracker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'resource_tracker'])\n"
        "time.sleep(0.2)\n"
        "server = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'spawn_main'])\n"
        "time.sleep(30)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def _wait_children(pid: int, n: int = 2) -> list[int]:
    import time

    deadline = time.time() + 5
    while time.time() < deadline:
        kids = soak.child_pids(pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.05)
    return []


def _state_becomes(pid: int, ok) -> bool:
    import time

    deadline = time.time() + 5
    while time.time() < deadline:
        if ok(Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]):
            return True
        time.sleep(0.02)
    return False


def test_keepsake_faults_hit_the_server_child_and_the_folder(tmp_path: Path):
    kiosk = _kiosk_with_child()
    try:
        tracker, server = _wait_children(kiosk.pid)  # pids in start order (they do not wrap here)
        assert soak.server_pid(kiosk.pid) == server
        inj = soak.Injector(tmp_path, tmp_path / "faults.json", 10.0, 1.0, 0.0)
        inj.kiosk_pid = kiosk.pid
        inj.stop_s = 0.0
        inj.inject("server_stop")
        assert _state_becomes(server, lambda s: s == "T")  # stopped
        inj.tick()  # resumed
        assert _state_becomes(server, lambda s: s != "T")
        inj.inject("stray_signal")
        inj.inject("stray_signal")
        (tmp_path / "keepsakes").mkdir()
        inj.inject("keepsake_dir_gone")
        assert not (tmp_path / "keepsakes").exists()
        inj.inject("server_kill")
        assert _state_becomes(server, lambda s: s == "Z")  # killed -9 (a zombie until the kiosk reaps it)
        # The resource tracker was never hit (taking the first child killed it, not the server).
        assert Path(f"/proc/{tracker}/stat").read_text().split(") ")[1][0] not in "TZ"
        assert kiosk.poll() is None  # the kiosk itself took the stray signals and runs on
        assert {w.kind for w in inj.windows} == {
            "server_stop",
            "stray_signal",
            "keepsake_dir_gone",
            "server_kill",
        }
    finally:
        for k in soak.child_pids(kiosk.pid):
            subprocess.run(["kill", "-9", str(k)])
        kiosk.kill()
        kiosk.wait()


def test_visitor_reads_the_qr_and_fetches_the_photo_on_loopback(tmp_path: Path):
    import http.server
    import threading

    import cv2
    import numpy as np

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path == "/p/tokGOOD.jpg"
            self.send_response(200 if ok else 404)
            self.end_headers()
            if ok:
                self.wfile.write(b"\xff\xd8\xff\xe0 jpeg")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        visitor = soak.Visitor(None, port, 20.0, soak.Injector(tmp_path, tmp_path / "f.json", 10, 1, 0))  # type: ignore[arg-type]
        for token in ("tokGOOD", "tokGOOD", "tokGONE"):
            qr = cv2.QRCodeEncoder.create().encode(f"http://127.0.0.1:{port}/p/{token}")
            img = cv2.resize(qr, (qr.shape[1] * 8, qr.shape[0] * 8), interpolation=cv2.INTER_NEAREST)
            img = cv2.copyMakeBorder(img, 40, 40, 40, 40, cv2.BORDER_CONSTANT, value=255)
            visitor.see(cv2.cvtColor(img, cv2.COLOR_GRAY2BGR))
        visitor.see(np.zeros((100, 100, 3), np.uint8))  # no QR code: nothing fetched
        assert visitor.tokens == {"tokGOOD", "tokGONE"}
        assert (visitor.fetched, visitor.refused) == (1, 1)  # each token fetched once
    finally:
        server.shutdown()
        server.server_close()


def test_config_churn_keeps_keepsakes_on(tmp_path: Path):
    (tmp_path / "kiosk.yaml").write_text(soak.booth_yaml(0, keepsake_port=18765))
    inj = soak.Injector(tmp_path, tmp_path / "faults.json", 10.0, 1.0, 0.0)
    inj.keepsake_port = 18765
    for _ in range(2):  # the second churn writes half the YAML first, then completes it
        inj.inject("config_churn")
        for _, _, action in inj.pending:
            action()
        inj.pending = []
        assert yaml.safe_load((tmp_path / "kiosk.yaml").read_text())["keepsake"]["enabled"] is True


def test_a_frozen_still_is_read_for_its_qr_code_even_with_the_faces_tinted(tmp_path: Path):
    """The keepsake still is frozen and its QR card may leave a face square tinted: the visitor must
    read it anyway (it looked at untinted shots only and missed photos), and the shot is kept."""
    import cv2

    seen: list[object] = []

    class Visitor:
        def see(self, img: object) -> None:
            seen.append(img)

    frame = soak.make_scene(5)
    tint = frame.copy()
    for x, y, side in soak.FACE_SQUARES:
        tint[y : y + side, x : x + side] = (198, 226, 189)
    shots: list[tuple[float, bool, int]] = []
    misses = tmp_path / "misses"
    misses.mkdir()
    assert soak.take_shot(tint, 1.0, shots, Visitor(), misses) is True  # live swap: not read
    assert not seen
    assert soak.take_shot(tint, 1.5, shots, Visitor(), misses) is False  # frozen (same counter), tinted
    assert len(seen) == 1
    assert soak.take_shot(frame, 2.0, shots, None, misses) is False  # untinted
    assert sorted(p.name for p in misses.iterdir()) == ["1.500.png", "2.000.png"]
    assert cv2.imread(str(misses / "1.500.png")).shape == tint.shape
