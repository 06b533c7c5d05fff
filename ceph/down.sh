#!/usr/bin/env bash
# Stops what ceph/up.sh RUN_DIR started: the OSD, then the monitor; each gets SIGTERM and, after
# 10 s, SIGKILL. Returns once they are gone and the monitor's ports are free (at most ~35 s).
# Idempotent, and safe when the watchdog and a caller run it at the same time. Keeps ceph.conf,
# the keyrings and the logs; removes the daemons' data.
set -uo pipefail
run=${1:?usage: down.sh RUN_DIR}
[ -d "$run" ] || exit 0
exec 9>>"$run/.down.lock"
flock -w 60 9 || { echo "down.sh: another down.sh holds $run/.down.lock" >&2; exit 1; }
[ -f "$run/pids" ] || exit 0
mapfile -t procs < <(awk '{print $2}' "$run/pids")
rm -f "$run/pids"

# A process that exited but was not reaped yet (a zombie: up.sh, its parent, is long gone) holds
# no socket, yet `kill -0` still succeeds on it.
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop() {
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do alive "$1" || return 0; sleep 0.1; done
  echo "down.sh: $1 ignored SIGTERM for 10 s, sending SIGKILL" >&2
  kill -KILL "$1" 2>/dev/null
  for _ in $(seq 50); do alive "$1" || return 0; sleep 0.1; done
  echo "down.sh: $1 is still alive after SIGKILL" >&2
}
# Newest first: the OSD, then the monitor.
for ((i = ${#procs[@]} - 1; i >= 0; i--)); do stop "${procs[i]}"; done

# The monitor's ports (from ceph.conf's mon host) must be free before we return.
ports=$(sed -n 's/^mon host = //p' "$run/ceph.conf" 2>/dev/null | grep -o '127\.0\.0\.1:[0-9]*' | cut -d: -f2)
for port in $ports; do
  for _ in $(seq 100); do
    ss -Htln "sport = :$port" | grep -q . || break
    sleep 0.1
  done
  ss -Htln "sport = :$port" | grep -q . && echo "down.sh: port $port is still bound" >&2
done

if [ -f "$run/watchdog" ]; then
  w=$(awk '{print $2}' "$run/watchdog")
  [ "$w" != "$PPID" ] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null
  rm -f "$run/watchdog"
fi
rm -rf "$run/data" "$run/run"
rm -f "$run/env"
exit 0
