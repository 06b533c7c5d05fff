#!/usr/bin/env bash
# Prints the paths of the OpenReports CRDs of the pinned github.com/openreports/reports-api, one
# per line: Report (namespaced) first, then ClusterReport (cluster-scoped), both group
# openreports.io, version v1alpha1. The files are the module's config/crd/ YAML as released, read
# from the Go module cache; when absent they are fetched through the Go module proxy
# (`go mod download`, which checks the checksum database) and the module's hash is compared with
# the one pinned here. Everything but the paths goes to stderr.
#
#   kubectl apply $(printf -- '-f %s ' $(tools/openreports-crd.sh))
#
# To bump: `go list -m -versions github.com/openreports/reports-api`, then
# `go mod download -json github.com/openreports/reports-api@NEW` and copy its "Sum" below.
set -euo pipefail

module=github.com/openreports/reports-api
version=v0.2.1
sum=h1:g9KS3yle9Y1elmww4TK9EkD1rl6inIaiIJPX6e+u680=
files=(config/crd/openreports.io_reports.yaml config/crd/openreports.io_clusterreports.yaml)

command -v go >/dev/null || { echo "openreports-crd.sh: 'go' is not on PATH" >&2; exit 1; }
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

present() {
  for f in "${files[@]}"; do [ -f "$dir/$f" ] || return 1; done
}

# The module cache only holds a module's directory after its zip has been verified, and it is
# read-only: a present directory is the pinned content (the module path has no upper case, so
# its cache path needs no escaping).
dir="$(go env GOMODCACHE)/$module@$version"
if ! present; then
  echo "openreports-crd.sh: downloading $module@$version into the Go module cache" >&2
  json=$(cd / && go mod download -json "$module@$version") || {
    echo "openreports-crd.sh: go mod download $module@$version failed:" >&2
    printf '%s\n' "$json" >&2
    exit 1
  }
  got_sum=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Sum": "(.*)",?$/\1/p')
  dir=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')
  [ "$got_sum" = "$sum" ] || { echo "openreports-crd.sh: $module@$version has sum '$got_sum', pinned $sum" >&2; exit 1; }
  present || { echo "openreports-crd.sh: $dir lacks ${files[*]}" >&2; exit 1; }
fi
for f in "${files[@]}"; do echo "$dir/$f"; done
