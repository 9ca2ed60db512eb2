#!/usr/bin/env bash
# tests/integration/nexmark_top.sh SHMRUN SHMRUN_BENCH QUERY_DIR: NEXMark q5
# (docs/examples/nexmark/q5.conf: window counts -> nexmark_window_key -> by
# window -> nexmark_top) is exact across failures (issue 12 §7). QUERY_DIR is
# the build's copy (q5.conf beside nexmark_queries.so). With checkpoints every
# 100 ms and the source paced, over 600 000 events (34 windows, ties among
# them), the output equals the single-threaded reference's
# (`shmrun-bench nexmark --reference q5`) as a multiset:
#   - after kill -9 of a worker mid-run (restart from the last checkpoint:
#     open windows, tie lists and pending timers restored);
#   - after a stop mid-run and `--rescale` of the window, re-key and top
#     stages 2 -> 3, and of another run 3 -> 1 (key-bound state and timers
#     move with their vnodes);
# nexmark_top by hand over extract'ed lines (a tie, a window of one auction,
# a late record counted and dropped; counts updated before the window fires);
# and the two operators fail the job, naming the stage and the record, when
# fed records that are not what they read.
set -euo pipefail
shmrun=${1:?usage: nexmark_top.sh SHMRUN SHMRUN_BENCH QUERY_DIR}
bench=${2:?}
qdir=${3:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

N=600000
"$bench" nexmark --reference q5 --events $N --seed 1 | sort > "$tmp/want" || fail "the reference failed"
lines=$(wc -l < "$tmp/want")
windows=$(cut -f2 "$tmp/want" | sort -u | wc -l)
[ "$windows" -ge 30 ] || fail "the reference has $windows windows over $N events, want >= 30"
[ "$lines" -gt "$windows" ] || fail "no tie among the reference's $windows windows: the test would not cover ties"

# job DIR: q5.conf with $N events, checkpoints, the source paced
job() {
	mkdir -p "$1"
	cp "$qdir/nexmark_queries.so" "$1/"
	sed -e "s/^count = .*/count = $N/" \
		-e 's/^plugins = .*/&\ncheckpoint_dir = ck\ncheckpoint_interval = 100ms/' \
		-e 's/^piece_events = .*/&\nrate = 250000/' \
		"$qdir/q5.conf" > "$1/job.conf"
	grep -q "^rate = 250000" "$1/job.conf" && grep -q "^checkpoint_dir = ck" "$1/job.conf" ||
		fail "q5.conf: could not add the rate and checkpoints (its layout changed?)"
}
same() { # name dir
	cat "$2"/out/q5.tsv* | sort > "$tmp/got"
	if ! cmp -s "$tmp/want" "$tmp/got"; then
		diff "$tmp/want" "$tmp/got" | head -8 >&2 || true
		fail "$1: output differs from the reference ($(wc -l < "$tmp/got") lines, want $lines)"
	fi
}
committed() { # dir: lines visible in the output
	cat "$1"/out/q5.tsv* 2> /dev/null | wc -l
}

# ---- kill -9 of a worker ------------------------------------------------------
d=$tmp/kill
job "$d"
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "kill -9: the run did not start"
for _ in $(seq 600); do # a checkpoint after some windows were emitted
	[ "$(committed "$d")" -ge 3 ] && break
	sleep 0.02
done
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -eq 2 ] || fail "kill -9: expected 2 workers, found ${#ws[@]}"
kill -9 "${ws[1]}"
rc=0
wait $launcher || rc=$?
launcher=
[ $rc -eq 0 ] || fail "kill -9: exit status $rc"
grep -q "restart 1 of" "$tmp/log" || fail "kill -9 landed after the end (no restart logged)"
same "kill -9 of a worker" "$d"
echo "ok kill -9 of a worker mid-run: restarted, the $lines lines of $windows windows exactly"

# ---- stop, --rescale -------------------------------------------------------------
rescale() { # from to
	local d=$tmp/rescale-$1-$2 rc=0 n1
	job "$d"
	# the window, re-key and top stages at width FROM (source and file_sink stay)
	awk -v w="$1" '/^\[/ { s = $0 } /^width = / && (s == "[counts]" || s == "[by_window]" || s == "[q5]") { $0 = "width = " w } 1' \
		"$d/job.conf" > "$d/job.tmp" && mv "$d/job.tmp" "$d/job.conf"
	(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "rescale $1 -> $2: the run did not start"
	for _ in $(seq 600); do
		[ "$(committed "$d")" -ge 3 ] && break
		sleep 0.02
	done
	kill -TERM $launcher
	wait $launcher || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "rescale $1 -> $2, stop: exit status $rc"
	grep -q "stopped at epoch" "$tmp/log" || fail "rescale $1 -> $2: the stop landed after the end"
	n1=$(committed "$d")
	[ "$n1" -gt 0 ] && [ "$n1" -lt "$lines" ] || fail "rescale $1 -> $2: $n1 lines before the stop"
	awk -v w="$2" '/^\[/ { s = $0 } /^width = / && (s == "[counts]" || s == "[by_window]" || s == "[q5]") { $0 = "width = " w } 1' \
		"$d/job.conf" > "$d/job.tmp" && mv "$d/job.tmp" "$d/job.conf"
	[ "$(grep -c "^width = $2\$" "$d/job.conf")" -ge 3 ] || fail "rescale $1 -> $2: widths not changed"
	(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || fail "--rescale $1 -> $2: exit $?"
	same "stop, --rescale $1 -> $2" "$d"
	echo "ok stop after $n1 of $lines lines, --rescale $1 -> $2 of window, re-key and top: exact"
}
rescale 2 3
rescale 3 1

# ---- hand-computed: ties, one auction alone, a late count --------------------
# nexmark_top fed by extract from lines "start end auction count time_ms" (as
# nexmark_window_key emits them: a window's lines at its end - 1), paced at 20
# lines/s with watermarks every 1 ms, 1 ms behind the newest time, so a
# window's timer fires once a line of a later window came; the last line is
# behind the watermark: late, counted, dropped.
d=$tmp/hand
mkdir -p "$d"
cp "$qdir/nexmark_queries.so" "$d/"
printf '%s\t%s\t%s\t%s\t%s\n' \
	1000 2000 1001 5 1999 \
	1000 2000 1002 7 1999 \
	1000 2000 1003 7 1999 \
	1000 2000 1004 6 1999 \
	2000 4000 1001 3 3999 \
	2000 4000 1002 2 3999 \
	3000 5000 1005 1 4999 \
	9000 9500 1006 4 9499 \
	1000 2000 1007 9 1999 > "$d/in.tsv"
cat > "$d/job.conf" <<'CONF'
[job]
plugins = nexmark_queries.so
[lines]
op = file_source
path = in.tsv
rate = 20
[ex]
op = extract
input = lines
separator = \t
key = 1-2
value = 3-4
time = 5
time_format = epoch_ms
watermark_delay = 1ms
watermark_interval = 1ms
[q]
op = nexmark_top
input = ex by key
width = 2
[out]
op = file_sink
input = q
path = out.tsv
CONF
printf '%s\t%s\t%s\t%s\n' 1002 1000 2000 7 1003 1000 2000 7 1001 2000 4000 3 1005 3000 5000 1 \
	1006 9000 9500 4 | sort > "$tmp/hand.want"
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "hand-computed: exit $?"
sort "$d/out.tsv" > "$tmp/hand.got"
cmp -s "$tmp/hand.want" "$tmp/hand.got" || { diff "$tmp/hand.want" "$tmp/hand.got" >&2; fail "hand-computed: output differs"; }
qgrep -E "^late records: +1 " "$tmp/log" || fail "hand-computed: the late line was not counted (want 'late records: 1')"
echo "ok hand-computed: a tie of two, a window of one, a late count dropped and counted"
# the same (window, auction) again before the window fires (a late firing
# upstream): a larger count replaces the smaller, the same count is no tie
printf '%s\t%s\t%s\t%s\t%s\n' \
	1000 2000 1001 5 1999 \
	1000 2000 1002 6 1999 \
	1000 2000 1001 6 1999 \
	1000 2000 1002 6 1999 \
	1000 2000 1003 4 1999 \
	1000 2000 1003 6 1999 \
	3000 4000 1001 8 3999 \
	3000 4000 1002 7 3999 \
	3000 4000 1001 9 3999 > "$d/in.tsv"
printf '%s\t%s\t%s\t%s\n' 1001 1000 2000 6 1002 1000 2000 6 1003 1000 2000 6 1001 3000 4000 9 |
	sort > "$tmp/hand.want"
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "updated counts: exit $?"
sort "$d/out.tsv" > "$tmp/hand.got"
cmp -s "$tmp/hand.want" "$tmp/hand.got" || { diff "$tmp/hand.want" "$tmp/hand.got" >&2; fail "updated counts: output differs"; }
echo "ok a window's counts updated before it fires: the larger counts, ties among them, no duplicate"

# ---- the wrong records: each operator fails, naming its stage and the record ---
d=$tmp/wrong
mkdir -p "$d"
cp "$qdir/nexmark_queries.so" "$d/"
wrong() { # name op upstream-lines pattern
	{
		printf '[job]\nplugins = nexmark_queries.so\n'
		printf '[gen]\nop = nexmark\ncount = 100000\nevents = bid\nwatermark_delay = 0s\n'
		printf '%b\n' "$3"
		printf '[q]\nop = %s\ninput = up\n[out]\nop = file_sink\ninput = q\npath = out.tsv\n' "$2"
	} > "$d/job.conf"
	local rc=0
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 1 ] || fail "$1: exit $rc, want 1"
	qgrep -F "stage 'q' [0]: $4" "$tmp/log" || fail "$1: no message naming the stage and the record"
	echo "ok $1: the job fails, naming the stage and the record"
}
wrong "nexmark_window_key fed bids" nexmark_window_key '[up]\nop = nexmark_currency\ninput = gen' \
	"a record that is not a window's output"
wrong "nexmark_top fed window counts not re-keyed" nexmark_top \
	'[up]\nop = window\ninput = gen\nkind = tumbling\nsize = 1s\ntime_format = ms' \
	"a record that is not a window count re-keyed by nexmark_window_key"
