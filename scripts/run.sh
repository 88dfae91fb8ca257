#!/usr/bin/env bash
# Set up and start JupyterLab with hive-lab on the embedded default
# (SQLite in the Jupyter data dir; NVIDIA GPUs via NVML when present, else a simulated cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)
exec .venv/bin/jupyter lab "${extra[@]}" "$@"
