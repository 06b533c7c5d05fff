#!/usr/bin/env bash
# A Python for the project's own Compute Engine test server (tests/fake-gce-compute/server.py):
# `cryptography` (RS256 verification of the client's signed JWTs) and Google's published
# discovery document for compute v1, which ships in the `google-api-python-client` wheel
# (googleapiclient/discovery_cache/documents/compute.v1.json); the server validates every
# response it sends against it. The wheel is installed without its dependencies: only that file
# is read, no Google library is imported. Installed from PyPI into a venv outside the clone,
# keyed by the pins; a second call returns at once. Prints the interpreter's path.
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
set -euo pipefail
crypto_pin="cryptography==50.0.2"
discovery_pin="google-api-python-client==2.202.0"
command -v python3 >/dev/null || { echo "gce-python.sh: python3 is required" >&2; exit 1; }
key="$(printf '%s %s %s' "$crypto_pin" "$discovery_pin" "$(python3 -c 'import sys; print(sys.version.split()[0])')" | sha256sum | cut -c1-12)"
root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$root/python/gce-$key"
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
echo "gce-python.sh: installing $crypto_pin and $discovery_pin into $dest" >&2
"$(dirname "${BASH_SOURCE[0]}")/ensure-tools.sh" python3-venv
rm -rf "$dest"
python3 -m venv "$dest" >&2
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check "$crypto_pin" >&2
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$discovery_pin" >&2
# What it installed: the pinned versions, and the discovery document with the schemas the
# server validates against.
"$dest/bin/python" - "$crypto_pin" "$discovery_pin" >&2 <<'PY'
import importlib.metadata as md, json, pathlib, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    got = md.version(name)
    assert got == version, f"{name}: installed {got}, pinned {version}"
import googleapiclient
doc = pathlib.Path(googleapiclient.__file__).parent / "discovery_cache/documents/compute.v1.json"
d = json.loads(doc.read_text())
assert d["name"] == "compute" and d["version"] == "v1", (d["name"], d["version"])
for s in ("DiskAggregatedList", "DiskList", "Disk", "DisksScopedList"):
    assert s in d["schemas"], f"{doc}: no schema {s}"
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: F401
PY
touch "$dest/.complete"
echo "$dest/bin/python"
