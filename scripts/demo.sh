#!/usr/bin/env bash
# The main journey, as a user types it: build berth and its images (berth/dev
# is skipped when its recipe is unchanged), start the daemon in a small Python
# project, serve its app from a locked-down berth/dev container on an
# ephemeral 127.0.0.1 port, wait until it serves, fetch a page, read its log,
# run its tests, stop it, stop the daemon. Uses its own instance and state dir.
#
# Needs Rust and a running Docker engine. berth/dev is built from Debian
# packages with mmdebstrap, which this script installs when it can (root or
# password-less sudo, with apt). When it cannot (or BERTH_DEMO_SANDBOX=1),
# it says why and plays the journey in berth/sandbox instead: busybox's
# httpd serves the page and the project's tests are skipped (no python).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "demo: $*" >&2; }
dev=yes
if [ -n "${BERTH_DEMO_SANDBOX:-}" ]; then
    dev=""
    why="BERTH_DEMO_SANDBOX is set"
elif ! command -v mmdebstrap >/dev/null; then
    if ! command -v apt-get >/dev/null; then
        dev=""
        why="mmdebstrap is not installed and there is no apt-get to install it"
    else
        as_root=()
        if [ "$(id -u)" -ne 0 ]; then
            as_root=(sudo -n)
        fi
        say "installing mmdebstrap (builds berth/dev from Debian packages)"
        if ! "${as_root[@]}" apt-get install -y -qq mmdebstrap >&2 2>/dev/null; then
            "${as_root[@]}" apt-get update -qq >&2 2>/dev/null || true
            "${as_root[@]}" apt-get install -y -qq mmdebstrap >&2 2>/dev/null || {
                dev=""
                why="mmdebstrap is not installed and could not be installed (needs root or password-less sudo)"
            }
        fi
    fi
fi
if [ -n "$dev" ] && ! bash images/build.sh all >/dev/null; then
    dev=""
    why="building berth/dev failed (see above)"
fi
if [ -z "$dev" ]; then
    say "berth/dev cannot be built: $why."
    say "playing the journey in berth/sandbox (busybox httpd; the project's tests are skipped)."
    bash images/build.sh sandbox >/dev/null
fi
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
if [ -n "$dev" ]; then
    step $berth run -d --runner docker --cpus 0.5 --memory 256m -p 8000 --label web --ready-http / -- python3 app.py
else
    step $berth run -d --runner docker --image berth/sandbox:latest --cpus 0.5 --memory 256m -p 8000 --label web --ready-http / -- httpd -f -p 8000 -h /www
fi
id=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
port=$($berth ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["ports"][0]["host_port"])')
step $berth status "$id"
step python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/').read().decode().strip())"
step $berth logs "$id" --tail 20
if [ -n "$dev" ]; then
    step $berth test
fi
step $berth kill "$id"
step $berth down
left=$(docker ps -aq --filter "label=berth.instance=$BERTH_INSTANCE" | wc -l)
echo
echo "containers left for instance $BERTH_INSTANCE: $left"
[ "$left" -eq 0 ]
