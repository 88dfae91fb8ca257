#!/usr/bin/env bash
# Set up everything the tests need and run them. Extra arguments go to pytest.
#
# The suite runs on $HIVE_TEST_WORKERS pytest-xdist workers (default 4: most of a test's time is spent
# waiting on servers, browsers and daemons, so more workers than a 2-core machine's cores pay; see
# docs/testing.md). A caller's own -n (e.g. `-n 0` for one process) wins.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
./scripts/system-deps.sh
# Bytecode caches: without them every server, zygote, CLI call and worker compiles hive-lab's sources, and
# pytest rewrites every test module's asserts, again each time (a machine may set this for its own reasons;
# __pycache__ is ignored by git).
unset PYTHONDONTWRITEBYTECODE
workers=(-n "${HIVE_TEST_WORKERS:-4}")
for arg in "$@"; do
  case "$arg" in
    -n|-n*|--numprocesses|--numprocesses=*|no:xdist) workers=() ;;
  esac
done
exec .venv/bin/python -m pytest "${workers[@]}" "$@"
