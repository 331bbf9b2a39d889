#!/usr/bin/env bash
# Register Debian's runsc (gVisor) with the local engine as the runtime
# `runsc`, when it is not registered already: adds it to daemon.json's
# "runtimes" (nothing else in the file changes) and sends dockerd a SIGHUP,
# which reloads runtimes without a restart. Idempotent; needs root.
#
#   scripts/gvisor-runtime.sh [DAEMON_JSON]   (default /etc/docker/daemon.json)
set -euo pipefail
conf="${1:-/etc/docker/daemon.json}"
command -v runsc >/dev/null || { echo "gvisor-runtime.sh: runsc is not installed (Debian: apt install runsc)" >&2; exit 1; }
if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  echo "gvisor-runtime.sh: the engine has runsc already" >&2
  exit 0
fi
python3 - "$conf" "$(command -v runsc)" <<'PY'
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
conf = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) > 0 else {}
conf.setdefault("runtimes", {})["runsc"] = {
    "path": runsc,
    # ptrace: no KVM needed; host network: gVisor uses the container's own
    # network namespace through the host's stack (berth's networks work).
    "runtimeArgs": ["--platform=ptrace", "--network=host"],
}
tmp = path + ".berth-tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
os.replace(tmp, path)
PY
pid="$(pidof dockerd | awk '{print $1}')"
[ -n "$pid" ] || { echo "gvisor-runtime.sh: no dockerd running to reload" >&2; exit 1; }
kill -HUP "$pid"
for _ in $(seq 1 50); do
  if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
    echo "gvisor-runtime.sh: registered runsc with the engine" >&2
    exit 0
  fi
  sleep 0.2
done
echo "gvisor-runtime.sh: dockerd did not load runsc from $conf" >&2
exit 1
