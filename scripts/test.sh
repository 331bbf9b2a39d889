#!/usr/bin/env bash
# The test command (README, CI): build the local images (berth/sandbox, and
# berth/dev, which is skipped when its recipe is unchanged), run the whole
# suite against the real Docker engine, then check that no container berth
# labelled is left behind.
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

cargo test --all-targets "$@"
cargo test --doc

# A crashed manager's watchdog sweeps its containers for ~12 s after the
# crash (requests the manager sent just before dying land late): let the
# watchdogs of the last tests finish before counting.
for _ in $(seq 60); do
    pgrep -f 'berth watchdog --owner' >/dev/null || break
    sleep 0.5
done
left=$(docker ps -aq --filter label=berth.managed=true | wc -l)
if [ "$left" -ne 0 ]; then
    echo "scripts/test.sh: $left container(s) labelled berth.managed are left on the engine:" >&2
    docker ps -a --filter label=berth.managed=true >&2
    exit 1
fi
echo "scripts/test.sh: no berth containers left behind"
