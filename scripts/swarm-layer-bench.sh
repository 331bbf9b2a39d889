#!/usr/bin/env bash
# What a `layer` job's read-back costs on a swarm: `run --runner swarm --
# true` with and without `--write layer`, N times each in turns, in a
# workspace of FILES random files of SIZE bytes. Builds a three-node swarm
# (scripts/swarm.sh, root) and takes it down again.
#   bash scripts/swarm-layer-bench.sh            # 500 files of 8 KiB, 5 rounds
#   FILES=2000 SIZE=4096 N=9 bash scripts/swarm-layer-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --features cli
B=$PWD/target/release/berth
tmp=$(mktemp -d)
dpid=
cleanup() {
    [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
    bash scripts/swarm.sh down "$tmp/swarm" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/swarm" "$tmp/ws"
while IFS='=' read -r k v; do export "$k=$v"; done < <(bash scripts/swarm.sh up "$tmp/swarm")
bash scripts/swarm.sh load "$tmp/swarm" berth/sandbox:latest >/dev/null
FILES=${FILES:-500} SIZE=${SIZE:-8192} WS=$tmp/ws python3 -c '
import os
ws, files, size = os.environ["WS"], int(os.environ["FILES"]), int(os.environ["SIZE"])
for i in range(files):
    d = "%s/d%d" % (ws, i % 20)
    os.makedirs(d, exist_ok=True)
    with open("%s/f%d" % (d, i), "wb") as f:
        f.write(os.urandom(size))
'
export BERTH_STATE_DIR=$tmp/state BERTH_INSTANCE=swlayerbench BERTH_WORKSPACE=$tmp/ws
export BERTH_USER_CONFIG=$tmp/user.toml BERTH_RUNNER=swarm
"$B" daemon >"$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do "$B" ps >/dev/null 2>&1 && break; sleep 0.1; done
ms() {
    local s
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || echo "failed: $*" >&2
    echo $((($(date +%s%N) - s) / 1000000))
}
plain=() layer=()
for _ in $(seq "${N:-5}"); do
    plain+=("$(ms "$B" run --image berth/sandbox:latest -- true)")
    layer+=("$(ms "$B" run --write layer --image berth/sandbox:latest -- true)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "workspace: $(du -sh "$tmp/ws" | cut -f1) in ${FILES:-500} files"
echo "run -- true:               ${plain[*]} ms (median $(median "${plain[@]}"))"
echo "run --write layer -- true: ${layer[*]} ms (median $(median "${layer[@]}"))"
