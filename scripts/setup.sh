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
