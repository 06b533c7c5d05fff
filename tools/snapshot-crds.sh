#!/usr/bin/env bash
# Prints the paths of the CSI snapshot CRDs, group snapshot.storage.k8s.io, served version v1, one
# per line: VolumeSnapshotClass and VolumeSnapshotContent (cluster-scoped), then VolumeSnapshot
# (namespaced). The files are client/config/crd/ of github.com/kubernetes-csi/external-snapshotter,
# which is the module github.com/kubernetes-csi/external-snapshotter/client/v8, as released, read
# from the Go module cache; when absent they are fetched through the Go module proxy
# (`go mod download`, which checks the checksum database) and the module's hash is compared with
# the one pinned. Everything but the paths goes to stderr.
#
#   kubectl apply $(printf -- '-f %s ' $(tools/snapshot-crds.sh))
#   tools/snapshot-crds.sh --group   also the three groupsnapshot.storage.k8s.io v1 CRDs
#
# The pin is the one the snapshot-controller is built with (tools/build.sh snapshot-controller):
# the version tools/snapshot-controller/go.mod requires of client/v8 and its h1: hash in go.sum,
# so a bump there (`go get .../v8@NEW .../client/v8@NEW && go mod tidy`) moves the CRDs too. That
# version is the client tag of the same release (v8.7.0), not the v8.6.0 that
# external-snapshotter v8.7.0's go.mod names (upstream replaces it with ./client); their
# config/crd/ are identical.
#
# Group snapshots (snapshot-controller v8.7.0, cmd/snapshot-controller/main.go): the controller
# needs only the three snapshot.storage.k8s.io CRDs to start; it exits after
# --retry-crd-interval-max (30 s) when one of them cannot be listed. The feature gate
# CSIVolumeGroupSnapshot is GA and on by default: the controller then also waits up to
# --retry-crd-interval-max for the groupsnapshot.storage.k8s.io CRDs and, when they are missing,
# logs a warning and runs without group snapshots (not fatal, but 30 s of startup).
# `--feature-gates=CSIVolumeGroupSnapshot=false` skips that wait (a GA gate can still be set to
# false; the controller warns that the gate will be removed). There is no
# --enable-volume-group-snapshots flag in v8 ("flag provided but not defined", exit 2).
# docs/snapshot-controller-notes.md has the startup seen in each case.
set -euo pipefail

module=github.com/kubernetes-csi/external-snapshotter/client/v8
files=(
  config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml
  config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml
  config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml
)
case "${1:-}" in
  '') ;;
  --group)
    files+=(
      config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml
      config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml
      config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml
    )
    ;;
  *) echo "usage: tools/snapshot-crds.sh [--group]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tooldir="$here/snapshot-controller"
version=$(awk -v m="$module" '
  /^require[ \t]*\($/ { blk = 1; next }
  blk && /^\)/       { blk = 0; next }
  blk                { if ($1 == m) { print $2; exit } next }
  $1 == "require" && $2 == m { print $3; exit }
' "$tooldir/go.mod")
[ -n "$version" ] || { echo "snapshot-crds.sh: $tooldir/go.mod requires no $module" >&2; exit 1; }
sum=$(awk -v m="$module" -v v="$version" '$1 == m && $2 == v { print $3; exit }' "$tooldir/go.sum")
[ -n "$sum" ] || { echo "snapshot-crds.sh: $tooldir/go.sum has no hash of $module $version" >&2; exit 1; }

command -v go >/dev/null || { echo "snapshot-crds.sh: 'go' is not on PATH" >&2; exit 1; }
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

present() {
  for f in "${files[@]}"; do [ -f "$dir/$f" ] || return 1; done
}

# The module cache only holds a module's directory after its zip has been verified, and it is
# read-only: a present directory is the pinned content (the module path has no upper case, so
# its cache path needs no escaping).
dir="$(go env GOMODCACHE)/$module@$version"
if ! present; then
  echo "snapshot-crds.sh: downloading $module@$version into the Go module cache" >&2
  json=$(cd / && go mod download -json "$module@$version") || {
    echo "snapshot-crds.sh: go mod download $module@$version failed:" >&2
    printf '%s\n' "$json" >&2
    exit 1
  }
  got_sum=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Sum": "(.*)",?$/\1/p')
  dir=$(printf '%s\n' "$json" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')
  [ "$got_sum" = "$sum" ] || { echo "snapshot-crds.sh: $module@$version has sum '$got_sum', pinned $sum" >&2; exit 1; }
  present || { echo "snapshot-crds.sh: $dir lacks ${files[*]}" >&2; exit 1; }
fi
for f in "${files[@]}"; do echo "$dir/$f"; done
