#!/usr/bin/env bash
# The main journey, as a user types it: build berth and its sandbox image,
# start the daemon, run a web server in a locked-down container on an
# ephemeral 127.0.0.1 port, wait until it serves, fetch a page, read its log,
# stop it, stop the daemon. Uses its own instance and state dir.
set -euo pipefail
cd "$(dirname "$0")/.."

bash images/build.sh >/dev/null
cargo build --release --quiet
berth=./target/release/berth
export BERTH_INSTANCE=demo-$$ BERTH_STATE_DIR="${TMPDIR:-/tmp}/berth-demo-$$"
trap '$berth down >/dev/null 2>&1 || true; rm -rf "$BERTH_STATE_DIR"' EXIT
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step $berth up
step $berth run -d --runner docker --image berth/sandbox:latest --cpus 0.5 --memory 64m -p 8080 --label web -- httpd -f -v -p 8080 -h /www
id=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
port=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ports"][0]["host_port"])')
step $berth wait "$id" --http / --timeout 30
step python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/').read().decode().strip())"
step $berth logs "$id" --tail 20
step $berth kill "$id"
step $berth down
left=$(docker ps -aq --filter "label=berth.instance=$BERTH_INSTANCE" | wc -l)
echo
echo "containers left for instance $BERTH_INSTANCE: $left"
[ "$left" -eq 0 ]
