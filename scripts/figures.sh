#!/usr/bin/env bash
# Runs a benchmark and writes what it printed into README.md, between the markers
# <!-- figures:NAME --> and <!-- /figures:NAME --> (as a code block), so that the README's figures
# are the benchmark's own output, never edited by hand.
#
#   scripts/figures.sh NAME COMMAND [ARGS...]
#   scripts/figures.sh NAME --from LOG      (the saved standard output of such a command: for
#                                           the benchmarks that run for many minutes)
#
# e.g. scripts/figures.sh memory cargo run --release --example memory
# The command's output is also shown as it runs. Nothing is written when the command fails.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/figures.sh NAME COMMAND [ARGS...]}
shift
[ $# -gt 0 ] || { echo "usage: scripts/figures.sh NAME COMMAND [ARGS...]" >&2; exit 2; }
grep -qF "<!-- figures:$name -->" README.md || { echo "figures.sh: README.md has no <!-- figures:$name --> block" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ "$1" = --from ]; then
  cp "${2:?--from needs a file}" "$out"
else
  # Only the command's standard output is recorded (cargo's progress goes to standard error).
  "$@" | tee "$out"
fi
python3 - "$name" "$out" <<'PY'
import re, sys
name, out = sys.argv[1], sys.argv[2]
body = open(out).read().rstrip("\n")
readme = open("README.md").read()
begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
block = f"{begin}\n```\n{body}\n```\n{end}"
new, n = pattern.subn(lambda _: block, readme)
if n != 1:
    sys.exit(f"figures.sh: expected one {begin} ... {end} block in README.md, found {n}")
open("README.md", "w").write(new)
print(f"figures.sh: README.md block {name!r} rewritten ({len(body.splitlines())} lines)", file=sys.stderr)
PY
