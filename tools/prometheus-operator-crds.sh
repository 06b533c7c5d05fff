#!/usr/bin/env bash
# Prints the paths of the Prometheus Operator CRDs the chart can use, one per line: ServiceMonitor
# and PrometheusRule (group monitoring.coreos.com, version v1), from the pinned
# github.com/prometheus-operator/prometheus-operator module (example/prometheus-operator-crd/,
# the CRDs as released), read from the Go module cache; when absent they are fetched through the
# Go module proxy (`go mod download`, which checks the checksum database) and the module's hash
# is compared with the one pinned here. Everything but the paths goes to stderr.
#
#   kubectl apply --server-side $(printf -- '-f %s ' $(tools/prometheus-operator-crds.sh))
#
# To bump: `go list -m -versions github.com/prometheus-operator/prometheus-operator`, then
# `go mod download -json github.com/prometheus-operator/prometheus-operator@NEW` and copy its
# "Sum" below.
set -euo pipefail

module=github.com/prometheus-operator/prometheus-operator
version=v0.85.0
sum=h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=
files=(
  example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
  example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
)

command -v go >/dev/null || { echo "prometheus-operator-crds.sh: 'go' is not on PATH" >&2; exit 1; }
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

present() {
  for f in "${files[@]}"; do [ -f "$dir/$f" ] || return 1; done
}

# The module cache only holds a module's directory after its zip has been verified, and it is
# read-only: a present directory is the pinned content (the module path has no upper case, so
# its cache path needs no escaping).
dir="$(go env GOMODCACHE)/$module@$version"
if ! present; then
  echo "prometheus-operator-crds.sh: downloading $module@$version into the Go module cache" >&2
  json=$(cd / && go mod download -json "$module@$version") || {
    echo "prometheus-operator-crds.sh: go mod download $module@$version failed:" >&2
    printf '%s\n' "$json" >&2
    exit 1
  }
  got_sum=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Sum": "(.*)",?$/\1/p')
  dir=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')
  [ "$got_sum" = "$sum" ] || { echo "prometheus-operator-crds.sh: $module@$version has sum '$got_sum', pinned $sum" >&2; exit 1; }
  present || { echo "prometheus-operator-crds.sh: $dir lacks ${files[*]}" >&2; exit 1; }
fi
for f in "${files[@]}"; do echo "$dir/$f"; done
