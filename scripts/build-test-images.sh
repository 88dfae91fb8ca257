#!/usr/bin/env bash
# Build the container image the Docker tests use, locally and without any container registry: a minimal
# Debian (bookworm) holding python3 + ipykernel, unpacked from Debian's own packages, then `docker import`.
#
#   scripts/build-test-images.sh            build what is missing (DOCKER_HOST picks the engine)
#   scripts/build-test-images.sh --force    rebuild the rootfs tarball and re-import
#
# How (each step what the tests need, no more; it used to be a debootstrap of minbase, 2-3 min of CPU):
# - apt (the host's, with a private state dir under $HIVE_CACHE/apt) resolves the dependencies of
#   $PACKAGES against bookworm's index, checks its signature with Debian's archive keyring, and downloads
#   the .debs into $HIVE_CACHE/debs; debootstrap's own resolver took most of a minute of CPU for this.
# - each .deb is unpacked with dpkg-deb into a merged-/usr tree; no dpkg database, no maintainer scripts.
#   Of what those scripts do, the image needs three things, done here: /etc/passwd and /etc/group
#   (base-passwd's), the linker cache (libc's trigger) and the byte code of the modules a kernel imports
#   (python3's py3compile; jobs run as their owners and could not write it).
# - gdb is left out: python3-pydevd (debugpy's) depends on it only to attach to a running process by its
#   pid, which no test does; it and the libraries only it needs (ICU, Boost, libpython, ...) were a third
#   of the image. apt is told it is there (a line in the private status file).
# The rootfs tarball and the .debs are cached under $HIVE_CACHE (default .hive-cache/, ignored by git), so
# a second run only re-imports (seconds). The Debian mirror is the one apt on this machine already uses
# (read from /etc/apt/sources.list*), or $DEBIAN_MIRROR when set.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${HIVE_TEST_IMAGE:-hive-lab/test-python:1}
SUITE=bookworm
# The tests' commands run in containers: /bin/sh (dash) with the shell tools Debian treats as essential
# (coreutils, grep, sed, ..., bash), python3 and ipykernel; procps (ps) for a person debugging one.
# usr-is-merged satisfies init-system-helpers (procps) without usrmerge (perl).
PACKAGES="base-files base-passwd dash bash coreutils grep sed findutils gzip tar hostname debianutils diffutils
  usr-is-merged procps python3 python3-ipykernel"
NOT_INSTALLED="gdb"  # declared present to apt, never unpacked (see above)
CACHE=${HIVE_CACHE:-$PWD/.hive-cache}
TARBALL="$CACHE/images/test-python-1.tar"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
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

# apt on this machine, pointed at a private state: only bookworm main, an empty system but for gdb, no
# recommends; the host's apt.conf.d still applies (a proxy, say)
private_apt() {
  local state="$CACHE/apt"
  mkdir -p "$state/lists/partial" "$state/none/partial" "$CACHE/debs/partial"
  echo "deb [signed-by=$KEYRING] $mirror $SUITE main" >"$state/sources.list"
  : >"$state/status"
  for p in $NOT_INSTALLED; do
    printf 'Package: %s\nStatus: install ok installed\nVersion: 99\nArchitecture: all\nMaintainer: none\nDescription: left out of the test image\n\n' \
      "$p" >>"$state/status"
  done
  APT=(-q -o "Dir::State=$state" -o "Dir::State::Lists=$state/lists" -o "Dir::State::status=$state/status"
       -o "Dir::Cache=$state" -o "Dir::Cache::archives=$CACHE/debs" -o "Dir::Cache::pkgcache=$state/pkgcache.bin"
       -o "Dir::Cache::srcpkgcache=$state/srcpkgcache.bin" -o "Dir::Etc::SourceList=$state/sources.list"
       -o Dir::Etc::SourceParts=/nonexistent -o Dir::Etc::Preferences=/nonexistent
       -o Dir::Etc::PreferencesParts=/nonexistent -o APT::Architecture=amd64 -o APT::Architectures::=amd64
       -o Acquire::Languages=none -o APT::Install-Recommends=false -o Debug::NoLocking=true
       -o APT::Sandbox::User=root)
}

if [ "$force" = 1 ] || [ ! -s "$TARBALL" ]; then
  [ "$(id -u)" = 0 ] || { log "building the image needs root (files owned by root, chroot)"; exit 1; }
  [ -r "$KEYRING" ] || { log "$KEYRING is missing (Debian's debian-archive-keyring package has it)"; exit 1; }
  mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
  [ -n "$mirror" ] || { log "no Debian mirror found in /etc/apt/sources.list*; set DEBIAN_MIRROR"; exit 1; }
  mkdir -p "$CACHE/images"
  private_apt
  aptlog="$CACHE/images/apt.log"
  log "resolving and downloading $PACKAGES ($SUITE, $mirror)"
  apt-get "${APT[@]}" update >"$aptlog" 2>&1 \
    || { log "apt-get update failed:"; tail -20 "$aptlog" >&2; exit 1; }
  # the file name of every package to unpack, then the packages themselves (checked against the index)
  # (--print-uris names only what is not downloaded yet: asked against an empty archives dir, it names all)
  debs=$(apt-get "${APT[@]}" -o "Dir::Cache::archives=$CACHE/apt/none" --print-uris install $PACKAGES 2>>"$aptlog" | awk '/^'"'"'/ {print $2}') \
    || { log "apt could not resolve $PACKAGES:"; tail -20 "$aptlog" >&2; exit 1; }
  apt-get "${APT[@]}" install --download-only -y $PACKAGES >>"$aptlog" 2>&1 \
    || { log "downloading the packages failed:"; tail -20 "$aptlog" >&2; exit 1; }
  root=$(mktemp -d "$CACHE/images/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  chmod 755 "$root"
  # merged /usr, as debootstrap makes it (bookworm's packages still ship some files under /bin and /lib)
  mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib" "$root/usr/lib64"
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
  log "unpacking $(echo "$debs" | wc -l) packages"
  for deb in $debs; do
    dpkg-deb --fsys-tarfile "$CACHE/debs/$deb" | tar -C "$root" -x --keep-directory-symlink --numeric-owner \
      --exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' --exclude='./usr/share/locale/*' \
      --exclude='./usr/share/info/*' \
      || { log "unpacking $deb failed"; exit 1; }
  done
  # what the maintainer scripts would have done that the tests need
  cp "$root/usr/share/base-passwd/passwd.master" "$root/etc/passwd"
  cp "$root/usr/share/base-passwd/group.master" "$root/etc/group"
  /usr/sbin/ldconfig -r "$root"
  # byte code for what a kernel and a job's python3 import (compiled by the image's own python3, as root:
  # a job's user could not write it, and would compile IPython at every kernel start)
  env -i PATH=/usr/bin:/bin PYDEVD_DISABLE_FILE_VALIDATION=1 /usr/sbin/chroot "$root" /usr/bin/python3 -c \
    'import ipykernel.kernelapp, ipykernel_launcher, socket, json, signal, subprocess' \
    || { log "python3 with ipykernel does not start in the new image"; exit 1; }
  log "writing $TARBALL"
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
