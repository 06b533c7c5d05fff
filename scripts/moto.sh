#!/usr/bin/env bash
# moto's standalone server (`moto[server]` from PyPI), the EC2 endpoint of the EBS census tests
# (tests/ebs.rs): the real aws-sdk-ec2 talks to it by endpoint_url. Installed into a venv outside
# the clone, keyed by the pin and the Python version; a second call returns at once. Checks that
# what it installed runs (`moto_server --help`, and moto's EC2 backend imports) and is the pinned
# version. Prints the path of `moto_server`. Installs Debian's python3-venv first when
# `python3 -m venv` would fail (scripts/ensure-tools.sh).
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
set -euo pipefail
pin="moto[server]==5.2.5"
command -v python3 >/dev/null || { echo "moto.sh: python3 is required" >&2; exit 1; }
key="$(printf '%s %s' "$pin" "$(python3 -c 'import sys; print(sys.version.split()[0])')" | sha256sum | cut -c1-12)"
root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$root/python/moto-$key"
if [ -f "$dest/.complete" ]; then
  echo "$dest/bin/moto_server"
  exit 0
fi
mkdir -p "$root/python"
exec 9>"$root/python/.lock-$key"
flock 9
if [ -f "$dest/.complete" ]; then
  echo "$dest/bin/moto_server"
  exit 0
fi
echo "moto.sh: installing $pin into $dest" >&2
# Debian's python3 has no venv module (ensurepip) without python3-venv.
"$(dirname "${BASH_SOURCE[0]}")/ensure-tools.sh" python3-venv
rm -rf "$dest"
python3 -m venv "$dest" >&2
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
# What was installed runs: the server's entry point, and the EC2 backend the tests use.
"$dest/bin/moto_server" --help >/dev/null
"$dest/bin/python" - "$pin" >&2 <<'PY'
import importlib.metadata as md, sys
import moto, moto.ec2, moto.server  # noqa: F401
version = sys.argv[1].split("==")[1]
got = md.version("moto")
assert got == version, f"moto: installed {got}, pinned {version}"
print("moto", got)
PY
touch "$dest/.complete"
echo "$dest/bin/moto_server"
