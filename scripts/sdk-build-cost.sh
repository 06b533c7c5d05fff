#!/usr/bin/env bash
# What the cloud SDKs (the `gce` and `ebs` features: Google's Compute and auth crates, the AWS
# SDK for EC2 and its config chain) cost a cold build. Builds the crate from nothing twice, in
# throwaway target directories, with `cargo build --release --locked --timings`: once with its
# default features and once with none. Prints each build's wall time, its compile units and
# their compile time summed over units (CPU-bound work, more than the wall time on several
# cores), the difference, and the crates only the SDK features bring, largest first.
#
# Run it on an idle machine (it prints the load average it started with) and write its output
# into docs/benchmarks.md with:
#   scripts/figures.sh sdk-build-cost scripts/sdk-build-cost.sh
# It takes two cold release builds: about half an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cache.sh
. scripts/cache.sh
work=$cache_root/sdk-build-cost
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

load=$(cut -d' ' -f1 /proc/loadavg)
for build in default none; do
  flags=()
  [ "$build" = none ] && flags=(--no-default-features)
  start=$(date +%s.%N)
  CARGO_TARGET_DIR=$work/$build cargo build --release --locked --timings "${flags[@]}" >&2
  end=$(date +%s.%N)
  python3 -c "print(round($end - $start))" >"$work/$build.wall"
  cp "$work/$build/cargo-timings/cargo-timing.html" "$work/$build.html"
  cargo tree --locked --edges normal,build --prefix none --format '{p}' "${flags[@]}" \
    | sed 's/ (.*//; s/ (\*)$//' | sort -u >"$work/$build.tree"
  rm -rf "${work:?}/$build"
done

python3 - "$work" "$load" "$(rustc --version)" "$(nproc)" <<'PY'
import json, re, sys
work, load, rustc, cores = sys.argv[1:5]

def units(build):
    html = open(f"{work}/{build}.html").read()
    data = re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1)
    return json.loads(data)

def crates(build):
    # `cargo tree` lines are "name vVERSION"; the timing units say name and version apart.
    return {line.strip() for line in open(f"{work}/{build}.tree") if line.strip()}

with_sdk, without = units("default"), units("none")
wall = {b: int(open(f"{work}/{b}.wall").read()) for b in ("default", "none")}
only = crates("default") - crates("none")
key = lambda u: f"{u['name']} v{u['version']}"
sdk_units = [u for u in with_sdk if key(u) in only]
by_crate = {}
for u in sdk_units:
    by_crate[key(u)] = by_crate.get(key(u), 0.0) + u["duration"]
total = lambda us: round(sum(u["duration"] for u in us))

print(f"cold `cargo build --release --locked`, {rustc}, {cores} cores, load average {load} at start")
print(f"{'':32}{'wall':>8}{'units':>8}{'compile time':>14}")
print(f"{'default features (gce, ebs)':32}{wall['default']:>6} s{len(with_sdk):>8}{total(with_sdk):>12} s")
print(f"{'--no-default-features':32}{wall['none']:>6} s{len(without):>8}{total(without):>12} s")
print(f"{'what the SDKs add':32}{wall['default'] - wall['none']:>6} s"
      f"{len(with_sdk) - len(without):>8}{total(with_sdk) - total(without):>12} s")
print(f"crates only the SDK features build: {len(only)}, {round(sum(by_crate.values()))} s of compile time; the largest:")
for name, secs in sorted(by_crate.items(), key=lambda kv: -kv[1])[:8]:
    print(f"  {name:40}{secs:>8.0f} s")
PY
