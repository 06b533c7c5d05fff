#!/usr/bin/env bash
# Runs the project's install steps on a machine where nothing is installed yet: a minimal Debian
# root made by Debian's own tool (mmdebstrap), holding only what a newcomer's machine has (Python
# 3, make, curl, openssl, git, and the C compiler and linker Rust needs), with empty package lists
# (/var/lib/apt/lists), entered with unshare + chroot, with this machine's Go and Rust toolchains
# bind-mounted read-only at their own paths and the clone read-only at /src. There it runs, each
# against that empty state:
#
#   - every `ensure-tools.sh TOOL...` line of the scripts (test.sh's first, then the others), as
#     written, so a tool added anywhere is installed from nothing here too;
#   - scripts/seed-python.sh (Python's venv module and the seed's `kubernetes` client from PyPI);
#   - scripts/gce-python.sh (`cryptography` and Google's compute v1 discovery document, for the
#     project's Compute test server, which must then validate a body against that document),
#     scripts/azure-python.sh (`azure-mgmt-compute`'s models, for the project's ARM test server,
#     which must then validate a body against them) and
#     scripts/moto.sh (moto's EC2 server, which must then answer `--help`), from PyPI;
#   - once more, every tool at once: it must now be silent, and dpkg must name, as the owner of
#     each tool, the package ensure-tools.sh maps it to (a tool that an earlier line's packages
#     brought along is checked too);
#
# and fails loudly, with the step's output, when one fails. The PATH inside is a non-login one
# (no /usr/sbin, no /sbin), as a CI runner or `env -i` gives. Prints the seconds of each step.
#
#   scripts/fresh-root.sh            (make fresh-check)
#
# Cached outside the clone, under $cache/fresh-root/<pin> (pin: the suite and a hash of the
# mmdebstrap command and the mirror lines): base.tar, the bare root, and debs/ + pip/, the packages apt and
# pip downloaded. Only downloads are cached: every run unpacks the bare root again, so the
# project's scripts always start from "nothing installed, package lists empty" and always run
# `apt-get update`. The first run (no cache) costs minutes; later ones are dominated by dpkg.
#
# Needs root (mmdebstrap, mount, chroot); installs mmdebstrap with ensure-tools.sh when missing.
# The mirror is the one this machine's /etc/apt/sources.list* names for the suite
# (deb.debian.org when none does). The machine's extra CA certificates and PIP_* settings are
# passed in, so that the same registries are reachable inside as outside.
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
#   FRESH_ROOT_KEEP=1       keep the unpacked root (its path is printed) instead of removing it
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
export PATH="$PATH:/usr/sbin:/sbin"
suite=bookworm
# What the newcomer's machine has besides Go and Rust (README: Rust, Go, Python 3, make, curl,
# openssl); gcc and libc6-dev because Rust cannot link without them, git because it is a clone.
base_packages=python3,make,curl,openssl,ca-certificates,gcc,libc6-dev,git

[ "$(id -u)" = 0 ] || { echo "fresh-root.sh: needs root (mmdebstrap, mount, chroot)" >&2; exit 1; }
t_all=$SECONDS
t=$SECONDS
step_times=()
timed() { step_times+=("$(printf '%5d s  %s' "$((SECONDS - t))" "$1")"); t=$SECONDS; }
"$here/ensure-tools.sh" mmdebstrap
timed "mmdebstrap on this machine"

# --- the mirror: this machine's, for the suite and its -updates and -security ----------------
mapfile -t mirrors < <(python3 - "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/* <<'EOF'
import re, sys
suite, files = sys.argv[1], sys.argv[2:]
wanted = {suite, suite + "-updates", suite + "-security"}
out = []
def add(uri, suites, comps):
    for s in suites:
        if s in wanted and "main" in comps:
            line = f"deb {uri.rstrip('/')} {s} main"
            if line not in out:
                out.append(line)
for f in files:
    try:
        text = open(f).read()
    except OSError:
        continue
    if f.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            d = {}
            for l in stanza.splitlines():
                if l.startswith("#") or ":" not in l:
                    continue
                k, v = l.split(":", 1)
                d[k.strip().lower()] = v.split()
            if "deb" in d.get("types", []):
                for uri in d.get("uris", []):
                    add(uri, d.get("suites", []), d.get("components", []))
    elif f.endswith(".list"):
        for l in text.splitlines():
            l = re.sub(r"\[[^]]*\]", "", l.split("#", 1)[0]).split()
            if len(l) >= 4 and l[0] == "deb":
                add(l[1], [l[2]], l[3:])
if not any(l.split()[2] == suite for l in out):
    out.insert(0, f"deb http://deb.debian.org/debian {suite} main")
print("\n".join(out))
EOF
)

cache_root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
# The bare root is made by this command; the pin covers it and the mirrors, not the rest of this
# script, so that changing the steps below does not cost a new root.
base_cmd=(mmdebstrap --mode=root --variant=minbase --include="$base_packages" "$suite")
pin="$suite-$(printf '%s\n' "${base_cmd[@]}" "${mirrors[@]}" | sha256sum | cut -c1-12)"
cache=$cache_root/fresh-root/$pin
mkdir -p "$cache/debs/partial" "$cache/pip"
exec 9>"$cache/.lock"
flock 9

# --- the bare root, cached ---------------------------------------------------------------------
if [ ! -f "$cache/base.tar" ]; then
  echo "== fresh root: building the bare $suite root with mmdebstrap (cold: downloads about 100 MB)" >&2
  printf '   %s\n' "${mirrors[@]}" >&2
  log=$cache/base.log
  # (mmdebstrap writes a tarball because the name ends in .tar)
  rm -rf "$cache/base.tmp.tar"
  "${base_cmd[@]}" "$cache/base.tmp.tar" "${mirrors[@]}" >"$log" 2>&1 ||
    { tail -n 40 "$log" >&2; echo "fresh-root.sh: mmdebstrap failed (log: $log)" >&2; exit 1; }
  mv "$cache/base.tmp.tar" "$cache/base.tar"
  timed "mmdebstrap: the bare root (cached as $cache/base.tar)"
fi

root=$(mktemp -d "${TMPDIR:-/var/tmp}/vl-fresh-root.XXXXXX")
cleanup() {
  if [ "${FRESH_ROOT_KEEP:-0}" = 1 ]; then
    echo "fresh-root.sh: kept $root" >&2
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
tar -C "$root" -xf "$cache/base.tar"
# The point of the check: nothing of what the scripts install is there, and apt knows no package.
for p in buildah ceph-common runc iptables time python3-venv docker-registry; do
  if chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
    echo "fresh-root.sh: the bare root already has $p installed" >&2
    exit 1
  fi
done
if [ -n "$(ls -A "$root/var/lib/apt/lists" 2>/dev/null | grep -v -e '^lock$' -e '^partial$' -e '^auxfiles$')" ]; then
  echo "fresh-root.sh: the bare root's /var/lib/apt/lists is not empty" >&2
  exit 1
fi
# This machine's network settings: its resolver, its extra CAs (a proxy's), pip's configuration.
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
if [ -n "$(ls /usr/local/share/ca-certificates/ 2>/dev/null)" ]; then
  cp -L /usr/local/share/ca-certificates/* "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
[ -f /etc/pip.conf ] && cp -L /etc/pip.conf "$root/etc/pip.conf"
timed "unpacking the bare root"

# --- the toolchains, read-only at their own paths --------------------------------------------
go_bin=$(command -v go) || { echo "fresh-root.sh: go is not on PATH" >&2; exit 1; }
goroot=$(go env GOROOT)
cargo_bin=$(command -v cargo) || { echo "fresh-root.sh: cargo is not on PATH" >&2; exit 1; }
cargo_dir=$(dirname "$(readlink -f "$cargo_bin")")
ro_mounts=("$goroot" "$repo:/src")
rust_path=$cargo_dir
if [ -d "${RUSTUP_HOME:-$HOME/.rustup}" ]; then
  # rustup: its proxies in ~/.cargo/bin, the toolchains in ~/.rustup.
  rust_path=$(dirname "$cargo_bin")
  ro_mounts+=("${RUSTUP_HOME:-$HOME/.rustup}:/root/.rustup" "$rust_path:/root/.cargo/bin")
  rust_path=/root/.cargo/bin
else
  ro_mounts+=("$(dirname "$cargo_dir")")
fi
inner_path="$rust_path:$(dirname "$go_bin"):/usr/local/bin:/usr/bin:/bin"

# The ensure-tools.sh calls of the scripts (comments dropped; not this script's own, nor
# ensure-tools.sh's usage), test.sh's first, each with its tools as written.
mapfile -t tool_lines < <(cd "$repo" && for f in scripts/test.sh Makefile scripts/*.sh ceph/*.sh node/*.sh controlplane/*.sh tools/*.sh; do
  case "$f" in scripts/fresh-root.sh | scripts/ensure-tools.sh) continue ;; esac
  sed -E 's/^[[:space:]]*#.*//' "$f" | grep -oE 'ensure-tools\.sh"? [a-z0-9 -]+' || true
done | sed -E 's/^ensure-tools\.sh"? +//; s/ +$//' | awk 'NF && !seen[$0]++')
[ ${#tool_lines[@]} -gt 0 ] || { echo "fresh-root.sh: found no ensure-tools.sh call in the scripts" >&2; exit 1; }

# One shell inside the root runs every step and reports each one's seconds on fd 3.
inner=$(cat <<'EOF'
set -uo pipefail
cd /src
t=$SECONDS
report() { echo "$(($SECONDS - t)) $1" >&3; t=$SECONDS; }
run() { # what command...: output to a log, shown when it fails
  local what=$1 log; shift
  log=$(mktemp)
  echo "== fresh root: $what" >&2
  if ! "$@" >"$log" 2>&1; then
    sed 's/^/   | /' "$log" >&2
    report "$what (FAILED)"
    echo "fresh-root.sh: FAILED in the fresh root: $what" >&2
    exit 1
  fi
  report "$what"
}
all=()
for line in "$@"; do
  # shellcheck disable=SC2086 # one word per tool
  run "scripts/ensure-tools.sh $line" scripts/ensure-tools.sh $line
  all+=($line)
done
run "scripts/seed-python.sh" scripts/seed-python.sh
python=$(scripts/seed-python.sh)
run "the seed's Python imports kubernetes" "$python" -c 'import kubernetes'
# The cloud census tests' servers: each script checks what it installed itself; here they must
# also run from what they installed, as the tests start them.
run "scripts/gce-python.sh" scripts/gce-python.sh
gce_python=$(scripts/gce-python.sh)
run "the Compute test server validates a body against the discovery document" sh -c '
  set -e
  doc=$("$1" -c "import googleapiclient, pathlib; print(pathlib.Path(googleapiclient.__file__).parent / \"discovery_cache/documents/compute.v1.json\")")
  echo "{\"kind\": \"compute#diskList\", \"items\": []}" |
    "$1" tests/fake-gce-compute/server.py --discovery "$doc" --validate DiskList | grep -qx valid
  ! echo "{\"kind\": \"compute#diskList\", \"itemz\": []}" |
    "$1" tests/fake-gce-compute/server.py --discovery "$doc" --validate DiskList >/dev/null
' sh "$gce_python"
run "scripts/azure-python.sh" scripts/azure-python.sh
azure_python=$(scripts/azure-python.sh)
run "the ARM test server validates a body against azure-mgmt-compute's models" sh -c '
  set -e
  echo "{\"value\": []}" | "$1" tests/fake-azure-arm/server.py --validate DiskList | grep -qx valid
  ! echo "{\"valuez\": []}" | "$1" tests/fake-azure-arm/server.py --validate DiskList >/dev/null 2>&1
' sh "$azure_python"
run "scripts/moto.sh" scripts/moto.sh
moto_server=$(scripts/moto.sh)
run "moto_server --help" "$moto_server" --help
# Everything is there now: a second call installs nothing and says nothing.
out=$(scripts/ensure-tools.sh "${all[@]}" 2>&1) || { echo "$out" >&2; echo "fresh-root.sh: FAILED: ensure-tools.sh ${all[*]} after the installs" >&2; exit 1; }
[ -z "$out" ] || { echo "$out" >&2; echo "fresh-root.sh: FAILED: ensure-tools.sh still installs after the installs" >&2; exit 1; }
# The map is right for every tool, including those that an earlier line's packages brought
# along (runc comes with buildah): dpkg names the tool's package as its owner.
owners() { # paths... -> the packages dpkg says own them (usrmerge: /bin/ip is /usr/bin/ip)
  local p r
  for p in "$@"; do
    r=$(readlink -f "$p")
    for q in "$p" "$r" "${p#/usr}" "${r#/usr}"; do dpkg -S "$q" 2>/dev/null; done
  done | sed 's/: .*//' | tr ',' '\n' | tr -d ' ' | sort -u
}
check_map() {
  local tool pkg paths o
  while read -r tool pkg; do
    case "$tool" in
      cni-plugins) paths=(/usr/lib/cni/bridge /usr/lib/cni/host-local) ;;
      python3-venv) paths=() ;;
      *) mapfile -t paths < <(type -P "$tool"; ls -d "/usr/sbin/$tool" "/sbin/$tool" 2>/dev/null) ;;
    esac
    if [ ${#paths[@]} -eq 0 ]; then
      [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] ||
        { echo "ensure-tools.sh maps $tool to $pkg, which is not installed"; return 1; }
    else
      o=$(owners "${paths[@]}")
      grep -qx "$pkg" <<<"$o" || {
        echo "ensure-tools.sh maps $tool to $pkg, but dpkg says ${paths[*]} belongs to: $(echo $o)"
        return 1
      }
    fi
  done < <(scripts/ensure-tools.sh --packages "${all[@]}")
}
run "each tool is from the package ensure-tools.sh names" check_map
run "the toolchains: go version, cargo --version" sh -c 'go version && cargo --version'
EOF
)

times=$(mktemp)
rc=0
# A mount namespace of its own: every mount below disappears with it, also when this is killed.
unshare --mount --propagation private -- bash -c '
  set -euo pipefail
  root=$1 debs=$2 pip=$3 n=$4; shift 4
  mounts=("${@:1:$n}"); shift "$n"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t sysfs sysfs "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  mount --bind "$debs" "$root/var/cache/apt/archives"
  mkdir -p "$root/root/.cache/pip"
  mount --bind "$pip" "$root/root/.cache/pip"
  for m in "${mounts[@]}"; do
    src=${m%%:*} dst=${m#*:}
    [ "$dst" != "$m" ] || dst=$src
    mkdir -p "$root$dst"
    mount --bind "$src" "$root$dst"
    mount -o remount,bind,ro "$root$dst"
  done
  inner=$1 path=$2; shift 2
  exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LANG=C.UTF-8 TERM=dumb PATH="$path" \
    ${PIP_DEFAULT_TIMEOUT:+PIP_DEFAULT_TIMEOUT=$PIP_DEFAULT_TIMEOUT} \
    ${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
    /bin/bash -c "$inner" fresh-root "$@"
' fresh-root "$root" "$cache/debs" "$cache/pip" "${#ro_mounts[@]}" "${ro_mounts[@]}" \
  "$inner" "$inner_path" "${tool_lines[@]}" 3>"$times" || rc=$?
while read -r secs what; do
  step_times+=("$(printf '%5d s  %s' "$secs" "$what")")
done <"$times"
rm -f "$times"
t=$SECONDS
cleanup
trap - EXIT
timed "removing the root"
echo "== fresh root ($pin): seconds per step" >&2
printf '   %s\n' "${step_times[@]}" >&2
if [ "$rc" != 0 ]; then
  echo "fresh-root.sh: the install path failed on a fresh $suite root (exit $rc, see above)" >&2
  exit 1
fi
echo "== fresh root: every install step passed from nothing installed, in $((SECONDS - t_all)) s" >&2
