#!/usr/bin/env bash
# What the cloud SDKs (the `gce`, `ebs` and `azure` features: Google's Compute and auth crates,
# the AWS SDK for EC2 and its config chain, Microsoft's azure_core and azure_identity) cost a cold
# build, and what `azure` adds alone. Builds the crate from nothing three times, in throwaway
# target directories, with `cargo build --release --locked --timings`: with its default
# features, without `azure`, and with none. Prints each build's wall time, its compile units and
# their compile time summed over units (CPU-bound work, more than the wall time on several
# cores), the differences, and the crates only the SDK features (and only `azure`) bring,
# largest first.
#
# Run it on an idle machine (it prints the load average it started with) and write its output
# into docs/benchmarks.md with:
#   scripts/figures.sh sdk-build-cost scripts/sdk-build-cost.sh
# It takes three cold release builds: about three quarters of an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cache.sh
. scripts/cache.sh
work=$cache_root/sdk-build-cost
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

load=$(cut -d' ' -f1 /proc/loadavg)
for build in default no-azure none; do
  flags=()
  [ "$build" = no-azure ] && flags=(--no-default-features --features gce,ebs)
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

with_sdk, no_azure, without = units("default"), units("no-azure"), units("none")
wall = {b: int(open(f"{work}/{b}.wall").read()) for b in ("default", "no-azure", "none")}
key = lambda u: f"{u['name']} v{u['version']}"
total = lambda us: round(sum(u["duration"] for u in us))

def largest(title, only, of):
    by_crate = {}
    for u in of:
        if key(u) in only:
            by_crate[key(u)] = by_crate.get(key(u), 0.0) + u["duration"]
    print(f"{title}: {len(only)}, {round(sum(by_crate.values()))} s of compile time; the largest:")
    for name, secs in sorted(by_crate.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {name:40}{secs:>8.0f} s")

print(f"cold `cargo build --release --locked`, {rustc}, {cores} cores, load average {load} at start")
print(f"{'':36}{'wall':>8}{'units':>8}{'compile time':>14}")
for title, b, us in [("default features (gce, ebs, azure)", "default", with_sdk),
                     ("without azure (gce, ebs)", "no-azure", no_azure),
                     ("--no-default-features", "none", without)]:
    print(f"{title:36}{wall[b]:>6} s{len(us):>8}{total(us):>12} s")
for title, a, b, ua, ub in [("what the SDKs add", "default", "none", with_sdk, without),
                            ("what azure adds", "default", "no-azure", with_sdk, no_azure)]:
    print(f"{title:36}{wall[a] - wall[b]:>6} s{len(ua) - len(ub):>8}{total(ua) - total(ub):>12} s")
largest("crates only the SDK features build", crates("default") - crates("none"), with_sdk)
largest("crates only azure builds", crates("default") - crates("no-azure"), with_sdk)
PY
