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
