#!/usr/bin/env bash
# tests/integration/cli.sh SHMRUN: the shmrun command line — --help, --version,
# usage errors, `check`, `plan`, and bad topologies: each of these exits 2,
# names file:line in its message and starts nothing (checked through `shmrun
# run`, not only `check`).
set -euo pipefail
shmrun=${1:?usage: cli.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

"$shmrun" --help | qgrep "usage: shmrun" || fail "--help"
"$shmrun" --version | grep -Eq "^shmrun [0-9]+\.[0-9]+" || fail "--version"
set +e
"$shmrun" > /dev/null 2>&1; [ $? -eq 2 ] || fail "no argument: exit status"
"$shmrun" --bogus x.conf > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: exit status"
"$shmrun" --log-level loud x.conf 2> "$tmp/err"; [ $? -eq 2 ] || fail "bad --log-level: exit"
grep -q "log-level" "$tmp/err" || fail "bad --log-level: message"
"$shmrun" "$tmp/nope.conf" 2> "$tmp/err"; [ $? -eq 2 ] || fail "missing conf: exit"
grep -q "nope.conf" "$tmp/err" || fail "missing conf: path not named"
set -e

good='[job]
workers = 2
[read]
op = sequence
count = 1000
keys = 7
width = 2
[count]
op = count
input = read by key
width = 3
[out]
op = file_sink
input = count
path = out/good.tsv'
printf '%s\n' "$good" > "$tmp/good.conf"
"$shmrun" check "$tmp/good.conf" | qgrep "ok" || fail "check of a good conf"
"$shmrun" plan "$tmp/good.conf" > "$tmp/plan"
grep -q "read -> count: shuffle by key, 6 channels" "$tmp/plan" || fail "plan: edges"
grep -Eq "^[0-9]+ +count +2 +[01] +[0-9]+ +\[170, 256\)" "$tmp/plan" || fail "plan: task rows"
grep -qx "job good: 2 workers, 3 stages, 6 tasks, 256 vnodes, 9 channels" "$tmp/plan" || fail "plan: header"
# counts of one are singular (P1: "1 workers")
printf '[job]\nworkers = 1\nvnodes = 1\n[read]\nop = sequence\ncount = 5\n[out]\nop = file_sink\ninput = read\npath = one.tsv\n' > "$tmp/one.conf"
"$shmrun" plan "$tmp/one.conf" > "$tmp/plan"
grep -qx "job one: 1 worker, 2 stages, 2 tasks, 1 vnode, 0 channels" "$tmp/plan" ||
	fail "plan of one worker: $(head -1 "$tmp/plan")"
grep -q "segment: 0 rings of" "$tmp/plan" || fail "plan of one worker: segment line"
# plan --json: the same values as the text (json_check.py compares them one by one)
jc="$(dirname "$0")/json_check.py"
for c in good one; do
	"$shmrun" plan "$tmp/$c.conf" > "$tmp/plan"
	"$shmrun" plan --json "$tmp/$c.conf" > "$tmp/plan.json" || fail "plan --json of $c.conf"
	python3 "$jc" plan "$tmp/plan" "$tmp/plan.json" || fail "plan --json of $c.conf differs from the text"
done
"$shmrun" --json plan "$tmp/good.conf" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["edges"][0]["kind"] == "shuffle" and len(d["edges"][0]["channels"]) == 6, d["edges"][0]' ||
	fail "--json before plan"
"$shmrun" --log-level error "$tmp/good.conf" 2> /dev/null
[ "$(wc -l < "$tmp/out/good.tsv")" -eq 7 ] || fail "run of a good conf"
rm -rf "$tmp/out"

# Regression: a conf file in a directory whose path has a blank, with a
# relative file_source path (resolved paths used to be split on blanks).
mkdir -p "$tmp/sp ace/in"
printf 'a b\nc\n' > "$tmp/sp ace/in/x.txt"
printf '[s]\nop = file_source\npath = in\n[o]\nop = file_sink\ninput = s\npath = o.txt\n' > "$tmp/sp ace/j.conf"
"$shmrun" check "$tmp/sp ace/j.conf" > /dev/null || fail "blank in the conf's directory: check"
"$shmrun" --log-level error "$tmp/sp ace/j.conf" || fail "blank in the conf's directory: run"
[ "$(cat "$tmp/sp ace/o.txt")" = "$(printf 'a b\nc')" ] || fail "blank in the conf's directory: output"
# `check` runs what a run checks before starting: a missing input is exit 2,
# named once, with the file:line of its `path` key (not the section's line 1).
printf '[r]\nop = file_source\npath = /nonexistent/x.txt\n[o]\nop = null_sink\ninput = r\n' > "$tmp/missing.conf"
set +e; "$shmrun" check "$tmp/missing.conf" 2> "$tmp/err"; rc=$?; set -e
[ $rc -eq 2 ] || fail "check of a missing input: exit $rc"
[ "$(grep -c "missing.conf:3: stage 'r' \[0\]: input '/nonexistent/x.txt'" "$tmp/err")" -eq 1 ] ||
	{ cat "$tmp/err" >&2; fail "check of a missing input: not named exactly once with file:line"; }
# checkpoint_dir naming a file, not a directory: exit 2 with file:line
printf '[job]\ncheckpoint_dir = good.conf\n[s]\nop = sequence\ncount = 5\n[o]\nop = null_sink\ninput = s\n' > "$tmp/ckfile.conf"
cp "$tmp/ckfile.conf" "$tmp/good.conf.tmp"
set +e; "$shmrun" check "$tmp/ckfile.conf" 2> "$tmp/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "ckfile.conf:2: checkpoint_dir = .* is not a directory" "$tmp/err" ||
	fail "checkpoint_dir naming a file: exit $rc"
STREAM_RESET_STATE=maybe "$shmrun" "$tmp/good.conf" 2> "$tmp/err" && fail "STREAM_RESET_STATE=maybe accepted"
rm -rf "$tmp/out"

# Not a topology file: a FIFO (would block), /dev/zero (never ends), a
# directory; and garbage: every error counted, at most 50 printed.
mkfifo "$tmp/fifo.conf"
for f in "$tmp/fifo.conf" /dev/zero "$tmp"; do
	set +e; timeout 10 "$shmrun" check "$f" 2> "$tmp/err"; rc=$?; set -e
	[ $rc -eq 2 ] && grep -q "is not a regular file" "$tmp/err" || fail "$f: exit $rc, expected 2 naming it"
done
head -c 200000 /dev/urandom | tr -d '\000' > "$tmp/garbage.conf"
set +e; timeout 20 "$shmrun" check "$tmp/garbage.conf" 2> "$tmp/err"; rc=$?; set -e
[ $rc -eq 2 ] || fail "garbage conf: exit $rc"
[ "$(grep -c "garbage.conf:" "$tmp/err")" -le 51 ] || fail "garbage conf: more than 50 errors printed"
grep -q "more errors" "$tmp/err" || fail "garbage conf: no count of the rest"
LC_ALL=C grep -q "$(printf '\r')" "$tmp/err" && fail "garbage conf: control bytes echoed"

# name | line | text appended to a minimal good job (line numbers count from 1)
n=0
bad() {
	local name=$1 line=$2 body=$3
	n=$((n + 1))
	printf '%s\n' "$body" > "$tmp/$name.conf"
	for cmd in check run; do
		set +e
		if [ $cmd = run ]; then "$shmrun" "$tmp/$name.conf" > /dev/null 2> "$tmp/err"
		else "$shmrun" check "$tmp/$name.conf" > /dev/null 2> "$tmp/err"; fi
		rc=$?
		set -e
		[ $rc -eq 2 ] || { cat "$tmp/err" >&2; fail "$name ($cmd): exit status $rc, expected 2"; }
		grep -q "$tmp/$name.conf:$line: " "$tmp/err" ||
			{ cat "$tmp/err" >&2; fail "$name ($cmd): no '$name.conf:$line:' in the message"; }
		grep -q "INFO" "$tmp/err" && fail "$name ($cmd): something started"
	done
	[ -e "$tmp/out" ] && fail "$name: output was written"
	return 0
}
src='[src]
op = sequence
count = 10'
sink='[out]
op = null_sink
input = src'
bad unknown_job_key 2 "[job]
wrokers = 2
$src
$sink"
bad width_3x 4 "$src
width = 3x
$sink"
bad width_negative 4 "$src
width = -1
$sink"
bad width_zero 4 "$src
width = 0
$sink"
bad count_overflow 3 "[src]
op = sequence
count = 99999999999999999999999
$sink"
bad ring_not_pow2 2 "[job]
ring_bytes = 3000
$src
$sink"
bad ring_unit 2 "[job]
ring_bytes = 1Q
$src
$sink"
bad ring_too_small 2 "[job]
ring_bytes = 1K
$src
$sink"
bad vnodes_zero 2 "[job]
vnodes = 0
$src
$sink"
bad width_over_vnodes 6 "[job]
vnodes = 4
$src
width = 8
$sink"
bad unknown_op 2 "[src]
op = sequense
count = 10
$sink"
bad unknown_stage_key 4 "$src
widht = 2
$sink"
bad missing_required 1 "[src]
op = sequence
$sink"
bad unknown_input 6 "$src
[out]
op = null_sink
input = scr"
bad cycle 6 "$src
[a]
op = count
input = src, b
[b]
op = count
input = a
$sink"
bad no_sink 4 "$src
[c]
op = count
input = src"
bad source_with_input 7 "$src
[s2]
op = sequence
count = 5
input = src
$sink"
bad forward_unequal 8 "$src
width = 2
[out]
op = null_sink
width = 3
input = src forward"
bad duration_unit 2 "[job]
checkpoint_interval = 5 minutes
checkpoint_dir = ck
$src
$sink"
bad bad_bool 6 "$src
[t]
op = tokenize
lowercase = maybe
input = src
$sink"
bad bad_enum 7 "$src
[c]
op = count
input = src
emit = sometimes
[out2]
op = null_sink
input = c"
bad duplicate_key 4 "$src
count = 20
$sink"
bad cpu_offline 2 "[job]
cpus = 4000
$src
$sink"
bad workers_and_cpus 3 "[job]
workers = 2
cpus = 0
$src
$sink"
bad key_outside_section 1 "width = 2
$src
$sink"
[ $n -ge 20 ] || fail "only $n bad configurations"

# Usage errors: one line saying what is wrong, then where help is; exit 2;
# never the whole help. A mistyped command is named with the nearest one.
usage_error() { # want-regex args...
	local want=$1
	shift
	set +e; "$shmrun" "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?; set -e
	[ $rc -eq 2 ] || fail "shmrun $*: exit $rc, want 2"
	grep -Eq "$want" "$tmp/err" || { cat "$tmp/err" >&2; fail "shmrun $*: want /$want/"; }
	[ "$(tail -1 "$tmp/err")" = "Try 'shmrun --help' for more information." ] ||
		fail "shmrun $*: no 'Try shmrun --help' line"
	[ "$(wc -l < "$tmp/err")" -le 2 ] && [ ! -s "$tmp/out" ] ||
		fail "shmrun $*: more than a short message (the whole help?)"
}
usage_error "^shmrun: unknown command 'chekc'; did you mean 'check'\?$" chekc "$tmp/good.conf"
usage_error "^shmrun: unknown command 'chekc'; did you mean 'check'\?$" chekc
usage_error "^shmrun: unknown command 'paln'; did you mean 'plan'\?$" paln "$tmp/good.conf"
# a swap of two neighbours is one edit: 'tpo' is 'top', not 'ops'
usage_error "^shmrun: unknown command 'tpo'; did you mean 'top'\?$" tpo
usage_error "^shmrun: unknown command 'sp'; did you mean 'ps'\?$" sp
usage_error "^shmrun: unknown command 'frobnicate' \(commands: run, plan, check, ckpt, ops, top, ps, stop, stress, supervise\)$" frobnicate "$tmp/good.conf"
usage_error "^shmrun: unknown command 'stres'; did you mean 'stress'\?$" stres "$tmp/good.conf"
usage_error "^shmrun: unknown command 'supervize'; did you mean 'supervise'\?$" supervize -- true
usage_error "^shmrun: unknown ckpt command 'lsit'; did you mean 'list'\?$" ckpt lsit "$tmp"
# a command after options that only works first: named, never "did you mean" itself
usage_error "^shmrun: 'ckpt' must be the first argument: shmrun ckpt \.\.\.$" --log-level debug ckpt list "$tmp"
usage_error "^shmrun: ckpt takes a command and one directory" ckpt
usage_error "^shmrun: expected one topology.conf, got 2 arguments$" "$tmp/good.conf" "$tmp/good.conf"
usage_error "^shmrun: missing topology.conf$"
usage_error "^shmrun: unrecognized option '--bogus'$" --bogus "$tmp/good.conf"
usage_error "^shmrun: --log-level must be" --log-level loud "$tmp/good.conf"
usage_error "^shmrun: --drop-state needs --rescale \(or plan --rescale-from\)$" --drop-state=x "$tmp/good.conf"
usage_error "^shmrun: --rescale goes with a run or check$" plan --rescale "$tmp/good.conf"
# a checkpoint directory with no room for the paths inside it: refused, not cut short
long=$(printf 'x%.0s' $(seq 3900))
usage_error "^shmrun: --json goes with \`shmrun plan\` \(and \`shmrun ckpt list\|verify\`\)$" check --json "$tmp/good.conf"
usage_error "^shmrun: plan --json does not print a rescale; leave out --rescale-from$" plan --json --rescale-from "$tmp" "$tmp/good.conf"
usage_error "^shmrun: ckpt list: unknown option '--jsno' \(only --json\)$" ckpt list --jsno "$tmp"
usage_error "^shmrun: ckpt takes a command and one directory: shmrun ckpt list \[--json\] DIR \| shmrun ckpt verify \[--json\] DIR$" ckpt verify --json
usage_error "^shmrun: checkpoint directory too long \(3900 bytes; at most 3840\): x+$" ckpt list "$long"
usage_error "^shmrun: --rescale-from: directory too long \(3900 bytes; at most 3840\): x+$" plan --rescale-from "$long" "$tmp/good.conf"

# `-`: the topology from standard input; its relative paths resolve against
# the current directory; messages name it <stdin>.
mkdir -p "$tmp/cwd"
printf '[g]\nop = sequence\ncount = 3\n[o]\nop = file_sink\ninput = g\npath = sub/o.txt\n' > "$tmp/stdin.conf"
(cd "$tmp/cwd" && "$shmrun" check - < "$tmp/stdin.conf") | qgrep -x "<stdin>: ok (2 stages, 1 worker)" ||
	fail "check - : not ok"
(cd "$tmp/cwd" && "$shmrun" --log-level error - < "$tmp/stdin.conf") || fail "run - : failed"
[ "$(cat "$tmp/cwd/sub/o.txt")" = "$(printf 'k0\t0\nk0\t1\nk0\t2')" ] ||
	fail "run - : output not in the current directory's sub/o.txt"
printf '[g]\nop = sequence\ncount = x\n' > "$tmp/stdin.conf"
set +e; "$shmrun" check - < "$tmp/stdin.conf" 2> "$tmp/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "^<stdin>:3: count = 'x'" "$tmp/err" || fail "check - of a bad conf: exit $rc"

printf '[g]\nop = sequence\ncount = 3\n[o]\nop = null_sink\ninput = g\n' > "$tmp/plan.conf"
# bounded memory (400 MB of address space), except under a sanitizer, whose
# shadow memory needs terabytes of address space
vlimit=400000
ldd "$shmrun" 2> /dev/null | qgrep 'libasan\|libtsan' && vlimit=unlimited
# standard input has the file's 16 MiB cap: /dev/zero (no '\n', endless) is
# refused quickly, in bounded memory; a NUL byte is refused as in a file
set +e
( ulimit -v $vlimit; timeout 60 "$shmrun" check - < /dev/zero ) 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] || fail "check - < /dev/zero: exit $rc, expected 2 (124: it hung)"
grep -q "^<stdin>: is larger than 16 MiB, the limit of a topology" "$tmp/err" ||
	fail "check - < /dev/zero: no size message"
[ "$(wc -l < "$tmp/err")" -le 2 ] || fail "check - < /dev/zero: follow-on errors"
printf '[g]\nop = seq\0uence\ncount = 3\n' > "$tmp/stdin.conf"
set +e; "$shmrun" check - < "$tmp/stdin.conf" 2> "$tmp/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "^<stdin>:2: line contains a NUL byte" "$tmp/err" ||
	fail "check - with a NUL byte: exit $rc"

# plan --rescale-from a directory that does not exist says so (errno)
set +e
(cd "$tmp/cwd" && "$shmrun" plan --rescale-from nonexist - < "$tmp/plan.conf") > /dev/null 2> "$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "nonexist: No such file or directory" "$tmp/err" ||
	fail "plan --rescale-from nonexist: exit $rc, $(cat "$tmp/err")"

# --set SECTION.KEY=VALUE: run, check and plan take the override as if it
# were in the file; its errors name the override (exit 2, nothing started);
# a relative path in it resolves against the current directory
mkdir -p "$tmp/set"
printf '%s\n' "$good" > "$tmp/set/set.conf"
"$shmrun" check --set job.workers=1 --set count.width=2 "$tmp/set/set.conf" |
	qgrep -x "$tmp/set/set.conf: ok (3 stages, 1 worker)" || fail "check --set job.workers=1"
"$shmrun" plan --set count.width=1 "$tmp/set/set.conf" > "$tmp/plan"
grep -qx "job set: 2 workers, 3 stages, 4 tasks, 256 vnodes, 2 channels" "$tmp/plan" ||
	fail "plan --set count.width=1: $(head -1 "$tmp/plan")"
set +e
"$shmrun" check --set count.width=x "$tmp/set/set.conf" > /dev/null 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "^--set count.width=x: width = 'x' in stage 'count' is not a valid count" "$tmp/err" ||
	fail "--set count.width=x: exit $rc, $(cat "$tmp/err")"
for bad in nope.width=2 width=2 count.nokey=1; do
	set +e
	"$shmrun" --set "$bad" "$tmp/set/set.conf" > /dev/null 2> "$tmp/err"; rc=$?
	set -e
	[ $rc -eq 2 ] && grep -q "^--set $bad: " "$tmp/err" && grep -q "nothing was started" "$tmp/err" ||
		fail "--set $bad: exit $rc, $(cat "$tmp/err")"
done
[ ! -e "$tmp/set/out" ] || fail "--set with an error: the run started"
# a conflict with a key of the file names the override, not "line -1"
set +e
"$shmrun" check --set job.cpus=0 --set job.workers=1 "$tmp/set/set.conf" > /dev/null 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] && qgrep "both 'workers' (--set job.workers=1) and 'cpus' (--set job.cpus=0)" "$tmp/err" ||
	fail "--set workers and cpus: exit $rc, $(cat "$tmp/err")"
mkdir -p "$tmp/set/cwd"
(cd "$tmp/set/cwd" && "$shmrun" --log-level error --set out.path=here/o.tsv --set read.count=50 ../set.conf)
[ "$(wc -l < "$tmp/set/cwd/here/o.tsv")" -eq 7 ] && [ ! -e "$tmp/set/out" ] ||
	fail "--set out.path=here/o.tsv: not written under the current directory"
[ "$(awk '{s += $2} END {print s}' "$tmp/set/cwd/here/o.tsv")" -eq 50 ] ||
	fail "--set read.count=50: $(cat "$tmp/set/cwd/here/o.tsv")"
set +e
"$shmrun" ops --set a.b=1 > /dev/null 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\-\-set goes with" "$tmp/err" || fail "ops --set: exit $rc"

echo "cli: $n bad configurations each exit 2 with file:line; help, version, check, plan, run ok"
