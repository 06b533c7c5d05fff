#!/usr/bin/env bash
# Starts a real single node for a control plane that controlplane/up.sh started: containerd (CRI,
# runc, a CNI bridge), kube-scheduler and a kubelet, all as root, everything under RUN_DIR, and
# waits until the Node is Ready; with --kube-proxy also kube-proxy (iptables mode), and waits until
# it has programmed the `kubernetes` Service.
#
#   node/up.sh RUN_DIR CONTROLPLANE_RUN_DIR [--owner-pid PID] [--kube-proxy]
#
# With --owner-pid, a watchdog runs node/down.sh RUN_DIR as soon as that process is gone, or the
# control plane is (its CONTROLPLANE_RUN_DIR/pids disappears).
#
# The control plane needs nothing from this script but its CA (CONTROLPLANE_RUN_DIR/pki/ca.key
# signs the kubelet's, the scheduler's and kube-proxy's certificates). Its authorizer decides how
# the kubelet is authorised: with `--authorization-mode Node,RBAC` the Node authorizer does it;
# with RBAC alone this script binds the ClusterRole system:node to the node's user (broader than
# the Node authorizer, fine for a test node). `kubectl logs` needs `--kubelet-client-certificate/-key`
# on the apiserver (see node/NOTES.md). `controlplane/up.sh RUN_DIR --node` does all of it.
#
# kube-proxy programs the machine's (one network namespace's) iptables, which every node on this
# machine would share: only one node with --kube-proxy runs at a time. Another one waits for it
# (NODE_PROXY_LOCK_TIMEOUT seconds, default 600) on the lock ${NODE_LOCK_DIR:-/run/lock}/volume-leftovers-kube-proxy.lock.
# node/down.sh removes kube-proxy's rules (kube-proxy --cleanup) and the KUBE-FIREWALL chain it
# shares with the kubelet, then releases the lock.
#
# RUN_DIR then holds:
#   kubelet.kubeconfig, scheduler.kubeconfig,  client certificates signed by the control plane's CA
#   kube-proxy.kubeconfig
#   containerd.toml, kubelet.yaml,             the configuration
#   kube-proxy.yaml, cni/net.d
#   containerd.sock                            the CRI endpoint (`ctr -a RUN_DIR/containerd.sock`;
#                                              /run/vl-containerd-ID/ when RUN_DIR is too deep)
#   containerd/certs.d/                        containerd's registry host configuration (its
#                                              config_path, read at each pull; empty): a registry
#                                              without TLS is HOST:PORT/hosts.toml there, e.g.
#                                                server = "http://127.0.0.1:5000"
#                                                [host."http://127.0.0.1:5000"]
#                                                  capabilities = ["pull", "resolve"]
#   env                                        NODE_NAME, NODE_BIN_DIR, CONTAINERD_ADDRESS,
#                                              REGISTRY_CONFIG_PATH, NODE_IP, POD_SUBNET, ports, ...
#   *.log                                      component logs
#
# Environment: NODE_NAME (default vl-node), NODE_READY_TIMEOUT (seconds, default 120).
set -euo pipefail
# iptables (kube-proxy, the kubelet, the rules checked and cleaned up here) and runc live in
# /usr/sbin, which a non-login PATH lacks.
export PATH="$PATH:/usr/sbin:/sbin"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage="usage: node/up.sh RUN_DIR CONTROLPLANE_RUN_DIR [--owner-pid PID] [--kube-proxy]"
run=${1:?$usage}
cp_run=${2:?$usage}
shift 2
owner=""
proxy=false
while [ $# -gt 0 ]; do
  case "$1" in
    --owner-pid) owner=${2:?--owner-pid needs a PID}; shift 2 ;;
    --kube-proxy) proxy=true; shift ;;
    *) echo "node/up.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
node=${NODE_NAME:-vl-node}
ready_timeout=${NODE_READY_TIMEOUT:-120}
lock_timeout=${NODE_PROXY_LOCK_TIMEOUT:-600}
machine_lock="${NODE_LOCK_DIR:-/run/lock}/volume-leftovers-kube-proxy.lock"

[ "$(id -u)" = 0 ] || { echo "node/up.sh: must run as root (containerd, runc and the kubelet need it)" >&2; exit 1; }
cp_run=$(cd "$cp_run" && pwd)
[ -f "$cp_run/env" ] && [ -f "$cp_run/pki/ca.key" ] || { echo "node/up.sh: $cp_run holds no running control plane" >&2; exit 1; }
# shellcheck disable=SC1091
. "$cp_run/env" # BIN_DIR (kubectl), APISERVER_URL
kubectl="$BIN_DIR/kubectl"
admin=(--kubeconfig "$cp_run/admin.kubeconfig")

bin=$("$here/build.sh")
images=$(cd "$bin/../images" && pwd)
cni_bin=$(cat "$bin/../cni-bin-dir")
mkdir -p "$run"
run=$(cd "$run" && pwd)
[ ! -e "$run/env" ] || { echo "node/up.sh: $run already holds a node" >&2; exit 1; }

# Names that must not collide with another node on this machine: the cgroup root, the bridge and
# its subnet; the node's address is the bridge's (node/net.sh says why).
eval "$("$here/net.sh" "$run")"
id=$NODE_ID cgroup_root=$CGROUP_ROOT bridge=$CNI_BRIDGE subnet=$POD_SUBNET node_ip=$NODE_IP
net=${node_ip%.1}
# The kubelet makes unix sockets under its root directory (pod-resources/<10 digits> is the
# longest, 26 bytes), and a socket path has at most 107 bytes: a deep RUN_DIR (a cargo target
# directory under ~/.cache, say) would make the kubelet fail with "bind: invalid argument". Such a
# RUN_DIR gets its kubelet root at /run/vl-kubelet-ID instead (node/down.sh removes it).
kubelet_root="$run/kubelet"
[ $((${#kubelet_root} + 26)) -le 107 ] || kubelet_root="/run/vl-kubelet-$id"
# containerd's socket likewise (its ttrpc socket adds 6 bytes): a RUN_DIR under a long HOME (seen
# with /tmp/cold/home, a cold run's) gets it in /run/vl-containerd-ID (node/down.sh removes it).
sock="$run/containerd.sock"
if [ ${#sock} -gt 100 ]; then
  mkdir -p "/run/vl-containerd-$id"
  sock="/run/vl-containerd-$id/containerd.sock"
fi
if ! ip link show "$bridge" >/dev/null 2>&1 && ip -4 -o addr show | grep -qF " $net."; then
  echo "node/up.sh: $subnet (derived from RUN_DIR) is already used on this machine; choose another RUN_DIR" >&2
  exit 1
fi

pids=()
fail() {
  echo "node/up.sh: $*" >&2
  for f in containerd kubelet kube-scheduler kube-proxy; do
    [ -s "$run/$f.log" ] && { echo "--- last lines of $run/$f.log" >&2; tail -n 20 "$run/$f.log" >&2; }
  done
  "$here/down.sh" "$run" >&2 || true
  exit 1
}
start() { # name args...
  local name=$1; shift
  "$@" >"$run/$name.log" 2>&1 &
  pids+=("$!")
  echo "$name $!" >>"$run/pids"
}
wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a process exited while waiting for $what"; done
    sleep 0.2
  done
  fail "timed out after ${secs}s waiting for $what"
}

# Written first: down.sh needs it to find what to clean up, even after a failure below.
cat >"$run/env" <<EOF
NODE_NAME=$node
NODE_BIN_DIR=$bin
CONTROLPLANE_RUN_DIR=$cp_run
CONTAINERD_ADDRESS=$sock
REGISTRY_CONFIG_PATH=$run/containerd/certs.d
CGROUP_ROOT=$cgroup_root
CNI_BRIDGE=$bridge
KUBELET_ROOT=$kubelet_root
CNI_BRIDGE_OWNED=$(ip link show "$bridge" >/dev/null 2>&1 && echo false || echo true)
POD_SUBNET=$subnet
NODE_IP=$node_ip
KUBE_PROXY=$proxy
IP_FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
EOF
touch "$run/pids"
if [ -n "$owner" ]; then
  nohup bash -c 'while kill -0 "$1" 2>/dev/null && [ -e "$2/pids" ] && [ -e "$4/pids" ]; do sleep 1; done; "$3/down.sh" "$2"' \
    watchdog "$owner" "$run" "$here" "$cp_run" >/dev/null 2>&1 &
  echo "watchdog $!" >"$run/watchdog"
fi

# --- one kube-proxy per machine ----------------------------------------------------------------
# The lock is held by a process of its own (recorded in pids as machine-lock), which down.sh
# stops only after it has removed kube-proxy's rules.
if $proxy; then
  mkdir -p "$(dirname "$machine_lock")"
  rm -f "$run/machine-lock.held"
  (
    exec 9>>"$machine_lock"
    flock -w "$lock_timeout" 9 || exit 1
    echo "$run" >"$run/machine-lock.held"
    exec sleep infinity
  ) </dev/null >/dev/null 2>&1 &
  lock_pid=$!
  echo "machine-lock $lock_pid" >>"$run/pids"
  waited=0
  until [ -f "$run/machine-lock.held" ]; do
    kill -0 "$lock_pid" 2>/dev/null || fail "another node with kube-proxy held $machine_lock for more than ${lock_timeout}s (one kube-proxy per machine: they would share its iptables)"
    [ "$waited" = 50 ] && echo "node/up.sh: waiting for $machine_lock (another node with kube-proxy runs on this machine)" >&2
    waited=$((waited + 1))
    sleep 0.1
  done
fi

# --- cgroups ----------------------------------------------------------------------------------
# The kubelet puts its kubepods hierarchy under a cgroup root of this node's own, created here in
# every mounted hierarchy (cgroup v1 here: cpu, cpuacct, cpuset, memory, ... and the unified one).
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  cgroup_version=2
  mkdir -p "/sys/fs/cgroup$cgroup_root"
  for c in $(cat /sys/fs/cgroup/cgroup.subtree_control); do
    echo "+$c" >"/sys/fs/cgroup$cgroup_root/cgroup.subtree_control" 2>/dev/null || true
  done
else
  cgroup_version=1
  for h in /sys/fs/cgroup/*/; do
    [ -e "$h/cgroup.procs" ] || continue
    mkdir -p "$h${cgroup_root#/}"
  done
  # A new v1 cpuset has no cpus or mems: give it the root's.
  if [ -d /sys/fs/cgroup/cpuset ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$cgroup_root/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$cgroup_root/cpuset.mems"
  fi
fi
echo "CGROUP_VERSION=$cgroup_version" >>"$run/env"

# --- certificates -----------------------------------------------------------------------------
pki="$run/pki"
mkdir -p "$pki"
chmod 700 "$pki"
(
  cd "$pki"
  exec 2>openssl.log
  sign() { # name subject [extfile-lines]
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
    printf '%s\n' "${@:3}" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$cp_run/pki/ca.crt" -CAkey "$cp_run/pki/ca.key" \
      -CAcreateserial -CAserial "$pki/ca.srl" -out "$1.crt" -days 2 -extfile "$1.ext"
  }
  sign kubelet-client "/O=system:nodes/CN=system:node:$node" "extendedKeyUsage=clientAuth"
  sign kubelet-serving "/O=system:nodes/CN=system:node:$node" "subjectAltName=IP:$node_ip,IP:127.0.0.1,DNS:$node" "extendedKeyUsage=serverAuth"
  sign scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  # Bound to ClusterRole system:node-proxier by the default RBAC policy.
  sign kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
) || fail "signing the node's certificates failed (see $pki/openssl.log)"

kubeconfig() { # file name
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $APISERVER_URL
    certificate-authority: $cp_run/pki/ca.crt
users:
- name: user
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
EOF
}
kubeconfig "$run/kubelet.kubeconfig" kubelet-client
kubeconfig "$run/scheduler.kubeconfig" scheduler
kubeconfig "$run/kube-proxy.kubeconfig" kube-proxy

# --- authorisation ----------------------------------------------------------------------------
# With the Node authorizer a node may read its own Node; with RBAC alone it may not until bound.
if [ "$("$kubectl" --kubeconfig "$run/kubelet.kubeconfig" auth can-i get "node/$node" 2>/dev/null)" != yes ]; then
  echo "node/up.sh: the apiserver has no Node authorizer; binding ClusterRole system:node to system:node:$node" >&2
  "$kubectl" "${admin[@]}" create clusterrolebinding "vl-node:$node" --clusterrole system:node \
    --user "system:node:$node" --dry-run=client -o yaml | "$kubectl" "${admin[@]}" apply -f - >/dev/null ||
    fail "could not bind system:node"
fi
# The apiserver reaches the kubelet (logs, exec) as kube-apiserver-kubelet-client when it has
# --kubelet-client-certificate; the kubelet asks the apiserver whether that user may.
"$kubectl" "${admin[@]}" create clusterrolebinding vl-node:kube-apiserver-kubelet-client \
  --clusterrole system:kubelet-api-admin --user kube-apiserver-kubelet-client --dry-run=client -o yaml |
  "$kubectl" "${admin[@]}" apply -f - >/dev/null || fail "could not bind system:kubelet-api-admin"

# --- ports ------------------------------------------------------------------------------------
# Below the kernel's ephemeral range (scripts/free-ports.py says why).
ports=$("$here/../scripts/free-ports.py" 5) || fail "no free ports for the servers"
read -r kubelet_port healthz_port sched_port proxy_healthz_port proxy_metrics_port <<<"$ports"
cat >>"$run/env" <<EOF
KUBELET_PORT=$kubelet_port
KUBELET_HEALTHZ_PORT=$healthz_port
SCHEDULER_PORT=$sched_port
KUBE_PROXY_HEALTHZ_PORT=$proxy_healthz_port
KUBE_PROXY_METRICS_PORT=$proxy_metrics_port
EOF

# --- CNI: one bridge, host-local addresses, no masquerading (pods need no way out) ------------
# The bridge is made here, with the node's address, so that the kubelet can serve on it before
# the first pod; the bridge plugin finds it and keeps the address (its gateway, .1). When it is
# there already (controlplane/up.sh --node made it, for its apiserver), its maker removes it.
ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge || fail "cannot create bridge $bridge"
ip addr replace "$node_ip/24" dev "$bridge" && ip link set "$bridge" up || fail "cannot configure bridge $bridge"
mkdir -p "$run/cni/net.d" "$run/cni/ipam"
cat >"$run/cni/net.d/10-vl-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "vl-node-$id",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$run/cni/ipam",
        "ranges": [[{"subnet": "$subnet"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF

# --- containerd -------------------------------------------------------------------------------
mkdir -p "$run/containerd/root" "$run/containerd/state" "$run/containerd/opt" "$run/containerd/certs.d" "$run/runc"
cat >"$run/containerd.toml" <<EOF
version = 4
root = "$run/containerd/root"
state = "$run/containerd/state"
imports = []
# Plugins that would touch paths outside RUN_DIR or are of no use here.
disabled_plugins = [
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[debug]
  level = "info"

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = "$sock"
  [plugins.'io.containerd.server.v1.ttrpc']
    address = "$sock.ttrpc"
  [plugins.'io.containerd.server.v1.grpc-tcp']
    address = ""
  [plugins.'io.containerd.server.v1.debug']
    address = ""
  [plugins.'io.containerd.server.v1.metrics']
    address = ""
  [plugins.'io.containerd.internal.v1.opt']
    path = "$run/containerd/opt"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "registry.k8s.io/pause:3.10.2"
    # Where a registry's hosts.toml goes (HOST:PORT/hosts.toml: its scheme, capabilities, CA),
    # read at each pull, so a test adds one while the node runs (tests/e2e/release.rs).
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$run/containerd/certs.d"
  [plugins.'io.containerd.cri.v1.runtime']
    # This machine withholds CAP_SYS_RESOURCE, so no process may lower its oom_score_adj below 0
    # and runc fails on the sandbox's -998 ("can't get final child's PID from pipe: EOF").
    # Clamp the scores to containerd's own (0).
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "$bin/containerd-shim-runc-v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$bin/runc"
          Root = "$run/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["$cni_bin"]
      conf_dir = "$run/cni/net.d"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
start containerd env PATH="$bin:$PATH" "$bin/containerd" --config "$run/containerd.toml"
ctr=("$bin/ctr" --address "$sock" --namespace k8s.io)
wait_for containerd 60 "${ctr[@]}" version
for i in pause probe; do
  "${ctr[@]}" images import "$images/$i.tar" >>"$run/images.log" 2>&1 ||
    fail "importing $images/$i.tar into containerd failed (see $run/images.log)"
done

# --- kube-scheduler ---------------------------------------------------------------------------
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig "$run/scheduler.kubeconfig" \
  --authentication-kubeconfig "$run/scheduler.kubeconfig" --authorization-kubeconfig "$run/scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$sched_port"

# --- kubelet ----------------------------------------------------------------------------------
mkdir -p "$kubelet_root/volume-plugins" "$run/pod-logs"
[ "$kubelet_root" = "$run/kubelet" ] || ln -sfn "$kubelet_root" "$run/kubelet"
cat >"$run/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Served on the node's address only (see node_ip above); the apiserver is authenticated by the
# control plane's CA and every request is authorised by the apiserver (webhook). No read-only
# port; /healthz on 127.0.0.1.
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $cp_run/pki/ca.crt}
authorization: {mode: Webhook}
# The runtime: the containerd above, cgroupfs (no systemd here), and cgroup v1 allowed: this
# machine mounts cgroup v1 hierarchies (kubelet 1.36 refuses v1 unless failCgroupV1 is false).
containerRuntimeEndpoint: unix://$sock
imageServiceEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: true
cgroupRoot: $cgroup_root
enforceNodeAllocatable: ["pods"]
failSwapOn: false
protectKernelDefaults: false
localStorageCapacityIsolation: true
resolvConf: /etc/resolv.conf
podLogsDir: $run/pod-logs
volumePluginDir: $kubelet_root/volume-plugins
# Other people's builds share the disk and memory: never evict the test pods, never garbage
# collect the images that were imported by hand (they cannot be pulled again).
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 8760h
serializeImagePulls: false
registerNode: true
# No KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY or KUBE-FIREWALL chains from the kubelet: they are
# machine-wide and outlive it (kube-proxy, when it runs, makes the one rule of KUBE-FIREWALL that
# matters to it, and node/down.sh removes it).
makeIPTablesUtilChains: false
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 10s
EOF
start kubelet "$bin/kubelet" --config "$run/kubelet.yaml" \
  --kubeconfig "$run/kubelet.kubeconfig" --root-dir "$kubelet_root" --cert-dir "$pki" \
  --hostname-override "$node" --node-ip "$node_ip" --v 2
wait_for "kubelet /healthz" 60 curl -fsS "http://127.0.0.1:$healthz_port/healthz"
wait_for "kube-scheduler /healthz" 60 curl -fsSk "https://127.0.0.1:$sched_port/healthz"

node_ready() {
  [ "$("$kubectl" "${admin[@]}" get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_for "node $node to be Ready" "$ready_timeout" node_ready

# --- kube-proxy (iptables mode) ---------------------------------------------------------------
# Started once the Node exists (it reads its addresses). ClusterIPs then work from this machine
# and from the pods: the `kubernetes` Service (KUBERNETES_SERVICE_HOST of every pod) is DNATed to
# the apiserver's address, which must not be a loopback one (controlplane/up.sh --node binds the
# apiserver on this node's address). No NodePorts on loopback (that would set route_localnet), no
# conntrack sysctls touched (0 = leave them), no OOM score change (this machine withholds
# CAP_SYS_RESOURCE), health and metrics on 127.0.0.1.
if $proxy; then
  cat >"$run/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $run/kube-proxy.kubeconfig
hostnameOverride: $node
mode: iptables
healthzBindAddress: 127.0.0.1:$proxy_healthz_port
metricsBindAddress: 127.0.0.1:$proxy_metrics_port
detectLocalMode: ClusterCIDR
clusterCIDR: $subnet
nodePortAddresses: ["$node_ip/32"]
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 1s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  start kube-proxy "$bin/kube-proxy" --config "$run/kube-proxy.yaml" --v 2
  wait_for "kube-proxy /healthz" 60 curl -fsS "http://127.0.0.1:$proxy_healthz_port/healthz"
  # Its first sync includes the apiserver's own Service.
  kubernetes_service() { iptables -w 5 -t nat -S KUBE-SERVICES 2>/dev/null | grep -qF 'default/kubernetes:https cluster IP'; }
  wait_for "kube-proxy to program the kubernetes Service" 60 kubernetes_service
fi
echo "node $node ready (run dir $run)" >&2
