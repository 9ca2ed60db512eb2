#!/usr/bin/env bash
# tests/integration/ops.sh SHMRUN PLUGIN_DIR SOURCE_DIR: `shmrun ops`.
#
# - The list names every built-in operator with its kind, and with --plugin
#   the plugin's operators with their origin; `ops NAME` shows a plugin
#   operator's keys with type, default and choices.
# - The reference section of docs/operators.md is exactly what
#   `shmrun ops --markdown` prints for the built-ins: the docs cannot drift
#   from the tables `shmrun check` enforces.
# - Bad usage exits 2: an unknown name (with the nearest), a bad --plugin,
#   --markdown elsewhere, two names.
set -euo pipefail
shmrun=${1:?usage: ops.sh path/to/shmrun PLUGIN_DIR SOURCE_DIR}
pdir=${2:?}
src=${3:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

"$shmrun" ops > "$tmp/list" 2> "$tmp/log" || fail "shmrun ops failed"
for op in file_source sequence tokenize extract count window lookup file_sink stdout_sink null_sink latency_sink; do
	grep -q "^$op " "$tmp/list" || fail "shmrun ops does not list $op"
done
grep -q "^file_source *source " "$tmp/list" || fail "file_source is not listed as a source"
grep -q "^count *operator " "$tmp/list" || fail "count is not listed as an operator"
grep -q "^tag " "$tmp/list" && fail "a plugin operator is listed without --plugin"

"$shmrun" ops --plugin "$pdir/good.so" > "$tmp/list" 2> "$tmp/log" || fail "ops --plugin failed"
grep -q "^tag_numbers *source .*\[plugin test 1.0.0 ($pdir/good.so)\]$" "$tmp/list" ||
	fail "ops --plugin does not list tag_numbers with its origin"
"$shmrun" ops --plugin "$pdir/good.so" tag > "$tmp/one" 2> "$tmp/log" || fail "ops tag failed"
grep -q "^  origin: *plugin test 1.0.0 ($pdir/good.so)$" "$tmp/one" || fail "ops tag: no origin"
grep -q "^    tag  *text; required$" "$tmp/one" || fail "ops tag: key 'tag' not shown as required text"
grep -q "^    mode  *choice; default plain; one of: plain fancy$" "$tmp/one" || fail "ops tag: key 'mode' wrong"
"$shmrun" ops count > "$tmp/one" || fail "ops count failed"
grep -q "^    emit  *choice; default final; one of: final update$" "$tmp/one" || fail "ops count: emit wrong"
grep -q "a combiner" "$tmp/one" || fail "ops count: no combiner"
# the keys of every stage, from their table (conf_job.c)
grep -q "^  keys, besides op, width, input, combine, watermark_delay and watermark_interval:$" "$tmp/one" ||
	fail "ops count: the keys of every stage are not listed: $(grep besides "$tmp/one")"

# docs/operators.md's reference section is generated
"$shmrun" ops --markdown > "$tmp/generated.md" || fail "ops --markdown failed"
awk '/^<!-- END generated/ { p = 0 } p { print } /^<!-- BEGIN generated: shmrun ops --markdown/ { p = 1 }' \
	"$src/docs/operators.md" > "$tmp/doc.md"
[ -s "$tmp/doc.md" ] || fail "docs/operators.md has no generated section (<!-- BEGIN generated: shmrun ops --markdown --> ... <!-- END generated -->)"
# the section holds the output after one blank line, and is followed by one
printf '\n' > "$tmp/want.md"
cat "$tmp/generated.md" >> "$tmp/want.md"
cmp -s "$tmp/want.md" "$tmp/doc.md" ||
	fail "docs/operators.md's reference differs from \`shmrun ops --markdown\` (regenerate it: tools/gen-ops-doc.sh): $(diff "$tmp/want.md" "$tmp/doc.md" | head -8)"

# bad usage
bad() { # PATTERN ARGS...
	local pat=$1
	shift
	set +e
	"$shmrun" "$@" > "$tmp/out" 2> "$tmp/log"
	rc=$?
	set -e
	[ $rc = 2 ] || fail "shmrun $*: exit $rc, not 2"
	grep -q "$pat" "$tmp/log" || fail "shmrun $*: no '$pat' in: $(cat "$tmp/log")"
}
bad "no operator 'cuont'; did you mean 'count'?" ops cuont
bad "no operator 'tag'; .*needs --plugin PATH" ops tag
bad "plugin $tmp/none.so does not exist" ops --plugin "$tmp/none.so"
bad "\-\-markdown goes with .shmrun ops." check --markdown "$tmp/x.conf"
bad "at most one operator name" ops count tokenize
echo "ops: ok"
