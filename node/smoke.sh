#!/usr/bin/env bash
# End-to-end check of a real node: starts a control plane (controlplane/up.sh) and a node
# (node/up.sh), runs node/manifests/probe-{host,pod}.yaml, waits until both are Ready (which
# proves their securityContext and the ServiceAccount token inside them), reads their /checks,
# deletes them, stops everything and checks that nothing is left. Prints timings. As root.
#
#   node/smoke.sh [WORK_DIR]      (default: a new directory under /tmp)
#
# CONTROLPLANE_DIR: where up.sh/down.sh of the control plane are (default controlplane/), e.g. a
# copy with the flags of node/NOTES.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cp_dir=${CONTROLPLANE_DIR:-$here/../controlplane}
work=${1:-$(mktemp -d /tmp/vl-node-smoke.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}s')" "$1" "$2"; }
passed=0 failures=0
check() { # description command...
  if "${@:2}"; then echo "ok:   $1"; passed=$((passed + 1)); else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
cleanup() {
  "$here/down.sh" "$work/node" || true
  "$cp_dir/down.sh" "$work/cp" || true
}
trap cleanup EXIT

t0=$(now)
"$cp_dir/up.sh" "$work/cp" --owner-pid $$ >/dev/null
t1=$(now)
"$here/up.sh" "$work/node" "$work/cp" --owner-pid $$ >/dev/null
t2=$(now)
echo "control plane up: $(secs "$t0" "$t1"); node up to Ready: $(secs "$t1" "$t2")"

# shellcheck disable=SC1091
. "$work/cp/env"
# shellcheck disable=SC1091
. "$work/node/env"
k() { "$BIN_DIR/kubectl" --kubeconfig "$work/cp/admin.kubeconfig" "$@"; }
ctr=("$NODE_BIN_DIR/ctr" --address "$CONTAINERD_ADDRESS" --namespace k8s.io)

t3=$(now)
k apply -f "$here/manifests/probe-host.yaml" -f "$here/manifests/probe-pod.yaml" >/dev/null
check "both pods Ready" k wait --for=condition=Ready pod/probe-host pod/probe-pod --timeout=90s
t4=$(now)
echo "pods created to Ready: $(secs "$t3" "$t4")"

checks_pass() { # address
  curl -fsS "http://$1/checks" | python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(0 if d["pass"] else 1)'
}
pod_ip=$(k get pod probe-pod -o jsonpath='{.status.podIP}')
host_ip=$(k get pod probe-host -o jsonpath='{.status.podIP}')
check "hostNetwork pod has the node's address ($host_ip)" test "$host_ip" = "$NODE_IP"
check "pod on the bridge has an address of $POD_SUBNET ($pod_ip)" test "${pod_ip%.*}" = "${NODE_IP%.*}"
check "hostNetwork pod: uid 65532, read-only root, no capabilities, seccomp, token" checks_pass "$host_ip:18080"
check "bridge pod: uid 65532, read-only root, no capabilities, seccomp, token" checks_pass "$pod_ip:18080"
if k logs probe-pod >/dev/null 2>&1; then
  echo "ok:   kubectl logs (the apiserver reaches the kubelet)"
else
  echo "note: kubectl logs fails: $(k logs probe-pod 2>&1 | head -n1)"
fi

t5=$(now)
check "pods deleted" k delete pod probe-host probe-pod --timeout=60s
t6=$(now)
echo "pods deleted in: $(secs "$t5" "$t6")"
tasks_gone() { [ -z "$("${ctr[@]}" tasks list -q 2>/dev/null)" ]; }
check "no container task left in containerd" tasks_gone

t7=$(now)
"$here/down.sh" "$work/node"
t8=$(now)
"$cp_dir/down.sh" "$work/cp"
echo "node down: $(secs "$t7" "$t8")"
procs_left() { # any process but this script whose command line names the work dir
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$work/" && return 0
  done
  return 1
}
nothing_left() {
  ! grep -qF "$work/" /proc/self/mountinfo &&
    ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1 &&
    ! ls -d /sys/fs/cgroup/*"$CGROUP_ROOT" >/dev/null 2>&1 &&
    ! procs_left
}
check "no process, mount, cgroup or bridge left" nothing_left
echo "node smoke: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
