#!/usr/bin/env bash
# Build berth's local images without any registry access.
#
#   images/build.sh            build berth/sandbox:latest (the default job image)
#   images/build.sh daemon     also build berth/daemon:latest from target/release/berth
#   images/build.sh dev        also build berth/dev:latest, the toolchain image
#                              (Debian: sh, coreutils, python3 + pip/venv, make,
#                              gcc, git, curl), from Debian packages with
#                              mmdebstrap; skipped when the recipe is unchanged
#   images/build.sh all        sandbox and dev
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
dev_image="${BERTH_DEV_IMAGE:-berth/dev:latest}"

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
  # `berth images build` passes its own binary; from a checkout, the release build.
  local bin="${BERTH_BINARY:-$repo/target/release/berth}" root="$here/berth/rootfs"
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

# The toolchain image: a Debian root filesystem made by mmdebstrap from the
# same mirror apt uses here, imported FROM scratch. No registry is involved.
# The recipe (suite, packages, this function) is hashed into the
# `berth.recipe` label; an image that carries the same hash is kept as is.
dev_packages="bash coreutils findutils grep sed procps python3 python3-pip python3-venv python3-pytest make gcc libc6-dev git curl ca-certificates"

build_dev() {
  command -v mmdebstrap >/dev/null \
    || die "mmdebstrap is not installed: apt-get install mmdebstrap (it builds berth/dev from Debian packages)"
  local suite sources recipe have tmp
  suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
  # apt's own Debian sources (deb822 or one-line), so the build uses the
  # mirror this machine can reach.
  sources="$(grep -ls 'debian' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1 || true)"
  recipe="$( { echo "$suite"; echo "$dev_packages"; declare -f build_dev; } | sha256sum | cut -c1-16)"
  have="$(docker image inspect --format '{{index .Config.Labels "berth.recipe"}}' "$dev_image" 2>/dev/null || true)"
  if [[ "$have" == "$recipe" ]]; then
    say "$dev_image is up to date (recipe $recipe)"
    docker image inspect --format '{{.Id}}' "$dev_image"
    return
  fi
  tmp="$(mktemp -d)"
  chmod 0755 "$tmp"
  say "building $dev_image from Debian $suite with mmdebstrap (recipe $recipe)"
  # --skip=output/mknod: device nodes come from the engine at run time.
  # The hook makes /tmp sticky and world-writable and gives arbitrary uids a
  # HOME that works (berth mounts a tmpfs there; /tmp is the fallback).
  mmdebstrap --variant=minbase --mode=root --format=tar \
    --include="$(echo "$dev_packages" | tr ' ' ',')" \
    --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='chmod 1777 "$1/tmp"; mkdir -p "$1/home/berth" "$1/workspace"; chmod 1777 "$1/home/berth"; rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$suite" "$tmp/rootfs.tar" ${sources:+"$sources"} >&2 \
    || { rm -rf "$tmp"; die "mmdebstrap failed (see above); is the Debian mirror in ${sources:-/etc/apt/sources.list} reachable?"; }
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/home/berth' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_DISABLE_PIP_VERSION_CHECK=1' \
    --change 'CMD ["bash"]' \
    --change "LABEL berth.recipe=$recipe org.opencontainers.image.title=berth/dev org.opencontainers.image.description=\"Debian $suite toolchain for berth jobs\"" \
    "$tmp/rootfs.tar" "$dev_image" >&2 \
    || { rm -rf "$tmp"; die "docker import of $dev_image failed (see above)"; }
  rm -rf "$tmp"
  docker image inspect --format '{{.Id}}' "$dev_image"
}

case "${1:-sandbox}" in
  sandbox) build_sandbox ;;
  daemon) build_sandbox; build_daemon ;;
  dev) build_dev ;;
  all) build_sandbox; build_dev ;;
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown target '$1' (expected: sandbox, dev, all, daemon)" ;;
esac
