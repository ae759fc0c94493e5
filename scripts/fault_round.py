#!/usr/bin/env python3
"""The keepsake fault round (issue 28) against the INSTALLED kiosk, not the checkout.

Build and install the wheel into a venv outside the checkout, then run this script with that
venv's python from a folder outside the checkout::

    bash scripts/check_wheel.sh --offline --install-only --workdir /tmp/fr_wheel
    cd /tmp && /tmp/fr_wheel/venv/bin/python /path/to/checkout/scripts/fault_round.py --json fr.json

It refuses to run when ``import kiosk`` resolves into the checkout. It builds the soak's booth
(``scripts/soak.py``: stand-in models, a looping video with two white-square faces and a frame
counter) with keepsakes on over HTTPS on a loopback port (a self-signed certificate made with
openssl), a log file and a Prometheus textfile, and starts ``kiosk run`` in a real window on a
private Xvfb. Then it runs each attack in turn:

- ``tls_idle_flood``: the server process's descriptor limit lowered (``prlimit``) to what it has
  open + ``--flood-spare``, then ``--flood`` idle TCP connections (no TLS handshake) from
  ``--flood-addresses`` loopback addresses (127.0.0.x), held open during the phone check;
- ``slowloris``: from ``--slow-addresses`` addresses, ``--slow-per-address`` TLS connections each
  that send a request header one line every 2 s and never finish it;
- ``server_kill``: ``kill -9`` of the keepsake server (the kiosk's spawned child);
- ``server_stop``: ``kill -STOP`` of the server for ``--stop-s`` s (longer than the kiosk's 10 s
  hung limit: it must be replaced), then ``-CONT``;
- ``second_kiosk``: a second, headless kiosk (its own config and port) on the same keepsake
  folder for 15 s: it must refuse keepsakes in one line, exit 0 and delete nothing;
- ``folder_deleted``: the keepsake folder removed while the kiosk runs (an earlier photo then
  answers 410, the next photo recreates the folder);
- ``enter_held``: Enter held down (``xdotool keydown``) for ``--hold-s`` s: at most one photo per
  ``cooldown_s``;
- ``sigusr1``: SIGUSR1 to the kiosk: counted and ignored;
- ``token_grep``: every token issued so far searched for in every file the kiosk wrote (its log
  file, stderr, stats JSON, metrics file, XDG folders), photos excepted.

After each attack a phone (a loopback HTTPS client that trusts the booth's certificate) must get a
fresh photo: the keepsake key pressed into the window, the QR code read off the kiosk's own
screenshot, ``<url>.jpg`` fetched (200, a JPEG); the kiosk must still run, swap on screen again
(the stand-in tint on both faces, the frame counter moving), show ``server_up`` 1 in its stats and
``faceswap_kiosk_keepsake_server_up 1`` in its metrics, and have no ``Traceback`` in any log. At the
end the kiosk gets SIGTERM and must exit 0 with a shutdown line naming SIGUSR1. One PASS/FAIL line
per attack; exit 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
CHECKOUT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))  # the soak's booth helpers (scripts/soak.py); kiosk is the wheel's

import soak  # noqa: E402

ATTACKS = (
    "tls_idle_flood",
    "slowloris",
    "server_kill",
    "server_stop",
    "second_kiosk",
    "folder_deleted",
    "enter_held",
    "sigusr1",
    "token_grep",
)
#: The booth's keepsake settings: photos at once (countdown 0), the still short.
COOLDOWN_S = 3
SHOW_S = 2


def keepsake_yaml(port: int, tls: bool = True) -> str:
    scheme = "https" if tls else "http"
    cert = ", tls_cert: booth.crt, tls_key: booth.key" if tls else ""
    return (
        f'keepsake: {{enabled: true, listen: "127.0.0.1:{port}", url_base: "{scheme}://127.0.0.1:{port}", '
        f"countdown_s: 0, show_s: {SHOW_S}, cooldown_s: {COOLDOWN_S}, takes_per_visitor: 0{cert}, "
        # the attackers' 127.0.0.x addresses are "phones" of the booth LAN (else closed at once)
        'allow: ["127.0.0.0/8"]}\n'
    )


def booth_config(port: int, log_name: str = "kiosk.log", prom_name: str = "metrics.prom") -> str:
    """The soak booth's YAML with keepsakes on over HTTPS, a log file and a metrics file."""
    text = soak.booth_yaml(0).replace("logging: {level: INFO}", f"logging: {{level: INFO, file: {log_name}}}")
    return text + f"monitoring: {{textfile: {prom_name}, interval_s: 1}}\n" + keepsake_yaml(port)


def tokens_in_files(files: Iterable[Path], tokens: set[str]) -> dict[str, list[str]]:
    """{file: tokens it contains} for every file that contains any of ``tokens``."""
    found: dict[str, list[str]] = {}
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        hits = sorted(t for t in tokens if t and t.encode() in data)
        if hits:
            found[str(path)] = hits
    return found


def files_to_grep(root: Path) -> list[Path]:
    """Every file under ``root`` but the photos themselves and the screenshots."""
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix.lower() not in (".jpg", ".png", ".mp4", ".onnx"):
            out.append(path)
    return out


def token_of(url: str, base: str) -> str | None:
    """The token of a keepsake address ``<base>/p/<token>``; None for anything else."""
    m = re.fullmatch(re.escape(base) + r"/p/([A-Za-z0-9_\-]{8,})", url)
    return m.group(1) if m else None


def verdict_line(name: str, problems: list[str], notes: str = "") -> str:
    word = "PASS" if not problems else "FAIL"
    detail = "; ".join([*problems, notes] if notes else problems)
    return f"{word} {name}" + (f": {detail}" if detail else "")


def make_cert(folder: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "booth.key"),
         "-out", str(folder / "booth.crt")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


class Background:
    """An asyncio attack on a thread of its own, until :meth:`stop`."""

    def __init__(self, attack: Callable[[asyncio.Event], Any]) -> None:
        self.attack = attack
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stats: dict[str, int] = {}
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        async def main() -> None:
            self._stop = asyncio.Event()
            self.stats = await self.attack(self._stop, self.ready)  # type: ignore[call-arg]

        self.loop.run_until_complete(main())

    def stop(self) -> dict[str, int]:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        return self.stats


def idle_flood(port: int, n: int, addresses: int) -> Callable[..., Any]:
    async def attack(stop: asyncio.Event, ready: threading.Event) -> dict[str, int]:
        writers = []
        failed = 0
        for i in range(n):
            host = f"127.0.0.{10 + i % addresses}"
            try:
                _, w = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, local_addr=(host, 0)), 5
                )
                writers.append(w)
            except (OSError, asyncio.TimeoutError):
                failed += 1
        ready.set()
        await stop.wait()
        for w in writers:
            w.close()
        return {"opened": len(writers), "failed": failed}

    return attack


def slowloris(port: int, addresses: int, per_address: int, ctx: ssl.SSLContext) -> Callable[..., Any]:
    async def one(host: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
        while not stop.is_set():
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(
                        "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1", local_addr=(host, 0)
                    ),
                    10,
                )
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
                counts["refused"] += 1
                counts[f"refused_{type(exc).__name__}"] = counts.get(f"refused_{type(exc).__name__}", 0) + 1
                await asyncio.sleep(0.5)
                continue
            counts["connected"] += 1
            try:
                w.write(b"GET /p/slowloris HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while not stop.is_set():
                    w.write(b"X-a: b\r\n")
                    await w.drain()
                    with contextlib.suppress(asyncio.TimeoutError):
                        if await asyncio.wait_for(r.read(1), 2) == b"":
                            break  # closed by the server (its first-request deadline)
            except (OSError, ssl.SSLError):
                pass  # reset by the server
            counts["closed_by_server"] += not stop.is_set()
            w.close()

    async def attack(stop: asyncio.Event, ready: threading.Event) -> dict[str, int]:
        counts = {"connected": 0, "closed_by_server": 0, "refused": 0}
        tasks = [
            asyncio.ensure_future(one(f"127.0.0.{100 + a}", stop, counts))
            for a in range(addresses)
            for _ in range(per_address)
        ]
        await asyncio.sleep(3)
        ready.set()
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return counts

    return attack


class Round:
    def __init__(self, args: argparse.Namespace, work: Path, python: str) -> None:
        self.args, self.work, self.python = args, work, python
        self.booth = work / "booth"
        self.booth.mkdir()
        self.port = soak.free_loopback_port()
        self.base = f"https://127.0.0.1:{self.port}"
        soak.make_booth(self.booth, yaml=booth_config(self.port))
        make_cert(self.booth)
        self.ctx = ssl.create_default_context(cafile=str(self.booth / "booth.crt"))
        self.loose = ssl.create_default_context()
        self.loose.check_hostname, self.loose.verify_mode = False, ssl.CERT_NONE
        self.photos = work / "keepsakes"
        self.shot, self.stats_path = work / "shot.png", work / "stats.json"
        self.stderr_path = work / "kiosk.stderr"
        self.xvfb, display = soak.start_xvfb()
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("KIOSK_") and k not in ("PYTHONPATH", "WAYLAND_DISPLAY")
        }
        self.env.update(
            DISPLAY=display, PYTHONUNBUFFERED="1", KIOSK_KEEPSAKE_DIR=str(self.photos),
            XDG_DATA_HOME=str(work / "data"), XDG_CACHE_HOME=str(work / "cache"), XDG_STATE_HOME=str(work / "state"),
        )  # fmt: skip
        self.xdotool = shutil.which("xdotool") or "xdotool"
        self.tokens: set[str] = set()
        self.urls: list[str] = []
        self.results: list[dict[str, Any]] = []
        with self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [python, "-m", "kiosk", "run", "--config", str(self.booth / "kiosk.yaml"), "--seconds", "1800",
                 "--screenshot", str(self.shot), "--screenshot-every", "0.3",
                 "--stats-json", str(self.stats_path), "--stats-interval", "0.5"],
                cwd=work, env=self.env, stdout=err, stderr=subprocess.STDOUT,
            )  # fmt: skip

    # -- what the kiosk shows ---------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return soak.read_stats(self.stats_path)

    def keepsakes(self) -> dict[str, Any]:
        ks = self.stats().get("keepsakes")
        return ks if isinstance(ks, dict) else {}

    def screen(self, after: float) -> Any:
        import cv2

        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                fresh = self.shot.stat().st_mtime > after
            except FileNotFoundError:
                fresh = False
            img = cv2.imread(str(self.shot)) if fresh else None
            if img is not None and img.shape[:2] == (soak.SIZE[1], soak.SIZE[0]):
                return img
            time.sleep(0.05)
        return None

    def swapping(self, timeout_s: float) -> bool:
        """Two screenshots in a row with the swap's tint and a moving frame counter."""
        deadline, prev, good = time.time() + timeout_s, None, 0
        while time.time() < deadline and self.proc.poll() is None:
            img = self.screen(time.time())
            if img is None:
                continue
            tinted, counter = soak.classify_shot(img)
            good = good + 1 if tinted and prev is not None and counter != prev else 0
            prev = counter
            if good >= 2:
                return True
        return False

    def window(self) -> str:
        r = subprocess.run(
            [self.xdotool, "search", "--name", f"^{soak.TITLE}$"], env=self.env, capture_output=True,
            text=True, timeout=10,
        )  # fmt: skip
        ids = r.stdout.split()
        return ids[-1] if ids else ""

    def xkey(self, *words: str) -> bool:
        wid = self.window()
        if not wid:
            return False
        r = subprocess.run([self.xdotool, *words[:1], "--window", wid, *words[1:]], env=self.env,
                           capture_output=True, timeout=20, check=False)  # fmt: skip
        return r.returncode == 0

    def logs_text(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in (self.stderr_path, self.booth / "kiosk.log") if p.exists()
        )

    def fetch(self, url: str, timeout_s: float = 10) -> int:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s, context=self.ctx) as resp:  # noqa: S310 (loopback)
                body = resp.read()
                return int(resp.status) if body[:2] == b"\xff\xd8" else -1
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError, ValueError):
            return 0

    def phone(self, timeout_s: float = 60) -> tuple[bool, str]:
        """A fresh photo taken with the key, its QR code read off the screen and its JPEG fetched."""
        import cv2

        detector = cv2.QRCodeDetector()
        deadline, presses = time.time() + timeout_s, 0
        while time.time() < deadline and self.proc.poll() is None:
            self.xkey("key", "Return")
            presses += 1
            pressed = time.time()
            while time.time() < pressed + COOLDOWN_S + 1:
                img = self.screen(time.time())
                if img is None:
                    continue
                text, _, _ = detector.detectAndDecode(img)
                token = token_of(str(text), self.base)
                if token and token not in self.tokens:
                    self.tokens.add(token)
                    self.urls.append(str(text))
                    status = self.fetch(str(text) + ".jpg")
                    return status == 200, f"photo fetched ({status}) after {presses} press(es)"
        return False, f"no fresh QR code within {timeout_s:.0f} s ({presses} presses)"

    def healthy(self) -> list[str]:
        """What is wrong after an attack: the phone, the swap, server_up, the metric, tracebacks."""
        problems: list[str] = []
        ok, note = self.phone()
        self.last_phone = note
        if not ok:
            problems.append(f"phone: {note}")
        if not self.swapping(20):
            problems.append("the swap is not back on screen within 20 s")
        t0 = time.time()
        while time.time() < t0 + 15 and self.keepsakes().get("server_up") != 1:
            time.sleep(0.5)
        if self.keepsakes().get("server_up") != 1:
            problems.append(f"stats keepsakes.server_up is {self.keepsakes().get('server_up')}")
        prom = (self.booth / "metrics.prom").read_text() if (self.booth / "metrics.prom").exists() else ""
        if not re.search(r"^faceswap_kiosk_keepsake_server_up 1$", prom, re.M):
            problems.append("metrics: keepsake_server_up is not 1")
        if self.proc.poll() is not None:
            problems.append(f"the kiosk exited ({self.proc.returncode})")
        if "Traceback" in self.logs_text():
            problems.append("a Traceback in the kiosk's log")
        return problems

    # -- the attacks --------------------------------------------------------------------------------

    def server(self) -> int | None:
        return soak.server_pid(self.proc.pid)

    def tls_idle_flood(self) -> tuple[list[str], str]:
        pid = self.server()
        if pid is None:
            return ["no keepsake server process found"], ""
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        limit = fds + self.args.flood_spare
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
        refused0 = int(self.keepsakes().get("connections_refused", 0))
        flood = Background(idle_flood(self.port, self.args.flood, self.args.flood_addresses))
        flood.ready.wait(60)
        problems = self.healthy()
        got = flood.stop()
        refused = int(self.keepsakes().get("connections_refused", 0)) - refused0
        if self.server() != pid:
            problems.append("the server process was replaced during the flood")
        if self.args.flood > 128 and refused <= 0:
            problems.append("no connection refused over the caps: the flood never reached them")
        return problems, (
            f"{got} idle TCP from {self.args.flood_addresses} addresses, server nofile {limit}, "
            f"{refused} closed over the caps"
        )

    def slowloris(self) -> tuple[list[str], str]:
        pid = self.server()
        started = time.time()
        attack = Background(
            slowloris(self.port, self.args.slow_addresses, self.args.slow_per_address, self.loose)
        )
        attack.ready.wait(60)
        problems = self.healthy()
        time.sleep(max(0.0, started + 14 - time.time()))  # past the server's first-request deadline (10 s)
        if not self.phone(30)[0]:
            problems.append("phone: no photo later in the attack")
        got = attack.stop()
        if got.get("closed_by_server", 0) == 0:
            problems.append("the server closed no slow connection")
        if self.server() != pid:
            problems.append("the server process was replaced during the attack")
        return problems, f"{self.args.slow_addresses} addresses x {self.args.slow_per_address}: {got}"

    def server_kill(self) -> tuple[list[str], str]:
        pid = self.server()
        if pid is None:
            return ["no keepsake server process found"], ""
        os.kill(pid, signal.SIGKILL)
        problems = self.healthy()
        new = self.server()
        if new in (None, pid):
            problems.append("the server was not restarted")
        return problems, f"server {pid} killed, now {new}"

    def server_stop(self) -> tuple[list[str], str]:
        pid = self.server()
        if pid is None:
            return ["no keepsake server process found"], ""
        os.kill(pid, signal.SIGSTOP)
        time.sleep(self.args.stop_s)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
        problems = self.healthy()
        return problems, f"server {pid} stopped {self.args.stop_s:g} s, now {self.server()}"

    def second_kiosk(self) -> tuple[list[str], str]:
        port2 = soak.free_loopback_port()
        cfg2 = self.booth / "kiosk2.yaml"
        cfg2.write_text(
            booth_config(port2, "kiosk2.log", "metrics2.prom").replace(soak.TITLE, soak.TITLE + "-2")
        )
        before = sorted(p.name for p in self.photos.iterdir()) if self.photos.is_dir() else []
        r = subprocess.run(
            [self.python, "-m", "kiosk", "run", "--config", str(cfg2), "--headless", "--seconds", "15"],
            cwd=self.work, env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        (self.work / "kiosk2.stderr").write_text(r.stdout + r.stderr)
        problems = []
        if r.returncode != 0:
            problems.append(f"the second kiosk exited {r.returncode}")
        if "in use by another kiosk" not in r.stdout + r.stderr:
            problems.append("the second kiosk did not say the folder is in use")
        if "Traceback" in r.stdout + r.stderr:
            problems.append("a Traceback in the second kiosk's log")
        after = sorted(p.name for p in self.photos.iterdir()) if self.photos.is_dir() else []
        if not set(before) <= set(after):
            problems.append(f"files deleted from the folder: {sorted(set(before) - set(after))}")
        if self.urls and self.fetch(self.urls[-1] + ".jpg") != 200:
            problems.append("the last photo no longer answers 200")
        problems += self.healthy()
        return problems, f"second kiosk exit {r.returncode}, {len(before)} files kept"

    def folder_deleted(self) -> tuple[list[str], str]:
        shutil.rmtree(self.photos, ignore_errors=True)
        old = self.urls[-1] if self.urls else None
        problems = []
        old_status = self.fetch(old + ".jpg") if old else None
        if old and old_status != 410:
            problems.append(f"a photo of the deleted folder answers {old_status}, not 410")
        problems += self.healthy()
        if not self.photos.is_dir():
            problems.append("the folder was not recreated")
        return problems, f"old photo {old_status}, folder recreated: {self.photos.is_dir()}"

    def enter_held(self) -> tuple[list[str], str]:
        """Enter held down (``keydown``: the X server's own auto-repeat), then the key's repeat as a
        stream of presses 25 a second (what an auto-repeat without detectable repeat sends): at
        most one photo per ``cooldown_s`` of each."""
        problems, notes = [], []
        for how, words, hold_s in (
            ("held", ("keydown", "Return"), self.args.hold_s),
            (
                "repeated",
                ("key", "--delay", "40", "--repeat", str(int(self.args.hold_s * 25)), "Return"),
                0.0,
            ),
        ):
            time.sleep(COOLDOWN_S + SHOW_S)
            before, t0 = int(self.keepsakes().get("taken", 0)), time.monotonic()
            self.xkey(*words)
            if hold_s:
                time.sleep(hold_s)
                self.xkey("keyup", "Return")
            spent = time.monotonic() - t0
            time.sleep(1.5)
            taken = int(self.keepsakes().get("taken", 0)) - before
            allowed = 1 + int(spent // COOLDOWN_S)
            notes.append(f"{how} {spent:.1f} s: {taken} photo(s) (at most {allowed})")
            if taken > allowed:
                problems.append(f"Enter {how} {spent:.1f} s took {taken} photos (> {allowed})")
        time.sleep(SHOW_S + COOLDOWN_S)
        problems += self.healthy()
        return problems, "; ".join(notes)

    def sigusr1(self) -> tuple[list[str], str]:
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(1)
        return self.healthy(), "SIGUSR1 sent"

    def token_grep(self) -> tuple[list[str], str]:
        problems = self.healthy()  # one more token, then grep for all of them
        time.sleep(2)
        found = tokens_in_files(files_to_grep(self.work), self.tokens)
        if found:
            problems.append(f"tokens in {found}")
        return problems, f"{len(self.tokens)} tokens, {len(files_to_grep(self.work))} files searched"

    def run(self, attacks: list[str]) -> int:
        failed = 0
        if not self.swapping(self.args.start_s):
            print(f"FAIL start: no swap on screen within {self.args.start_s:g} s\n{self.logs_text()[-3000:]}")
            return 1
        ok, note = self.phone()
        print(f"{'PASS' if ok else 'FAIL'} baseline: {note}", flush=True)
        failed += not ok
        for name in attacks:
            t0 = time.monotonic()
            try:
                problems, notes = getattr(self, name)()
            except Exception as exc:  # the harness's own failure: a FAIL line, go on
                problems, notes = [f"harness error {type(exc).__name__}: {exc}"], ""
            line = verdict_line(name, problems, notes)
            print(f"{line} [{time.monotonic() - t0:.0f} s; {getattr(self, 'last_phone', '')}]", flush=True)
            self.results.append({"attack": name, "pass": not problems, "problems": problems, "notes": notes})
            failed += bool(problems)
        return failed

    def finish(self) -> list[str]:
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        else:
            rc = self.proc.returncode
        if rc != 0:
            problems.append(f"exit code {rc}")
        text = self.logs_text()
        if "Traceback" in text:
            problems.append("a Traceback in the log")
        line = next((ln for ln in text.splitlines() if "shutting down" in ln), "")
        if "sigusr1" in getattr(self, "_attacks", ATTACKS) and "SIGUSR1" not in line:
            problems.append(f"the shutdown line does not name SIGUSR1: {line!r}")
        found = tokens_in_files(files_to_grep(self.work), self.tokens)
        if found:
            problems.append(f"tokens in {found}")
        self.xvfb.terminate()
        self.xvfb.wait(5)
        self.shutdown_line = line.strip()
        return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attacks", default=",".join(ATTACKS), help="comma list, in order (default: all)")
    ap.add_argument("--flood", type=int, default=300, help="tls_idle_flood: idle TCP connections")
    ap.add_argument("--flood-addresses", type=int, default=30, help="tls_idle_flood: loopback addresses")
    ap.add_argument(
        "--flood-spare", type=int, default=150, help="tls_idle_flood: server nofile = open + this"
    )
    ap.add_argument("--slow-addresses", type=int, default=6, help="slowloris: loopback addresses")
    ap.add_argument("--slow-per-address", type=int, default=20, help="slowloris: connections per address")
    ap.add_argument("--stop-s", type=float, default=13.0, help="server_stop: seconds stopped")
    ap.add_argument("--hold-s", type=float, default=4.0, help="enter_held: seconds Enter is held")
    ap.add_argument("--start-s", type=float, default=180.0, help="how long the kiosk may take to swap")
    ap.add_argument("--workdir", help="keep the booth, logs and photos here (default: a temp folder)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    import kiosk

    where = Path(kiosk.__file__).resolve()
    if (
        CHECKOUT in where.parents
        or Path.cwd().resolve() == CHECKOUT
        or CHECKOUT in Path.cwd().resolve().parents
    ):
        print(f"fault_round: kiosk imports from {where} (cwd {Path.cwd()}): run the installed wheel's python "
              "from a folder outside the checkout (scripts/check_wheel.sh --install-only --workdir DIR)")  # fmt: skip
        return 2
    attacks = [a for a in args.attacks.split(",") if a]
    unknown = sorted(set(attacks) - set(ATTACKS))
    if unknown:
        print(f"fault_round: unknown attack(s) {', '.join(unknown)} (known: {', '.join(ATTACKS)})")
        return 2
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kiosk-fault-round-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"fault_round: kiosk {getattr(kiosk, '__version__', '?')} from {where}; work folder {work}",
        flush=True,
    )
    rnd = Round(args, work, sys.executable)
    rnd._attacks = attacks  # type: ignore[attr-defined]
    try:
        failed = rnd.run(attacks)
    finally:
        end = rnd.finish()
    print(verdict_line("clean_exit", end, rnd.shutdown_line), flush=True)
    failed += bool(end)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"results": rnd.results, "exit": end, "tokens": len(rnd.tokens)}, indent=2)
        )
    print(f"fault_round: {'OK' if not failed else f'{failed} FAILED'} ({len(rnd.tokens)} photos fetched)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
