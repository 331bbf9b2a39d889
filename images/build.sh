#!/usr/bin/env bash
# Build berth's local images without any registry access.
#
#   images/build.sh            build berth/sandbox:latest (the default job image)
#   images/build.sh daemon     also build berth/daemon:latest from target/release/berth
#
# Idempotent: re-running re-stages only what changed and lets the engine's
# layer cache do the rest. Nothing is ever pulled: the sandbox is FROM scratch
# plus a static busybox, taken from the host when /bin/busybox is static, else
# from Debian's busybox-static package (`apt-get download`, no install).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
sandbox_image="${BERTH_SANDBOX_IMAGE:-berth/sandbox:latest}"
daemon_image="${BERTH_DAEMON_IMAGE:-berth/daemon:latest}"

die() { echo "images/build.sh: error: $*" >&2; exit 1; }
say() { echo "images/build.sh: $*" >&2; }

command -v docker >/dev/null || die "the docker CLI is not installed"
docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1 \
  || die "no Docker engine answers (is it running? can this user use $(echo "${DOCKER_HOST:-unix:///var/run/docker.sock}")?)"

is_static() {
  # `file` says so directly; ldd is the fallback where `file` is missing.
  if command -v file >/dev/null; then
    file -L "$1" 2>/dev/null | grep -q 'statically linked'
  else
    ! ldd "$1" >/dev/null 2>&1
  fi
}

stage_busybox() {
  local dest="$here/sandbox/busybox" src="" tmp=""
  if [[ -x /bin/busybox ]] && is_static /bin/busybox; then
    src=/bin/busybox
    say "using the host's static /bin/busybox"
  else
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
      || die "/bin/busybox is missing or not static, and apt-get/dpkg-deb are not available to fetch Debian's busybox-static; put a static busybox at $dest"
    tmp="$(mktemp -d)"
    # apt drops to the _apt user for downloads; let it write here.
    chmod 0755 "$tmp"
    say "fetching Debian's busybox-static package (apt-get download)"
    # A fresh machine may have no package lists yet: update once and retry.
    (cd "$tmp" && apt-get download busybox-static >&2) \
      || { say "apt-get download failed; running apt-get update and retrying"; apt-get update -qq >&2 && (cd "$tmp" && apt-get download busybox-static >&2); } \
      || die "apt-get download busybox-static failed (try 'apt-get update' first, or put a static busybox at $dest)"
    dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/root" || die "could not unpack busybox-static"
    src="$tmp/root/bin/busybox"
    [[ -x "$src" ]] || die "busybox-static did not contain bin/busybox"
  fi
  is_static "$src" || die "$src is not statically linked; it would not run in a FROM scratch image"
  if ! cmp -s "$src" "$dest" 2>/dev/null; then
    install -m 0755 "$src" "$dest"
  fi
  if [[ -n "$tmp" ]]; then rm -rf "$tmp"; fi
}

build_sandbox() {
  if [[ -x "$here/sandbox/busybox" ]] && is_static "$here/sandbox/busybox"; then
    say "busybox already staged"
  else
    stage_busybox
  fi
  say "building $sandbox_image"
  # No --pull: the only base is scratch.
  docker build --tag "$sandbox_image" "$here/sandbox" >&2 \
    || die "docker build of $sandbox_image failed (see above)"
  docker image inspect --format '{{.Id}}' "$sandbox_image"
}

# The daemon image is the sandbox plus the berth binary and the shared
# libraries it links (the sandbox has no libc of its own).
build_daemon() {
  local bin="$repo/target/release/berth" root="$here/berth/rootfs"
  [[ -x "$bin" ]] || die "$bin not found: run 'cargo build --release' first"
  rm -rf "$root"
  mkdir -p "$root/usr/local/bin"
  cp "$bin" "$root/usr/local/bin/berth"
  local lib
  for lib in $(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  say "building $daemon_image"
  docker build --tag "$daemon_image" "$here/berth" >&2 \
    || die "docker build of $daemon_image failed (see above)"
  docker image inspect --format '{{.Id}}' "$daemon_image"
}

case "${1:-sandbox}" in
  sandbox) build_sandbox ;;
  daemon) build_sandbox; build_daemon ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown target '$1' (expected: sandbox, daemon)" ;;
esac
