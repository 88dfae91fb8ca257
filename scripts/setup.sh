#!/usr/bin/env bash
# Create .venv (if missing) and install hive-lab into it in editable mode. `setup.sh test` adds the test
# extras (what ./scripts/test.sh needs); the product alone needs none. Re-running is cheap: pip skips
# what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extra=""
[ "${1:-}" = "test" ] && extra="[test]"
if [ ! -x .venv/bin/python ]; then
  echo "hive-lab: creating .venv with $("$PY" --version 2>&1) (the first set-up takes a few minutes)"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
echo "hive-lab: installing hive-lab${extra} into .venv (editable)"
.venv/bin/pip install -q -e ".${extra}"
