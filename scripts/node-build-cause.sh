#!/usr/bin/env bash
# Print, in one line, why building the JupyterLab extension failed and what to do, from the build's log
# (pip's output around hatch-jupyter-builder's `jlpm install` / `jlpm build:prod`, thousands of lines).
# Usage: scripts/node-build-cause.sh LOG   (setup.sh and build-wheel.sh call it when the build fails)
set -uo pipefail
log=${1:?usage: node-build-cause.sh LOG}
has() { grep -qiE "$1" "$log"; }
if has 'self[- ]signed certificate|unable to get local issuer certificate|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT'; then
  echo "cause: Node does not trust the TLS certificate the npm registry answered with (a TLS-intercepting proxy?);" \
       "fix: export NODE_EXTRA_CA_CERTS=/path/to/your-proxy-ca.pem (e.g. /etc/ssl/certs/ca-certificates.crt once the proxy's CA is installed there) and run again"
elif has 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|getaddrinfo|network error|Network request failed'; then
  echo "cause: the npm registry cannot be reached from this machine;" \
       "fix: allow it (or set HTTPS_PROXY / a registry mirror: jlpm config set npmRegistryServer URL) and run again, or build the wheel elsewhere with scripts/build-wheel.sh"
elif has 'Please install Node.js|jlpm: (command )?not found|No such file or directory: .jlpm|node: (command )?not found|No such file or directory: .node|Cannot find module|engine "node" is incompatible|Unsupported engine|requires Node'; then
  echo "cause: Node >= 18 is missing or too old (node --version: $(node --version 2>/dev/null || echo none));" \
       "fix: install Node >= 18 (Debian: apt-get install nodejs) and run again"
else
  # the first error of yarn, npm, tsc or a Python exception; not pip's generic wrapping of it
  line=$(grep -E 'YN0001|YN0035|YN0028|npm ERR!|error TS[0-9]+|[A-Za-z]+Error: ' "$log" \
         | grep -vE 'CalledProcessError|subprocess-exited-with-error' | head -n 1 | sed 's/^ *//' | cut -c1-300)
  echo "cause: ${line:-unknown (see the log)}"
fi
