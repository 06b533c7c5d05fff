#!/usr/bin/env bash
# Builds one Go tool module, tools/NAME/ (a go.mod + go.sum that pin it, with `tool` directives
# so that `go mod tidy` keeps the requirements), into a cache directory outside the clone keyed
# by the tool's version and a hash of everything that changes the binaries. A second run with the
# same pin does nothing. Prints the bin directory on stdout (everything else goes to stderr).
#
#   tools/build.sh NAME            e.g. "$(tools/build.sh helm)/helm" version
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
#
# tools/NAME/build.conf, when present, is a bash fragment sourced after `version` is known; it
# may set:
#   version   the version in the cache key (default: the required module providing the first tool)
#   pkgs      array of packages to build (default: the `tool` directives)
#   bins      array of binary names that must exist afterwards (default: last element of each pkg)
#   tags      build tags (comma separated)
#   ldflags   extra -ldflags (after "-s -w"), typically `-X` version stamps
# and may use `modver MODULE` (the version go.mod requires of MODULE).
#
# The key covers go.mod, go.sum, build.conf and every *.go file of tools/NAME/, this script and
# `go env GOVERSION`. Builds are static (CGO_ENABLED=0), -trimpath, GOTOOLCHAIN=local,
# -mod=readonly (the committed go.sum must be complete: run `go mod tidy` in tools/NAME after a bump).
set -euo pipefail

usage() { echo "usage: tools/build.sh NAME   (NAME: a directory of tools/ with a go.mod)" >&2; exit 2; }
[ $# -eq 1 ] || usage
name=$1
case $name in ''|*/*|.*) usage ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir="$here/$name"
[ -f "$dir/go.mod" ] || { echo "tools/build.sh: no $dir/go.mod" >&2; exit 2; }
command -v go >/dev/null || { echo "tools/build.sh: 'go' is not on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
export GOTOOLCHAIN=local

# The version go.mod requires of module $1 (single-line or block `require`), empty if none.
modver() {
  awk -v m="$1" '
    /^require[ \t]*\($/ { blk = 1; next }
    blk && /^\)/       { blk = 0; next }
    blk                { if ($1 == m) { print $2; exit } next }
    $1 == "require" && $2 == m { print $3; exit }
  ' "$dir/go.mod"
}
# The `tool` directives of go.mod, one per line.
toolpaths() {
  awk '
    /^tool[ \t]*\($/ { blk = 1; next }
    blk && /^\)/    { blk = 0; next }
    blk && NF       { print $1; next }
    $1 == "tool" && NF >= 2 { print $2 }
  ' "$dir/go.mod"
}
# The required module that provides package $1 (longest matching module path).
provider() {
  awk -v p="$1" '
    /^require[ \t]*\($/ { blk = 1; next }
    blk && /^\)/       { blk = 0; next }
    blk                { m = $1 }
    !blk && $1 == "require" { m = $2 }
    !blk && $1 != "require" { next }
    (p == m || index(p, m "/") == 1) && length(m) > length(best) { best = m }
    END { if (best != "") print best }
  ' "$dir/go.mod"
}

mapfile -t pkgs < <(toolpaths)
version=""
if [ ${#pkgs[@]} -gt 0 ]; then
  mod=$(provider "${pkgs[0]}")
  if [ -n "$mod" ]; then version=$(modver "$mod"); fi
fi
bins=()
tags=""
ldflags=""
if [ -f "$dir/build.conf" ]; then
  # shellcheck source=/dev/null
  . "$dir/build.conf"
fi
[ ${#pkgs[@]} -gt 0 ] || { echo "tools/build.sh: $dir/go.mod has no tool directive and build.conf sets no pkgs" >&2; exit 2; }
[ -n "$version" ] || { echo "tools/build.sh: cannot tell the version of ${pkgs[0]} from $dir/go.mod" >&2; exit 2; }
if [ ${#bins[@]} -eq 0 ]; then
  for p in "${pkgs[@]}"; do
    b=${p##*/}
    if [[ $b =~ ^v[0-9]+$ ]]; then b=${p%/*}; b=${b##*/}; fi  # .../cmd/foo/v2 builds foo
    bins+=("$b")
  done
fi

# The key covers everything that changes the binaries: the pins, the sources, build.conf, this
# script, the Go version.
key_src=$(
  cd "$dir"
  find . -type f \( -name go.mod -o -name go.sum -o -name build.conf -o -name '*.go' \) -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum
  sha256sum <"$here/build.sh"
  go env GOVERSION
)
key="$version-$(printf '%s' "$key_src" | sha256sum | cut -c1-12)"
cache_root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$cache_root/tools/$name/$key"

complete() {
  [ -f "$dest/bin/.complete" ] || return 1
  for b in "${bins[@]}"; do [ -x "$dest/bin/$b" ] || return 1; done
}

if complete; then
  echo "$name $key: cached in $dest/bin" >&2
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache_root/tools/$name"
# Two callers may ask at once: one builds, the other waits.
exec 9>"$cache_root/tools/$name/.lock-$key"
flock 9
if complete; then
  echo "$dest/bin"
  exit 0
fi

echo "$name $key: building ${pkgs[*]} (log: $dest.build.log)" >&2
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin"
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s.%N)
(
  cd "$dir"
  export CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"
  args=(-trimpath -ldflags "-s -w${ldflags:+ $ldflags}")
  [ -n "$tags" ] && args+=(-tags "$tags")
  out="$tmp/bin/"
  [ ${#pkgs[@]} -eq 1 ] && out="$tmp/bin/${bins[0]}"
  set -x
  /usr/bin/time -v -o "$tmp/time.txt" go build "${args[@]}" -o "$out" "${pkgs[@]}"
) >"$dest.build.log" 2>&1 || {
  echo "tools/build.sh: go build of $name failed; last lines of $dest.build.log:" >&2
  tail -n 30 "$dest.build.log" >&2
  exit 1
}
end=$(date +%s.%N)
for b in "${bins[@]}"; do
  [ -x "$tmp/bin/$b" ] || { echo "tools/build.sh: $name built no $b (see $dest.build.log)" >&2; exit 1; }
done
secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
{
  echo "key=$key"
  echo "seconds=$secs"
  grep -h 'Maximum resident' "$tmp/time.txt"
} >"$tmp/build-stats.txt"
touch "$tmp/bin/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$name $key: built in ${secs}s" >&2
echo "$dest/bin"
