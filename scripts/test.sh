#!/usr/bin/env bash
# Set up everything the tests need and run them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
./scripts/system-deps.sh
exec .venv/bin/python -m pytest "$@"
