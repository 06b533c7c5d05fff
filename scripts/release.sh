#!/usr/bin/env bash
# Builds everything a release ships into one directory (`make release`) and, with REGISTRY set,
# publishes the image and the chart to that OCI registry. There is no public registry for this
# project: a release is pushed to yours.
#
#   scripts/release.sh                                       build the artifacts
#   REGISTRY=registry.example.com/team scripts/release.sh    build them, then push image and chart
#
# Writes, with VERSION from Cargo.toml (the chart's appVersion must be the same; the chart's own
# version is Chart.yaml's `version`):
#   $VL_RELEASE_DIR/oci/                            the image as an OCI layout, reference VERSION
#   $VL_RELEASE_DIR/volume-leftovers-VERSION.tar    the image as a docker-archive (docker/podman
#                                                   load, ctr images import), as scripts/image.sh
#   $VL_RELEASE_DIR/image.json                      scripts/image.sh's summary: digests, sizes
#   $VL_RELEASE_DIR/volume-leftovers-CHART.tgz      the chart (helm package)
#   $VL_RELEASE_DIR/kubectl-leftovers-vVERSION-linux-amd64.tar.gz
#                                                   the kubectl plugin: the same binary named
#                                                   kubectl-leftovers (`kubectl leftovers` =
#                                                   `volume-leftovers scan`), and LICENSE
#   $VL_RELEASE_DIR/kubectl-leftovers-vVERSION-linux-amd64.tar.gz.sha256
#                                                   its checksum, as sha256sum writes it
#   $VL_RELEASE_DIR/leftovers.yaml                  krew's plugin manifest for that archive
#                                                   (`kubectl krew install --manifest=leftovers.yaml`)
#   $VL_RELEASE_DIR/SHA256SUMS                      every file above (`sha256sum -c SHA256SUMS`)
# Everything else in $VL_RELEASE_DIR is removed first.
#
# Environment:
#   VL_BINARY       release this binary instead of running `cargo build --release --locked`; its
#                   --version must name VERSION
#   VL_RELEASE_DIR  output directory (default target/release-artifacts)
#   RELEASE_URL     where the plugin archive will be downloaded from: the krew manifest's uri is
#                   RELEASE_URL/kubectl-leftovers-vVERSION-linux-amd64.tar.gz (e.g. a release page's
#                   download URL). Unset: a placeholder under https://example.invalid/ and a note
#   REGISTRY        HOST[:PORT][/PATH] of an OCI registry: push the image to
#                   docker://REGISTRY/volume-leftovers:VERSION (skopeo copy from the OCI layout) and
#                   the chart to oci://REGISTRY/charts/volume-leftovers:CHART (helm push). Log in
#                   first where it needs credentials (skopeo login, helm registry login)
#   REGISTRY_PLAIN_HTTP=1  the registry speaks plain HTTP (a local test registry): skopeo
#                   --dest-tls-verify=false, helm push --plain-http
#   VL_PUSH_TIMEOUT seconds each push may take (default 300); a registry that does not answer
#                   within 10 s is refused before anything is built
#
# A push that fails or times out ends the script with one line naming the registry and the cause
# (the tool's own output is in the release directory's push-*.log) and exit code 1. The last line
# on stdout is the release directory; progress goes to stderr.
#
# Tools: buildah and skopeo from Debian (scripts/ensure-tools.sh, as scripts/image.sh), Helm built
# from its Go module (tools/build.sh helm); objcopy, tar, gzip and sha256sum are the base system's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
# The release binary make test built, when no VL_BINARY is given (one target directory).
# shellcheck source=scripts/cache.sh
. scripts/cache.sh

case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "release.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac
die() { echo "release.sh: $*" >&2; exit 1; }

name=volume-leftovers
plugin=kubectl-leftovers
version=$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version[[:space:]]*=/ { print $2; exit }' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml's [package]"
chart_dir=charts/$name
chart_field() { sed -nE "s/^$1:[[:space:]]*\"?([^\"[:space:]]+)\"?[[:space:]]*$/\\1/p" "$chart_dir/Chart.yaml" | head -n1; }
chart_version=$(chart_field version)
app_version=$(chart_field appVersion)
[ -n "$chart_version" ] || die "no version in $chart_dir/Chart.yaml"
# The chart's default image tag is its appVersion: it must name the image this release pushes.
[ "$app_version" = "$version" ] ||
  die "$chart_dir/Chart.yaml's appVersion is '$app_version' but Cargo.toml's version is '$version': the chart would install an image this release does not push"
registry=${REGISTRY:-}
registry=${registry%/}
plain_http=${REGISTRY_PLAIN_HTTP:-0}
[ "$plain_http" = 0 ] || [ "$plain_http" = 1 ] || die "REGISTRY_PLAIN_HTTP must be 0 or 1"
push_timeout=${VL_PUSH_TIMEOUT:-300}
[[ "$push_timeout" =~ ^[1-9][0-9]*$ ]] || die "VL_PUSH_TIMEOUT must be a number of seconds"
release_url=${RELEASE_URL:-}
release_url=${release_url%/}
archive=$plugin-v$version-linux-amd64.tar.gz

# --- the registry answers, before minutes of building --------------------------------------------
if [ -n "$registry" ]; then
  case "$registry" in
    *://*) die "REGISTRY is HOST[:PORT][/PATH] without a scheme (got $registry); REGISTRY_PLAIN_HTTP=1 for plain HTTP" ;;
  esac
  host=${registry%%/*}
  scheme=https
  [ "$plain_http" = 0 ] || scheme=http
  # Any HTTP answer will do (401 from a registry that wants a login is one): this asks only
  # whether something speaks HTTP there. Certificates are the tools' business (-k).
  if ! err=$(curl -ksS -o /dev/null --connect-timeout 5 --max-time 10 "$scheme://$host/v2/" 2>&1); then
    die "registry $host does not answer at $scheme://$host/v2/: ${err#curl: }"
  fi
fi

out=${VL_RELEASE_DIR:-$repo/target/release-artifacts}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Two releases into one directory take turns.
exec 9>"$out/.lock"
flock 9
find "$out" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
work=$(mktemp -d "${TMPDIR:-/tmp}/vl-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- the binary ----------------------------------------------------------------------------------
if [ -n "${VL_BINARY:-}" ]; then
  bin=$VL_BINARY
  [ -x "$bin" ] || die "VL_BINARY=$bin is not an executable file"
else
  echo "== cargo build --release --locked: $name $version (a cold build takes minutes; an up-to-date one a second)" >&2
  bin=$(cargo build --release --locked --message-format=json-render-diagnostics | python3 -c '
import json, sys
exe = None
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "volume-leftovers" \
            and "bin" in m["target"]["kind"] and m.get("executable"):
        exe = m["executable"]
print(exe or "")')
  [ -n "$bin" ] || die "cargo did not report the $name binary"
fi
# `volume-leftovers 0.1.0 (revision 0123456789ab)`: the version this release is, and the commit.
binary_version=$("$bin" --version) || die "$bin --version failed"
case "$binary_version" in
  "$name $version (revision "*) ;;
  *) die "$bin --version says '$binary_version', not $name $version" ;;
esac
revision=${binary_version##*(revision }
revision=${revision%)}
head=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ "$revision" = "$head" ] ||
  echo "   note: the binary was built from revision $revision; the checkout is at $head" >&2
echo "== release $version (revision $revision) into $out" >&2

# --- the image -------------------------------------------------------------------------------------
echo "== the image (scripts/image.sh)" >&2
VL_BINARY=$bin VL_IMAGE_DIR=$work/image scripts/image.sh >/dev/null
mv "$work/image/oci" "$out/oci"
mv "$work/image/$name-$version.tar" "$out/$name-$version.tar"
python3 - "$work/image/summary.json" "$out/image.json" "$out" <<'EOF'
import json, os, sys
src, dst, out = sys.argv[1:]
s = json.load(open(src))
# Paths relative to the release directory: where it was built means nothing to whoever gets it.
s["tarball"] = os.path.basename(s["tarball"])
s["oci"] = "oci:" + s["oci"].rsplit(":", 1)[1]
json.dump(s, open(dst, "w"), indent=1)
EOF
manifest_digest=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifest_digest"])' "$out/image.json")

# --- the chart -------------------------------------------------------------------------------------
echo "== the chart (helm lint --strict, helm package)" >&2
helm_dir=$(tools/build.sh helm 2>"$work/helm-build.log") || { cat "$work/helm-build.log" >&2; die "tools/build.sh helm failed"; }
helm_bin=$helm_dir/helm
"$helm_bin" lint --strict "$chart_dir" >"$work/lint.log" 2>&1 || { cat "$work/lint.log" >&2; die "helm lint --strict $chart_dir failed"; }
"$helm_bin" package "$chart_dir" --destination "$out" >"$work/package.log" 2>&1 ||
  { cat "$work/package.log" >&2; die "helm package $chart_dir failed"; }
chart=$out/$name-$chart_version.tgz
[ -f "$chart" ] || die "helm package did not write $chart: $(cat "$work/package.log")"

# --- the kubectl plugin ---------------------------------------------------------------------------
echo "== the kubectl plugin: $archive" >&2
# The SOURCE_DATE_EPOCH of the image (the commit's time): the same commit and binary give the same
# archive. Without the debug sections, as in the image (about 100 -> 19 MB).
timestamp=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
mkdir -p "$work/plugin"
objcopy --strip-debug "$bin" "$work/plugin/$plugin"
chmod 0755 "$work/plugin/$plugin"
install -m 0644 LICENSE "$work/plugin/LICENSE"
tar -C "$work/plugin" --sort=name --mtime="@$timestamp" --owner=0 --group=0 --numeric-owner \
  -cf - "$plugin" LICENSE | gzip -n -9 >"$out/$archive"
(cd "$out" && sha256sum "$archive" >"$archive.sha256")
archive_sha=$(cut -d' ' -f1 "$out/$archive.sha256")

if [ -n "$release_url" ]; then
  uri=$release_url/$archive
else
  uri=https://example.invalid/set-RELEASE_URL/$archive
  echo "   note: RELEASE_URL is not set: leftovers.yaml's uri is a placeholder ($uri)" >&2
fi
source_url=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["labels"].get("org.opencontainers.image.source", ""))' "$out/image.json")
{
  cat <<EOF
# krew's plugin manifest (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/), written
# by scripts/release.sh for $name $version (revision $revision).
#   kubectl krew install --manifest=leftovers.yaml [--archive=$archive]
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: leftovers
spec:
  version: v$version
EOF
  [ -z "$source_url" ] || echo "  homepage: $source_url"
  cat <<EOF
  shortDescription: Report PersistentVolumes that survived their claims
  description: |
    Lists the PersistentVolumes that outlived, lost or never met their claims (Released volumes
    whose claim is gone, claims re-created under the same name, failed reclaims, ...), the same
    findings the volume-leftovers operator publishes as VolumeLeftover objects, without
    installing anything: it only reads PVs, claims and StorageClasses.
      kubectl leftovers              a table on a terminal, one JSON line per finding in a pipe
      kubectl leftovers -o wide      (json, yaml, name)
    Exit code 3 when there are leftovers, 4 when it could not read everything it needs.
  caveats: |
    kubectl leftovers needs list on persistentvolumes, persistentvolumeclaims and storageclasses.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $uri
    sha256: $archive_sha
    bin: $plugin
    files:
    - from: $plugin
      to: .
    - from: LICENSE
      to: .
EOF
} >"$out/leftovers.yaml"

# --- checksums -----------------------------------------------------------------------------------
(cd "$out" && find . -type f ! -name .lock | sed 's#^\./##' | LC_ALL=C sort | xargs -d '\n' sha256sum >"$work/SHA256SUMS")
mv "$work/SHA256SUMS" "$out/SHA256SUMS"
echo "   SHA256SUMS: $(wc -l <"$out/SHA256SUMS") files" >&2

# --- publish -------------------------------------------------------------------------------------
# push WHAT LOG command...: bounded by VL_PUSH_TIMEOUT; on failure one line with the tool's last
# words (skopeo's `level=fatal msg="..."` unwrapped; helm's `Error: ...`).
push() {
  local what=$1 log=$2 rc=0 cause
  shift 2
  timeout --kill-after=5 "$push_timeout" "$@" >"$log" 2>&1 || rc=$?
  [ "$rc" = 0 ] && return 0
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    cause="no answer within ${push_timeout} s (VL_PUSH_TIMEOUT)"
  else
    cause=$(grep -v '^[[:space:]]*$' "$log" | tail -n1 |
      sed -E 's/^time="[^"]*" level=[a-z]+ msg="(.*)"$/\1/; s/\\n$//; s/\\"/"/g; s/^Error: //')
  fi
  die "pushing $what to $registry failed: ${cause:-exit code $rc} (output: $log)"
}
if [ -n "$registry" ]; then
  "$repo/scripts/ensure-tools.sh" skopeo
  image_ref=$registry/$name:$version
  chart_ref=oci://$registry/charts
  tls=()
  [ "$plain_http" = 0 ] || tls=(--dest-tls-verify=false)
  helm_tls=()
  [ "$plain_http" = 0 ] || helm_tls=(--plain-http)
  echo "== pushing the image to docker://$image_ref" >&2
  push "the image" "$out/push-image.log" skopeo copy --quiet "${tls[@]}" --digestfile "$work/digest" \
    "oci:$out/oci:$version" "docker://$image_ref"
  pushed=$(cat "$work/digest")
  [ "$pushed" = "$manifest_digest" ] ||
    echo "   note: the registry stored manifest $pushed, the OCI layout has $manifest_digest (converted on the way)" >&2
  echo "   $image_ref@$pushed" >&2
  echo "== pushing the chart to $chart_ref/$name:$chart_version" >&2
  push "the chart" "$out/push-chart.log" "$helm_bin" push "$chart" "$chart_ref" "${helm_tls[@]}"
  echo "   $(grep -i '^Digest:' "$out/push-chart.log" || true)" >&2
  echo "== published; install with:" >&2
  echo "   helm install $name $chart_ref/$name --version $chart_version${helm_tls[*]:+ ${helm_tls[*]}} \\" >&2
  echo "     -n $name --create-namespace --set image.repository=$registry/$name" >&2
fi
echo "== release $version: $(cd "$out" && find . -maxdepth 1 ! -name . ! -name .lock ! -name 'push-*.log' | sed 's#^\./##' | LC_ALL=C sort | tr '\n' ' ')" >&2
echo "$out"
