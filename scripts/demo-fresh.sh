#!/usr/bin/env bash
# The README's first command on a machine that starts without mmdebstrap
# (a CI step): `bash scripts/demo.sh` in a fresh Debian container, on a clean
# clone of HEAD, as root, the way a user types it.
#
# The container is berth/dev (a Debian root file system with apt, python3,
# gcc and git, and no mmdebstrap, no busybox, no berth) with only what a
# user's machine with Rust and Docker has besides:
#   - this machine's Rust toolchain, read-only (never a target/ directory);
#     CARGO_HOME is fresh, seeded with this machine's downloaded crates
#     (registry index and .crate files, not built artefacts) so the build
#     works offline; cargo still fetches what is missing;
#   - the docker CLI and the engine's socket (images and job containers are
#     the shared engine's; berth/dev already being there is fine: what must be
#     fresh is the absence of mmdebstrap);
#   - the host's network (apt and crates.io; berth's job networks and its
#     127.0.0.1 forwarders must be in the engine's network namespace);
#   - a scratch directory mounted at the same path inside and out, as TMPDIR:
#     the demo's workspace is bind-mounted into job containers by path, which
#     the engine resolves on this machine.
# Then the demo runs twice: as is (it installs mmdebstrap with apt, or says
# why it cannot and falls back; this step says which it took), and with
# BERTH_DEMO_SANDBOX=1 (the forced fallback to berth/sandbox), reusing the
# first run's build.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "demo-fresh: $*" >&2; }
image=${BERTH_FRESH_IMAGE:-berth/dev:latest}
docker image inspect "$image" >/dev/null 2>&1 \
    || { say "$image is not built (bash images/build.sh dev builds it)"; exit 1; }
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
docker_cli=$(command -v docker)
[ -d "$rustup_home/toolchains/$toolchain" ] || { say "no toolchain $toolchain in $rustup_home"; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/berth-demo-fresh.XXXXXX")
name="berth-demo-fresh-$$"
cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
    # The container ran as root: what it left in the scratch dir is root's.
    rm -rf "$scratch"
}
trap cleanup EXIT
# A clean copy of what is committed: no target/, no staged busybox.
git clone -q --no-local --no-hardlinks "$PWD" "$scratch/berth"
git -C "$scratch/berth" checkout -q --detach "$(git rev-parse HEAD)"
mkdir -p "$scratch/cargo" "$scratch/tmp"
for part in index cache; do
    if [ -d "$cargo_home/registry/$part" ]; then
        mkdir -p "$scratch/cargo/registry"
        cp -a "$cargo_home/registry/$part" "$scratch/cargo/registry/"
    fi
done

cat >"$scratch/inside.sh" <<'SH'
set -euo pipefail
cd "$SCRATCH/berth"
if command -v mmdebstrap >/dev/null; then
    echo "demo-fresh: mmdebstrap is already installed in the container: not a fresh machine" >&2
    exit 1
fi
# Everything the build needs is in the seeded registry: build offline when it
# can, so the step needs no network for crates (apt still needs Debian's).
if cargo fetch --locked --offline -q 2>/dev/null; then
    export CARGO_NET_OFFLINE=true
fi
bash scripts/demo.sh 2>&1 | tee "$SCRATCH/demo1.err"
if grep -q 'demo: berth/dev cannot be built' "$SCRATCH/demo1.err"; then
    echo "demo-fresh: PATH TAKEN: fallback to berth/sandbox ($(grep -o 'cannot be built: .*' "$SCRATCH/demo1.err" | head -n1))" >&2
elif command -v mmdebstrap >/dev/null && grep -q 'demo: installing mmdebstrap' "$SCRATCH/demo1.err"; then
    echo "demo-fresh: PATH TAKEN: mmdebstrap installed by the demo, journey in berth/dev" >&2
else
    echo "demo-fresh: the demo said neither that it installed mmdebstrap nor that it fell back" >&2
    exit 1
fi
BERTH_DEMO_SANDBOX=1 bash scripts/demo.sh 2>&1 | tee "$SCRATCH/demo2.err"
grep -q 'demo: berth/dev cannot be built: BERTH_DEMO_SANDBOX is set' "$SCRATCH/demo2.err" \
    || { echo "demo-fresh: BERTH_DEMO_SANDBOX=1 did not fall back visibly" >&2; exit 1; }
echo "demo-fresh: PATH TAKEN: forced fallback (BERTH_DEMO_SANDBOX=1), journey in berth/sandbox" >&2
SH

say "fresh container from $image (no mmdebstrap), clone of $(git rev-parse --short HEAD)"
start=$(date +%s)
docker run --name "$name" --rm --init \
    --network host \
    --label berth.demo-fresh=true \
    -v /var/run/docker.sock:/var/run/docker.sock \
    -v "$docker_cli":/usr/local/bin/docker:ro \
    -v "$rustup_home":/opt/rustup:ro \
    -v "$scratch":"$scratch" \
    -e SCRATCH="$scratch" \
    -e TMPDIR="$scratch/tmp" \
    -e RUSTUP_HOME=/opt/rustup \
    -e RUSTUP_TOOLCHAIN="$toolchain" \
    -e CARGO_HOME="$scratch/cargo" \
    -e CARGO_TERM_COLOR=never \
    -e PATH="/opt/rustup/toolchains/$toolchain/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -e DEBIAN_FRONTEND=noninteractive \
    --entrypoint bash \
    "$image" "$scratch/inside.sh"
say "passed in $(($(date +%s) - start)) s"
