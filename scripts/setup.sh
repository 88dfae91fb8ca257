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
if [ ! -f hive_lab/labextension/static/style.js ]; then
  echo "hive-lab: building the JupyterLab extension (needs Node and the npm registry)"
  if ! node --version >/dev/null 2>&1; then
    echo "hive-lab: Node is not installed; install Node >= 18 (Debian: apt-get install nodejs) and run again" >&2
    exit 1
  fi
fi
# pip's output on a failed extension build is thousands of lines of yarn: kept in a file, the cause in one line
log=$(mktemp "${TMPDIR:-/tmp}/hive-lab-setup.XXXXXX.log")
if ! .venv/bin/pip install -q -e ".${extra}" >"$log" 2>&1; then
  echo "hive-lab: installing hive-lab failed; $(scripts/node-build-cause.sh "$log") (the whole output: $log)" >&2
  exit 1
fi
cat "$log"  # (warnings, if any)
rm -f "$log"
# jupyter-events asks for jsonschema[format-nongpl], which brings rfc3987-syntax: when it is installed, jsonschema
# imports it to check the `iri` formats (no Jupyter schema has one), and it builds ~35 parsers at import: 1 s of
# CPU in every Jupyter server's start, a third of it (docs/performance.md). Without it those two formats go unchecked.
.venv/bin/pip uninstall -q -y rfc3987-syntax >/dev/null 2>&1 || true
