#!/usr/bin/env bash
# tests/integration/rescale.sh SHMRUN: every restore is exact or refused.
#   - word count with file_source width 3 stopped mid-input (SIGTERM), restarted
#     at width 1: refused, naming the width change; with --rescale: final word
#     counts equal the coreutils reference. The same for 1 -> 4 and 2 -> 3 -> 2.
#   - count widths 4 -> 2 -> 1 -> 5 (and the worker count) keep every key's count.
#   - refusals: a vnode count change; a removed stage without --drop-state; a
#     file_sink width change (per-worker state without a rule) — each names it.
#   - a new stage starts empty; a removed stage with --drop-state is dropped.
#   - STREAM_RESET_STATE=1 moves checkpoints aside and starts empty.
#   - shmrun plan --rescale-from prints what moves.
set -euo pipefail
shmrun=${1:?usage: rescale.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

stop_after() { # dir seconds: start the job, SIGTERM it after a while, expect a stop
	(cd "$1" && exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started
	sleep "$2"
	kill -TERM $launcher 2>/dev/null || true
	wait $launcher || fail "$1: stop failed"
	launcher=
	grep -q "stopped at epoch" "$tmp/log" || fail "$1: finished before the stop; slow it down"
}

run() { (cd "$1" && shift && "$shmrun" "$@" job.conf) 2> "$tmp/log"; }

# --- word count over files, source width changes --------------------------
mkdir -p "$tmp/in"
for i in $(seq 1 60); do
	seq 1 $((200 + i * 13)) | sed "s/^/Word$((i % 11)) common w/" > "$tmp/in/f$i.txt"
done
for f in "$tmp"/in/*; do tr -c 'A-Za-z0-9' '\n' < "$f"; echo; done | tr 'A-Z' 'a-z' |
	grep -v '^$' | sort | uniq -c | awk '{print $2 "\t" $1}' | sort > "$tmp/wc.expected"

wc_conf() { # dir read_width rate workers
	cat > "$1/job.conf" <<CONF
[job]
workers = ${4:-2}
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[read]
op = file_source
path = $tmp/in
piece_bytes = 4K
rate = $3
width = $2
[words]
op = tokenize
input = read
width = $2
[count]
op = count
input = words by key
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
CONF
}

wc_case() { # name widths...: first width stopped mid-input, later ones rescaled to
	local name=$1 d="$tmp/$1"
	shift
	mkdir -p "$d"
	wc_conf "$d" "$1" 40000
	stop_after "$d" 0.7
	shift
	for w in "$@"; do
		local last=0
		[ "$w" = "${*: -1}" ] && last=1
		wc_conf "$d" "$w" $([ $last -eq 1 ] && echo 100000000 || echo 40000)
		set +e; run "$d"; rc=$?; set -e
		[ $rc -ne 0 ] || fail "$name: restart at width $w without --rescale was not refused"
		grep -q "stage read: width [0-9]* → $w" "$tmp/log" || fail "$name: refusal does not name the width change"
		grep -q "STREAM_RESET_STATE=1" "$tmp/log" && grep -q -- "--rescale" "$tmp/log" || fail "$name: refusal does not say how to proceed"
		if [ $last -eq 1 ]; then
			run "$d" --rescale || fail "$name: --rescale to width $w: exit $?"
		else
			(cd "$d" && exec "$shmrun" --rescale job.conf) 2> "$tmp/log" &
			launcher=$!
			wait_started
			sleep 0.5
			kill -TERM $launcher 2>/dev/null || true
			wait $launcher || fail "$name: rescaled run to $w did not stop cleanly"
			launcher=
		fi
	done
	sort "$d/out/result.tsv" > "$d/got"
	cmp -s "$tmp/wc.expected" "$d/got" || { diff "$tmp/wc.expected" "$d/got" | head -5 >&2 || true; fail "$name: counts differ from the coreutils reference"; }
	echo "ok word count, file_source width $name: refused without --rescale, exact with it"
}
wc_case 3-1 3 1
wc_case 1-4 1 4
wc_case 2-3-2 2 3 2

# --- count widths 4 -> 2 -> 1 -> 5, workers 2 -> 1 -> 2 ------------------
seq_conf() { # dir count_width workers rate
	cat > "$1/job.conf" <<CONF
[job]
workers = $3
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = 400000
keys = 700
piece_records = 2000
rate = $4
width = 2
[count]
op = count
input = gen by key
width = $2
[out]
op = file_sink
input = count
path = out/result.tsv
CONF
}
d="$tmp/count"
mkdir -p "$d"
seq_conf "$d" 4 2 200000
stop_after "$d" 0.5
for step in "2 1" "1 2" "5 2"; do
	set -- $step
	seq_conf "$d" "$1" "$2" 200000
	(cd "$d" && exec "$shmrun" --rescale job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started
	sleep 0.4
	kill -TERM $launcher 2>/dev/null || true
	wait $launcher || fail "count width $1: rescaled run failed"
	launcher=
done
seq_conf "$d" 5 2 100000000
run "$d" || fail "count: final run: exit $?"
[ "$(wc -l < "$d/out/result.tsv")" -eq 700 ] || fail "count: $(wc -l < "$d/out/result.tsv") keys, expected 700"
awk -F'\t' '$2 != 571 && $2 != 572 {bad++} END {exit bad > 0}' "$d/out/result.tsv" ||
	fail "count: a key lost or doubled its count across 4 -> 2 -> 1 -> 5"
echo "ok count widths 4 -> 2 -> 1 -> 5 (workers 2 -> 1 -> 2 -> 2): every key's count kept"

# --- refusals ----------------------------------------------------------------
d="$tmp/refuse"
mkdir -p "$d"
seq_conf "$d" 2 2 200000
stop_after "$d" 0.4
cp "$d/job.conf" "$d/orig.conf"
refused() { # dir what pattern: check --rescale and the run both refuse, exit 2, same words
	local rc=0 before
	before=$(cd "$1" && find . | sort)
	run "$1" check --rescale > /dev/null || rc=$?
	[ $rc -eq 2 ] || fail "$2: check --rescale exit $rc, want 2"
	grep -q "rescale refused: $3" "$tmp/log" || fail "$2: check --rescale does not say: $3"
	rc=0
	run "$1" --rescale || rc=$?
	[ $rc -eq 2 ] || fail "$2: run --rescale exit $rc, want 2 (nothing started)"
	grep -q "rescale refused: $3; nothing was started" "$tmp/log" || fail "$2: the run does not say: $3"
	[ "$before" = "$(cd "$1" && find . | sort)" ] || fail "$2: a refused rescale changed files"
}
sed -i 's/^workers = 2/workers = 2\nvnodes = 128/' "$d/job.conf"
refused "$d" "vnode change" "job.conf: vnodes: 256 → 128 .*: set vnodes = 256 in \[job\] again"
echo "ok vnode count change refused (exit 2, check and run alike)"
cp "$d/orig.conf" "$d/job.conf"
sed -i 's/^path = out\/result.tsv/path = out\/result.tsv\nwidth = 2/' "$d/job.conf"
line=$(grep -n '^\[out\]' "$d/job.conf" | cut -d: -f1)
refused "$d" "file_sink width change" \
	"job.conf:$line: stage out: its per-worker state is how much of each instance.s output file (path: one file per instance) is committed, .*(1 → 2): set width = 1 again"
echo "ok per-worker state without a rule: refused (exit 2), naming job.conf:$line and the stage"
# the same topology with --drop-state naming a stage it still has: check agrees with the run
cp "$d/orig.conf" "$d/job.conf"
before=$(cd "$d" && find . | sort)
for how in "check --rescale" "--rescale"; do
	rc=0
	run "$d" $how --drop-state=count > /dev/null || rc=$?
	[ $rc -eq 2 ] || fail "--drop-state of a kept stage: $how exit $rc, want 2"
	grep -q "rescale refused: --drop-state=count names no stage that .* has and this topology removed" "$tmp/log" ||
		fail "--drop-state of a kept stage: $how does not say so: $(cat "$tmp/log")"
done
[ "$before" = "$(cd "$d" && find . | sort)" ] || fail "--drop-state of a kept stage: files changed"
echo "ok --drop-state naming a kept stage: check --rescale and the run both refuse (exit 2)"
# a removed stage: replace count+out by a direct sink
cat > "$d/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = 400000
keys = 700
piece_records = 2000
width = 2
[out]
op = file_sink
input = gen
path = out/result.tsv
CONF
set +e; run "$d" --rescale; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "stage count: removed.*--drop-state=count" "$tmp/log" || fail "removed stage not refused"
# plan shows the same refusal (exit 2, as a refused rescale), and takes the advice
rc=0
"$shmrun" plan --rescale-from "$d/ckpt" "$d/job.conf" > "$tmp/plan" 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] && grep -q "stage count: removed.*--drop-state=count" "$tmp/log" ||
	fail "plan --rescale-from, removed stage: exit $rc, want 2 and the refusal: $(cat "$tmp/log")"
"$shmrun" plan --rescale-from "$d/ckpt" --drop-state=count "$d/job.conf" > "$tmp/plan" 2> "$tmp/log" ||
	fail "plan --rescale-from --drop-state=count: exit $?: $(cat "$tmp/log")"
run "$d" --rescale --drop-state=count || fail "--drop-state=count: exit $?"
echo "ok removed stage: refused, then dropped with --drop-state"
# a new stage starts empty
cp "$d/orig.conf" "$d/job.conf"
rm -rf "$d/ckpt" "$d/out"
stop_after "$d" 0.4
cat >> "$d/job.conf" <<CONF
[again]
op = count
input = count by key
width = 2
[out2]
op = file_sink
input = again
path = out/again.tsv
CONF
"$shmrun" plan --rescale-from "$d/ckpt" "$d/job.conf" > "$tmp/plan" 2>&1 || fail "plan --rescale-from: exit $?"
grep -q "stage again: new, starts empty" "$tmp/plan" || fail "plan: new stage not shown"
grep -q "count\[0\]: vnodes \[0, 128): [0-9]* key-bound bytes" "$tmp/plan" || fail "plan: no per-instance bytes"
sed -i 's/rate = 200000/rate = 100000000/' "$d/job.conf"
run "$d" --rescale || fail "new stage: exit $?"
[ "$(wc -l < "$d/out/again.tsv")" -eq 700 ] || fail "new stage: wrong key count"
echo "ok new stage starts empty; plan --rescale-from shows it"

# --- STREAM_RESET_STATE=1 ------------------------------------------------------
d="$tmp/reset"
mkdir -p "$d"
seq_conf "$d" 2 2 200000
stop_after "$d" 0.4
n_before=$(ls "$d/ckpt" | grep -c '^ckpt-')
seq_conf "$d" 3 2 100000000
(cd "$d" && STREAM_RESET_STATE=1 "$shmrun" job.conf) 2> "$tmp/log" || fail "reset: exit $?"
grep -q "STREAM_RESET_STATE=1: moved $n_before checkpoint" "$tmp/log" || fail "reset: not logged"
aside=$(ls -d "$d"/ckpt/reset-*)
[ "$(ls "$aside" | grep -c '^ckpt-')" -eq "$n_before" ] || fail "reset: checkpoints not moved aside"
awk -F'\t' '$2 != 571 && $2 != 572 {bad++} END {exit bad > 0}' "$d/out/result.tsv" || fail "reset: counts wrong after starting empty"
echo "ok STREAM_RESET_STATE=1: checkpoints moved to $(basename "$aside"), started empty"
# --- a changed setting of a stateful stage: refused, nothing written ----------------
# A rescale moves state; it does not convert it. A window's size, a join's
# bounds or count's emit changed along with a width once gave wrong output.
d="$tmp/setting"
mkdir -p "$d"
wc_conf "$d" 2 40000
stop_after "$d" 0.7
wc_conf "$d" 3 100000000
sed -i '/^op = count$/a emit = update' "$d/job.conf"
before=$(ls "$d/ckpt" | sort)
set +e; run "$d" --rescale; rc=$?; set -e
[ $rc -eq 2 ] || fail "a changed emit with --rescale: exit $rc, want 2"
grep -q "job.conf:[0-9]*: stage count: emit: final → update (a rescale moves state but does not convert it" "$tmp/log" ||
	fail "a changed emit: the refusal does not name the setting: $(cat "$tmp/log")"
[ "$(ls "$d/ckpt" | sort)" = "$before" ] || fail "a refused rescale wrote a checkpoint"
set +e; "$shmrun" check --rescale "$d/job.conf" > /dev/null 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "stage count: emit: final → update" "$tmp/log" ||
	fail "check --rescale does not refuse the changed emit: exit $rc"
sed -i '/^emit = update$/d' "$d/job.conf"
run "$d" --rescale || fail "rescale with the setting set back: exit $?"
sort "$d"/out/result.tsv* > "$d/got"
cmp -s "$tmp/wc.expected" "$d/got" || fail "rescale with the setting set back: output differs"
echo "ok a changed setting of a stateful stage: --rescale refused, nothing written; set back, exact"
echo "rescale: all cases passed"
