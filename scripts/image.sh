#!/usr/bin/env bash
# Builds the volume-leftovers container image without a daemon (buildah, from ./Containerfile).
#
#   scripts/image.sh                  build the release binary, assemble the context, build, export
#   scripts/image.sh --context-only   only assemble the context (for `docker build`, see below)
#
# Environment:
#   VL_BINARY     use this binary instead of running `cargo build --release --locked`
#   VL_IMAGE_DIR  output directory (default target/image)
#   VL_STRIP      0 keeps the binary's debug sections (default: objcopy --strip-debug, about 100 -> 19 MB)
#   VL_IMAGE_CEPH 1 adds the Ceph client libraries (librbd.so.1, librados.so.2 and every library
#                 they need, from this machine's Debian packages librbd1 and librados2) for the
#                 opt-in Ceph RBD census, and tags the image VERSION-ceph; the operator loads them
#                 only when the census is configured
#   VL_IMAGE_SOURCE  the org.opencontainers.image.source label, taken as given; set but empty: no
#                 label. Unset: the `origin` remote when it names a host (user and password
#                 dropped, `git@host:owner/repo.git` and ssh:// turned into https://host/owner/repo);
#                 no remote, or a remote that is a path (a clone of a local clone, as CI makes):
#                 no label. An absent label says "unknown"; an empty or local-path one says nonsense.
#   SOURCE_DATE_EPOCH  the image's creation time and layer mtimes (default: the commit's time; 0
#                 outside a git checkout), so the same commit and binary give the same digest
#
# Writes, with VERSION from Cargo.toml:
#   $VL_IMAGE_DIR/context/                          the build context (binary, rootfs/)
#   $VL_IMAGE_DIR/oci/                              OCI image layout, reference name VERSION
#                                                   (e.g. umoci unpack --image target/image/oci:0.1.0)
#   $VL_IMAGE_DIR/volume-leftovers-VERSION.tar      docker-archive tagged volume-leftovers:VERSION
#                                                   (docker load / podman load / ctr images import)
#   $VL_IMAGE_DIR/summary.json                      what was built: reference, digests, labels,
#                                                   layer count, sizes in bytes (uncompressed, gzip,
#                                                   the tarball), build seconds
#
# Paths are relative to this script, so it works from any clone and any working directory; the
# only things written outside $VL_IMAGE_DIR are cargo's target directory and buildah's temporary
# storage under $TMPDIR (removed on exit).
#
# buildah and skopeo are installed from Debian when missing (scripts/ensure-tools.sh). buildah's
# storage is a temporary directory (vfs driver, chroot isolation: no daemon, no mounts, nothing
# cached; the image has no base to cache) that is removed on exit. The last line on stdout is the
# path of the tarball; progress and sizes go to stderr.
#
# The same image with Docker (or `podman build`, `buildah build`), after `--context-only`:
#   docker build -f Containerfile -t volume-leftovers:0.1.0 --build-arg VERSION=0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     [--label org.opencontainers.image.source=https://HOST/OWNER/REPO] target/image/context
#
# Loading the tarball (it is tagged docker.io/library/volume-leftovers:VERSION, which is what
# `image: volume-leftovers:VERSION` in deploy/deployment.yaml resolves to):
#   docker load -i target/image/volume-leftovers-0.1.0.tar
#   podman load -i target/image/volume-leftovers-0.1.0.tar
#   ctr -n k8s.io images import target/image/volume-leftovers-0.1.0.tar     (a kubelet's containerd)
#   kind load image-archive target/image/volume-leftovers-0.1.0.tar
#   skopeo copy oci:target/image/oci:0.1.0 docker://REGISTRY/volume-leftovers:0.1.0   (a registry)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
# The release binary make test built, when no VL_BINARY is given (one target directory).
# shellcheck source=scripts/cache.sh
. scripts/cache.sh
export PATH="$PATH:/usr/sbin:/sbin"

context_only=false
case "${1:-}" in
  "") ;;
  --context-only) context_only=true ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "image.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac

name=volume-leftovers
version=$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version[[:space:]]*=/ { print $2; exit }' Cargo.toml)
[ -n "$version" ] || { echo "image.sh: no version in Cargo.toml's [package]" >&2; exit 1; }
out=${VL_IMAGE_DIR:-$repo/target/image}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Two builds into one directory take turns.
exec 9>"$out/.lock"
flock 9
ctx=$out/context
ceph=${VL_IMAGE_CEPH:-0}
[ "$ceph" = 0 ] || [ "$ceph" = 1 ] || { echo "image.sh: VL_IMAGE_CEPH must be 0 or 1" >&2; exit 2; }
[ "$ceph" = 0 ] || version=$version-ceph
tarball=$out/$name-$version.tar
ref=$name:$version

# --- the binary ------------------------------------------------------------------------------
if [ -n "${VL_BINARY:-}" ]; then
  bin=$VL_BINARY
  [ -x "$bin" ] || { echo "image.sh: VL_BINARY=$bin is not an executable file" >&2; exit 1; }
else
  # What is built and how long it takes, before cargo starts: a cold build is minutes of silence
  # otherwise. Measured on 2 cores: 8 min 14 s (6 min CPU) while another build shared them; with
  # the cores to itself about 4 min. Cargo's own progress follows on stderr.
  echo "== cargo build --release --locked: volume-leftovers $version (the operator binary, release profile)" >&2
  echo "   a cold build (empty target directory) takes about 4 min on 2 idle cores, longer on busy ones;" >&2
  echo "   an up-to-date one a second" >&2
  build_start=$SECONDS
  bin=$(cargo build --release --locked --message-format=json-render-diagnostics | python3 -c '
import json, sys
exe = None
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "volume-leftovers" \
            and "bin" in m["target"]["kind"] and m.get("executable"):
        exe = m["executable"]
print(exe or "")')
  [ -n "$bin" ] || { echo "image.sh: cargo did not report the volume-leftovers binary" >&2; exit 1; }
  echo "   cargo build took $((SECONDS - build_start)) s" >&2
fi

# --- the context -----------------------------------------------------------------------------
echo "== assembling $ctx from $bin" >&2
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/etc"
# Without the debug sections: the release profile's line tables (and std's debug info) are 80% of
# the binary (about 100 MB -> 19 MB). The code and the symbol table stay, so a backtrace still names the
# functions, without file:line. VL_STRIP=0 keeps them.
if [ "${VL_STRIP:-1}" = 0 ]; then
  install -m 0755 "$bin" "$ctx/$name"
else
  objcopy --strip-debug "$bin" "$ctx/$name"
  chmod 0755 "$ctx/$name"
fi

# The loader (PT_INTERP) and every library ldd resolves, as regular files at the paths the loader
# looks in (Debian's multiarch /lib/x86_64-linux-gnu is in glibc's built-in search path, so no
# ld.so.cache is needed). A static binary has no interpreter and needs nothing.
interp=$(readelf -lW "$ctx/$name" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
if [ -n "$interp" ]; then
  mapfile -t libs < <(ldd "$ctx/$name" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
  for lib in "$interp" "${libs[@]}"; do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
    chmod 0755 "$ctx/rootfs$lib"
  done
  echo "   dynamically linked: $(printf '%s\n' "$interp" "${libs[@]}" | sort -u | tr '\n' ' ')" >&2
else
  echo "   statically linked: no libraries" >&2
fi
if [ "$ceph" = 1 ]; then
  # dlopen()ed by name at run time: the two libraries and their closure, at their own paths.
  ceph_libs=()
  for l in librbd.so.1 librados.so.2; do
    # awk reads to the end: leaving early would let ldconfig die of SIGPIPE, which pipefail
    # turns into a silent exit of this script.
    p=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ && !found { print $NF; found = 1 }')
    [ -n "$p" ] || { echo "image.sh: $l not found (apt-get install librbd1 librados2)" >&2; exit 1; }
    ceph_libs+=("$p")
    mapfile -t -O "${#ceph_libs[@]}" ceph_libs < <(ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
  done
  mapfile -t ceph_libs < <(printf '%s\n' "${ceph_libs[@]}" | sort -u)
  for lib in "${ceph_libs[@]}"; do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
    chmod 0755 "$ctx/rootfs$lib"
  done
  echo "   Ceph client libraries: ${#ceph_libs[@]} files, $(du -sh "$ctx/rootfs" | cut -f1) of libraries in all" >&2
fi

cat >"$ctx/rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$ctx/rootfs/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
# glibc's own default without this file would try DNS before /etc/hosts.
cat >"$ctx/rootfs/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
chmod 0644 "$ctx/rootfs/etc/"*
find "$ctx" -type d -exec chmod 0755 {} +

# --- labels ----------------------------------------------------------------------------------
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "   note: the working tree has uncommitted changes; the revision label names HEAD ($revision)" >&2
fi
# Layer mtimes and the creation date: the commit's time, so that the same commit and binary give
# the same image digest.
timestamp=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}
# The web URL of a remote: https://host[:port]/path without credentials or .git; nothing for a
# path or anything else without a host.
web_url() {
  python3 - "$1" <<'EOF'
import re, sys, urllib.parse
r = sys.argv[1].strip()
m = re.fullmatch(r"(?:[^@/\s]+@)?([A-Za-z0-9.-]{2,}):(?!//)(\S+)", r)  # scp-like git@host:owner/repo
if m:
    r = f"ssh://{m.group(1)}/{m.group(2)}"
u = urllib.parse.urlsplit(r)
if u.scheme not in ("https", "http", "ssh", "git", "git+ssh") or not u.hostname:
    sys.exit()
web = u.scheme in ("https", "http")
host = u.hostname + (f":{u.port}" if u.port and web else "")  # ssh's port is not the web's
path = u.path.rstrip("/")
path = path[: -len(".git")] if path.endswith(".git") else path
print(urllib.parse.urlunsplit((u.scheme if web else "https", host, path, "", "")))
EOF
}
if [ -n "${VL_IMAGE_SOURCE+set}" ]; then
  source_url=$VL_IMAGE_SOURCE
else
  source_url=$(web_url "$(git -C "$repo" remote get-url origin 2>/dev/null || true)")
fi
labels=()
[ -z "$source_url" ] || labels+=(--label "org.opencontainers.image.source=$source_url")

if $context_only; then
  echo "== context ready; docker build -f $repo/Containerfile -t $ref --build-arg VERSION=$version" \
    "--build-arg REVISION=$revision${source_url:+ --label org.opencontainers.image.source=$source_url} $ctx" >&2
  echo "$ctx"
  exit 0
fi

# --- build -----------------------------------------------------------------------------------
"$repo/scripts/ensure-tools.sh" buildah skopeo
echo "== image $ref: revision $revision, source label ${source_url:-none (no remote URL)}" >&2

store=$(mktemp -d "${TMPDIR:-/tmp}/vl-buildah.XXXXXX")
bah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
cleanup() {
  "${bah[@]}" rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$store"
}
trap cleanup EXIT

echo "== buildah build (storage $store, removed afterwards)" >&2
start=$(date +%s.%N)
# buildah writes its temporary layer tarballs to $TMPDIR (default /var/tmp): keep them in the store.
TMPDIR=$store "${bah[@]}" build --quiet --layers --isolation chroot --identity-label=false --timestamp "$timestamp" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" "${labels[@]}" \
  -f "$repo/Containerfile" -t "localhost/$ref" "$ctx" >/dev/null

rm -rf "$out/oci" "$tarball"
TMPDIR=$store "${bah[@]}" push --quiet "localhost/$ref" "oci:$out/oci:$version"
skopeo copy --quiet "oci:$out/oci:$version" "docker-archive:$tarball:$ref"
end=$(date +%s.%N)

# --- check what docker load, podman load and ctr import read ----------------------------------
skopeo inspect "docker-archive:$tarball" >"$store/inspect.json"
skopeo inspect --config "docker-archive:$tarball" >"$store/config.json"
python3 - "$tarball" "$ref" "$version" "$out/oci" "$store" "$start" "$end" "$source_url" "$out/summary.json" <<'EOF'
import hashlib, json, os, sys, tarfile
path, ref, version, oci, store, start, end, source, summary = sys.argv[1:]
fail = lambda msg: sys.exit(f"image.sh: {path}: {msg}")
with tarfile.open(path) as t:
    names = set(t.getnames())
    for f in ("manifest.json", "repositories"):
        if f not in names:
            fail(f"no {f}")
    manifest = json.load(t.extractfile("manifest.json"))
    repositories = json.load(t.extractfile("repositories"))
    if len(manifest) != 1:
        fail(f"manifest.json has {len(manifest)} images, not 1")
    m = manifest[0]
    full = "docker.io/library/" + ref
    if m.get("RepoTags") not in ([ref], [full]):
        fail(f"RepoTags {m.get('RepoTags')}, expected [{full!r}]")
    repo, tag = m["RepoTags"][0].rsplit(":", 1)
    if tag not in repositories.get(repo, {}):
        fail(f"repositories does not tag {repo}:{tag}")
    for member in [m["Config"], *m["Layers"]]:
        if member not in names:
            fail(f"manifest.json names {member}, which the tar lacks")
    config_bytes = t.extractfile(m["Config"]).read()
    config = json.loads(config_bytes)
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    uncompressed = sum(t.getmember(l).size for l in m["Layers"])
    # docker load checks each layer against the config's diff_ids.
    diff_ids = ["sha256:" + hashlib.sha256(t.extractfile(l).read()).hexdigest() for l in m["Layers"]]
    if diff_ids != config["rootfs"]["diff_ids"]:
        fail(f"layer digests {diff_ids} differ from the config's diff_ids {config['rootfs']['diff_ids']}")
c = config["config"]
want = {"User": "65532:65532", "Entrypoint": ["/usr/local/bin/volume-leftovers"], "Cmd": ["run"]}
for k, v in want.items():
    if c.get(k) != v:
        fail(f"config {k} is {c.get(k)!r}, expected {v!r}")
labels = c.get("Labels") or {}
for k in ("version", "licenses", "title", "description", "revision"):
    if "org.opencontainers.image." + k not in labels:
        fail(f"no label org.opencontainers.image.{k}")
# The source label carries the URL, or is absent: never empty.
if labels.get("org.opencontainers.image.source") != (source or None):
    fail(f"label org.opencontainers.image.source is {labels.get('org.opencontainers.image.source')!r},"
         f" expected {source or None!r}")
if labels["org.opencontainers.image.version"] != version or labels["org.opencontainers.image.licenses"] != "Apache-2.0":
    fail(f"labels {labels}")
if config.get("architecture") != "amd64" and config.get("architecture") is None:
    fail("no architecture")
inspect = json.load(open(f"{store}/inspect.json"))
if inspect.get("Labels") != labels or inspect.get("Os") != "linux":
    fail(f"skopeo inspect disagrees: {inspect}")
# The OCI layout's manifest: its layers are what a registry would store (gzip).
index = json.load(open(f"{oci}/index.json"))
desc = [d for d in index["manifests"]
        if d.get("annotations", {}).get("org.opencontainers.image.ref.name") == version]
if len(desc) != 1:
    fail(f"{oci}/index.json has no single manifest named {version}")
om = json.load(open(f"{oci}/blobs/{desc[0]['digest'].replace(':', '/')}"))
compressed = sum(l["size"] for l in om["layers"])
tar_bytes = os.path.getsize(path)
json.dump({
    "ref": ref, "version": version, "tarball": path, "oci": f"{oci}:{version}",
    "config_digest": config_digest, "manifest_digest": desc[0]["digest"], "labels": labels,
    "user": c["User"], "entrypoint": c["Entrypoint"], "cmd": c["Cmd"], "layers": len(om["layers"]),
    "uncompressed_bytes": uncompressed, "compressed_bytes": compressed, "tarball_bytes": tar_bytes,
    "build_seconds": round(float(end) - float(start), 2),
}, open(summary, "w"), indent=1)
mib = lambda n: f"{n / 1048576:.1f} MiB"
print(f"== {ref}: {len(om['layers'])} layers, {mib(uncompressed)} uncompressed, {mib(compressed)} compressed (gzip),"
      f" {mib(tar_bytes)} as a docker-archive, built in {float(end) - float(start):.1f} s", file=sys.stderr)
print(f"   config {config_digest[:19]}, manifest {desc[0]['digest'][:19]}, user {c['User']},"
      f" entrypoint {c['Entrypoint']} {c['Cmd']}", file=sys.stderr)
EOF
echo "   OCI layout:     $out/oci (reference $version)" >&2
echo "   docker-archive: $tarball (RepoTags docker.io/library/$ref)" >&2
echo "   summary:        $out/summary.json" >&2
echo "$tarball"
