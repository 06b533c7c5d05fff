#!/usr/bin/env bash
# Keeps the copies of the observability artifacts equal to their sources:
#
#   charts/volume-leftovers/files/alerts.yaml   ->  prometheus/alerts.yaml (byte for byte)
#   argocd/resource_customizations/leftovers.dev/VolumeLeftover/health.lua
#                                               ->  the argocd-cm block of argocd/README.md
#
# The chart's file is the source of the alert rules because Helm reads files only from inside the
# chart; prometheus/ holds the same rules for a Prometheus without the Prometheus Operator, next to
# their promtool unit tests (prometheus/alerts_test.yaml).
#
#   scripts/sync-observability.sh           write the copies
#   scripts/sync-observability.sh --check   change nothing; exit 1 and show the difference when a
#                                           copy differs from its source
#
# tests/observability.rs checks the same equalities.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: scripts/sync-observability.sh [--check]" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: scripts/sync-observability.sh [--check]" >&2; exit 2; }

alerts_src="$repo/charts/volume-leftovers/files/alerts.yaml"
alerts_copy="$repo/prometheus/alerts.yaml"
lua="$repo/argocd/resource_customizations/leftovers.dev/VolumeLeftover/health.lua"
readme="$repo/argocd/README.md"
begin='<!-- argocd-cm: generated from resource_customizations/leftovers.dev/VolumeLeftover/health.lua'
end='<!-- end argocd-cm -->'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The README with its argocd-cm block rewritten from health.lua: the lines from the begin marker
# through the `resource.customizations.health...: |` line are kept, then the script indented by
# four spaces (empty lines stay empty), then the closing fence and the end marker.
grep -q "^$begin" "$readme" || { echo "scripts/sync-observability.sh: no line starting with '$begin' in $readme" >&2; exit 1; }
grep -qx "$end" "$readme" || { echo "scripts/sync-observability.sh: no line '$end' in $readme" >&2; exit 1; }
awk -v begin="$begin" -v end="$end" -v lua="$lua" '
  index($0, begin) == 1 { inblk = 1; print; next }
  inblk && $0 == end {
    while ((getline line < lua) > 0) print (line == "" ? "" : "    " line)
    close(lua)
    print "```"
    print
    inblk = 0; done = 1; next
  }
  inblk && keep == 0 { print; if ($0 ~ /^  resource\.customizations\.health\.leftovers\.dev_VolumeLeftover: \|$/) keep = 1; next }
  inblk { next }
  { print }
  END { if (!done) exit 1 }
' "$readme" >"$tmp/README.md"

if $check; then
  status=0
  if ! diff -u "$alerts_copy" "$alerts_src" >"$tmp/alerts.diff" 2>&1; then
    echo "prometheus/alerts.yaml differs from charts/volume-leftovers/files/alerts.yaml (run scripts/sync-observability.sh):" >&2
    cat "$tmp/alerts.diff" >&2
    status=1
  fi
  if ! diff -u "$readme" "$tmp/README.md" >"$tmp/readme.diff"; then
    echo "the argocd-cm block of argocd/README.md differs from health.lua (run scripts/sync-observability.sh):" >&2
    cat "$tmp/readme.diff" >&2
    status=1
  fi
  exit $status
fi

mkdir -p "$(dirname "$alerts_copy")"
cp "$alerts_src" "$alerts_copy"
cp "$tmp/README.md" "$readme"
echo "wrote prometheus/alerts.yaml and the argocd-cm block of argocd/README.md" >&2
