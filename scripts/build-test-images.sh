#!/usr/bin/env bash
# Build the container images the Docker tests use, locally and without any container registry:
# debootstrap a minimal Debian (bookworm) with python3 + ipykernel, then `docker import` it.
#
#   scripts/build-test-images.sh            build what is missing (DOCKER_HOST picks the engine)
#   scripts/build-test-images.sh --force    rebuild the rootfs tarball and re-import
#
# The rootfs tarball and the downloaded .debs are cached under $HIVE_CACHE (default .hive-cache/,
# ignored by git), so a second run only re-imports (seconds). The Debian mirror is the one apt on this
# machine already uses (read from /etc/apt/sources.list*), or $DEBIAN_MIRROR when set.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${HIVE_TEST_IMAGE:-hive-lab/test-python:1}
SUITE=bookworm
# debootstrap does not resolve virtual packages: name their providers (python3-zmq, gdb via debugpy need them)
PACKAGES=python3,python3-ipykernel,python3-cffi-backend,libboost-regex1.74.0,procps,ca-certificates
CACHE=${HIVE_CACHE:-$PWD/.hive-cache}
TARBALL="$CACHE/images/test-python-1.tar"
force=0
[ "${1:-}" = "--force" ] && force=1

log() { echo "build-test-images: $*" >&2; }

docker_cli() { docker "$@"; }

if [ "$force" = 0 ] && docker_cli image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE is already there"
  exit 0
fi

apt_mirror() {
  # The first Debian main archive apt is configured with (deb822 .sources or one-line .list files).
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
}

if [ "$force" = 1 ] || [ ! -s "$TARBALL" ]; then
  [ "$(id -u)" = 0 ] || { log "debootstrap needs root"; exit 1; }
  command -v debootstrap >/dev/null || { log "debootstrap is missing (scripts/system-deps.sh installs it)"; exit 1; }
  mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
  [ -n "$mirror" ] || { log "no Debian mirror found in /etc/apt/sources.list*; set DEBIAN_MIRROR"; exit 1; }
  mkdir -p "$CACHE/images" "$CACHE/debs"
  root=$(mktemp -d "$CACHE/images/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  log "debootstrap $SUITE ($PACKAGES) into $root"
  debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs" \
    "$SUITE" "$root" "$mirror" >"$CACHE/images/debootstrap.log" 2>&1 || {
    cp "$root/debootstrap/debootstrap.log" "$CACHE/images/debootstrap-inner.log" 2>/dev/null || true
    log "debootstrap failed; last lines of $CACHE/images/debootstrap*.log:"
    tail -20 "$CACHE/images/debootstrap-inner.log" "$CACHE/images/debootstrap.log" >&2 2>/dev/null
    exit 1
  }
  # Slim the image: no apt lists, docs or caches (the tests never install anything inside).
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*
  tar -C "$root" --numeric-owner -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  rm -rf "$root"
  trap - EXIT
fi

log "importing $TARBALL as $IMAGE"
docker_cli import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  "$TARBALL" "$IMAGE" >/dev/null
log "$IMAGE ready"
