#!/usr/bin/env bash
# Makes sure the daemonless container tools that scripts/image.sh and scripts/run-image.sh use, and
# the Ceph daemons and CLIs of the census tests (ceph/up.sh), are on PATH, installing the missing
# ones from Debian's packages (tool name = package name, except rbd: ceph-common).
#
#   scripts/ensure-tools.sh TOOL...      e.g. buildah skopeo   or   umoci runc   or   ceph-mon ceph-osd rbd
#
# Fast and silent when every tool is present (one `command -v` each). Otherwise, as root on a
# Debian-like system, one non-interactive `apt-get install --no-install-recommends` (with an
# `apt-get update` first only when the package lists do not know a package); elsewhere it names
# what to install and fails.
set -euo pipefail

missing=()
for tool in "$@"; do
  case "$tool" in
    buildah | skopeo | umoci | runc | ceph-mon | ceph-osd | rbd) ;;
    *) echo "ensure-tools.sh: unknown tool $tool" >&2; exit 2 ;;
  esac
  # runc lives in /usr/sbin, which a non-login PATH may lack.
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0
# The packages that provide them (the tools are checked again by name after the install).
packages=()
for tool in "${missing[@]}"; do
  case "$tool" in
    rbd) packages+=(ceph-common) ;;
    *) packages+=("$tool") ;;
  esac
done

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools.sh: missing ${missing[*]}; install them (Debian/Ubuntu: apt-get install ${packages[*]})" >&2
  exit 1
fi

echo "ensure-tools.sh: installing ${packages[*]} (for ${missing[*]}) from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0 -qq)
known() { for p in "${packages[@]}"; do apt-cache show "$p" >/dev/null 2>&1 || return 1; done; }
known || "${apt[@]}" update >&2
# Lists that know the package can still be older than the mirror (a 404 on a superseded .deb):
# refresh them once and try again.
"${apt[@]}" install -y --no-install-recommends "${packages[@]}" >&2 ||
  { "${apt[@]}" update >&2 && "${apt[@]}" install -y --no-install-recommends "${packages[@]}" >&2; }
for tool in "${missing[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || {
    echo "ensure-tools.sh: $tool is still missing after apt-get install" >&2
    exit 1
  }
done
