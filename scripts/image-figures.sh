#!/usr/bin/env bash
# Builds the image with scripts/image.sh (from the release binary; cargo builds it when it is
# out of date) and prints what was built, from the summary.json that image.sh writes, for the
# docs' image block:
#
#   scripts/figures.sh image scripts/image-figures.sh
#
# image.sh's progress goes to standard error; standard output is the figures only. Extra
# arguments and the environment (VL_IMAGE_CEPH=1, VL_BINARY, VL_IMAGE_DIR) go to image.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/image.sh "$@" >/dev/null
summary=${VL_IMAGE_DIR:-target/image}/summary.json
python3 - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
mib = lambda n: f"{n / 1048576:.1f} MiB"
print(f"image {s['ref']}: {s['layers']} layers, {mib(s['uncompressed_bytes'])} uncompressed, "
      f"{mib(s['compressed_bytes'])} gzip-compressed (what a registry stores and a node pulls), "
      f"{mib(s['tarball_bytes'])} as a docker-archive")
print(f"built in {s['build_seconds']} s once the release binary exists (buildah, no daemon); user {s['user']}")
PY
