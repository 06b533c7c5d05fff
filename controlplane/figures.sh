#!/usr/bin/env bash
# Measures the local control plane and prints one line per figure, for the docs' controlplane
# block:
#
#   scripts/figures.sh controlplane controlplane/figures.sh
#
# What it prints: the cold build that made the cached binaries (its seconds and the peak RSS of
# each `go build`, from the build-stats.txt that controlplane/build.sh wrote then; a cold build
# is not repeated here), build.sh with the binaries present, up.sh to ready, the RSS of each
# process right after, and down.sh. The run directory is a temporary one, stopped and removed on
# exit. The machine's cores and load are printed first: every time depends on them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
now() { date +%s.%N; }
secs() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.2f}")' "$1" "$2"; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
t0=$(now)
bin=$(GOTOOLCHAIN=local "$here/build.sh" 2>/dev/null | tail -n 1)
t1=$(now)
stats="$(dirname "$bin")/build-stats.txt"
if [ -r "$stats" ]; then
  seconds=$(sed -n 's/^seconds=//p' "$stats")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$stats" |
    awk '{printf "%s%.1f GiB", (NR > 1 ? " / " : ""), $1 / 1048576}')
  echo "cold build of the cached binaries ($(basename "$(dirname "$bin")"), built $(date -u -r "$stats" +%Y-%m-%d), beside whatever else ran then): $seconds s; peak RSS of go build (etcd / kubernetes): $rss"
else
  echo "cold build: no build-stats.txt beside $bin"
fi
echo "build.sh with the binaries present: $(secs "$t0" "$t1") s"
run=$(mktemp -d)
trap '"$here/down.sh" "$run" >/dev/null 2>&1 || true; rm -rf "$run"' EXIT
t0=$(now)
"$here/up.sh" "$run" --owner-pid $$ >/dev/null 2>&1
t1=$(now)
echo "up.sh to ready (certificates, three processes, /readyz): $(secs "$t0" "$t1") s"
line="RSS after start:"
while read -r name pid; do
  kb=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  line+=" $name $(awk -v k="$kb" 'BEGIN {printf "%.0f", k / 1024}') MiB,"
done <"$run/pids"
echo "${line%,}"
t0=$(now)
"$here/down.sh" "$run" >/dev/null 2>&1
t1=$(now)
echo "down.sh (returns when the ports are free): $(secs "$t0" "$t1") s"
