#!/usr/bin/env bash
# Set up and start JupyterLab with hive-lab on the embedded default
# (SQLite in the Jupyter data dir; NVIDIA GPUs via NVML when present, else a simulated cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Lab, its terminals, its kernels and the jobs submitted from them run in this environment: `hive-lab`
# and the venv's `python` are on PATH everywhere (a job runs in its submitter's environment).
export PATH="$PWD/.venv/bin:$PATH" VIRTUAL_ENV="$PWD/.venv"
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)
echo "hive-lab: starting JupyterLab (open the URL it prints; Ctrl-C stops it)"
exec .venv/bin/jupyter lab "${extra[@]}" "$@"
