#!/usr/bin/env bash
# A three-node Docker Swarm on this one machine, for integration tests of
# berth's swarm support. Each node is an isolated dockerd, built like the one
# of remote-engine.sh (whose techniques this copies; see its header).
#
#   swarm.sh up DIR              build it (idempotent); print DOCKER_HOST,
#                                DOCKER_TLS_VERIFY, DOCKER_CERT_PATH (the manager)
#                                and BERTH_SWARM_NODES (every node's engine
#                                address) lines, also kept in DIR/env
#   swarm.sh down DIR            stop it, remove everything it made (idempotent)
#   swarm.sh status DIR          each node's hostname, address and state; exit 0
#                                if all three are Ready
#   swarm.sh load DIR IMAGE…     copy images from the local engine to every node
#   swarm.sh kill-node DIR N     SIGKILL node N (1-3) whole, as a crashed machine
#   swarm.sh node-pid DIR N      node N's PID 1 (tini), as seen from the host
#
# Needs root, dockerd, docker-init or tini, iproute2, util-linux and openssl.
# Layout (suffix: hash of DIR, so swarms can run side by side):
# - network namespace berth-sw-<sfx> (the "fabric") holds the bridge br0; the
#   host reaches it through the veth bsw-<sfx>, 10.237.X.1/24 (X from the
#   hash, the first one free on the host), and node N's netns
#   berth-sw-<sfx>-nodeN through the veth nN, its eth0 at 10.237.X.(10+N).
#   Nodes have no default route: they reach each other and the host only.
#   Inside node N: docker0 10.238.N.1/24, local pool 10.238.(16N).0/20 (e.g.
#   docker_gwbridge); swarm overlays (ingress too) from 10.239.0.0/16.
# - each node also has its own mount namespace (fresh /tmp, /run/containerd,
#   /run/docker and exec root tmpfs, /etc/docker bound to its own dir, fresh
#   sysfs), UTS namespace (hostname berth-swN, as `docker node ls` shows) and
#   PID namespace whose PID 1 is docker-init (tini): killing it ends the node's
#   dockerd, containerd, shims and containers at once. Its dockerd listens on
#   tcp://10.237.X.(10+N):2376 with TLS verify (one CA, one server cert for the
#   three addresses, one client cert), uses cgroupfs under the cgroup parent
#   /berth-sw-<sfx>-nodeN and has DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 (there
#   is no registry: tasks use the loaded image without waiting on a pull).
# - node 1 is the manager (swarm init), nodes 2 and 3 join as workers. There is
#   no IPVS in the kernel, so the routing mesh (VIPs, ingress-published ports)
#   does not work: publish ports with mode=host, reached at the node's address.
# - state: /var/lib/berth-sw-<sfx>/nodeN (data root, etc/ with daemon.json and
#   server TLS files, init.pid) and /run/berth-sw-<sfx>/nodeN (exec root mount
#   point). DIR holds client/{ca,cert,key}.pem, ca/, env, nodeN.pid (copies)
#   and nodeN.log (dockerd's output); down leaves only the certs and the logs
#   (and the empty lock file /run/berth-sw.lock).
set -euo pipefail

self="$(realpath "${BASH_SOURCE[0]}")"
# shellcheck source-path=SCRIPTDIR source=lib/tls.sh
source "$(dirname "$self")/lib/tls.sh"
die() { echo "swarm.sh: $*" >&2; exit 1; }
usage="usage: $0 up|down|status DIR | load DIR IMAGE... | kill-node|node-pid DIR N"
[[ $# -ge 2 ]] || die "$usage"
cmd=$1 dir="$(realpath -m "$2")"
shift 2
sfx="$(printf %s "$dir" | sha256sum | cut -c1-8)"
fab="berth-sw-$sfx" hveth="bsw-$sfx"
var="/var/lib/berth-sw-$sfx" run="/run/berth-sw-$sfx"
nodes=(1 2 3)
addr=() # addr[N]: node N's engine address, from DIR/env (read_addrs) or up

nodens() { echo "berth-sw-$sfx-node$1"; } # also its cgroup parent's name

read_addrs() {
  [[ -f $dir/env ]] || die "no swarm in $dir (run: $0 up $dir)"
  local a
  IFS=, read -ra a <<<"$(sed -n 's/^BERTH_SWARM_NODES=//p' "$dir/env")"
  [[ ${#a[@]} == 3 ]] || die "$dir/env has no BERTH_SWARM_NODES line"
  addr=("" "${a[@]}")
}

# dk N CMD...: run CMD (a docker CLI) against node N's engine.
dk() {
  local n=$1
  shift
  DOCKER_HOST="tcp://${addr[$n]}:2376" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$dir/client" \
    DOCKER_CONTEXT='' timeout 20 "$@"
}

# Runs as PID 1 of node N's new PID namespace, inside its netns, mount and UTS ns.
inner() {
  local n=$1 ip=$2 k v _ init nd="$var/node$1" ex="$run/node$1"
  while read -r k v _; do [[ $k == NSpid: ]] && echo "$v" >"$nd/init.pid"; done </proc/self/status
  hostname "berth-sw$n"
  mount --rbind /sys/fs/cgroup "$ex"
  mount -t sysfs sysfs /sys
  mount --move "$ex" /sys/fs/cgroup
  mount -t proc proc /proc
  mount -t tmpfs -o mode=700 tmpfs "$ex"
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  for d in /run/containerd /run/docker; do mkdir -p "$d"; mount -t tmpfs -o mode=700 tmpfs "$d"; done
  mkdir -p /etc/docker && mount --bind "$nd/etc" /etc/docker
  init="$(command -v docker-init || command -v tini || true)"
  export DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1
  exec ${init:+"$init" --} dockerd --config-file "$nd/etc/daemon.json" \
    --data-root "$nd/data" --exec-root "$ex" --pidfile "$ex/docker.pid" \
    -H "tcp://$ip:2376" --tlsverify --tlscacert "$nd/etc/ca.pem" \
    --tlscert "$nd/etc/server-cert.pem" --tlskey "$nd/etc/server-key.pem" \
    --bip "10.238.$n.1/24" --default-address-pool "base=10.238.$((16 * n)).0/20,size=24" \
    --exec-opt native.cgroupdriver=cgroupfs --cgroup-parent "/$(nodens "$n")"
}

# Node N's PID 1, only while it is still ours (in node N's netns): never a reused pid.
node_pid() {
  local pid
  pid="$(cat "$var/node$1/init.pid" 2>/dev/null || cat "$dir/node$1.pid" 2>/dev/null || true)"
  [[ -n $pid ]] && ip netns identify "$pid" 2>/dev/null | grep -qx "$(nodens "$1")" || return 1
  echo "$pid"
}

down() {
  local n ns pid pids=() i alive
  # The containers first (their cgroups are under /berth-sw-<sfx>-nodeN), so
  # that dockerd's shutdown need not wait out each one's stop timeout.
  # shellcheck disable=SC2038 # (xargs gets the pids in cgroup.procs, not file names)
  find /sys/fs/cgroup -path "*/berth-sw-$sfx-node*/*" -name cgroup.procs -exec cat {} + 2>/dev/null |
    xargs -r kill -KILL 2>/dev/null || true
  for n in "${nodes[@]}"; do
    if pid="$(node_pid "$n")"; then kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); fi
  done
  for ((i = 0; i < 150 && ${#pids[@]} > 0; i++)); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for ns in "$(nodens 1)" "$(nodens 2)" "$(nodens 3)" "$fab"; do
    [[ -e /run/netns/$ns ]] || continue
    for ((i = 0; i < 50; i++)); do
      [[ -z "$(ip netns pids "$ns")" ]] && break
      ip netns pids "$ns" | xargs -r kill -KILL 2>/dev/null || true
      sleep 0.1
    done
    ip netns del "$ns"
  done
  ! ip link show "$hveth" >/dev/null 2>&1 || ip link del "$hveth"
  for ((i = 0; i < 30; i++)); do # a killed container's cgroup empties in a moment
    find /sys/fs/cgroup -depth -type d -path "*/berth-sw-$sfx-node*" -exec rmdir {} + 2>/dev/null || true
    [[ -z "$(find /sys/fs/cgroup -type d -path "*/berth-sw-$sfx-node*" -print -quit 2>/dev/null)" ]] && break
    sleep 0.1
  done
  rm -rf "${var:?}" "${run:?}" "$dir/env" "$dir"/node[123].pid "$dir"/.load-*.tar
}

make_certs() { # make_certs ADDR... (the server cert is valid for all of them)
  local t="$dir/ca/server" san="IP:127.0.0.1,DNS:localhost" a n
  for a in "$@"; do san+=",IP:$a"; done
  tls_make "$dir" "$t" "berth-sw-$sfx" "$san"
  for n in "${nodes[@]}"; do
    install -m 644 "$t/ca.pem" "$t/server-cert.pem" "$var/node$n/etc/"
    install -m 600 "$t/server-key.pem" "$var/node$n/etc/"
  done
  rm -rf "${t:?}"
}

# Anything of this DIR's swarm left on the machine?
built_any() {
  local ns
  for ns in "$fab" "$(nodens 1)" "$(nodens 2)" "$(nodens 3)"; do [[ -e /run/netns/$ns ]] && return 0; done
  ip link show "$hveth" >/dev/null 2>&1 || [[ -e $var || -e $run ]]
}

up_failed() {
  set +e
  echo "swarm.sh: up failed; the nodes' dockerd log tails:"
  for n in "${nodes[@]}"; do
    echo "--- node$n ($dir/node$n.log)"
    tail -n 15 "$dir/node$n.log" 2>/dev/null
  done
  down
}

up() {
  local x i n ns deadline t0=$SECONDS token ready launcher=() jp=()
  [[ $(id -u) == 0 ]] || die "must run as root"
  mkdir -p "$dir"
  exec 3>&1 1>&2 # stdout is only for the env lines
  if [[ -f $dir/env ]] && status >/dev/null 2>&1; then
    echo "swarm.sh: the swarm of $dir is already up"
    cat "$dir/env" >&3
    return 0
  fi
  if built_any; then
    echo "swarm.sh: tearing down what is left of an earlier swarm of $dir"
    down
    t0=$SECONDS
  fi
  trap up_failed EXIT
  # 10.237.X.0/24 from the hash, the first free one from there; locked against racing ups.
  exec 9>/run/berth-sw.lock && flock 9
  x=$((16#${sfx:0:2}))
  for ((i = 0; i < 256; i++)); do
    [[ -z "$(ip -4 -o addr show to "10.237.$x.0/24")" ]] && break
    x=$(((x + 1) % 256))
  done
  ((i < 256)) || die "no free /24 in 10.237.0.0/16"
  [[ -z "$(ip -4 -o addr show to 10.238.0.0/15)" ]] ||
    echo "swarm.sh: warning: the host has addresses in 10.238.0.0/15, as the nodes' bridges do"
  ip netns add "$fab"
  ip -n "$fab" link set lo up
  ip -n "$fab" link add br0 type bridge
  ip -n "$fab" link set br0 up
  ip link add "$hveth" type veth peer name host netns "$fab"
  ip -n "$fab" link set host master br0 up
  ip addr add "10.237.$x.1/24" dev "$hveth"
  ip link set "$hveth" up
  flock -u 9 && exec 9<&-
  for n in "${nodes[@]}"; do
    ns="$(nodens "$n")" addr[n]="10.237.$x.$((10 + n))"
    ip netns add "$ns"
    ip -n "$fab" link add "n$n" type veth peer name eth0 netns "$ns"
    ip -n "$fab" link set "n$n" master br0 up
    ip -n "$ns" addr add "${addr[n]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$var/node$n/etc" "$var/node$n/data" "$run/node$n"
    echo '{}' >"$var/node$n/etc/daemon.json"
  done
  make_certs "${addr[@]:1}"
  printf '%s\n' "DOCKER_HOST=tcp://${addr[1]}:2376" DOCKER_TLS_VERIFY=1 "DOCKER_CERT_PATH=$dir/client" \
    "BERTH_SWARM_NODES=${addr[1]},${addr[2]},${addr[3]}" >"$dir/env"
  for n in "${nodes[@]}"; do
    setsid -w nsenter --net="/run/netns/$(nodens "$n")" unshare --mount --pid --uts --fork \
      --propagation private bash "$self" __inner "$dir" "$n" "${addr[n]}" \
      </dev/null >"$dir/node$n.log" 2>&1 3>&- &
    launcher[n]=$!
  done
  deadline=$((SECONDS + 60))
  for n in "${nodes[@]}"; do
    until dk "$n" docker version >/dev/null 2>&1; do
      kill -0 "${launcher[n]}" 2>/dev/null || die "node $n's engine exited"
      ((SECONDS < deadline)) || die "node $n's engine did not answer within 60s"
      sleep 0.1
    done
    cp "$var/node$n/init.pid" "$dir/node$n.pid"
  done
  echo "swarm.sh: engines up in $((SECONDS - t0))s"
  dk 1 docker swarm init --advertise-addr "${addr[1]}" \
    --default-addr-pool 10.239.0.0/16 --default-addr-pool-mask-length 24 >/dev/null
  token="$(dk 1 docker swarm join-token -q worker)"
  for n in 2 3; do
    dk "$n" docker swarm join --token "$token" --advertise-addr "${addr[n]}" "${addr[1]}:2377" >/dev/null &
    jp[n]=$!
  done
  for n in 2 3; do wait "${jp[n]}" || die "node $n could not join the swarm"; done
  deadline=$((SECONDS + 60))
  until ready="$(dk 1 docker node ls --format '{{.Status}}' 2>/dev/null | grep -cx Ready)" && ((ready == 3)); do
    ((SECONDS < deadline)) || die "only ${ready:-0} of 3 nodes Ready after 60s"
    sleep 0.2
  done
  trap - EXIT
  echo "swarm.sh: swarm berth-sw-$sfx up in $((SECONDS - t0))s: manager ${addr[1]}, workers ${addr[2]}, ${addr[3]}"
  cat "$dir/env" >&3
}

# One line per node: hostname, address, state as the manager sees it (Ready,
# Down, Unknown, or absent from its list), unknown when the manager gives no
# node list, unreachable when the node's own engine does not answer.
status() {
  local n list st rc=0
  read_addrs
  list="$(dk 1 docker node ls --format '{{.Hostname}} {{.Status}}' 2>/dev/null)" || list=""
  for n in "${nodes[@]}"; do
    st="$(awk -v h="berth-sw$n" '$1 == h { s = $2 } END { print s }' <<<"$list")"
    [[ -n $list ]] || st=unknown
    [[ -n $st ]] || st=absent
    if [[ $st != Down ]] && ! dk "$n" docker version >/dev/null 2>&1; then st=unreachable; fi
    echo "berth-sw$n ${addr[n]} $st"
    [[ $st == Ready ]] || rc=1
  done
  return $rc
}

load() {
  [[ $# -gt 0 ]] || die "usage: $0 load DIR IMAGE..."
  read_addrs
  local n p=() rc=0
  tar="$dir/.load-$$.tar" # global: the EXIT trap runs after this function has returned
  trap 'rm -f "$tar"' EXIT
  # Save from the local engine, whatever the caller's DOCKER_HOST points at.
  env -u DOCKER_HOST -u DOCKER_TLS_VERIFY -u DOCKER_CERT_PATH -u DOCKER_CONTEXT docker save -o "$tar" "$@"
  for n in "${nodes[@]}"; do
    DOCKER_HOST="tcp://${addr[n]}:2376" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$dir/client" \
      DOCKER_CONTEXT='' docker load -q -i "$tar" | sed "s/^/berth-sw$n: /" >&2 &
    p[n]=$!
  done
  for n in "${nodes[@]}"; do wait "${p[n]}" || { echo "swarm.sh: load into node $n failed" >&2; rc=1; }; done
  return $rc
}

node_arg() { [[ ${1:-} =~ ^[123]$ ]] || die "usage: $0 $cmd DIR N (N: 1, 2 or 3)"; }

kill_node() {
  local pid i
  pid="$(node_pid "$1")" || die "node $1 of $dir is not running"
  kill -KILL "$pid"
  for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  echo "swarm.sh: killed node $1 (pid $pid)" >&2
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  load) load "$@" ;;
  kill-node) node_arg "${1:-}" && kill_node "$1" ;;
  node-pid) node_arg "${1:-}" && { node_pid "$1" || die "node $1 of $dir is not running"; } ;;
  __inner) inner "$@" ;;
  *) die "$usage" ;;
esac
