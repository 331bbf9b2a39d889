#!/usr/bin/env bash
# Crash cleanup, repeated: start a daemon with 3 jobs (two containers, one
# host job with a grandchild), SIGKILL the daemon, and check that within 5 s
# no labelled container and no process of those jobs remains.
#   scripts/crash-test.sh [ROUNDS]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
cargo build --release --quiet
berth=$PWD/target/release/berth
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export BERTH_STATE_DIR=$state BERTH_WORKSPACE=$state
leftovers=0
for i in $(seq 1 "$rounds"); do
    export BERTH_INSTANCE=crash-$$-$i
    token="97$i.$$"
    $berth up >/dev/null
    pid=$(cat "$state/$BERTH_INSTANCE/daemon.pid")
    $berth run -d --runner docker -- sleep "$token" >/dev/null
    $berth run -d --runner docker -- sleep "$token" >/dev/null
    $berth run -d --runner host --shell -- "sleep $token & sleep $token" >/dev/null
    for _ in $(seq 1 100); do
        [ "$(pgrep -fc "sleep $token" || true)" -ge 4 ] && break
        sleep 0.05
    done
    kill -KILL "$pid"
    start=$(date +%s%N)
    left=-1
    while :; do
        c=$(docker ps -aq --filter "label=berth.instance=$BERTH_INSTANCE" | wc -l)
        p=$(pgrep -fc "sleep $token" || true)
        left=$((c + p))
        elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
        if [ "$left" -eq 0 ] || [ "$elapsed_ms" -gt 5000 ]; then break; fi
        sleep 0.05
    done
    took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    printf 'round %2d: %d leftover(s), clean after %d ms\n' "$i" "$left" "$took_ms"
    if [ "$left" -ne 0 ]; then
        leftovers=$((leftovers + left))
        docker ps -aq --filter "label=berth.instance=$BERTH_INSTANCE" | xargs -r docker rm -f >/dev/null
        pkill -KILL -f "sleep $token" || true
    fi
done
echo "$rounds rounds, $leftovers leftover(s)"
[ "$leftovers" -eq 0 ]
