#!/usr/bin/env bash
# The operator's main job.
#
# With $KUBECONFIG set: read-only. Prints `scan -o table` of that cluster (list and get only:
# nothing is written) and stops. With OPERATOR=1 (`make demo OPERATOR=1`) it then runs the
# operator against that cluster until Ctrl-C, with the caller's credentials: it creates
# VolumeLeftovers and Events there (the CRD must be installed: kubectl apply -f
# crds/volumeleftovers.yaml). The first line says which.
#
# Without: builds (or reuses) a local control plane, starts it, creates the mariadb scenario of
# the original tool (StorageClass standard, Retain, Immediate; PV mariadb-pv 250Mi bound to PVC
# mariadb/mariadb; the PVC deleted so the PV is Released), runs the operator as the identity
# deploy/ grants, shows `kubectl get pv,pvc` and `kubectl get volumeleftovers`, and stops
# everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

version=$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version[[:space:]]*=/ { print $2; exit }' Cargo.toml)
# The target directory `make test` uses too (scripts/cache.sh): after `make test` the release
# binary is already built.
# shellcheck source=scripts/cache.sh
. scripts/cache.sh
vl=$CARGO_TARGET_DIR/release/volume-leftovers
if [ -x "$vl" ]; then
  what="an up-to-date build takes a second, a rebuild after source changes about a minute"
else
  what="this is a cold build (nothing in $CARGO_TARGET_DIR/release yet): about 4 min on 2 idle cores, longer on busy ones, then cached"
fi
echo "== building volume-leftovers $version, the operator binary (cargo build --release --locked);" >&2
echo "   $what" >&2
build_start=$SECONDS
cargo build --release --locked
echo "== built $vl in $((SECONDS - build_start)) s" >&2

if [ -n "${KUBECONFIG:-}" ]; then
  context="the cluster of KUBECONFIG=$KUBECONFIG"
  if [ "${OPERATOR:-}" != 1 ]; then
    echo "== KUBECONFIG is set: read-only against $context (scan: lists and gets, no write); 'make demo OPERATOR=1' also runs the operator there" >&2
    rc=0
    "$vl" scan -o table || rc=$?
    # 3: leftovers found, 4: something could not be read (named above): both are answers.
    case $rc in 0 | 3 | 4) exit 0 ;; *) exit "$rc" ;; esac
  fi
  echo "== KUBECONFIG is set and OPERATOR=1: scanning, then running the operator against $context with your credentials (it writes VolumeLeftovers and Events there; Ctrl-C stops)" >&2
  rc=0
  "$vl" scan -o table || rc=$?
  case $rc in 0 | 3 | 4) ;; *) exit "$rc" ;; esac
  exec "$vl" run --listen 127.0.0.1:8080
fi

run=$(mktemp -d "${TMPDIR:-/tmp}/volume-leftovers-demo.XXXXXX")
operator_pid=""
cleanup() {
  [ -n "$operator_pid" ] && kill "$operator_pid" 2>/dev/null && wait "$operator_pid" 2>/dev/null
  controlplane/down.sh "$run"
  echo "== stopped everything (logs in $run)" >&2
}
trap cleanup EXIT

controlplane/up.sh "$run" --owner-pid $$
# shellcheck disable=SC1091
. "$run/env"
k() { "$BIN_DIR/kubectl" --kubeconfig "$run/admin.kubeconfig" "$@"; }

echo "== installing the CRD and deploy/ RBAC (the Deployment itself needs a kubelet; the operator runs here)" >&2
k apply -f crds/volumeleftovers.yaml -f deploy/namespace.yaml -f deploy/serviceaccount.yaml \
  -f deploy/clusterrole.yaml -f deploy/clusterrolebinding.yaml >/dev/null
k wait --for condition=established crd/volumeleftovers.leftovers.dev >/dev/null

echo "== the mariadb scenario" >&2
k apply -f scripts/demo-scenario.yaml >/dev/null
for _ in $(seq 60); do
  [ "$(k get pvc -n mariadb mariadb -o jsonpath='{.status.phase}')" = Bound ] && break
  sleep 0.5
done
k get pv,pvc -A
echo "== deleting the claim (the PV has reclaimPolicy Retain)" >&2
k delete pvc -n mariadb mariadb --wait=true >/dev/null
for _ in $(seq 60); do
  [ "$(k get pv mariadb-pv -o jsonpath='{.status.phase}')" = Released ] && break
  sleep 0.5
done
k get pv,pvc -A

echo "== running the operator as system:serviceaccount:volume-leftovers:volume-leftovers" >&2
KUBECONFIG="$run/operator.kubeconfig" "$vl" run --listen 127.0.0.1:0 >"$run/operator.log" 2>&1 &
operator_pid=$!
# The object is created first and its status applied next: wait for the status, so that the
# table below shows the reason.
published=false
for _ in $(seq 60); do
  [ -n "$(k get volumeleftover mariadb-pv -o jsonpath='{.status.reason}' 2>/dev/null)" ] && published=true && break
  sleep 0.5
done
if ! $published; then
  echo "demo.sh: the operator published no finding for mariadb-pv within 30 s; the end of its log:" >&2
  tail -n 20 "$run/operator.log" >&2
  exit 1
fi
echo "== kubectl get volumeleftovers" >&2
k get volumeleftovers
echo "== volume-leftovers scan (JSON lines)" >&2
KUBECONFIG="$run/operator.kubeconfig" "$vl" scan 2>/dev/null || [ $? -eq 3 ]
