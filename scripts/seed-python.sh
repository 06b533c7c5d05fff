#!/usr/bin/env bash
# A Python with the `kubernetes` client, for running the seed's original tool
# (tests/seed/leftovers.py) as the e2e tests' oracle. Installed from PyPI into a venv outside the
# clone, keyed by the pin; a second call returns at once. Prints the interpreter's path. Installs
# Debian's python3-venv first when `python3 -m venv` would fail (scripts/ensure-tools.sh).
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
set -euo pipefail
pin="kubernetes==37.0.2"
command -v python3 >/dev/null || { echo "seed-python.sh: python3 is required" >&2; exit 1; }
key="$(printf '%s %s' "$pin" "$(python3 -c 'import sys; print(sys.version.split()[0])')" | sha256sum | cut -c1-12)"
root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$root/python/seed-$key"
if [ -f "$dest/.complete" ]; then
  echo "$dest/bin/python"
  exit 0
fi
mkdir -p "$root/python"
exec 9>"$root/python/.lock-$key"
flock 9
if [ -f "$dest/.complete" ]; then
  echo "$dest/bin/python"
  exit 0
fi
echo "seed-python.sh: installing $pin into $dest" >&2
# Debian's python3 has no venv module (ensurepip) without python3-venv.
"$(dirname "${BASH_SOURCE[0]}")/ensure-tools.sh" python3-venv
rm -rf "$dest"
python3 -m venv "$dest" >&2
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
touch "$dest/.complete"
echo "$dest/bin/python"
