#!/usr/bin/env bash
# Check the fleet files in deploy/: the Prometheus alert rules (promtool, Debian package `prometheus`)
# and the Ansible playbook (ansible-playbook --syntax-check, ansible-lint, and a --check run against
# this machine, which is not a booth). Ansible comes from PyPI, pinned in deploy/ansible/requirements-ci.txt,
# in a virtualenv of its own (kept between runs): $FLEET_TOOLS_VENV, default ${TMPDIR:-/tmp}/faceswap-kiosk-ansible.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FLEET_TOOLS_VENV:-${TMPDIR:-/tmp}/faceswap-kiosk-ansible}
REQS=deploy/ansible/requirements-ci.txt
if [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$(sha256sum "$REQS" | cut -d' ' -f1)" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQS"
  sha256sum "$REQS" | cut -d' ' -f1 >"$VENV/.requirements.sha256"
fi
export PATH="$VENV/bin:$PATH" ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0
if command -v promtool >/dev/null; then
  promtool check rules deploy/prometheus/kiosk-alerts.yml
  (cd deploy/prometheus && promtool test rules kiosk-alerts.test.yml)
else
  echo "fleet-checks: promtool not installed (apt-get install prometheus); alert rules not checked" >&2
fi
PLAYBOOK=deploy/ansible/booths.yml
ansible-playbook --syntax-check -i deploy/ansible/inventory.example.yml "$PLAYBOOK"
ansible-lint --offline -q deploy/ansible/
# The system python (ansible's apt module needs python3-apt), whatever python3 is first on PATH.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ansible-playbook --check -i localhost, -c local -e kiosk_hosts=localhost -e "ansible_python_interpreter=$PY" "$PLAYBOOK" >"$log" 2>&1 || {
  cat "$log"
  exit 1
}
tail -n 2 "$log"
echo "fleet-checks: OK"
