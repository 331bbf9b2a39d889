#!/usr/bin/env bash
# The test command (README, CI): build the local images (berth/sandbox, and
# berth/dev, which is skipped when its recipe is unchanged), run the whole
# suite against the real Docker engine, then check that no container,
# network or volume berth labelled is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
    echo "scripts/test.sh: no Docker engine answers (docker info failed)." >&2
    echo "  The suite needs one: start it (e.g. 'systemctl start docker') and retry." >&2
    exit 1
fi
if [ -f images/build.sh ]; then
    bash images/build.sh all
fi
# The gVisor tests need runsc registered with the engine (root only: it
# edits daemon.json; elsewhere those tests say what to add).
if [ "$(id -u)" = 0 ] && command -v runsc >/dev/null; then
    bash scripts/gvisor-runtime.sh
fi

cargo test --all-targets "$@"
cargo test --doc

# A crashed manager's watchdog sweeps its containers for ~12 s after the
# crash (requests the manager sent just before dying land late): let the
# watchdogs of the last tests finish before counting.
for _ in $(seq 60); do
    pgrep -f 'berth watchdog --owner' >/dev/null || break
    sleep 0.5
done
# Containers, networks and volumes the suite's own instances made (named
# `t<pid>-…` by tests/common's instance_name, or unnamed): none may be left.
# Another berth instance on the same engine (the user's own) is not counted.
ours() { awk '$2 == "" || $2 ~ /^t[0-9]+-/ { print $1 }'; }
left=0
for kind in container network volume; do
    case $kind in
        container) list() { docker ps -a --filter label=berth.managed=true --format '{{.ID}} {{.Label "berth.instance"}}' | ours; } ;;
        network) list() { docker network ls --filter label=berth.managed=true --format '{{.ID}} {{.Label "berth.instance"}}' | ours; } ;;
        volume) list() { docker volume ls --filter label=berth.managed=true --format '{{.Name}} {{.Label "berth.instance"}}' | ours; } ;;
    esac
    n=$(list | wc -l)
    if [ "$n" -ne 0 ]; then
        echo "scripts/test.sh: $n ${kind}(s) of the suite's instances are left on the engine:" >&2
        list >&2
        left=$((left + n))
    fi
done
[ "$left" -eq 0 ] || exit 1
echo "scripts/test.sh: no berth containers, networks or volumes left behind"
