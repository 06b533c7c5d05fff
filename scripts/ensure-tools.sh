#!/usr/bin/env bash
# Makes sure the tools the scripts use beyond what a newcomer's machine has (Rust, Go, Python 3,
# make, curl, openssl on Debian 12) are there, installing the missing ones from Debian's packages:
# the daemonless container tools of scripts/image.sh and scripts/run-image.sh, runc, the CNI
# plugins and iptables of the real node (node/build.sh), the Ceph daemons and CLIs of the census
# tests (ceph/up.sh), Python's venv module (scripts/seed-python.sh), GNU time (the Go builds
# record their peak memory with /usr/bin/time -v), the CNCF distribution registry server
# (docker-registry: the release test pushes to one of its own, scripts/release.sh), and the small
# tools of procps, iproute2 and uuid-runtime that minimal Debian images lack.
#
#   scripts/ensure-tools.sh TOOL...      e.g. buildah skopeo   or   umoci runc   or   ceph-mon ceph-osd rbd
#
# A TOOL is a command, looked up on PATH and in /usr/sbin and /sbin (which a non-login PATH may
# lack: runc, iptables and ip live there); `type -P`, so that a shell keyword or builtin (time,
# kill) does not count. Two are not commands: cni-plugins (/usr/lib/cni/bridge and host-local)
# and python3-venv (`python3 -m venv` works). Every TOOL is checked again after the install, so a
# wrong entry in the map below fails here, not later.
#
# Fast and silent when every tool is present. Otherwise, as root on a Debian-like system, one
# non-interactive `apt-get install --no-install-recommends` (with an `apt-get update` first when
# the package lists do not know a package, as on a machine whose lists are empty); elsewhere it
# names what to install and fails.
#
# Installing never starts a service: a package whose maintainer script would start one (Debian's
# docker-registry starts a registry on :5000, every interface, where an init system runs it) is
# installed under a policy-rc.d that denies it (unless the machine has its own, as container
# images do), and docker-registry's start at boot is disabled afterwards. The tests start the
# servers they need themselves, on 127.0.0.1, and stop them.
set -euo pipefail

# tool -> the Debian package that provides it (bookworm).
package_of() {
  case "$1" in
    buildah | skopeo | umoci | runc | iptables | mmdebstrap | ceph-mon | ceph-osd | time | python3-venv | docker-registry) echo "$1" ;;
    ceph | rbd | ceph-authtool) echo ceph-common ;;
    monmaptool) echo ceph-base ;;
    cni-plugins) echo containernetworking-plugins ;;
    pgrep | pkill | ps | kill) echo procps ;;
    ip | ss) echo iproute2 ;;
    uuidgen) echo uuid-runtime ;;
    *) return 1 ;;
  esac
}

present() {
  case "$1" in
    cni-plugins) [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] ;;
    python3-venv) python3 -c 'import ensurepip, venv' >/dev/null 2>&1 ;;
    time) [ -x /usr/bin/time ] ;;
    *) type -P "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] ;;
  esac
}

# --packages TOOL...: only prints "TOOL PACKAGE" lines (scripts/fresh-root.sh checks the map
# against what dpkg says owns each tool).
if [ "${1:-}" = --packages ]; then
  shift
  for tool in "$@"; do
    package=$(package_of "$tool") || { echo "ensure-tools.sh: unknown tool $tool" >&2; exit 2; }
    echo "$tool $package"
  done
  exit 0
fi

missing=()
packages=()
for tool in "$@"; do
  package=$(package_of "$tool") || { echo "ensure-tools.sh: unknown tool $tool" >&2; exit 2; }
  present "$tool" && continue
  missing+=("$tool")
  case " ${packages[*]} " in *" $package "*) ;; *) packages+=("$package") ;; esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools.sh: missing ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${packages[*]})" >&2
  exit 1
fi

echo "ensure-tools.sh: installing ${packages[*]} (for ${missing[*]}) from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0 -qq)
known() { for p in "${packages[@]}"; do apt-cache show "$p" >/dev/null 2>&1 || return 1; done; }
# An update that fails for one source (a third-party repository that is unreachable) still
# refreshes the others: the install below says whether what we need is there.
update() { "${apt[@]}" update >&2 || echo "ensure-tools.sh: apt-get update reported errors (above); trying the install anyway" >&2; }
known || update
# No service starts from these installs (invoke-rc.d and deb-systemd-invoke ask policy-rc.d; 101:
# action forbidden). A policy-rc.d the machine has is left as it is.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/ensure-tools.sh: no service starts during its install (removed afterwards)\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
# Lists that know the package can still be older than the mirror (a 404 on a superseded .deb):
# refresh them once and try again.
"${apt[@]}" install -y --no-install-recommends "${packages[@]}" >&2 ||
  { update && "${apt[@]}" install -y --no-install-recommends "${packages[@]}" >&2; }
case " ${packages[*]} " in
  *" docker-registry "*)
    # Its postinst enables the registry at boot (sysvinit links, a systemd unit): not wanted.
    update-rc.d docker-registry disable >/dev/null 2>&1 || true
    if command -v deb-systemd-helper >/dev/null 2>&1; then
      deb-systemd-helper disable docker-registry.service >/dev/null 2>&1 || true
    fi
    ;;
esac
for tool in "${missing[@]}"; do
  present "$tool" || {
    echo "ensure-tools.sh: $tool is still missing after apt-get install $(package_of "$tool")" >&2
    exit 1
  }
done
