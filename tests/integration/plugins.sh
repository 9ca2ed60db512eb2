#!/usr/bin/env bash
# tests/integration/plugins.sh SHMRUN PLUGIN_DIR: operator plugins
# (docs/operators.md). PLUGIN_DIR holds the builds of tests/plugins/test_plugin.c.
#
# - A good plugin's operators run like built-ins: a source and an operator with
#   keys, checked by `shmrun check` with file:line (a missing required key, a
#   bad choice), placed by `shmrun plan`, and the run's output is exact.
# - Every refusal exits 2 from check, plan and the run alike, with the conf's
#   file:line, the plugin's path and what to do, and starts nothing: a missing
#   file, a file that is not a shared object (dlopen's message verbatim), a
#   missing symbol, another ABI major, a newer ABI minor, an operator without
#   a name, without process(), with .size 0, a descriptor without operators, a
#   key whose default is not a valid value of it (not a choice, out of range), a
#   symbol no library defines, an operator named like a built-in, and two
#   plugins defining one operator (both origins named).
# - The same plugin named twice (and through a symlink) loads once.
# - The fingerprint: a new plugin version refuses a restore with the usual
#   message naming the versions, and so does --rescale; a new version whose
#   operators keep their .state_version restores; a job directory moved with
#   its plugin inside resumes, a plugin at another path is refused.
set -euo pipefail
shmrun=${1:?usage: plugins.sh path/to/shmrun PLUGIN_DIR}
pdir=${2:?usage: plugins.sh path/to/shmrun PLUGIN_DIR}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

conf() { # NAME PLUGINS [extra stage lines for t] [checkpoint_dir]
	cat > "$tmp/$1.conf" <<CONF
[job]
plugins = $2
${4:+checkpoint_dir = $4}
${4:+checkpoint_interval = 20ms}

[src]
op = tag_numbers
count = 5000

[t]
op = tag
input = src by key
width = 2
${3-tag = T}

[out]
op = file_sink
input = t
path = $1.tsv
CONF
}

# --- a good plugin ---
conf good "$pdir/good.so"
"$shmrun" check "$tmp/good.conf" > "$tmp/log" 2>&1 || fail "check refused a good plugin"
"$shmrun" plan "$tmp/good.conf" > "$tmp/plan" 2>> "$tmp/log" || fail "plan refused a good plugin"
grep -q "tag_numbers" "$tmp/plan" || fail "plan does not show the plugin's source"
"$shmrun" "$tmp/good.conf" > "$tmp/log" 2>&1 || fail "the run of a good plugin failed"
seq 0 4999 | sed 's/^/n/' | awk '{print $1 "\tT\t" $1}' | sort > "$tmp/expected"
sort "$tmp/good.tsv" > "$tmp/got"
cmp -s "$tmp/expected" "$tmp/got" || fail "plugin output differs from the reference: $(diff "$tmp/expected" "$tmp/got" | head -5)"

# the same file twice, also through a symlink, loads once
ln -s "$pdir/good.so" "$tmp/link.so"
conf twice "$pdir/good.so $tmp/link.so $pdir/good.so"
"$shmrun" check "$tmp/twice.conf" > "$tmp/log" 2>&1 || fail "the same plugin twice was refused"

# a wildcard loads what it matches (as file_source's path does); one that
# matches nothing is refused at the key's line
mkdir "$tmp/g"
cp "$pdir/good.so" "$tmp/g/good.so"
conf glob "$tmp/g/*.so"
"$shmrun" check "$tmp/glob.conf" > "$tmp/log" 2>&1 || fail "plugins = dir/*.so was refused"
conf noglob "$tmp/g/*.none"
set +e
"$shmrun" check "$tmp/noglob.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "noglob.conf:2: plugin pattern .*\*.none matches no file" "$tmp/log" ||
	fail "a plugin pattern matching nothing: exit $rc, $(cat "$tmp/log")"

# a plugin operator's keys are validated with file:line, as a built-in's
conf nokey "$pdir/good.so" "mode = plain"
set +e
"$shmrun" check "$tmp/nokey.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "a missing required plugin key: exit $rc, not 2"
grep -q "nokey.conf:[0-9]*: .*tag" "$tmp/log" || fail "no file:line for the missing key 'tag'"
conf badchoice "$pdir/good.so" "tag = x
mode = weird"
set +e
"$shmrun" check "$tmp/badchoice.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "a bad plugin choice: exit $rc"
grep -q "badchoice.conf:1[0-9]: mode = 'weird'" "$tmp/log" || fail "no file:line for mode = weird"

# --- refusals: check, plan and the run, exit 2, nothing started or written ---
refused() { # NAME PLUGINS PATTERN
	conf "$1" "$2"
	for cmd in check plan run; do
		local args=("$cmd" "$tmp/$1.conf")
		[ "$cmd" = run ] && args=("$tmp/$1.conf")
		set +e
		"$shmrun" "${args[@]}" > "$tmp/log" 2>&1
		rc=$?
		set -e
		[ $rc = 2 ] || fail "$1 ($cmd): exit $rc, not 2"
		grep -q "$1.conf:2: .*$3" "$tmp/log" || fail "$1 ($cmd): no '$1.conf:2: ... $3' in the messages"
		[ ! -e "$tmp/$1.tsv" ] && [ ! -e "$tmp/$1.tsv.0" ] || fail "$1 ($cmd): an output was created"
	done
}
echo "not a shared object" > "$tmp/text.so"
refused missing "$tmp/nope.so" "plugin $tmp/nope.so does not exist"
refused notelf "$tmp/text.so" "plugin $tmp/text.so cannot be loaded: .*text.so: .*; build it"
refused nosym "$pdir/no_symbol.so" "does not export the symbol 'shmrun_plugin'; define it with SHMRUN_PLUGIN"
refused major "$pdir/abi_major.so" "was built for operator ABI 2.0; this shmrun has ABI 1\.[0-9]*.*rebuild"
refused minor "$pdir/abi_minor.so" "was built for operator ABI 1.[0-9]*; this shmrun has ABI 1.*or upgrade shmrun"
refused noname "$pdir/no_name.so" "operator #1 of its table has no name"
refused noproc "$pdir/no_process.so" "operator 'tag' has no process()"
refused size "$pdir/bad_size.so" "operator #2 (tag_numbers) has .size = 0; set .size = sizeof(struct shmrun_operator)"
refused noops "$pdir/no_ops.so" "has no operators"
refused keyedsrc "$pdir/keyed_source.so" "operator 'tag_numbers' is flagged both SHMRUN_OP_SOURCE and SHMRUN_OP_KEYED; a source has no input"
# a default the key's own type refuses is the plugin's fault, not the conf's
refused baddef "$pdir/bad_default.so" "operator 'tag', key 'mode': its default 'weird' is not one of its choices (plain fancy); fix .def"
refused badrange "$pdir/bad_range.so" "operator 'tag_numbers', key 'count': its default '0' is out of range; expected 1 to 1000000000; fix .def"
refused unres "$pdir/unresolved.so" "cannot be loaded: .*shmrun_test_no_such_function"
refused unrtag "$pdir/unreplayable_tag.so" "operator 'tag' is flagged SHMRUN_OP_UNREPLAYABLE without SHMRUN_OP_SOURCE"
# a plugin source flagged SHMRUN_OP_UNREPLAYABLE (ABI 1.2) loads; with
# checkpoint_dir the job is refused at the stage's op line, as a built-in's
conf unr "$pdir/unreplayable.so" "tag = T" "$tmp/unr-ck"
set +e
"$shmrun" check "$tmp/unr.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "unr.conf:7: stage 'src': op = tag_numbers cannot be replayed" "$tmp/log" ||
	fail "an unreplayable plugin source with checkpoint_dir: exit $rc, $(cat "$tmp/log")"
conf unr "$pdir/unreplayable.so"
"$shmrun" check "$tmp/unr.conf" > "$tmp/log" 2>&1 || fail "an unreplayable plugin source without checkpoint_dir was refused: $(cat "$tmp/log")"
refused builtin "$pdir/dup_builtin.so" "operator 'count' is already defined by the built-in operators"
cp "$pdir/good.so" "$tmp/copy.so"
refused dup "$pdir/good.so $tmp/copy.so" "plugin $tmp/copy.so: operator 'tag' is already defined by plugin $pdir/good.so (test 1.0.0)"

# --- the fingerprint: plugin version, or the operators' state_version ---
restore_case() { # NAME V1 V2 EXPECT(ok|refused)
	rm -rf "${tmp:?}/$1.ck" "$tmp/$1.tsv"* 
	cp "$pdir/$2.so" "$tmp/$1.so"
	conf "$1" "$tmp/$1.so" "tag = T" "$tmp/$1.ck"
	sed -i 's/count = 5000/count = 100000000/' "$tmp/$1.conf"
	"$shmrun" "$tmp/$1.conf" > "$tmp/log" 2>&1 &
	launcher=$!
	wait_started || fail "$1: the run did not start"
	wait_manifest "$tmp/$1.ck" || fail "$1: no checkpoint"
	kill -TERM "$launcher"
	set +e
	wait "$launcher"
	rc=$?
	set -e
	launcher=
	[ $rc = 0 ] || fail "$1: stop with a final checkpoint: exit $rc"
	cp "$pdir/$3.so" "$tmp/$1.so.new" && mv "$tmp/$1.so.new" "$tmp/$1.so"
	set +e
	"$shmrun" check "$tmp/$1.conf" > "$tmp/log" 2>&1
	rc=$?
	set -e
	if [ "$4" = ok ]; then
		[ $rc = 0 ] || fail "$1: $2 -> $3 should restore (same state_version): exit $rc"
	else
		[ $rc = 2 ] || fail "$1: $2 -> $3 should refuse the restore: exit $rc"
		grep -q "stage t: plugin version=1.0.0 → version=2.0.0" "$tmp/log" || fail "$1: the refusal does not name the versions"
		# an authorised rescale cannot carry state across formats either
		set +e
		"$shmrun" check --rescale "$tmp/$1.conf" > "$tmp/log" 2>&1
		rc=$?
		set -e
		[ $rc = 2 ] || fail "$1: check --rescale across plugin versions: exit $rc, not 2"
		grep -q "$1.conf:[0-9]*: stage t: plugin version=1.0.0 → version=2.0.0 (its state format may have changed" "$tmp/log" ||
			fail "$1: the rescale refusal does not name the versions"
	fi
}
restore_case ver good good_v2 refused
restore_case state state_v1 state_v2 ok

# a job directory moved with its plugin inside still resumes (the plugin's path
# is in the fingerprint relative to the conf's directory, as every path is)
mkdir "$tmp/jobdir"
conf moved "good.so" "tag = T" "ck"
sed -i 's/count = 5000/count = 100000000/' "$tmp/moved.conf"
mv "$tmp/moved.conf" "$tmp/jobdir/"
cp "$pdir/good.so" "$tmp/jobdir/good.so"
"$shmrun" "$tmp/jobdir/moved.conf" > "$tmp/log" 2>&1 &
launcher=$!
wait_started || fail "moved: the run did not start"
wait_manifest "$tmp/jobdir/ck" || fail "moved: no checkpoint"
kill -TERM "$launcher"
set +e
wait "$launcher"
rc=$?
set -e
launcher=
[ $rc = 0 ] || fail "moved: stop with a final checkpoint: exit $rc"
mv "$tmp/jobdir" "$tmp/jobdir2"
"$shmrun" check "$tmp/jobdir2/moved.conf" > "$tmp/log" 2>&1 ||
	fail "moved: a job directory moved with its plugin does not resume: $(cat "$tmp/log")"
# a plugin outside the job directory keeps its absolute path: another file refuses
cp "$pdir/good.so" "$tmp/elsewhere.so"
sed -i "s|^plugins = .*|plugins = $tmp/elsewhere.so|" "$tmp/jobdir2/moved.conf"
set +e
"$shmrun" check "$tmp/jobdir2/moved.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "moved: a plugin at another path restored: exit $rc"
grep -q "stage t: plugin good.so → $(realpath "$tmp")/elsewhere.so" "$tmp/log" || fail "moved: the refusal does not name both paths: $(cat "$tmp/log")"
echo "plugins: ok"
