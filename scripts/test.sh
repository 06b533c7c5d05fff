#!/usr/bin/env bash
# Runs every test. The end-to-end tests start real control planes (controlplane/up.sh), a real
# Helm, a daemonless container runtime, ... and fail, never skip, when one cannot be built or
# started.
#
# Everything built is cached outside the clone, keyed by its pin: the Go builds (control plane,
# Helm, ...) under ~/.cache/volume-leftovers, and cargo's target directory under
# ~/.cache/volume-leftovers/cargo-target unless CARGO_TARGET_DIR is set (scripts/cache.sh, which
# `make demo` shares), so that a CI run on a fresh clone recompiles only this crate.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
# iptables and runc live in /usr/sbin, which a non-login PATH (a CI runner's, env -i) lacks: the
# node tests run iptables, and kube-proxy and containerd find it and runc on PATH.
export PATH="$PATH:/usr/sbin:/sbin"
# shellcheck source=scripts/cache.sh
. scripts/cache.sh

# A nearly full disk fails the suite far from its cause (a Ceph monitor that will not start, a
# node evicting pods): say so first. A cold run's builds and the tests' scratch take about 25 GiB.
mkdir -p "$CARGO_TARGET_DIR"
free_gib=$(df -Pk "$CARGO_TARGET_DIR" | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "$free_gib" -lt 10 ]; then
  echo "test.sh: only ${free_gib} GiB free under $CARGO_TARGET_DIR; the suite needs about 25 GiB on a cold run (free some, e.g. an old target directory)" >&2
  exit 1
fi

# The seconds of each phase, printed at the end of the run (and read by scripts/figures.sh into
# docs/testing.md): `phase NAME` ends the phase under way and starts NAME.
phases=()
phase_name=""
phase_start=$SECONDS
run_start=$SECONDS
phase() {
  if [ -n "$phase_name" ]; then
    phases+=("$(printf '%6d s  %s' $((SECONDS - phase_start)) "$phase_name")")
  fi
  phase_name=$1
  phase_start=$SECONDS
}
phases_reported=false
phases_report() {
  $phases_reported && return
  phases_reported=true
  phase ""
  echo "== suite phases (seconds; $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg))"
  printf '%s\n' "${phases[@]}"
  printf '%6d s  %s\n' $((SECONDS - run_start)) "the whole run"
}

for tool in cargo go openssl curl python3; do
  command -v "$tool" >/dev/null || { echo "test.sh: $tool is required but not on PATH" >&2; exit 1; }
done

phase "tools: Debian packages"
echo "== small tools that minimal Debian images lack (GNU time for the Go builds; pgrep, kill), installed when missing"
scripts/ensure-tools.sh time pgrep kill
phase "tools: control plane (Go)"
echo "== control plane binaries (cached by pinned version)"
controlplane/build.sh >/dev/null
phase "tools: node (Go)"
echo "== node binaries for the real-node tests (kubelet, kube-scheduler, kube-proxy, containerd; cached by pin)"
node/build.sh >/dev/null
phase "tools: helm, promtool, lua, snapshot-controller, CSI (Go)"
echo "== tools built from their Go modules (cached by pin): helm, promtool, Argo CD's Lua runner, the CSI snapshot-controller, csi-snapshotter and csi-resizer sidecars, the project's test CSI driver"
tools/build.sh helm >/dev/null
tools/build.sh promtool >/dev/null
tools/build.sh lua >/dev/null
tools/build.sh snapshot-controller >/dev/null
tools/build.sh csi-snapshotter >/dev/null
tools/build.sh csi-resizer >/dev/null
tools/build.sh csi-test-driver >/dev/null
phase "tools: Debian packages"
echo "== container tools from Debian (buildah, skopeo, umoci, runc), installed when missing"
scripts/ensure-tools.sh buildah skopeo umoci runc
echo "== the CNCF distribution registry from Debian (docker-registry) for the release test, installed when missing"
scripts/ensure-tools.sh docker-registry
echo "== Ceph from Debian's packages for the census tests (ceph-mon, ceph-osd, ceph-common), installed when missing"
scripts/ensure-tools.sh ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd ss uuidgen
phase "tools: Python (seed, moto, Compute and ARM servers)"
echo "== Python for the seed's original tool (cached by pin)"
scripts/seed-python.sh >/dev/null
echo "== moto's EC2 server for the EBS census tests (cached by pin)"
scripts/moto.sh >/dev/null
echo "== Python for the project's Compute test server, the GCE census tests (cached by pin)"
scripts/gce-python.sh >/dev/null
echo "== Python for the project's ARM test server, the Azure census tests (cached by pin)"
scripts/azure-python.sh >/dev/null
# The steps above find most tools already installed on a machine that ran them once (CI's): run
# them again where nothing is, so that a missing install step fails here and not on a newcomer's
# first `make test`.
phase "fresh root"
echo "== fresh root: the install steps from nothing installed, in a bare Debian root (scripts/fresh-root.sh)"
scripts/fresh-root.sh

phase "rust: fmt, clippy, check"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo check --no-default-features --all-targets (the build without the cloud SDKs)"
cargo check --no-default-features --all-targets --locked
phase "rust: release build"
echo "== cargo build --release (the binary the image test packs)"
cargo build --release --locked
export VL_RELEASE_BINARY=$CARGO_TARGET_DIR/release/volume-leftovers
phase "rust: test build"
echo "== cargo test --no-run (the test binaries)"
cargo test --tests --locked --no-run
phase "tests (every binary; each one's time below)"
echo "== cargo test"
log=$(mktemp)
# A failing run says where its time went too.
trap 'phases_report; rm -f "$log"' EXIT
# Four tests at once (libtest's default is one per core): the end-to-end tests mostly wait on
# servers, and with two full control planes to lease (tests/e2e/support.rs, `lease`) two of the
# operator tests run beside two others. That halved the e2e binary's time on 2 cores
# (docs/testing.md, "How long the suite takes").
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-4}
cargo test --tests --locked 2>&1 | tee "$log"

# Every control plane a test started must be gone once the test binaries have exited (each has a
# watchdog that stops it within a second or two of its owner's exit), and so must every container
# and every cloud test server (moto's, and the project's Compute server, which exit with their test)
# and registry (the release test's docker-registry).
runs="$CARGO_TARGET_DIR/tmp/controlplane-"
registries="docker-registry serve $CARGO_TARGET_DIR/tmp/registry-"
cephs="$CARGO_TARGET_DIR/tmp/ceph-"
moto='/moto_server( |$)'
gce="$PWD/tests/fake-gce-compute/server\.py"
arm="$PWD/tests/fake-azure-arm/server\.py"
for _ in $(seq 20); do
  pgrep -f "$runs" >/dev/null || pgrep -f "$cephs" >/dev/null || pgrep -f '^/usr/local/bin/volume-leftovers ' >/dev/null ||
    pgrep -f "$moto" >/dev/null || pgrep -f "$gce" >/dev/null || pgrep -f "$arm" >/dev/null || pgrep -f "$registries" >/dev/null || break
  sleep 0.5
done
if pgrep -af "$runs"; then
  echo "test.sh: control-plane processes outlived the tests (listed above)" >&2
  exit 1
fi
if pgrep -af "$cephs"; then
  echo "test.sh: Ceph daemons outlived the tests (listed above)" >&2
  exit 1
fi
if pgrep -af '^/usr/local/bin/volume-leftovers '; then
  echo "test.sh: an image test's container outlived the tests (listed above)" >&2
  exit 1
fi
if pgrep -af "$moto"; then
  echo "test.sh: a moto server outlived the EBS tests (listed above)" >&2
  exit 1
fi
if pgrep -af "$gce"; then
  echo "test.sh: a Compute test server (fake-gce-compute) outlived the GCE tests (listed above)" >&2
  exit 1
fi
if pgrep -af "$arm"; then
  echo "test.sh: an ARM test server (fake-azure-arm) outlived the Azure tests (listed above)" >&2
  exit 1
fi
if pgrep -af "$registries"; then
  echo "test.sh: a registry of the release test outlived it (listed above)" >&2
  exit 1
fi
echo "== no control-plane process, Ceph daemon, container, cloud test server or registry left behind"

phases_report
# Each test binary's own time (`Running ...` then its `test result: ... finished in Xs`).
awk '/^ *Running / { bin = $2; sub(/.*\//, "", bin); sub(/-[0-9a-f]+$/, "", bin) }
     /^test result:/ { t = $NF; sub(/s$/, "", t); printf "%6d s    %s\n", t, bin }' "$log"
# One closing line for the whole run.
awk '/^test result:/ { p += $4; f += $6 } END { printf "all tests: %d passed, %d failed\n", p, f }' "$log"
