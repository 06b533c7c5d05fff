#!/usr/bin/env bash
# Runs a benchmark and writes what it printed into the documentation, between the markers
# <!-- figures:NAME --> and <!-- /figures:NAME --> (as a code block), so that every figure in
# README.md and docs/ is a benchmark's own output, never edited by hand. The block is found in
# whichever of README.md and docs/**/*.md holds it; exactly one file may.
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
mapfile -t files < <(grep -rlF --include='*.md' "<!-- figures:$name -->" README.md docs 2>/dev/null || true)
case ${#files[@]} in
  1) file=${files[0]} ;;
  0) echo "figures.sh: no <!-- figures:$name --> block in README.md or docs/" >&2; exit 2 ;;
  *) echo "figures.sh: <!-- figures:$name --> is in ${#files[@]} files (${files[*]}); keep it in one" >&2; exit 2 ;;
esac
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ "$1" = --from ]; then
  cp "${2:?--from needs a file}" "$out"
else
  # Only the command's standard output is recorded (cargo's progress goes to standard error).
  "$@" | tee "$out"
fi
python3 - "$name" "$out" "$file" <<'PY'
import re, sys
name, out, path = sys.argv[1], sys.argv[2], sys.argv[3]
body = open(out).read().rstrip("\n")
if not body.strip():
    sys.exit(f"figures.sh: the command printed nothing; {path} is left as it was")
text = open(path).read()
begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
block = f"{begin}\n```\n{body}\n```\n{end}"
new, n = pattern.subn(lambda _: block, text)
if n != 1:
    sys.exit(f"figures.sh: expected one {begin} ... {end} block in {path}, found {n}")
open(path, "w").write(new)
print(f"figures.sh: {path} block {name!r} rewritten ({len(body.splitlines())} lines)", file=sys.stderr)
PY
