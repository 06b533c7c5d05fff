#!/usr/bin/env bash
# Runs every test. The end-to-end tests start real control planes (controlplane/up.sh) and fail,
# never skip, when one cannot be built or started.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

for tool in cargo go openssl curl python3; do
  command -v "$tool" >/dev/null || { echo "test.sh: $tool is required but not on PATH" >&2; exit 1; }
done

echo "== control plane binaries (cached by pinned version)"
controlplane/build.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --tests --locked 2>&1 | tee "$log"

# Every control plane a test started must be gone once the test binaries have exited (each has a
# watchdog that stops it within a second or two of its owner's exit).
runs="$PWD/target/tmp/controlplane-"
for _ in $(seq 20); do
  pgrep -f "$runs" >/dev/null || break
  sleep 0.5
done
if pgrep -af "$runs"; then
  echo "test.sh: control-plane processes outlived the tests (listed above)" >&2
  exit 1
fi
echo "== no control-plane process left behind"

# One closing line for the whole run.
awk '/^test result:/ { p += $4; f += $6 } END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
