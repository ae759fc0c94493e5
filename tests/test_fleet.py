"""deploy/ for many booths: the Prometheus alert rules use only metrics the kiosk writes and pass
promtool's checks and unit tests; the fleet config validates; the Ansible playbook parses, and
uses only install.sh options that exist. (scripts/fleet-checks.sh, run by CI, adds ansible-lint and
a --check run of the playbook.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kiosk.appliance.monitoring import render_metrics
from kiosk.config import load_config

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "kiosk-alerts.yml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "kiosk-alerts.test.yml"
ANSIBLE = ROOT / "deploy" / "ansible"


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _written_metric_names() -> set[str]:
    from kiosk.app.kiosk_app import KioskApp, RunOptions
    from kiosk.config import parse_config

    app = KioskApp(parse_config("source: {kind: synthetic}\nprocessing: {enabled: false}\n"), RunOptions())
    app.stop.set()
    try:
        text = render_metrics(app.stats(), up=True, now_unix=0.0)
    finally:
        app.shutdown()
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if not line.startswith("#")}


def test_alert_rules_cover_the_fleet_failures_and_use_real_metric_names():
    rules = _rules()
    names = [r["alert"] for r in rules]
    assert {"KioskDown", "KioskCameraLost", "KioskGpuFallback", "KioskProcessingStalled"} <= set(names)
    assert len(names) == len(set(names))
    written = _written_metric_names()
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        used = set(re.findall(r"\bfaceswap_kiosk_\w+", rule["expr"]))
        assert used <= written, f"{rule['alert']} uses metrics the kiosk does not write: {used - written}"
        if "up{" in rule["expr"]:
            assert 'job="faceswap-booths"' in rule["expr"], "node_exporter's up is scoped to the booths' job"


def test_the_readme_rules_are_the_ones_in_the_file():
    readme = (ROOT / "deploy" / "README.md").read_text()
    block = readme.split("<!-- alert-rules:start -->")[1].split("<!-- alert-rules:end -->")[0]
    shown = yaml.safe_load(block.strip().removeprefix("```yaml").removesuffix("```"))
    in_file = {r["alert"]: r for r in _rules()}
    assert len(shown) >= 4
    for rule in shown:
        full = in_file[rule["alert"]]
        assert {k: full[k] for k in rule} == rule, f"deploy/README.md shows {rule['alert']} unlike the file"


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (apt-get install prometheus)"
)
def test_promtool_checks_and_unit_tests_the_rules():
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        ["promtool", "test", "rules", RULES_TEST.name], cwd=RULES.parent, capture_output=True, text=True
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr


def test_every_alert_has_a_promtool_unit_test_that_fires_it():
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t["alert_rule_test"] if case.get("exp_alerts")}
    assert fired == {r["alert"] for r in _rules()}


def test_the_fleet_config_validates_and_writes_into_the_textfile_folder():
    cfg = load_config(ANSIBLE / "kiosk.fleet.yaml")
    playbook = yaml.safe_load((ANSIBLE / "booths.yml").read_text())[0]
    textfile_dir = playbook["vars"]["kiosk_textfile_dir"]
    assert cfg.monitoring.textfile is not None
    assert str(Path(cfg.monitoring.textfile).parent) == textfile_dir
    assert cfg.faces.dir == playbook["vars"]["kiosk_faces_dest"]


def test_the_playbook_uses_only_install_sh_options_that_exist():
    install = (ROOT / "deploy" / "install.sh").read_text()
    playbook = (ANSIBLE / "booths.yml").read_text()
    used = set(re.findall(r"'(--[a-z-]+)'", playbook)) & {"--wheel", "--no-models", "--user", "--prefix"}
    assert used == {"--wheel", "--no-models", "--user", "--prefix"}
    for opt in sorted(used - {"--wheel"}):
        assert f"{opt})" in install, f"deploy/install.sh has no {opt} option"
    assert "change(s)" in install, "the playbook reads install.sh's closing 'N change(s)' line"
    if "--wheel)" not in install:
        pytest.skip("deploy/install.sh has no --wheel option yet (the wheel workstream adds it)")


def _ansible_playbook() -> str | None:
    venv = Path(
        os.environ.get("FLEET_TOOLS_VENV", Path(os.environ.get("TMPDIR", "/tmp")) / "faceswap-kiosk-ansible")
    )
    return shutil.which("ansible-playbook") or shutil.which("ansible-playbook", path=str(venv / "bin"))


def test_ansible_syntax_check():
    exe = _ansible_playbook()
    if exe is None:
        pytest.skip("ansible-playbook not installed (scripts/fleet-checks.sh installs it)")
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run(
        [exe, "--syntax-check", "-i", str(ANSIBLE / "inventory.example.yml"), str(ANSIBLE / "booths.yml")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
