#!/usr/bin/env bash
# Starts a local control plane (etcd, kube-apiserver, kube-controller-manager) on 127.0.0.1, on
# free ports, in a fresh run directory, and waits until it is ready.
#
#   controlplane/up.sh RUN_DIR [--owner-pid PID] [--node]
#
# With --owner-pid, a watchdog stops everything (controlplane/down.sh RUN_DIR) as soon as that
# process is gone — also when it panicked, was interrupted or was killed — so no process or port
# outlives the test run or demo that asked for the control plane.
#
# With --node (as root), also a real node in RUN_DIR/node (node/up.sh: containerd, kubelet,
# kube-scheduler, kube-proxy in iptables mode), and returns once the Node is Ready and kube-proxy
# has programmed the `kubernetes` Service. The control plane then differs in what a node needs
# (node/NOTES.md): the apiserver listens and advertises on the node's address (the gateway address
# of the node's own pod bridge, made here first; pods reach the apiserver through the `kubernetes`
# Service, and kube-proxy cannot send that to a loopback address), so APISERVER_URL and every
# kubeconfig name that address; its serving certificate also names it and the Service's names
# (10.0.0.1, kubernetes.default.svc, ...); authorization is Node,RBAC with the NodeRestriction
# admission plugin; and it has a client certificate for the kubelets (logs, exec) and checks
# theirs against the CA. down.sh stops the node first.
#
# RUN_DIR then holds:
#   admin.kubeconfig       system:masters client certificate
#   operator.kubeconfig    static token of system:serviceaccount:$OPERATOR_NAMESPACE:$OPERATOR_SA
#                          (what deploy/ names; RBAC authorises it exactly like that ServiceAccount)
#   restricted.kubeconfig  static token of the plain user "vl-restricted", with no rights at all
#   audit.log              Metadata-level audit log of every request (rotated only past 100 GiB,
#                          never deleted or compressed: the tests' readers read every file)
#   env                    BIN_DIR, APISERVER_URL and the PIDs, for scripts (with --node also
#                          NODE_RUN_DIR, NODE_IP, NODE_NAME)
#   node/                  with --node: the node's run directory (node/up.sh)
#   *.log                  component logs
#
# Environment: OPERATOR_NAMESPACE / OPERATOR_SA (default volume-leftovers / volume-leftovers),
# WATCH_CACHE (default true; false sends watches straight to etcd, so a compaction yields a 410),
# PV_SYNC_PERIOD (default 2s, so that small tests bind quickly; upstream's default is 15s),
# KCM_CONTROLLERS (default '*'; e.g. '*,-persistentvolume-binder-controller' for states that no
# controller would produce).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=${1:?usage: up.sh RUN_DIR [--owner-pid PID] [--node]}
shift
owner=""
with_node=false
while [ $# -gt 0 ]; do
  case "$1" in
    --owner-pid) owner=${2:?--owner-pid needs a PID}; shift 2 ;;
    --node) with_node=true; shift ;;
    *) echo "up.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ns=${OPERATOR_NAMESPACE:-volume-leftovers}
sa=${OPERATOR_SA:-volume-leftovers}
watch_cache=${WATCH_CACHE:-true}
controllers=${KCM_CONTROLLERS:-*}
pv_sync=${PV_SYNC_PERIOD:-2s}

# A cold build records its peak memory with GNU time, which minimal Debian images lack (as root
# it is installed; otherwise build.sh says what is missing when it has to build).
[ "$(id -u)" != 0 ] || "$here/../scripts/ensure-tools.sh" time
bin=$("$here/build.sh")
if $with_node; then
  [ "$(id -u)" = 0 ] || { echo "up.sh: --node must run as root (containerd, runc and the kubelet need it)" >&2; exit 1; }
  "$here/../node/build.sh" >/dev/null # before anything starts: a cold build takes minutes
fi
mkdir -p "$run"
run=$(cd "$run" && pwd)
[ ! -e "$run/env" ] || { echo "up.sh: $run already holds a control plane" >&2; exit 1; }
pki="$run/pki"
mkdir -p "$pki" "$run/etcd"
chmod 700 "$pki" "$run/etcd"

bind=127.0.0.1
if $with_node; then
  # The node's address (node/net.sh derives it from the node's run directory) on the node's bridge,
  # made now so that the apiserver can listen there; node/up.sh finds the bridge, node/down.sh or
  # down.sh (node-bridge) removes it.
  node_run="$run/node"
  mkdir -p "$node_run"
  eval "$("$here/../node/net.sh" "$node_run")"
  if ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && ip -4 -o addr show | grep -qF " ${NODE_IP%.1}."; then
    echo "up.sh: $POD_SUBNET (derived from $node_run) is already used on this machine; choose another RUN_DIR" >&2
    exit 1
  fi
  echo "$CNI_BRIDGE" >"$run/node-bridge"
  { ip link show "$CNI_BRIDGE" >/dev/null 2>&1 || ip link add "$CNI_BRIDGE" type bridge; } &&
    ip addr replace "$NODE_IP/24" dev "$CNI_BRIDGE" && ip link set "$CNI_BRIDGE" up || {
    echo "up.sh: cannot make bridge $CNI_BRIDGE with $NODE_IP" >&2
    "$here/down.sh" "$run" >&2 || true
    exit 1
  }
  bind=$NODE_IP
fi

fail() {
  echo "up.sh: $*" >&2
  for f in etcd kube-apiserver kube-controller-manager; do
    [ -s "$run/$f.log" ] && { echo "--- last lines of $run/$f.log" >&2; tail -n 15 "$run/$f.log" >&2; }
  done
  "$here/down.sh" "$run" >&2 || true
  exit 1
}

# --- PKI -------------------------------------------------------------------------------------
(
  cd "$pki"
  exec 2>openssl.log
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=volume-leftovers-test-ca"
  sign() { # name subject [extfile-lines]
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
    printf '%s\n' "${@:3}" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext"
  }
  if $with_node; then
    # Also the node's address and the names and ClusterIP of the `kubernetes` Service, which pods
    # use (KUBERNETES_SERVICE_HOST=10.0.0.1).
    sign serving "/CN=kube-apiserver" "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:$bind,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" "extendedKeyUsage=serverAuth"
  else
    sign serving "/CN=kube-apiserver" "subjectAltName=DNS:localhost,IP:127.0.0.1" "extendedKeyUsage=serverAuth"
  fi
  sign admin "/O=system:masters/CN=admin" "extendedKeyUsage=clientAuth"
  sign kcm "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  if $with_node; then
    # The apiserver's identity towards the kubelets (node/up.sh grants it system:kubelet-api-admin).
    sign kubelet-client "/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  fi
  openssl genrsa -out sa.key 2048
  openssl rsa -in sa.key -pubout -out sa.pub
) || fail "generating certificates failed (see $pki/openssl.log)"

# --- ports -----------------------------------------------------------------------------------
# Free ports below the kernel's ephemeral range (scripts/free-ports.py says why): they are released
# just before the servers bind them, a race that only another server asking for the same number
# could win.
ports=$("$here/../scripts/free-ports.py" 4) || fail "no free ports for the servers"
read -r etcd_port peer_port api_port kcm_port <<<"$ports"

token() { openssl rand -hex 24; }
operator_token=$(token)
restricted_token=$(token)
cat >"$pki/tokens.csv" <<EOF
$operator_token,system:serviceaccount:$ns:$sa,vl-operator-uid,"system:serviceaccounts,system:serviceaccounts:$ns"
$restricted_token,vl-restricted,vl-restricted-uid
EOF
cat >"$run/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
EOF

pids=()
start() { # name args...
  local name=$1; shift
  "$@" >"$run/$name.log" 2>&1 &
  pids+=("$!")
  echo "$name $!" >>"$run/pids"
}

# --- etcd ------------------------------------------------------------------------------------
# With the watch cache on, etcd sends a progress notification on every watch each 5 s, as
# kubeadm and kube-up on GCE configure it (etcd's default is 10 min): the API server's caches then
# learn of new revisions as they do on a real cluster. (It does not stop the API server from
# listing its cache of PVs from etcd again every 5 to 7 minutes at 100,000 PVs: docs/benchmarks.md,
# fleet-100k.) Without the watch cache (the tests that need a compaction to end a client's watch
# with a 410) it stays off, as kcp does.
progress_notify=()
[ "$watch_cache" = true ] && progress_notify=(--watch-progress-notify-interval 5s)
start etcd "$bin/etcd" --name vl --data-dir "$run/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "vl=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn "${progress_notify[@]}"

# The watchdog starts right away so that a failure below still cleans up.
if [ -n "$owner" ]; then
  nohup bash -c 'while kill -0 "$1" 2>/dev/null && [ -e "$2/pids" ]; do sleep 1; done; "$3/down.sh" "$2"' \
    watchdog "$owner" "$run" "$here" >/dev/null 2>&1 &
  echo "watchdog $!" >>"$run/watchdog"
fi

wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a process exited while waiting for $what"; done
    sleep 0.2
  done
  fail "timed out after ${secs}s waiting for $what"
}
wait_for etcd 60 curl -fsS "http://127.0.0.1:$etcd_port/health"

# --- kube-apiserver --------------------------------------------------------------------------
authz=RBAC
node_flags=()
if $with_node; then
  # The Node authorizer and NodeRestriction give the kubelet exactly a node's rights; the client
  # certificate lets the apiserver reach the kubelets (kubectl logs/exec), at their InternalIP (the
  # node name does not resolve), verifying their serving certificates.
  authz=Node,RBAC
  # shellcheck disable=SC2054 # the comma belongs to the value
  node_flags=(--enable-admission-plugins NodeRestriction
    --kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key"
    --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP,Hostname)
fi
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address "$bind" --advertise-address "$bind" --secure-port "$api_port" \
  --tls-cert-file "$pki/serving.crt" --tls-private-key-file "$pki/serving.key" \
  --client-ca-file "$pki/ca.crt" \
  --authorization-mode "$authz" "${node_flags[@]}" \
  --token-auth-file "$pki/tokens.csv" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.0.0.0/24 \
  --audit-policy-file "$run/audit-policy.yaml" --audit-log-path "$run/audit.log" \
  --audit-log-mode blocking \
  --audit-log-maxsize 102400 --audit-log-maxbackup 0 --audit-log-maxage 0 \
  --watch-cache="$watch_cache"
url="https://$bind:$api_port"
wait_for "kube-apiserver /readyz" 120 curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$url/readyz"

# --- kubeconfigs -----------------------------------------------------------------------------
kubeconfig() { # file user-yaml
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $url
    certificate-authority: $pki/ca.crt
users:
- name: user
  user:
$2
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
EOF
}
kubeconfig "$run/admin.kubeconfig" "    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key"
kubeconfig "$run/kcm.kubeconfig" "    client-certificate: $pki/kcm.crt
    client-key: $pki/kcm.key"
kubeconfig "$run/operator.kubeconfig" "    token: $operator_token"
kubeconfig "$run/restricted.kubeconfig" "    token: $restricted_token"

# --- kube-controller-manager -----------------------------------------------------------------
# Binding, release, PVC protection, namespace deletion and garbage collection run for real.
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$run/kcm.kubeconfig" \
  --authentication-kubeconfig "$run/kcm.kubeconfig" --authorization-kubeconfig "$run/kcm.kubeconfig" \
  --controllers "$controllers" --use-service-account-credentials \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$kcm_port" \
  --pvclaimbinder-sync-period "$pv_sync"
wait_for "kube-controller-manager /healthz" 60 curl -fsSk "https://127.0.0.1:$kcm_port/healthz"

cat >"$run/env" <<EOF
BIN_DIR=$bin
APISERVER_URL=$url
ETCD_URL=http://127.0.0.1:$etcd_port
EOF
echo "control plane ready at $url (run dir $run)" >&2

# --- the node ------------------------------------------------------------------------------------
if $with_node; then
  "$here/../node/up.sh" "$node_run" "$run" ${owner:+--owner-pid "$owner"} --kube-proxy ||
    fail "node/up.sh $node_run failed (its logs are in $node_run)"
  node_name=$(sed -n 's/^NODE_NAME=//p' "$node_run/env")
  cat >>"$run/env" <<EOF
NODE_RUN_DIR=$node_run
NODE_IP=$bind
NODE_NAME=$node_name
EOF
fi
