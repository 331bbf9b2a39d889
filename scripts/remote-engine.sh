#!/usr/bin/env bash
# A second, isolated Docker engine on this machine, for integration tests of
# berth's remote-engine support (DOCKER_HOST=tcp://…, DOCKER_TLS_VERIFY=1).
#
#   remote-engine.sh start DIR        start it; print DOCKER_HOST, DOCKER_TLS_VERIFY,
#                                     DOCKER_CERT_PATH lines (also kept in DIR/env)
#   remote-engine.sh stop DIR         stop it and remove everything it made (idempotent)
#   remote-engine.sh load DIR IMAGE…  copy images from the local engine into it
#   remote-engine.sh ssh DIR          an sshd in its netns for ssh:// endpoints
#
# Needs root, dockerd, iproute2, util-linux and openssl. The engine shares
# nothing with the caller but the kernel and the disk:
# - network namespace berth-rmt-<suffix> (suffix: hash of DIR, so tests can
#   run side by side), reached through a veth pair in 10.234.X.0/30 (host .1,
#   engine .2). The engine's bridge, iptables and published ports live there,
#   so the main engine's docker0 and iptables are never touched; a published
#   port is reached from the host at 10.234.X.2:<port>, as on a remote host.
# - mount namespace (private propagation): a fresh tmpfs on /tmp, so the
#   caller's /tmp paths (berth's test workspaces) do not exist for the engine;
#   tmpfs on /run/containerd and /run/docker (no system containerd, so dockerd
#   starts its own managed containerd under its exec root; no main-engine
#   state); /etc/docker bound to its own dir (own key.json, so its own engine
#   ID); a fresh sysfs for its netns (cgroup mounts carried over); its exec
#   root is a tmpfs too, so no socket of it is reachable from the host.
#   All its mounts vanish with the namespace.
# - PID namespace: docker-init (tini) is its PID 1, so stopping it, or killing
#   it, ends dockerd, containerd, shims and containers together.
# Layout: since DIR is usually under /tmp (hidden from the engine), the engine
# keeps its state in /var/lib/berth-rmt-<suffix> (data root, daemon.json,
# server TLS files, init.pid) and /run/berth-rmt-<suffix> (exec root mount
# point); DIR holds the client files (DIR/client/{ca,cert,key}.pem), the CA,
# DIR/env, DIR/engine.pid (a copy) and DIR/dockerd.log; stop leaves only the
# certs and the log in DIR (and the empty lock file /run/berth-rmt.lock).
set -euo pipefail

self="$(realpath "${BASH_SOURCE[0]}")"
# shellcheck source-path=SCRIPTDIR source=lib/tls.sh
source "$(dirname "$self")/lib/tls.sh"
die() { echo "remote-engine.sh: $*" >&2; exit 1; }
[[ $# -ge 2 ]] || die "usage: $0 start|stop|load|ssh DIR [IMAGE...]"
cmd=$1 dir="$(realpath -m "$2")"
shift 2
sfx="$(printf %s "$dir" | sha256sum | cut -c1-8)"
ns="berth-rmt-$sfx" veth="brmt-$sfx"
var="/var/lib/berth-rmt-$sfx" run="/run/berth-rmt-$sfx"

# Runs as PID 1 of the new PID namespace, inside the new netns and mount ns.
inner() {
  local addr=$1 x=$2 k v _ init
  while read -r k v _; do [[ $k == NSpid: ]] && echo "$v" >"$var/init.pid"; done </proc/self/status
  mount --rbind /sys/fs/cgroup "$run"
  mount -t sysfs sysfs /sys
  mount --move "$run" /sys/fs/cgroup
  mount -t proc proc /proc
  mount -t tmpfs -o mode=700 tmpfs "$run"
  mount -t tmpfs -o mode=1777 tmpfs /tmp
  for d in /run/containerd /run/docker; do mkdir -p "$d"; mount -t tmpfs -o mode=700 tmpfs "$d"; done
  mkdir -p /etc/docker && mount --bind "$var/etc" /etc/docker
  init="$(command -v docker-init || command -v tini || true)"
  exec ${init:+"$init" --} dockerd --config-file "$var/etc/daemon.json" \
    --data-root "$var/data" --exec-root "$run" --pidfile "$run/docker.pid" \
    -H "tcp://$addr:2376" --tlsverify --tlscacert "$var/etc/ca.pem" \
    --tlscert "$var/etc/server-cert.pem" --tlskey "$var/etc/server-key.pem" \
    --bip "10.235.$x.1/24" --default-address-pool base=10.236.0.0/16,size=24 \
    --exec-opt native.cgroupdriver=cgroupfs --cgroup-parent "/$ns"
}

stop_engine() {
  local pid="" i
  pid="$(cat "$var/init.pid" 2>/dev/null || cat "$dir/engine.pid" 2>/dev/null || true)"
  # Only signal it while it is still ours (in our netns), never a reused pid.
  if [[ -n $pid ]] && ip netns identify "$pid" 2>/dev/null | grep -qx "$ns"; then
    # Its containers first (their cgroups are under /$ns), so that dockerd's
    # shutdown need not wait out each one's 10 s stop timeout.
    find /sys/fs/cgroup -path "*/$ns/*" -name cgroup.procs -exec cat {} + 2>/dev/null |
      xargs -r kill -KILL 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if ip netns list | grep -qw "$ns"; then
    for ((i = 0; i < 50; i++)); do
      [[ -z "$(ip netns pids "$ns")" ]] && break
      ip netns pids "$ns" | xargs -r kill -KILL 2>/dev/null || true
      sleep 0.1
    done
    ip netns del "$ns"
  fi
  ! ip link show "$veth" >/dev/null 2>&1 || ip link del "$veth"
  find /sys/fs/cgroup -depth -type d -path "*/$ns*" -exec rmdir {} + 2>/dev/null || true
  rm -rf "$var" "$run" "$dir/engine.pid" "$dir/env"
}

start() {
  local x addr pid t0=$SECONDS
  [[ $(id -u) == 0 ]] || die "must run as root"
  mkdir -p "$dir"
  exec 3>&1 1>&2 # stdout is only for the env lines
  if ip netns list | grep -qw "$ns"; then die "$ns already exists (stop $dir first)"; fi
  trap 'echo "remote-engine.sh: start failed; dockerd.log tail:" >&2; tail -n 30 "$dir/dockerd.log" >&2 2>/dev/null || true; stop_engine' EXIT
  # 10.234.X.0/30 from the hash, first free one from there; locked against racing starts.
  exec 9>/run/berth-rmt.lock && flock 9 # (ip netns add itself locks /run/netns)
  x=$((16#${sfx:0:2}))
  for ((i = 0; i < 256; i++)); do
    [[ -z "$(ip -4 -o addr show to "10.234.$x.0/30")" ]] && break
    x=$(((x + 1) % 256))
  done
  addr="10.234.$x.2"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip addr add "10.234.$x.1/30" dev "$veth"
  ip link set "$veth" up
  flock -u 9 && exec 9<&-
  ip -n "$ns" addr add "$addr/30" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  rm -rf "$var" "$run"
  mkdir -p "$var/etc" "$var/data" "$run"
  echo '{}' >"$var/etc/daemon.json"
  tls_make "$dir" "$var/etc" "berth-rmt-$sfx" "IP:$addr,IP:127.0.0.1,DNS:localhost"
  printf '%s\n' "DOCKER_HOST=tcp://$addr:2376" DOCKER_TLS_VERIFY=1 "DOCKER_CERT_PATH=$dir/client" >"$dir/env"
  setsid -w nsenter --net="/run/netns/$ns" unshare --mount --pid --fork --propagation private \
    bash "$self" __inner "$dir" "$addr" "$x" </dev/null >"$dir/dockerd.log" 2>&1 3>&- &
  local launcher=$!
  while ((SECONDS - t0 < 60)); do
    pid="$(cat "$var/init.pid" 2>/dev/null || true)"
    [[ -n $pid ]] && cp "$var/init.pid" "$dir/engine.pid"
    if DOCKER_HOST="tcp://$addr:2376" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$dir/client" \
      docker version >/dev/null 2>&1; then
      trap - EXIT
      echo "remote-engine.sh: engine $ns up at $addr in $((SECONDS - t0))s" >&2
      cat "$dir/env" >&3
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || die "the engine exited"
    sleep 0.1
  done
  die "the engine did not answer within 60s"
}

load() {
  [[ -f $dir/env ]] || die "no engine started in $dir"
  [[ $# -gt 0 ]] || die "usage: $0 load DIR IMAGE..."
  local remote
  remote="$(sed -n 's/^DOCKER_HOST=//p' "$dir/env")"
  # Save from the local engine (not from this one, if the caller points at it).
  if [[ ${DOCKER_HOST:-} == "$remote" ]]; then unset DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH; fi
  docker save "$@" | env DOCKER_HOST="$remote" DOCKER_TLS_VERIFY=1 \
    DOCKER_CERT_PATH="$dir/client" docker load
}

# An sshd "on the engine host" (its netns, port 2222, key auth only) whose
# logins reach the engine through DOCKER_HOST/TLS (`docker system dial-stdio`).
# Prints DOCKER_HOST=ssh://root@ADDR:2222 and BERTH_TEST_SSH_PATH=DIR/ssh/bin:
# a directory whose `ssh` uses DIR/ssh's key and config (OpenSSH reads the
# user's ~/.ssh from the passwd entry, not $HOME, so a wrapper it is).
ssh_login() {
  [[ -f $dir/env ]] || die "no engine started in $dir"
  local addr sd="$dir/ssh" sshd
  addr="$(sed -n 's|^DOCKER_HOST=tcp://\(.*\):2376$|\1|p' "$dir/env")"
  sshd="$(command -v sshd || echo /usr/sbin/sshd)"
  [[ -x $sshd ]] || die "sshd is not installed (Debian: openssh-server)"
  mkdir -p "$sd/bin" /run/sshd
  rm -f "$sd/id" "$sd/id.pub" "$sd/host" "$sd/host.pub"
  ssh-keygen -q -t ed25519 -N '' -f "$sd/id" && ssh-keygen -q -t ed25519 -N '' -f "$sd/host"
  cp "$sd/id.pub" "$sd/authorized_keys"
  chmod 600 "$sd/authorized_keys"
  cat >"$sd/sshd_config" <<CONF
ListenAddress $addr:2222
HostKey $sd/host
AuthorizedKeysFile $sd/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $sd/sshd.pid
SetEnv DOCKER_HOST=tcp://$addr:2376 DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$dir/client
CONF
  cat >"$sd/ssh_config" <<CONF
Host $addr
  IdentityFile $sd/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
CONF
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$sd/ssh_config" >"$sd/bin/ssh"
  chmod 755 "$sd/bin/ssh"
  ip netns exec "$ns" "$sshd" -f "$sd/sshd_config" -E "$sd/sshd.log" || die "sshd did not start: $(tail -n 5 "$sd/sshd.log")"
  for ((i = 0; i < 50; i++)); do
    "$sd/bin/ssh" -p 2222 "root@$addr" true 2>/dev/null && break
    sleep 0.1
  done
  printf '%s\n' "DOCKER_HOST=ssh://root@$addr:2222" "BERTH_TEST_SSH_PATH=$sd/bin"
}

case $cmd in
  start) start ;;
  stop) stop_engine ;;
  load) load "$@" ;;
  ssh) ssh_login ;;
  __inner) inner "$@" ;;
  *) die "unknown command $cmd (start, stop, load)" ;;
esac
