"""The staff console of a running kiosk (issue 29's "done when"): without the PIN, 401 on every
path but the login page; 10 wrong PINs, then 429 for that client; with the PIN, ``status.json``
answers and ``POST /api/face/next`` changes the face on screen within a second; and a real browser
(headless Chromium) logs in, shows the status and the plots, switches the face and watches the
screen's thumbnail refresh. The kiosk runs headless on this thread; a helper thread is the staff."""

from __future__ import annotations

import base64
import http.client
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from egl_helpers import skip_module_without_egl
from net_helpers import free_port
from session_fixtures import FakeLibrary

from kiosk.app.kiosk_app import KioskApp, RunOptions
from kiosk.config import parse_config

pytestmark = [pytest.mark.gl, pytest.mark.slow]
skip_module_without_egl()

ROOT = Path(__file__).resolve().parent.parent
PIN = "4711-booth"
BASIC = {"Authorization": "Basic " + base64.b64encode(f"staff:{PIN}".encode()).decode()}
#: KIOSK_DOCS_IMG=1: the browser test writes its screenshots into docs/img/ (for docs/console.md).
DOCS_IMG = os.environ.get("KIOSK_DOCS_IMG") == "1"


def _kiosk(port: int, seconds: float) -> KioskApp:
    cfg = parse_config(
        "source: {kind: synthetic, synthetic: {width: 320, height: 180, fps: 30}, mirror: false}\n"
        "display: {width: 480, height: 270, max_fps: 30}\n"
        "processing: {enabled: false}\n"
        f"console: {{enabled: true, listen: '127.0.0.1:{port}', pin: '{PIN}', allow: [127.0.0.0/8]}}\n",
        "booth.yaml",
    )
    app = KioskApp(cfg, RunOptions(headless=True, seconds=seconds))
    library = FakeLibrary(("Ada Lovelace", "Grace Hopper", "Hedy Lamarr"))
    app.reload.library = app.session.library = library  # type: ignore[assignment]
    return app


def _run_with_staff(app: KioskApp, staff: Callable[[], None]) -> None:
    """Run the kiosk here until ``staff`` (on a helper thread) is done; re-raise its failure."""
    failure: list[BaseException] = []

    def work() -> None:
        try:
            staff()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failure.append(exc)
        finally:
            app.stop.set()

    helper = threading.Thread(target=work, daemon=True)
    helper.start()
    assert app.run() == 0
    helper.join(10)
    if failure:
        raise failure[0]


def _request(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: str = "",
    source: str = "127.0.0.1",
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        hdrs = {**(headers or {}), **({"Content-Type": "application/x-www-form-urlencoded"} if body else {})}
        conn.request(method, path, body=body or None, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _status(port: int) -> dict[str, Any]:
    code, body = _request(port, "GET", "/status.json", BASIC)
    assert code == 200, code
    return json.loads(body)  # type: ignore[no-any-return]


def _wait_up(port: int, timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            doc = _status(port)
            if doc.get("face"):
                return doc
        except (OSError, AssertionError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"the console did not answer within {timeout_s:g} s")


def test_pin_lockout_status_json_and_face_next_within_a_second() -> None:
    port = free_port()
    app = _kiosk(port, seconds=30)
    seen: dict[str, Any] = {}

    def staff() -> None:
        before = _wait_up(port)
        for path in ("/", "/status.json", "/screen.jpg", "/app.js", "/api/face/next", "/x"):
            assert _request(port, "GET", path)[0] == 401, path
            assert _request(port, "POST", path)[0] == 401, path
        assert _request(port, "GET", "/login")[0] == 200
        wrong = {"Authorization": "Basic " + base64.b64encode(b"staff:0000").decode()}
        codes = [_request(port, "GET", "/status.json", wrong, source="127.0.0.5")[0] for _ in range(10)]
        assert codes == [401] * 9 + [429], codes
        assert _request(port, "GET", "/status.json", BASIC, source="127.0.0.5")[0] == 429
        assert before["fps"]["render"] > 0 and "swap_share_pct" in before and before["warnings"] == []
        assert before["counters"].keys() >= {"faces_seen", "keepsakes_taken", "errors"}
        t0 = time.monotonic()
        assert _request(port, "POST", "/api/face/next", BASIC)[0] == 202
        while _status(port)["face"] == before["face"]:
            assert time.monotonic() - t0 < 3.0, "the face did not change"
            time.sleep(0.02)
        seen["switch_s"] = time.monotonic() - t0
        seen["before"], seen["after"] = before["face"], _status(port)["face"]

    _run_with_staff(app, staff)
    assert (seen["before"], seen["after"]) == ("Ada Lovelace", "Grace Hopper")
    assert app.controls.selected_key == "Grace Hopper"  # the kiosk's own selection: what it shows
    assert seen["switch_s"] < 1.0, seen


def test_a_real_browser_logs_in_sees_status_and_plots_and_switches_the_face(tmp_path: Path) -> None:
    from browser_helpers import NO_CHROMIUM, Browser, chromium_path

    if chromium_path() is None:
        pytest.skip(NO_CHROMIUM)
    port = free_port()
    app = _kiosk(port, seconds=40)
    shots = ROOT / "docs" / "img" if DOCS_IMG else tmp_path
    base = f"http://127.0.0.1:{port}"

    def staff() -> None:
        with Browser() as b:
            _wait_up(port)
            b.navigate(f"{base}/")  # without the PIN: the 401 page, pointing at the login page
            assert "log in" in b.evaluate("document.body.innerText")
            b.navigate(f"{base}/login")
            (shots / "console-login.png").write_bytes(b.screenshot())
            b.evaluate(f"document.querySelector('input[name=pin]').value = '{PIN}'")
            b.evaluate("document.querySelector('form').submit()")
            b.wait_for("location.pathname === '/' && !!document.querySelector('[data-k=face]')")
            assert b.wait_for("document.querySelector('[data-k=face]').textContent") == "Ada Lovelace"
            b.wait_for("/fps/.test(document.querySelector('[data-k=render_fps]').textContent)")
            assert b.evaluate("document.querySelectorAll('svg rect').length") >= 6 * 24  # the day's plots
            b.wait_for("document.getElementById('screen').naturalWidth > 0", 6)  # the screen's thumbnail
            src = b.evaluate("document.getElementById('screen').src")
            b.evaluate(
                "[...document.querySelectorAll('form')].find(f => f.action.endsWith('/api/face/next')).submit()"
            )
            b.wait_for("document.querySelector('[data-k=face]').textContent === 'Grace Hopper'", 5)
            b.wait_for(f"document.getElementById('screen').src !== {json.dumps(src)}", 5)  # refreshed
            b.wait_for(
                "document.getElementById('screen').complete && document.getElementById('screen').naturalWidth > 0"
            )
            (shots / "console.png").write_bytes(b.screenshot())

    _run_with_staff(app, staff)
    assert app.controls.selected_key == "Grace Hopper"
    assert (shots / "console.png").read_bytes()[:4] == b"\x89PNG"
