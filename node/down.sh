#!/usr/bin/env bash
# Stops what node/up.sh RUN_DIR started and removes what it left on the machine: the kubelet, the
# scheduler and kube-proxy (its iptables rules too), every container and pod sandbox (through containerd, then by killing whatever is
# still in the node's cgroups), the shims, containerd, every mount under RUN_DIR (container root
# filesystems, pod volumes, network namespaces), the node's cgroups, the CNI bridge and the
# kubelet's /var/log/containers links; restores net.ipv4.ip_forward (the CNI bridge plugin turns it
# on) and releases the one-kube-proxy-per-machine lock. Idempotent; keeps the logs and the
# configuration.
#
# It deletes the Node object when the control plane still answers.
set -uo pipefail
# iptables (kube-proxy, the kubelet, the rules checked and cleaned up here) and runc live in
# /usr/sbin, which a non-login PATH lacks.
export PATH="$PATH:/usr/sbin:/sbin"
run=${1:?usage: down.sh RUN_DIR}
[ -d "$run" ] || exit 0
run=$(cd "$run" && pwd)
[ -f "$run/env" ] || exit 0
# shellcheck disable=SC1091
. "$run/env"
# Only one down at a time (the watchdog and a caller may both run it).
exec 9>"$run/.down.lock"
flock 9

alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop() { # pid [grace seconds]
  kill -TERM "$1" 2>/dev/null || return 0
  for _ in $(seq $((${2:-10} * 10))); do alive "$1" || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  for _ in $(seq 50); do alive "$1" || return 0; sleep 0.1; done
}
pid_of() { [ -f "$run/pids" ] && awk -v n="$1" '$1 == n {print $2}' "$run/pids"; }

# 1. The kubelet, the scheduler and kube-proxy first, so that nothing restarts the containers.
for p in $(pid_of kubelet) $(pid_of kube-scheduler) $(pid_of kube-proxy); do stop "$p"; done

# The Node object goes too when the control plane still answers, so that its pods are garbage
# collected and a node of the same name registers afresh.
if [ -n "${CONTROLPLANE_RUN_DIR:-}" ] && [ -f "$CONTROLPLANE_RUN_DIR/admin.kubeconfig" ] && [ -f "$CONTROLPLANE_RUN_DIR/env" ]; then
  cp_bin=$(sed -n 's/^BIN_DIR=//p' "$CONTROLPLANE_RUN_DIR/env")
  [ -x "$cp_bin/kubectl" ] && "$cp_bin/kubectl" --kubeconfig "$CONTROLPLANE_RUN_DIR/admin.kubeconfig" \
    --request-timeout 5s delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1
fi

# 2. Containers and sandboxes, through containerd while it is up.
ctrd=$(pid_of containerd)
if [ -n "$ctrd" ] && alive "$ctrd" && [ -S "${CONTAINERD_ADDRESS:-}" ]; then
  ctr=("$NODE_BIN_DIR/ctr" --address "$CONTAINERD_ADDRESS" --namespace k8s.io --timeout 10s)
  mapfile -t ids < <("${ctr[@]}" containers list -q 2>/dev/null)
  for c in "${ids[@]}"; do "${ctr[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1; done
  for c in "${ids[@]}"; do
    for _ in $(seq 50); do
      st=$("${ctr[@]}" tasks list 2>/dev/null | awk -v c="$c" '$1 == c {print $3}')
      [ -z "$st" ] || [ "$st" = STOPPED ] && break
      sleep 0.1
    done
    "${ctr[@]}" tasks delete -f "$c" >/dev/null 2>&1
    "${ctr[@]}" containers delete "$c" >/dev/null 2>&1
  done
fi

# 3. containerd, then any shim of this containerd that is left (found by its -address).
[ -n "$ctrd" ] && stop "$ctrd"
if [ -n "${CONTAINERD_ADDRESS:-}" ]; then
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $CONTAINERD_ADDRESS " && stop "${p#/proc/}" 2
  done
fi

# 4. Whatever still runs in the node's cgroups (containers whose shim was killed).
if [ -n "${CGROUP_ROOT:-}" ]; then
  for _ in 1 2 3; do
    left=$(find /sys/fs/cgroup/*"$CGROUP_ROOT" /sys/fs/cgroup"$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
    [ -z "$left" ] && break
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
    sleep 0.5
  done
fi

# 5. Mounts under RUN_DIR and the kubelet's root (when it is elsewhere: up.sh says why), deepest
# first (rootfs overlays, shm, pod volumes, netns files).
kubelet_root=${KUBELET_ROOT:-$run/kubelet}
mounted() { awk -v r="$run/" -v k="$kubelet_root" 'index($5, r) == 1 || $5 == k || index($5, k "/") == 1 {print $5}' /proc/self/mountinfo; }
for _ in 1 2 3; do
  mapfile -t mnts < <(mounted | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  [ ${#mnts[@]} -eq 0 ] && break
  for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# 6. The node's cgroups, children first.
if [ -n "${CGROUP_ROOT:-}" ]; then
  for top in /sys/fs/cgroup/*"$CGROUP_ROOT" /sys/fs/cgroup"$CGROUP_ROOT"; do
    [ -d "$top" ] || continue
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
fi

# 7. kube-proxy's iptables rules (all its chains, in iptables, ip6tables and nftables), and the
# KUBE-FIREWALL chain it shares with the kubelet (kube-proxy's cleanup leaves that one, for the
# kubelet's sake; the kubelet here makes none). Only a node that ran kube-proxy does this: it held
# the machine's kube-proxy lock, so no other node's rules are there.
if [ "${KUBE_PROXY:-false}" = true ] && [ -x "$NODE_BIN_DIR/kube-proxy" ]; then
  "$NODE_BIN_DIR/kube-proxy" --cleanup >"$run/kube-proxy-cleanup.log" 2>&1
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for c in INPUT OUTPUT; do
      while "$ipt" -w 5 -t filter -D "$c" -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    "$ipt" -w 5 -t filter -F KUBE-FIREWALL 2>/dev/null && "$ipt" -w 5 -t filter -X KUBE-FIREWALL 2>/dev/null
  done
fi

# 8. The bridge (veths went with their network namespaces) and the kubelet's log links.
# A bridge that was there before up.sh (controlplane/up.sh --node made it: its apiserver listens
# on it until controlplane/down.sh) stays.
[ -n "${CNI_BRIDGE:-}" ] && [ "${CNI_BRIDGE_OWNED:-true}" = true ] && ip link show "$CNI_BRIDGE" >/dev/null 2>&1 &&
  ip link delete "$CNI_BRIDGE"
if [ -d /var/log/containers ]; then
  for l in /var/log/containers/*; do
    [ -L "$l" ] && case "$(readlink "$l")" in "$run"/*) rm -f "$l" ;; esac
  done
fi

# 9. net.ipv4.ip_forward as it was before the node (the bridge plugin sets it to 1 for a gateway),
# unless another node's bridge is still there.
if [ -n "${IP_FORWARD_BEFORE:-}" ] &&
  ! ip -o link show type bridge 2>/dev/null | grep -E '^[0-9]+: vl[0-9a-f]{8}[:@]' | grep -vqE "^[0-9]+: ${CNI_BRIDGE:-none}[:@]"; then
  echo "$IP_FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward 2>/dev/null
fi

# 10. The machine's kube-proxy lock (a process that holds it), the watchdog, and the state that is
# no use without the processes.
for p in $(pid_of machine-lock); do stop "$p" 2; done
rm -f "$run/machine-lock.held"
if [ -f "$run/watchdog" ]; then
  w=$(awk '{print $2}' "$run/watchdog")
  [ "$w" != "$PPID" ] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null
  rm -f "$run/watchdog"
fi
rm -f "$run/pids"
if [ -z "$(mounted)" ]; then
  rm -rf "$run/containerd/root" "$run/containerd/state" "$run/runc" "$kubelet_root/pods"
  # A kubelet root outside RUN_DIR holds nothing worth keeping (its sockets, checkpoints, pods).
  case "$kubelet_root" in /run/vl-kubelet-*) rm -rf "$kubelet_root" ;; esac
  case "${CONTAINERD_ADDRESS:-}" in /run/vl-containerd-*/containerd.sock) rm -rf "${CONTAINERD_ADDRESS%/containerd.sock}" ;; esac
fi
exit 0
