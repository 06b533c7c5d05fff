#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kubectl from the Go module proxy,
# pinned by controlplane/go.mod + go.sum, into a cache directory outside the clone keyed by
# the pinned Kubernetes version and a hash of the module files. A second run with the same pin
# does nothing. Prints the bin directory on stdout (everything else goes to stderr).
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(sed -nE 's/^[[:space:]]*(require[[:space:]]+)?k8s\.io\/kubernetes[[:space:]]+(v[0-9.]+)([[:space:]].*)?$/\2/p' "$here/go.mod")
[ -n "$k8s_version" ] || { echo "build.sh: no 'require k8s.io/kubernetes vX' line in $here/go.mod" >&2; exit 1; }
# The key covers everything that changes the binaries: the pins, the flags below, the Go version.
key_src=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh"; go env GOVERSION)
key="$k8s_version-$(printf '%s' "$key_src" | sha256sum | cut -c1-12)"
cache_root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$cache_root/controlplane/$key"
bins=(etcd kube-apiserver kube-controller-manager kubectl)

complete() {
  [ -f "$dest/bin/.complete" ] || return 1
  for b in "${bins[@]}"; do [ -x "$dest/bin/$b" ] || return 1; done
}

if complete; then
  echo "control plane $key: cached in $dest/bin" >&2
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache_root/controlplane"
# Two test binaries (or a test and the demo) may ask at once: one builds, the other waits.
exec 9>"$cache_root/controlplane/.lock-$key"
flock 9
if complete; then
  echo "$dest/bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: 'go' is not on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
echo "control plane $key: building (cold builds take a while on 2 cores; log: $dest.build.log)" >&2
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin"

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$(date +%s)
(
  cd "$here"
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  # As upstream builds them: static, trimmed, selinux/notest tags, version stamped so that
  # version-skew checks between the components do not misfire on "v0.0.0-master".
  common=(-trimpath -tags selinux,notest)
  /usr/bin/time -v -o "$tmp/time-k8s.txt" \
    go build "${common[@]}" -ldflags "-s -w$stamp" -o "$tmp/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kubectl
  /usr/bin/time -v -o "$tmp/time-etcd.txt" \
    go build "${common[@]}" -ldflags "-s -w" -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3
) >"$dest.build.log" 2>&1 || {
  echo "build.sh: go build failed; last lines of $dest.build.log:" >&2
  tail -n 30 "$dest.build.log" >&2
  exit 1
}
end=$(date +%s)
{
  echo "key=$key"
  echo "seconds=$((end - start))"
  grep -h 'Maximum resident' "$tmp"/time-*.txt
} >"$tmp/build-stats.txt"
touch "$tmp/bin/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
echo "control plane $key: built in $((end - start))s" >&2
echo "$dest/bin"
