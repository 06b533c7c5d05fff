#!/usr/bin/env bash
# A Python for the project's own Azure Resource Manager test server (tests/fake-azure-arm/server.py):
# Microsoft's `azure-mgmt-compute` 34.1.0, whose msrest-style models of Compute API version
# 2024-03-02 (`azure.mgmt.compute.v2024_03_02.models`: DiskList, SnapshotList, Disk, Snapshot and
# what they contain, each with its `_attribute_map` and `_validation`) the server validates every
# response it sends against. 34.1.0 is the last release that still ships that API version; later
# ones dropped it. Installed with its dependencies (azure-core, azure-mgmt-core, isodate, ...:
# the models' `_serialization` module imports them), every one pinned, from PyPI into a venv
# outside the clone, keyed by the pins and the Python version; a second call returns at once.
# No `cryptography`: the server makes its TLS certificates with the openssl CLI. Prints the
# interpreter's path on stdout, everything else on stderr.
#
#   VOLUME_LEFTOVERS_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers)
set -euo pipefail
compute_pin="azure-mgmt-compute==34.1.0"
# Its dependency closure as pip resolved it for 34.1.0, pinned so that every machine validates
# with the same code (constraints: pip installs only what 34.1.0 needs, at these versions).
dep_pins=(
  "azure-common==1.1.28"
  "azure-core==1.41.0"
  "azure-mgmt-core==1.6.0"
  "certifi==2026.10.19.post1"
  "charset-normalizer==3.5.3"
  "idna==3.21"
  "isodate==0.7.2"
  "requests==2.34.2"
  "typing_extensions==4.16.0"
  "urllib3==2.8.0"
)
command -v python3 >/dev/null || { echo "azure-python.sh: python3 is required" >&2; exit 1; }
key="$(printf '%s ' "$compute_pin" "${dep_pins[@]}" "$(python3 -c 'import sys; print(sys.version.split()[0])')" | sha256sum | cut -c1-12)"
root=${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}
dest="$root/python/azure-$key"
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
echo "azure-python.sh: installing $compute_pin and its dependencies into $dest" >&2
# Debian's python3 has no venv module (ensurepip) without python3-venv.
"$(dirname "${BASH_SOURCE[0]}")/ensure-tools.sh" python3-venv
rm -rf "$dest"
python3 -m venv "$dest" >&2
constraints="$dest/constraints.txt"
printf '%s\n' "${dep_pins[@]}" >"$constraints"
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check -c "$constraints" "$compute_pin" >&2
# What it installed: exactly the pinned versions, nothing unpinned besides pip's own, and the
# models the server validates against, with the msrest metadata it walks.
"$dest/bin/python" - "$compute_pin" "${dep_pins[@]}" >&2 <<'PY'
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pins = {norm(n): v for n, v in (p.split("==") for p in sys.argv[1:])}
installed = {norm(d.metadata["Name"]): d.version for d in md.distributions()}
for name, version in pins.items():
    assert installed.get(name) == version, f"{name}: installed {installed.get(name)}, pinned {version}"
extra = sorted(set(installed) - set(pins) - {"pip", "setuptools", "wheel"})
assert not extra, f"installed but not pinned: {extra}"
from azure.mgmt.compute.v2024_03_02.models import DiskList, SnapshotList, Disk, Snapshot, DiskState
from azure.mgmt.compute._serialization import Deserializer  # noqa: F401  (iso-8601 parsing)
for cls in (DiskList, SnapshotList, Disk, Snapshot):
    assert isinstance(cls._attribute_map, dict) and isinstance(cls._validation, dict), cls
assert DiskList._attribute_map["value"]["type"] == "[Disk]", DiskList._attribute_map
assert SnapshotList._attribute_map["value"]["type"] == "[Snapshot]", SnapshotList._attribute_map
assert Disk._attribute_map["disk_state"]["key"] == "properties.diskState", Disk._attribute_map
assert "Unattached" in {s.value for s in DiskState}
PY
touch "$dest/.complete"
echo "$dest/bin/python"
