#!/usr/bin/env bash
# Stops what controlplane/up.sh RUN_DIR started: SIGTERM, then SIGKILL after 10 s. Idempotent.
# Keeps the logs and the audit log; removes etcd's data.
set -uo pipefail
run=${1:?usage: down.sh RUN_DIR}
[ -f "$run/pids" ] || exit 0
mapfile -t procs < <(awk '{print $2}' "$run/pids")
rm -f "$run/pids"
# Stop the controller-manager and the apiserver before etcd, so they don't log a storm of errors.
for ((i = ${#procs[@]} - 1; i >= 0; i--)); do kill -TERM "${procs[i]}" 2>/dev/null; done
for _ in $(seq 50); do
  alive=0
  for p in "${procs[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 0.2
done
for p in "${procs[@]}"; do kill -KILL "$p" 2>/dev/null; done
if [ -f "$run/watchdog" ]; then
  w=$(awk '{print $2}' "$run/watchdog")
  [ "$w" != "$PPID" ] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null
  rm -f "$run/watchdog"
fi
rm -rf "$run/etcd"
exit 0
