#!/usr/bin/env bash
# Builds what a local single node needs, from the Go module proxy, into cache directories outside
# the clone, and prints the bin directory on stdout (everything else goes to stderr):
#
#   kubelet, kube-scheduler,         node/kube/go.mod (same k8s.io/kubernetes pin and staging
#   kube-proxy                       replaces as controlplane/go.mod; checked below)
#   containerd, ctr,                 node/containerd/go.mod (github.com/containerd/containerd/v2)
#   containerd-shim-runc-v2
#   ../images/pause.tar, probe.tar   OCI archives of node/images/{pause,probe} (no image registry
#                                    is reachable, so the sandbox image is made here too)
#
# Each of the three parts is cached on its own, keyed by a hash of its inputs (go.mod + go.sum or
# sources), the shell function below that builds it and the Go version, under
# $cache/node/<part>-<key>/ (flock'd, `.complete` marker), so a change to one part rebuilds only
# that part; $cache/node/<key>/bin links them together. runc, the CNI
# plugins, iptables and ip come from Debian (scripts/ensure-tools.sh installs them when missing).
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
#   NODE_NICE               niceness of the go builds (default 15: the CPU is shared)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
nice_n=${NODE_NICE:-15}
command -v go >/dev/null || { echo "node/build.sh: 'go' is not on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
# readonly: a build never edits the go.mod or go.sum files in the clone
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
goversion=$(go env GOVERSION)

# --- the pins must match the control plane's --------------------------------------------------
pin() { sed -nE "s/^[[:space:]]*(require[[:space:]]+)?$2[[:space:]]+(v[0-9][^[:space:]]*)([[:space:]].*)?$/\\2/p" "$1" | head -n1; }
replaces() { sed -n '/^replace (/,/^)/p' "$1"; }
k8s_version=$(pin "$here/kube/go.mod" 'k8s\.io\/kubernetes')
cp_version=$(pin "$here/../controlplane/go.mod" 'k8s\.io\/kubernetes')
[ -n "$k8s_version" ] && [ "$k8s_version" = "$cp_version" ] || {
  echo "node/build.sh: node/kube/go.mod pins k8s.io/kubernetes '$k8s_version' but controlplane/go.mod pins '$cp_version'" >&2
  exit 1
}
[ "$(replaces "$here/kube/go.mod")" = "$(replaces "$here/../controlplane/go.mod")" ] || {
  echo "node/build.sh: the staging replaces of node/kube/go.mod differ from controlplane/go.mod's" >&2
  exit 1
}
ctrd_version=$(pin "$here/containerd/go.mod" 'github\.com\/containerd\/containerd\/v2')
[ -n "$ctrd_version" ] || { echo "node/build.sh: no containerd/v2 requirement in node/containerd/go.mod" >&2; exit 1; }


# part_complete KEY FILES... : true when $cache/node/KEY holds a complete build with those files
part_complete() {
  local d="$cache_root/node/$1"; shift
  [ -f "$d/.complete" ] || return 1
  for f in "$@"; do [ -s "$d/$f" ] || return 1; done
}
# build_part KEY FUNCTION FILES... : builds under a lock into a temporary dir, then renames it
build_part() {
  local k=$1 fn=$2; shift 2
  part_complete "$k" "$@" && return 0
  mkdir -p "$cache_root/node"
  exec 8>"$cache_root/node/.lock-$k"
  flock 8
  if ! part_complete "$k" "$@"; then
    local d="$cache_root/node/$k" tmp="$cache_root/node/$k.tmp.$$" start end
    rm -rf "$tmp"; mkdir -p "$tmp"
    echo "node: building $k (log: $d.build.log)" >&2
    start=$(date +%s)
    ( "$fn" "$tmp" ) >"$d.build.log" 2>&1 || {
      echo "node/build.sh: building $k failed; last lines of $d.build.log:" >&2
      tail -n 30 "$d.build.log" >&2
      rm -rf "$tmp"; exec 8>&-; exit 1
    }
    end=$(date +%s)
    { echo "key=$k"; echo "seconds=$((end - start))"; grep -h 'Maximum resident' "$tmp"/time-*.txt 2>/dev/null || true; } >"$tmp/build-stats.txt"
    touch "$tmp/.complete"
    rm -rf "$d"; mv "$tmp" "$d"
    echo "node: built $k in $((end - start))s" >&2
  fi
  exec 8>&-
}

build_kube() { # as controlplane/build.sh builds: static, trimmed, selinux/notest, version stamped
  local out=$1 major minor stamp=""
  major=${k8s_version#v}; major=${major%%.*}
  minor=${k8s_version#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  cd "$here/kube"
  /usr/bin/time -v -o "$out/time-kube.txt" nice -n "$nice_n" \
    go build -trimpath -tags selinux,notest -ldflags "-s -w$stamp" -o "$out/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
}

build_containerd() { # as containerd's Makefile builds its static release (no cgo: no btrfs)
  local out=$1 pkg=github.com/containerd/containerd/v2 ld
  ld="-s -w -X $pkg/version.Version=$ctrd_version -X $pkg/version.Revision=module-proxy -X $pkg/version.Package=github.com/containerd/containerd"
  cd "$here/containerd"
  /usr/bin/time -v -o "$out/time-containerd.txt" nice -n "$nice_n" \
    go build -trimpath -tags "urfave_cli_no_docs osusergo netgo static_build" -ldflags "$ld" -o "$out/" \
    $pkg/cmd/containerd $pkg/cmd/ctr
  /usr/bin/time -v -o "$out/time-shim.txt" nice -n "$nice_n" \
    go build -trimpath -tags "urfave_cli_no_docs osusergo netgo static_build no_grpc" -ldflags "$ld" -o "$out/" \
    $pkg/cmd/containerd-shim-runc-v2
}

build_images() {
  local out=$1
  cd "$here/images"
  mkdir -p "$out/programs"
  nice -n "$nice_n" go build -trimpath -ldflags "-s -w" -o "$out/programs/" ./pause ./probe
  # The name containerd's CRI uses for the sandbox by default (sandbox_image of v2.4), so that
  # nothing would try to pull it; node/up.sh also names it in containerd's config.
  python3 oci-archive.py --name registry.k8s.io/pause:3.10.2 --program "$out/programs/pause" \
    --path /pause --user 65535:65535 --out "$out/pause.tar"
  python3 oci-archive.py --name localhost/vl-probe:1 --program "$out/programs/probe" \
    --path /probe --user 65532:65532 --out "$out/probe.tar"
}

# --- keys: a part is rebuilt when its inputs, the function that builds it or Go change ---------
hash() { sha256sum | cut -c1-12; }
kube_key="kube-$k8s_version-$(cat "$here/kube/go.mod" "$here/kube/go.sum" <(declare -f build_kube; echo "$goversion") | hash)"
ctrd_key="containerd-$ctrd_version-$(cat "$here/containerd/go.mod" "$here/containerd/go.sum" <(declare -f build_containerd; echo "$goversion") | hash)"
img_key="images-$(cd "$here/images" && cat go.mod oci-archive.py pause/main.go probe/main.go <(declare -f build_images; echo "$goversion") | hash)"
key=$(echo "$kube_key $ctrd_key $img_key" | hash)
dest="$cache_root/node/$key"

# The builds record their peak memory with GNU time, which minimal Debian images lack.
"$here/../scripts/ensure-tools.sh" time
build_part "$kube_key" build_kube kubelet kube-scheduler kube-proxy
build_part "$ctrd_key" build_containerd containerd ctr containerd-shim-runc-v2
build_part "$img_key" build_images pause.tar probe.tar

# --- runc, the CNI plugins, iptables and iproute2 from Debian ----------------------------------
# runc and iptables live in /usr/sbin, which a non-login PATH lacks: look there too.
export PATH="$PATH:/usr/sbin:/sbin"
cni_dir=/usr/lib/cni
"$here/../scripts/ensure-tools.sh" runc cni-plugins iptables ip
runc=$(command -v runc)

# --- the combined bin directory ---------------------------------------------------------------
if [ ! -f "$dest/bin/.complete" ]; then
  rm -rf "$dest"
  tmp="$dest.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp/bin" "$tmp/images"
  for b in kubelet kube-scheduler kube-proxy; do ln -s "../../$kube_key/$b" "$tmp/bin/$b"; done
  for b in containerd ctr containerd-shim-runc-v2; do ln -s "../../$ctrd_key/$b" "$tmp/bin/$b"; done
  ln -s "$runc" "$tmp/bin/runc"
  for i in pause probe; do ln -s "../../$img_key/$i.tar" "$tmp/images/$i.tar"; done
  echo "$cni_dir" >"$tmp/cni-bin-dir"
  touch "$tmp/bin/.complete"
  if ! mv -T "$tmp" "$dest" 2>/dev/null; then rm -rf "$tmp"; fi # a concurrent run won the race
fi
echo "node $key: $kube_key $ctrd_key $img_key in $dest/bin" >&2
echo "$dest/bin"
