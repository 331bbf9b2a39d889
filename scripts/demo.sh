#!/usr/bin/env bash
# The main journey, as a user types it: build berth and its images (berth/dev
# is skipped when its recipe is unchanged), start the daemon in a small Python
# project, serve its app from a locked-down berth/dev container on an
# ephemeral 127.0.0.1 port, wait until it serves, fetch a page, read its log,
# run its tests, stop it, stop the daemon. Uses its own instance and state dir.
set -euo pipefail
cd "$(dirname "$0")/.."

bash images/build.sh all >/dev/null
cargo build --release --quiet
berth=$PWD/target/release/berth
export BERTH_INSTANCE=demo-$$ BERTH_STATE_DIR="${TMPDIR:-/tmp}/berth-demo-$$"
project="$BERTH_STATE_DIR/hello"
trap '$berth down >/dev/null 2>&1 || true; rm -rf "$BERTH_STATE_DIR"' EXIT
mkdir -p "$project" && cd "$project"
cat > app.py <<'PY'
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello from python\n")
if __name__ == "__main__":
    http.server.HTTPServer(("0.0.0.0", 8000), H).serve_forever()
PY
printf 'test:\n\tpython3 -c "import app" && echo ok\n' > Makefile
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step $berth up
step $berth run -d --runner docker --cpus 0.5 --memory 256m -p 8000 --label web --ready-http / -- python3 app.py
id=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
port=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ports"][0]["host_port"])')
step $berth status "$id"
step python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/').read().decode().strip())"
step $berth logs "$id" --tail 20
step $berth test
step $berth kill "$id"
step $berth down
left=$(docker ps -aq --filter "label=berth.instance=$BERTH_INSTANCE" | wc -l)
echo
echo "containers left for instance $BERTH_INSTANCE: $left"
[ "$left" -eq 0 ]
