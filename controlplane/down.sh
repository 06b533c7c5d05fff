#!/usr/bin/env bash
# Stops what controlplane/up.sh RUN_DIR started: the controller-manager, then the apiserver, then
# etcd; each gets SIGTERM and, after 10 s, SIGKILL. Returns once they are gone, so their ports are
# free. Idempotent. Keeps the logs and the audit log; removes etcd's data. A node that up.sh
# --node started (RUN_DIR/node) is stopped first, while the apiserver still answers, and its bridge
# goes last.
set -uo pipefail
run=${1:?usage: down.sh RUN_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -f "$run/node/env" ] && "$here/../node/down.sh" "$run/node"
drop_bridge() {
  [ -f "$run/node-bridge" ] || return 0
  local b
  b=$(cat "$run/node-bridge")
  [ -n "$b" ] && ip link show "$b" >/dev/null 2>&1 && ip link delete "$b"
  rm -f "$run/node-bridge"
}
[ -f "$run/pids" ] || { drop_bridge; exit 0; }
mapfile -t procs < <(awk '{print $2}' "$run/pids")
rm -f "$run/pids"

# A process that exited but was not reaped yet (a zombie: up.sh, its parent, is long gone) holds
# no socket, yet `kill -0` still succeeds on it.
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop() {
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do alive "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  for _ in $(seq 50); do alive "$1" || return 0; sleep 0.1; done
}
for ((i = ${#procs[@]} - 1; i >= 0; i--)); do stop "${procs[i]}"; done

if [ -f "$run/watchdog" ]; then
  w=$(awk '{print $2}' "$run/watchdog")
  [ "$w" != "$PPID" ] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null
  rm -f "$run/watchdog"
fi
rm -rf "$run/etcd"
drop_bridge
exit 0
