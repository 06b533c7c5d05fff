#!/usr/bin/env bash
# Starts a throw-away Ceph cluster on 127.0.0.1 for tests of the storage census: one monitor and
# one in-memory (memstore) OSD, cephx on, one pool initialised for RBD and a read-only user, all
# under RUN_DIR. Waits until the pool is usable and the read-only user is proven read-only.
#
#   ceph/up.sh RUN_DIR [--owner-pid PID]
#
# With --owner-pid, a watchdog stops everything (ceph/down.sh RUN_DIR) as soon as that process is
# gone — also when it panicked, was interrupted or was killed with SIGKILL — so no process or port
# outlives the test run that asked for the cluster.
#
# Installs the Debian packages it needs when they are missing (scripts/ensure-tools.sh: ceph-mon
# ceph-osd ceph-common ceph-base iproute2 uuid-runtime); a no-op taking milliseconds when they are
# present. Needs root only for that install.
#
# RUN_DIR then holds:
#   ceph.conf                     the cluster's and the clients' configuration
#   keys/client.admin.keyring     full rights
#   keys/client.leftovers.keyring read-only: mon 'allow r' osd 'profile rbd-read-only'
#   keys/mon.keyring              the monitor's secret (mkfs input)
#   data/mon.a, data/osd.N        daemon data (the OSD's objects live in memory)
#   log/                          daemon, client and cluster/audit logs, daemon stdout/stderr,
#                                 mkfs.log (every setup command and its output)
#   run/                          admin sockets (ceph-mon.a.asok, ceph-osd.N.asok), pid files
#   crash/                        crash dumps, if a daemon crashes
#   env                           CEPH_CONF, keyrings, user id, pool, fsid, mon address, PIDs
#   pids                          "name pid" of each daemon, for down.sh
# Nothing is written outside RUN_DIR (no /etc/ceph, /var/lib/ceph, /var/log/ceph, /var/run/ceph).
#
# Environment: CEPH_POOL (default k8s-rbd), CEPH_RO_USER (default leftovers),
# CEPH_MEMSTORE_BYTES (default 1 GiB), CEPH_SKIP_INSTALL=1 (never call apt-get).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=${1:?usage: up.sh RUN_DIR [--owner-pid PID]}
shift
owner=""
while [ $# -gt 0 ]; do
  case "$1" in
    --owner-pid) owner=${2:?--owner-pid needs a PID}; shift 2 ;;
    *) echo "up.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
pool=${CEPH_POOL:-k8s-rbd}
ro_user=${CEPH_RO_USER:-leftovers}
memstore_bytes=${CEPH_MEMSTORE_BYTES:-1073741824}
t0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)"; }

# --- packages ----------------------------------------------------------------------------------
# The daemons and CLIs (ceph-mon, ceph-osd, ceph-common, ceph-base), ss (iproute2) and uuidgen
# (uuid-runtime), which minimal Debian images lack; the rest is in every Debian.
tools=(ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd ss uuidgen)
if [ "${CEPH_SKIP_INSTALL:-}" = 1 ]; then
  for tool in "${tools[@]}"; do
    type -P "$tool" >/dev/null || { echo "up.sh: $tool is missing (CEPH_SKIP_INSTALL=1)" >&2; exit 1; }
  done
else
  "$here/../scripts/ensure-tools.sh" ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd ss uuidgen
fi
for tool in python3 setsid flock timeout; do
  command -v "$tool" >/dev/null || { echo "up.sh: $tool is required but not on PATH" >&2; exit 1; }
done

# --- run directory -----------------------------------------------------------------------------
mkdir -p "$run"
run=$(cd "$run" && pwd)
if [ -e "$run/env" ] || [ -e "$run/pids" ]; then echo "up.sh: $run already holds a Ceph cluster" >&2; exit 1; fi
# Admin sockets are unix sockets: their path must fit in sun_path (107 bytes).
[ ${#run} -le 70 ] || { echo "up.sh: RUN_DIR path too long for admin sockets (${#run} > 70 chars): $run" >&2; exit 1; }
mkdir -p "$run/keys" "$run/data" "$run/log" "$run/run" "$run/crash"
chmod 700 "$run/keys" "$run/data"
conf="$run/ceph.conf"

fail() {
  echo "up.sh: $*" >&2
  for f in "$run"/log/mkfs.log "$run"/log/client.*.log "$run"/log/mon.a.log "$run"/log/osd.*.log "$run"/log/*.stderr; do
    [ -s "$f" ] && { echo "--- last lines of $f" >&2; tail -n 15 "$f" >&2; }
  done
  "$here/down.sh" "$run" >&2 || true
  exit 1
}

# ceph-mon refuses to start, silently in its log, when its data's filesystem has under 1% free
# (`mon data avail crit` counts whole percents): say so here instead.
free_pct=$(df -P "$run" | awk 'NR == 2 { print 100 - $5 }')
[ "${free_pct:-100}" -ge 1 ] ||
  fail "the filesystem of $run has under 1% free ($(df -Ph "$run" | awk 'NR == 2 { print $4 }') available): ceph-mon refuses to start on it"

# --- ports and configuration -------------------------------------------------------------------
# Free ports below the kernel's ephemeral range for the monitor's msgr2 and msgr1 addresses
# (scripts/free-ports.py says why: a kernel-chosen port was once taken by another test's client
# before ceph-mon bound it). The OSD binds free ports of its own in ms_bind_port_min..max
# (6800-7300) on 127.0.0.1.
ports=$("$here/../scripts/free-ports.py" 2) || fail "no free ports for the servers"
read -r mon_v2 mon_v1 <<<"$ports"
fsid=$(uuidgen)
mon_host="[v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]"

cat >"$conf" <<EOF
# Written by ceph/up.sh: a one-monitor, one-OSD test cluster on loopback.
[global]
fsid = $fsid
mon host = $mon_host
public network = 127.0.0.1/32
ms bind ipv6 = false
ms bind ipv4 = true
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $run/run
admin socket = $run/run/\$cluster-\$name.asok
pid file = $run/run/\$name.pid
log file = $run/log/\$name.log
log to stderr = false
mon cluster log file = $run/log/\$cluster.\$channel.log
crash dir = $run/crash
err to stderr = true
keyring = $run/keys/\$name.keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
auth allow insecure global id reclaim = false
mon data avail warn = 1
mon data avail crit = 0
# Clients give up instead of hanging when the cluster is gone.
client mount timeout = 30
rados mon op timeout = 30
rados osd op timeout = 30

[mon]
mon data = $run/data/\$name
keyring = $run/data/\$name/keyring

[osd]
osd data = $run/data/\$name
keyring = $run/data/\$name/keyring
osd objectstore = memstore
memstore device bytes = $memstore_bytes
public addr = 127.0.0.1
cluster addr = 127.0.0.1

[client]
# One log per client name; no admin socket per CLI call.
admin socket =
EOF

# --- keys --------------------------------------------------------------------------------------
(
  exec >"$run/log/mkfs.log" 2>&1
  ceph-authtool --create-keyring "$run/keys/mon.keyring" --gen-key -n mon. --cap mon 'allow *'
  ceph-authtool --create-keyring "$run/keys/client.admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *'
  ceph-authtool "$run/keys/mon.keyring" --import-keyring "$run/keys/client.admin.keyring"
  monmaptool --create --fsid "$fsid" --addv a "$mon_host" "$run/data/monmap"
  ceph-mon -c "$conf" --mkfs -i a --monmap "$run/data/monmap" --keyring "$run/keys/mon.keyring"
) || fail "keyrings or monitor mkfs failed (see $run/log/mkfs.log)"
chmod 600 "$run"/keys/*.keyring

pids=()
start() { # name args...: a daemon in the foreground of its own session, in the background here
  local name=$1; shift
  setsid "$@" >"$run/log/$name.stdout" 2>"$run/log/$name.stderr" </dev/null &
  pids+=("$!")
  echo "$name $!" >>"$run/pids"
}

# --- monitor -----------------------------------------------------------------------------------
start mon.a ceph-mon -c "$conf" -f -i a

# The watchdog starts right away so that a failure below still cleans up. Its own session, so a
# signal to the owner's process group does not take it along; a zombie owner counts as gone.
if [ -n "$owner" ]; then
  # shellcheck disable=SC2016 # the script's $1..$3 are its own arguments
  setsid nohup bash -c '
    alive() { [ -r "/proc/$1/status" ] && ! grep -q "^State:[[:space:]]*Z" "/proc/$1/status" 2>/dev/null; }
    while alive "$1" && [ -e "$2/pids" ]; do sleep 1; done
    "$3/down.sh" "$2"' watchdog "$owner" "$run" "$here" >/dev/null 2>&1 </dev/null &
  echo "watchdog $!" >"$run/watchdog"
fi

admin=(timeout 30 ceph -c "$conf" -n client.admin --keyring "$run/keys/client.admin.keyring" --connect-timeout 10)
rbd_admin=(timeout 30 rbd -c "$conf" -n client.admin --keyring "$run/keys/client.admin.keyring")

step() { # what command...: a one-shot command (each under `timeout`), output to log/mkfs.log
  local what=$1 rc=0; shift
  echo "+ $*" >>"$run/log/mkfs.log"
  "$@" >>"$run/log/mkfs.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { [ "$rc" = 124 ] && fail "$what timed out"; fail "$what failed (exit $rc)"; }
}

wait_for() { # what seconds command...
  local what=$1 secs=$2 deadline; shift 2
  deadline=$(($(date +%s) + secs))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a daemon exited while waiting for $what"; done
    sleep 0.2
  done
  fail "timed out after ${secs}s waiting for $what"
}
wait_for "the monitor (ceph -s)" 60 "${admin[@]}" -s

# --- OSD ---------------------------------------------------------------------------------------
osd_uuid=$(uuidgen)
osd_id=$("${admin[@]}" osd new "$osd_uuid" 2>>"$run/log/mkfs.log") || fail "ceph osd new failed (see $run/log/mkfs.log)"
mkdir -p "$run/data/osd.$osd_id"
(
  exec >>"$run/log/mkfs.log" 2>&1
  ceph-osd -c "$conf" -i "$osd_id" --mkfs --mkkey --osd-uuid "$osd_uuid" --no-mon-config
  "${admin[@]}" auth add "osd.$osd_id" osd 'allow *' mon 'allow profile osd' -i "$run/data/osd.$osd_id/keyring"
) || fail "OSD mkfs or key registration failed (see $run/log/mkfs.log)"
start "osd.$osd_id" ceph-osd -c "$conf" -f -i "$osd_id"

osd_up() {
  "${admin[@]}" osd stat -f json | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s.get("osdmap", s)
sys.exit(0 if s["num_up_osds"] == 1 and s["num_in_osds"] == 1 else 1)'
}
wait_for "osd.$osd_id up and in" 90 osd_up

# --- pool --------------------------------------------------------------------------------------
step "ceph osd pool create $pool" "${admin[@]}" osd pool create "$pool" 8 8
# There is no manager daemon, so `ceph pg stat` has nobody to answer it; `rbd pool init` writes
# to the pool, and its success (within the timeout) shows that the PGs are active.
step "rbd pool init $pool" "${rbd_admin[@]}" pool init "$pool"

# --- the read-only user ------------------------------------------------------------------------
ro_keyring="$run/keys/client.$ro_user.keyring"
"${admin[@]}" auth get-or-create "client.$ro_user" mon 'allow r' osd 'profile rbd-read-only' \
  -o "$ro_keyring" 2>>"$run/log/mkfs.log" || fail "creating client.$ro_user failed"
chmod 600 "$ro_keyring"
rbd_ro=(timeout 30 rbd -c "$conf" --id "$ro_user" --keyring "$ro_keyring")
step "rbd create as client.admin" "${rbd_admin[@]}" create "$pool/up-sh-probe" --size 4M
listing=$("${rbd_ro[@]}" ls -l --format json "$pool" 2>>"$run/log/mkfs.log") || fail "rbd ls -l as client.$ro_user failed"
case "$listing" in *up-sh-probe*) ;; *) fail "rbd ls -l as client.$ro_user does not show the probe image: $listing" ;; esac
if out=$("${rbd_ro[@]}" create "$pool/up-sh-ro-write" --size 4M 2>&1); then
  fail "client.$ro_user could create an image: it is not read-only"
fi
case "$out" in
  *"Operation not permitted"*) echo "rbd create as client.$ro_user failed as it must: $out" >>"$run/log/mkfs.log" ;;
  *) fail "rbd create as client.$ro_user failed, but not with EPERM: $out" ;;
esac
step "rbd rm of the probe image" "${rbd_admin[@]}" rm --no-progress "$pool/up-sh-probe"
"${rbd_admin[@]}" rm "$pool/up-sh-ro-write" >/dev/null 2>&1 || true

mon_pid=$(awk '$1 == "mon.a" {print $2}' "$run/pids")
osd_pid=$(awk -v n="osd.$osd_id" '$1 == n {print $2}' "$run/pids")
cat >"$run/env" <<EOF
CEPH_CONF=$conf
CEPH_ADMIN_KEYRING=$run/keys/client.admin.keyring
CEPH_RO_KEYRING=$ro_keyring
CEPH_RO_USER=$ro_user
CEPH_RO_NAME=client.$ro_user
CEPH_POOL=$pool
CEPH_FSID=$fsid
CEPH_MON_HOST=$mon_host
CEPH_MON_V2=127.0.0.1:$mon_v2
CEPH_MON_V1=127.0.0.1:$mon_v1
CEPH_OSD_ID=$osd_id
CEPH_MON_PID=$mon_pid
CEPH_OSD_PID=$osd_pid
EOF
echo "ceph ready: pool $pool at $mon_host, fsid $fsid, in $(elapsed) s (run dir $run)" >&2
