#!/usr/bin/env bash
# tools/gen-ops-doc.sh [SHMRUN]: regenerate the reference section of
# docs/operators.md (between "<!-- BEGIN generated: shmrun ops --markdown -->"
# and "<!-- END generated -->") from `shmrun ops --markdown`, the tables
# `shmrun check` enforces. tests/integration/ops.sh fails until it is run
# after a change to an operator's keys or summary.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shmrun=${1:-$here/build/tools/shmrun}
doc=$here/docs/operators.md
gen=$(mktemp)
out=$(mktemp)
trap 'rm -f "$gen" "$out"' EXIT
"$shmrun" ops --markdown > "$gen"
grep -q '^<!-- BEGIN generated: shmrun ops --markdown -->$' "$doc" ||
	{ echo "gen-ops-doc: $doc has no BEGIN marker" >&2; exit 1; }
awk -v gen="$gen" '
	/^<!-- END generated/ { skip = 0 }
	!skip { print }
	/^<!-- BEGIN generated: shmrun ops --markdown -->$/ {
		print ""
		while ((getline line < gen) > 0) print line
		skip = 1
	}' "$doc" > "$out"
cat "$out" > "$doc"
