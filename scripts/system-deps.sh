#!/usr/bin/env bash
# Install the Debian packages the real-component tests use (Docker engine, Chromium, Slurm, munge,
# PostgreSQL, Node.js for JupyterHub's configurable-http-proxy) when they are missing. Needs root; without root it says what is missing and goes on
# (the tests that need them then skip with a reason).
set -uo pipefail
cd "$(dirname "$0")/.."
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null || need+=(dpkg apt)  # the Docker test image
command -v chromium >/dev/null || need+=(chromium)
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
command -v slurmrestd >/dev/null || need+=(slurmrestd)
ls /usr/lib/*/slurm-wlm/auth_jwt.so >/dev/null 2>&1 || need+=(slurm-wlm-jwt-plugin)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v setpriv >/dev/null || need+=(util-linux)  # the local launcher drops to the job owner's account
command -v npm >/dev/null || need+=(nodejs npm)           # configurable-http-proxy (tests/hub) below
# /opt/hive-test-venv and /opt/hive-hub-venv: a Python the test accounts can run
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "system-deps: not root; missing Debian packages: ${need[*]} (tests needing them will skip)"
  else
    echo "system-deps: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
# JupyterHub's proxy for tests/hub, project-local (the fixture looks in .hive-cache/chp)
chp=.hive-cache/chp/node_modules/.bin/configurable-http-proxy
if [ ! -x "$chp" ] && command -v npm >/dev/null; then
  echo "system-deps: installing configurable-http-proxy into .hive-cache/chp"
  npm install --silent --no-audit --no-fund --prefix .hive-cache/chp configurable-http-proxy >/dev/null \
    || echo "system-deps: npm could not install configurable-http-proxy (tests/hub will skip)"
fi
exit 0
