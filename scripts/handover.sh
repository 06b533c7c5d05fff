#!/usr/bin/env bash
# Measures the leader handover of two operator replicas on the real control plane: the e2e test
# `two_replicas_one_writer_handover_on_kill_and_on_sigterm` (tests/e2e/ha.rs) kills the leader
# with SIGKILL, then stops the next one with SIGTERM, asserts the bounds the lease settings give
# (src/publish/leader.rs, takeover_bound) and prints one `handover:` line per run. This script runs it
# RUNS times (default 1) and prints those lines on standard output, for
#
#   scripts/handover.sh [RUNS] > handover.out && scripts/figures.sh handover --from handover.out
#
# The test starts its own control plane (controlplane/build.sh builds or reuses it) and stops
# everything it started. Cargo's progress and the test's other output go to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/handover.sh [RUNS]" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/volume-leftovers/cargo-target}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for i in $(seq 1 "$runs"); do
  echo "== handover run $i of $runs" >&2
  cargo test --locked --test e2e -- --exact --nocapture \
    ha::two_replicas_one_writer_handover_on_kill_and_on_sigterm >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "handover.sh: the test failed (run $i)" >&2; exit 1; }
  line=$(grep -m1 '^handover: ' "$log") || { echo "handover.sh: the test printed no handover line" >&2; exit 1; }
  echo "run $i: ${line#handover: }"
done
