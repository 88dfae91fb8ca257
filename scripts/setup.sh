#!/usr/bin/env bash
# Create .venv (if missing) and install hive-lab into it in editable mode with the test extras.
# Re-running is cheap: pip skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
.venv/bin/pip install -q -e ".[test]"
# A Python that other Unix accounts can run (the isolation tests run jobs under test accounts, which
# cannot read a Python under /root): a venv from Debian's python3, as root only.
if [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3 ] && [ ! -x /opt/hive-test-venv/bin/python ]; then
  /usr/bin/python3 -m venv --without-pip /opt/hive-test-venv || echo "setup: could not build /opt/hive-test-venv (apt-get install python3-venv)"
fi
