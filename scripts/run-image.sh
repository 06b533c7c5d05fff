#!/usr/bin/env bash
# Runs the volume-leftovers image without a daemon, the way a pod of deploy/deployment.yaml runs
# it: umoci unpacks the OCI layout into a runtime bundle and runc runs it, detached.
#
#   scripts/run-image.sh up RUN_DIR --token-file FILE --ca-file FILE --apiserver-port PORT
#                        [--namespace NS] [--apiserver-host HOST] [--image OCI_DIR:REF]
#                        [--env NAME=VALUE]... [--ready-url URL] [--ready-timeout SECONDS]
#                        [--owner-pid PID] [-- ARG...]
#   scripts/run-image.sh down RUN_DIR
#
# up: the container runs as uid/gid 65532 with a read-only root filesystem, no capabilities,
# noNewPrivileges, a 512 MiB memory limit (the Deployment's), its own pid/ipc/uts/mount
# namespaces and the HOST network namespace (so it reaches an API server on 127.0.0.1 and its
# listener is reachable on 127.0.0.1). Mounts, all read-only: the service-account directory
# /var/run/secrets/kubernetes.io/serviceaccount/ with copies of `token`, `ca.crt` and `namespace`
# (default volume-leftovers), and the host's /etc/hosts and /etc/resolv.conf (what the kubelet
# gives a hostNetwork pod). The environment has KUBERNETES_SERVICE_HOST (default 127.0.0.1) and
# KUBERNETES_SERVICE_PORT, so the binary takes the in-cluster configuration exactly as in a pod;
# no kubeconfig exists in the container. The hostname (and $HOSTNAME), like a pod's name, is the
# container id (below).
# No seccomp profile (a pod's RuntimeDefault is the runtime's; runc has none of its own). ARGs
# replace the image's CMD (`run`), like a pod's `args`; the entrypoint stays. The image defaults
# to target/image/oci:VERSION (scripts/image.sh; VL_IMAGE_DIR moves it).
#
# up returns once the container is running, or with --ready-url once that URL answers 2xx
# (e.g. http://127.0.0.1:PORT/readyz; default timeout 60 s); on failure it prints the end of the
# log, stops the container and exits 1. The container's stdout/stderr go to
# RUN_DIR/container.log (runc hands that file to uid 65532). With --owner-pid, a watchdog runs
# `down` as soon as that process is gone (also when it was killed).
#
# down: SIGTERM (the operator stops gracefully), SIGKILL after 10 s, `runc delete` (which
# removes the cgroups), then removes the bundle and runc's state; keeps RUN_DIR/container.log.
# Idempotent, safe to call concurrently with the watchdog; returns once runc reports the
# container stopped.
#
# Needs root. umoci and runc are installed from Debian when missing (scripts/ensure-tools.sh).
# runc's state lives in RUN_DIR/runc (not /run/runc); the container id is vl-image-<hash of
# RUN_DIR>; cgroups are runc's cgroupfs defaults (cgroupsPath unset: a group named after the id,
# below runc's own cgroup, so the memory limit nests in the caller's).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
export PATH="$PATH:/usr/sbin:/sbin"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
cmd=${1:-}
run=${2:-}
{ [ -n "$cmd" ] && [ -n "$run" ]; } || usage
shift 2

runc_() { runc --root "$run/runc" "$@"; }
# stopped, running, created, paused, or "" when runc does not know the container.
status() { runc_ state "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null || true; }

down() {
  [ -d "$run" ] || return 0
  # One at a time: the watchdog may be calling down while its owner does.
  exec 9>"$run/.lock"
  flock 9
  # The watchdog goes first, so that it does not clean up under our feet.
  if [ -f "$run/watchdog" ]; then
    local w
    w=$(cat "$run/watchdog")
    if [ "$w" != "$PPID" ] && [ "$w" != "$$" ]; then kill "$w" 2>/dev/null || true; fi
    rm -f "$run/watchdog"
  fi
  if [ -f "$run/id" ]; then
    local id
    id=$(cat "$run/id")
    if [ -n "$(status "$id")" ]; then
      runc_ kill "$id" TERM 2>/dev/null || true
      local deadline=$((SECONDS + 10))
      while [ "$(status "$id")" = running ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
      if [ "$(status "$id")" = running ]; then
        echo "run-image.sh: $id did not stop within 10 s of SIGTERM; SIGKILL" >&2
        runc_ kill "$id" KILL 2>/dev/null || true
        deadline=$((SECONDS + 5))
        while [ "$(status "$id")" = running ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
      fi
      # Removes the container's cgroups too.
      runc_ delete --force "$id" >&2 || echo "run-image.sh: runc delete $id failed" >&2
    fi
    rm -f "$run/id"
  fi
  rm -rf "$run/bundle" "$run/runc" "$run/serviceaccount" "$run/pid"
}

case "$cmd" in
  down) run=$(cd "$run" 2>/dev/null && pwd) || exit 0; down; exit 0 ;;
  up) ;;
  *) usage ;;
esac

token_file="" ca_file="" namespace=volume-leftovers host=127.0.0.1 port="" image="" owner=""
ready_url="" ready_timeout=60 envs=() args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --token-file) token_file=${2:?}; shift 2 ;;
    --ca-file) ca_file=${2:?}; shift 2 ;;
    --namespace) namespace=${2:?}; shift 2 ;;
    --apiserver-host) host=${2:?}; shift 2 ;;
    --apiserver-port) port=${2:?}; shift 2 ;;
    --image) image=${2:?}; shift 2 ;;
    --env) envs+=("${2:?}"); shift 2 ;;
    --ready-url) ready_url=${2:?}; shift 2 ;;
    --ready-timeout) ready_timeout=${2:?}; shift 2 ;;
    --owner-pid) owner=${2:?}; shift 2 ;;
    --) shift; args=("$@"); break ;;
    *) echo "run-image.sh: unknown argument $1" >&2; usage ;;
  esac
done
{ [ -r "$token_file" ] && [ -r "$ca_file" ] && [ -n "$port" ]; } || {
  echo "run-image.sh up: --token-file, --ca-file (readable files) and --apiserver-port are required" >&2
  exit 2
}
if [ -z "$image" ]; then
  version=$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version[[:space:]]*=/ { print $2; exit }' "$repo/Cargo.toml")
  image=${VL_IMAGE_DIR:-$repo/target/image}/oci:$version
fi
[ -f "${image%:*}/index.json" ] || { echo "run-image.sh: no OCI layout at ${image%:*} (run scripts/image.sh)" >&2; exit 1; }

# As a kubelet's runtime does: root runs runc, runc drops to uid 65532 (rootless runc would need
# `umoci unpack --rootless`, user namespaces and subordinate ids; not supported here).
[ "$(id -u)" -eq 0 ] || { echo "run-image.sh: up needs root (runc, umoci unpack)" >&2; exit 1; }
"$here/ensure-tools.sh" umoci runc

mkdir -p "$run"
run=$(cd "$run" && pwd)
[ ! -e "$run/id" ] || { echo "run-image.sh: $run already runs a container (run-image.sh down $run)" >&2; exit 1; }
# Unique per run directory: cgroups are named after it, and several may run at once.
id=vl-image-$(printf '%s' "$run" | sha256sum | cut -c1-12)
rm -rf "$run/bundle" "$run/runc" "$run/serviceaccount"
: >"$run/container.log"

fail() {
  echo "run-image.sh: $*" >&2
  [ -s "$run/container.log" ] && { echo "--- last lines of $run/container.log" >&2; tail -n 30 "$run/container.log" >&2; }
  down
  exit 1
}

# The files a pod finds in its projected service-account volume, readable by uid 65532.
mkdir -p "$run/serviceaccount"
install -m 0444 "$token_file" "$run/serviceaccount/token"
install -m 0444 "$ca_file" "$run/serviceaccount/ca.crt"
printf '%s' "$namespace" >"$run/serviceaccount/namespace"
chmod 0444 "$run/serviceaccount/namespace"
chmod 0755 "$run/serviceaccount"

umoci unpack --image "$image" "$run/bundle" >/dev/null || fail "umoci unpack --image $image failed"

python3 - "$run" "$image" "$host" "$port" "$id" "${#args[@]}" "${args[@]}" "--" "${envs[@]}" <<'EOF' || fail "could not write the runtime config"
import json, os, sys
run, image, host, port, cid, n = sys.argv[1:7]
rest = sys.argv[7:]
args, envs = rest[: int(n)], rest[int(n) + 1 :]
path = f"{run}/bundle/config.json"
c = json.load(open(path))
p = c["process"]
p["terminal"] = False
# The image's USER (and the Deployment's runAsUser/runAsGroup).
p["user"] = {"uid": 65532, "gid": 65532}
if args:  # a pod's args replace the image's CMD and keep its ENTRYPOINT
    layout, ref = image.rsplit(":", 1)
    blob = lambda d: json.load(open(f"{layout}/blobs/{d['digest'].replace(':', '/')}"))
    index = json.load(open(f"{layout}/index.json"))
    desc = next(d for d in index["manifests"]
                if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref)
    p["args"] = (blob(blob(desc)["config"])["config"].get("Entrypoint") or []) + args
# A pod's hostname (and $HOSTNAME) is its name; the operator names itself after it in its
# User-Agent. umoci's defaults (hostname umoci-default, TERM=xterm) are not what a pod has.
c["hostname"] = cid
p["env"] = [e for e in p.get("env", []) if not e.startswith(("KUBERNETES_SERVICE_", "TERM=", "HOSTNAME="))] + [
    f"HOSTNAME={cid}", f"KUBERNETES_SERVICE_HOST={host}", f"KUBERNETES_SERVICE_PORT={port}", *envs]
p["capabilities"] = {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
p["noNewPrivileges"] = True
c["root"]["readonly"] = True
c["mounts"].append({
    "destination": "/var/run/secrets/kubernetes.io/serviceaccount",
    "type": "bind",
    "source": f"{run}/serviceaccount",
    "options": ["rbind", "ro", "nosuid", "nodev", "noexec"],
})
# What the kubelet gives a hostNetwork pod: the node's /etc/hosts and /etc/resolv.conf.
for f in ("/etc/hosts", "/etc/resolv.conf"):
    if os.path.isfile(f):
        c["mounts"].append({"destination": f, "type": "bind", "source": os.path.realpath(f),
                            "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]})
lx = c.setdefault("linux", {})
lx["namespaces"] = [ns for ns in lx.get("namespaces", []) if ns["type"] not in ("network", "user", "cgroup")]
lx.pop("cgroupsPath", None)
lx.setdefault("resources", {})["memory"] = {"limit": 512 * 1024 * 1024}
json.dump(c, open(path, "w"), indent=1)
EOF

# Before the watchdog starts: it stops watching (and runs `down`) as soon as it finds no id file.
echo "$id" >"$run/id"
if [ -n "$owner" ]; then
  # shellcheck disable=SC2016 # $1.. are the watchdog's own arguments
  nohup bash -c 'while kill -0 "$1" 2>/dev/null && [ -e "$2/id" ]; do sleep 1; done; "$3" down "$2"' \
    watchdog "$owner" "$run" "$here/run-image.sh" >/dev/null 2>&1 &
  echo $! >"$run/watchdog"
fi

runc_ run --detach --bundle "$run/bundle" --pid-file "$run/pid" "$id" </dev/null >>"$run/container.log" 2>&1 ||
  fail "runc run failed"
[ "$(status "$id")" = running ] || fail "the container is not running (status: $(status "$id"))"

if [ -n "$ready_url" ]; then
  pid=$(cat "$run/pid")
  # Alive and not a zombie: the container's init is the operator itself.
  alive() { [ -r "/proc/$pid/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; }
  deadline=$((SECONDS + ready_timeout))
  until curl -fsS -o /dev/null --max-time 2 "$ready_url" 2>/dev/null; do
    alive || fail "the container exited before $ready_url answered"
    [ "$SECONDS" -lt "$deadline" ] || fail "$ready_url did not answer 2xx within ${ready_timeout}s"
    sleep 0.2
  done
fi
echo "container $id running (pid $(cat "$run/pid"), log $run/container.log)" >&2
