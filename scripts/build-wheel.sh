#!/usr/bin/env bash
# Build the installable wheel: dist/hive_lab-<version>-py3-none-any.whl, with the JupyterLab extension
# prebuilt inside. Building the extension needs Node >= 18 and the npm registry, here and once; the
# wheel then installs anywhere with pip alone (docs/jupyterhub.md: into /opt/hive for a Hub):
#   python3 -m venv /opt/hive && /opt/hive/bin/pip install "dist/hive_lab-<version>-py3-none-any.whl[hub]"
# An extension already built in hive_lab/labextension (by setup.sh, or an earlier run) is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
wheel="dist/hive_lab-${version}-py3-none-any.whl"
if [ ! -f hive_lab/labextension/static/style.js ]; then
  echo "hive-lab: building the JupyterLab extension (needs Node >= 18 and the npm registry; a few minutes)"
  if ! node --version >/dev/null 2>&1; then
    echo "hive-lab: Node is not installed; install Node >= 18 (Debian: apt-get install nodejs) and run again" >&2
    exit 1
  fi
fi
echo "hive-lab: building ${wheel}"
mkdir -p dist
log=$(mktemp "${TMPDIR:-/tmp}/hive-lab-wheel.XXXXXX.log")
venv=$(mktemp -d "${TMPDIR:-/tmp}/hive-lab-build.XXXXXX")
trap 'rm -rf "$venv"' EXIT
rm -f "$wheel"
# pip from a throw-away venv (python3-venv is all it takes, as for the install; Debian's own python3 may
# have no pip), which holds the build requirements of pyproject.toml and builds there. JupyterLab is one
# of them only to build the extension (jlpm): with the extension built already it is left out (it and its
# some 60 dependencies were most of this script's time).
"$PY" -m venv "$venv"
requires=$("$venv/bin/python" -c '
import pathlib, re, sys, tomllib
requires = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["build-system"]["requires"]
prebuilt = pathlib.Path("hive_lab/labextension/static/style.js").is_file()
print("\n".join(r for r in requires if not (prebuilt and re.match(r"jupyterlab\b", r))))')
mapfile -t requires <<<"$requires"
export PATH="$venv/bin:$PATH"  # jlpm, when the extension is built here
if ! { "$venv/bin/python" -m pip install "${requires[@]}" &&
       "$venv/bin/python" -m pip wheel --no-deps --no-build-isolation --wheel-dir dist .; } >"$log" 2>&1; then
  echo "hive-lab: building the wheel failed; $(scripts/node-build-cause.sh "$log") (the whole output: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "hive-lab: built ${wheel}; install it with: python3 -m venv /opt/hive && /opt/hive/bin/pip install \"${wheel}[hub]\""
