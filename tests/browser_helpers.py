"""A headless Chromium (Debian's ``chromium`` package) driven over the DevTools protocol, for tests
that need a real browser (the staff console's page; the keepsake page may follow). No pip
dependency: the protocol's websocket is aiohttp's client. :func:`chromium_path` is None where
Chromium is not installed (skip with :data:`NO_CHROMIUM`).

    with Browser() as b:
        b.navigate("http://127.0.0.1:8089/login")
        b.evaluate("document.title")
        png = b.screenshot()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

NO_CHROMIUM = "no Chromium (apt-get install chromium)"
#: Flags that keep a test's browser quiet and local: no first-run pages, no updates, no sync,
#: no network but what the page asks for.
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # CI runs as root in a container
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--password-store=basic",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium with one page, driven synchronously (each call runs the protocol on
    this object's own event loop: use it from one thread)."""

    def __init__(self, width: int = 430, height: int = 900, start_timeout_s: float = 20.0) -> None:
        exe = chromium_path()
        if exe is None:
            raise BrowserError(NO_CHROMIUM)
        self._profile = tempfile.mkdtemp(prefix="kiosk-chromium-")
        self._proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._loop = asyncio.new_event_loop()
        self._id = 0
        self._events: list[dict[str, Any]] = []
        try:
            port = self._devtools_port(start_timeout_s)
            self._loop.run_until_complete(self._connect(port, width, height))
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout_s: float) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrowserError(f"chromium exited with status {self._proc.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise BrowserError(f"chromium wrote no DevToolsActivePort within {timeout_s:g} s")

    async def _connect(self, port: int, width: int, height: int) -> None:
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in await r.json() if t.get("type") == "page"]
        if not pages:
            raise BrowserError("chromium has no page")
        self._ws = await self._http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        await self._call("Page.enable")
        await self._call("Runtime.enable")
        await self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
        )

    async def _call(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 15.0) -> Any:
        self._id += 1
        mine = self._id
        await self._ws.send_str(json.dumps({"id": mine, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer within {timeout_s:g} s")
            msg = await self._ws.receive(timeout=left)
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise BrowserError(f"{method}: the DevTools connection closed ({msg.type})")
            data = json.loads(msg.data)
            if data.get("id") == mine:
                if "error" in data:
                    raise BrowserError(f"{method}: {data['error'].get('message')}")
                return data.get("result", {})
            if "method" in data:
                self._events.append(data)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One DevTools protocol command; its result."""
        return self._loop.run_until_complete(self._call(method, params))

    # -- what tests do --------------------------------------------------------------------------
    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def navigate(self, url: str, timeout_s: float = 10.0) -> None:
        """Open ``url`` and wait until its document has loaded."""
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", timeout_s)

    def wait_for(self, expression: str, timeout_s: float = 10.0, every_s: float = 0.1) -> Any:
        """Evaluate ``expression`` until it is truthy (its value), or raise after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            with contextlib.suppress(BrowserError):  # between two documents
                last = self.evaluate(expression)
                if last:
                    return last
            time.sleep(every_s)
        raise BrowserError(f"not true within {timeout_s:g} s: {expression} (last: {last!r})")

    def screenshot(self, full_page: bool = True) -> bytes:
        """The page as a PNG."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            metrics = self.call("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics.get("contentSize")
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def close(self) -> None:
        async def shut() -> None:
            for thing in ("_ws", "_http"):
                obj = getattr(self, thing, None)
                if obj is not None:
                    with contextlib.suppress(Exception):
                        await obj.close()

        with contextlib.suppress(Exception):
            self._loop.run_until_complete(shut())
        self._loop.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(2)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def environment_ok() -> bool:
    """Chromium can start here (installed; a display is not needed: headless)."""
    return chromium_path() is not None and os.access(chromium_path() or "", os.X_OK)
