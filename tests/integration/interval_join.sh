#!/usr/bin/env bash
# tests/integration/interval_join.sh SHMRUN PLUGIN_DIR: `op = interval_join`
# and `op = window_join` (issue 12 §5), event times set by hand with
# tests/plugins/event_lines.so ("KEY TIME_MS [VALUE]" lines), watermarks
# generated per input (`watermark_delay`):
#   - bad settings (one input, three inputs, an input not `by key`, lower >
#     upper, a lower that is not a signed duration, too many buckets per
#     probe; window_join: one input, no size) refused at their file:line with exit status 2 by
#     `shmrun check` and by a run;
#   - hand-computed pairs (interval: negative lower, the inputs written in
#     either order in `input =`, which swaps the value halves; window: pairs
#     within one tumbling window only), at join widths 1 and 3;
#   - 6000 + 6000 records joined, against an awk oracle, and the buffers
#     trimmed: no key-bound state left at the end (both joins);
#   - flat memory: the run summary's peak key-bound state with 10x the
#     records stays below 4x (untrimmed buffers would grow 10x; the slack
#     is for the two paced sources drifting apart, which the buffers of
#     the side ahead absorb) (both);
#   - kill -9 of a worker during a run with checkpoints, and a stop followed
#     by `--rescale` of the join 2 -> 3 -> 1: the output, as a multiset,
#     equals the fault-free run's (both).
set -euo pipefail
shmrun=${1:?usage: interval_join.sh path/to/shmrun PLUGIN_DIR}
pdir=${2:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
T=$(printf '\t')

# conf DIR JOIN_WIDTH INPUT_LINE EXTRA_JOB_LINE JOIN_KEYS...:
# left.txt -> el, right.txt -> er, join, out.tsv
conf() {
	local d=$1 w=$2 input=$3 job=$4
	shift 4
	{
		printf '[job]\nworkers = %s\nplugins = %s/event_lines.so\n%s\n' "${WORKERS:-2}" "$pdir" "$job"
		for s in l r; do
			printf '[r%s]\nop = file_source\npath = %s.txt\n%s\n' $s \
				"$([ $s = l ] && echo left || echo right)" "${RATE:-}"
			printf '[e%s]\nop = event_lines\ninput = r%s\nwatermark_delay = 1s\n' $s $s
			printf 'watermark_interval = 1ms\n'
		done
		printf '[j]\nop = %s\n%s\nwidth = %s\n' "${JOP:-interval_join}" "$input" "$w"
		printf '%s\n' "$@"
		printf '[out]\nop = file_sink\ninput = %s\npath = out.tsv\n' "${SINK_INPUT:-j}"
	} > "$d/job.conf"
}
run() { # DIR [ARGS...]
	local d=$1
	shift
	(cd "$d" && "$shmrun" "$@" job.conf) 2> "$tmp/log"
}

# --- bad settings ---------------------------------------------------------------
d="$tmp/bad"
mkdir -p "$d"
: > "$d/left.txt"
: > "$d/right.txt"
bad() { # NAME INPUT_LINE PATTERN JOIN_KEYS...: the conf's line 21 is input, 23.. the keys
	local name=$1 input=$2 pat=$3 line
	shift 3
	conf "$d" 1 "$input" "" "$@"
	line=$(grep -n -- "$pat" "$d/job.conf" | head -1 | cut -d: -f1 || true)
	[ -n "$line" ] || line=$(grep -n '^input = e' "$d/job.conf" | cut -d: -f1)
	for cmd in check run; do
		set +e
		if [ $cmd = run ]; then (cd "$d" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log"
		else (cd "$d" && "$shmrun" check job.conf) > /dev/null 2> "$tmp/log"; fi
		rc=$?
		set -e
		[ $rc -eq 2 ] || fail "$name ($cmd): exit status $rc, expected 2"
		grep -q "job.conf:$line: " "$tmp/log" ||
			fail "$name ($cmd): no 'job.conf:$line:' in the message"
		grep -q "launcher: job .*: [0-9]* worker" "$tmp/log" && fail "$name ($cmd): something was started"
	done
	echo "ok bad: $name"
}
SINK_INPUT='j, er' bad one_input 'input = el by key' 'XX' 'lower = 0s' 'upper = 1s'
grep -q "exactly two inputs" "$tmp/log" || fail "one_input: message does not say why"
bad three_inputs 'input = el by key, er by key, rl' 'XX' 'lower = 0s' 'upper = 1s'
bad left_not_by_key 'input = el, er by key' 'XX' 'lower = 0s' 'upper = 1s'
grep -q "left (first) input is not .by key." "$tmp/log" || fail "left not by key: message"
JOP=window_join bad right_not_by_key 'input = el by key, er' 'XX' 'size = 1s'
grep -q "right (second) input is not .by key." "$tmp/log" || fail "right not by key: message"
bad lower_after_upper 'input = el by key, er by key' 'lower = 2s' 'lower = 2s' 'upper = 1s'
grep -q "lower (2000 ms) is after upper (1000 ms)" "$tmp/log" || fail "lower > upper: message"
bad lower_not_duration 'input = el by key, er by key' 'lower = -2m' 'lower = -2m' 'upper = 1s'
bad upper_not_duration 'input = el by key, er by key' 'upper = soon' 'lower = 0s' 'upper = soon'
bad too_many_buckets 'input = el by key, er by key' 'bucket = 1ms' 'lower = 0s' 'upper = 10s' \
	'bucket = 1ms'
conf "$d" 1 'input = el by key, er by key' "" 'lower = -500ms' 'upper = 0ms'
(cd "$d" && "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" || fail "a good join refused"
JOP=window_join SINK_INPUT='j, er' bad window_one_input 'input = el by key' 'XX' 'size = 1s'
grep -q "window_join needs exactly two inputs" "$tmp/log" || fail "window one input: message"
JOP=window_join bad window_zero_size 'input = el by key, er by key' 'size = 0ms' 'size = 0ms'
JOP=window_join conf "$d" 1 'input = el by key, er by key' ""
(cd "$d" && "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" && fail "window_join without size passed"
grep -q "size" "$tmp/log" || fail "window_join without size: message does not name size"
JOP=window_join conf "$d" 1 'input = el by key, er by key' "" 'size = 10s'
(cd "$d" && "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" || fail "a good window_join refused"

# --- hand-computed ----------------------------------------------------------------
# lower = -1s, upper = 2s: a left record at t joins right records in [t-1s, t+2s].
d="$tmp/hand"
mkdir -p "$d"
printf 'a 1000 L1\nb 2000 L2\na 5000 L3\nc 9000 L4\na 9500 L5\n' > "$d/left.txt"
printf 'a 500 R1\na 1500 R2\nb 4500 R3\na 6000 R4\nc 20000 R5\na 8500 R6\n' > "$d/right.txt"
# a L1@1000: R1@500, R2@1500; L3@5000: R4@6000; L5@9500: R6@8500 (9500-1000);
# b L2@2000: R3@4500 is past 4000; c L4@9000: R5@20000 is far past
want='a|L1|R1
a|L1|R2
a|L3|R4
a|L5|R6'
for w in 1 3; do
	for order in lr rl; do
		rm -f "$d/out.tsv"
		if [ $order = lr ]; then
			conf "$d" $w 'input = el by key, er by key' "" 'lower = -1s' 'upper = 2s'
			printf '%s\n' "$want" | sed "s/|/$T/g" | sort > "$tmp/want"
		else # right first: the roles swap, [t-2s, t+1s] from the right's view
			conf "$d" $w 'input = er by key, el by key' "" 'lower = -2s' 'upper = 1s'
			printf '%s\n' "$want" | awk -F'|' '{ print $1 "\t" $3 "\t" $2 }' | sort > "$tmp/want"
		fi
		run "$d" || fail "hand (width $w, $order): exit $?"
		sort "$d/out.tsv" | cmp -s "$tmp/want" - ||
			fail "hand (width $w, $order): output differs: $(sort "$d/out.tsv" | diff "$tmp/want" - | head)"
		grep -q "late records" "$tmp/log" && fail "hand: records counted late"
		grep -q "^distinct keys: 0$" "$tmp/log" || fail "hand: state left at the end"
	done
done
echo "ok hand-computed pairs, widths 1 and 3, either input order"

# window_join, size = 10s: pairs of a key within [0,10s), [10s,20s), ...
# a: L1@1000 L3@5000 x R1@500 R2@1500 in [0,10s); L5@9500 is in it too;
# R6@8500 too; R4@6000 too. So [0,10s) of a: L1 L3 L5 x R1 R2 R4 R6.
# b: L2@2000 x R3@4500. c: L4@9000 in [0,10s), R5@20000 in [20s,30s): none.
wwant=$(for l in L1 L3 L5; do for r in R1 R2 R4 R6; do echo "a|$l|$r"; done; done; echo "b|L2|R3")
for w in 1 3; do
	rm -f "$d/out.tsv"
	JOP=window_join conf "$d" $w 'input = el by key, er by key' "" 'size = 10s'
	printf '%s\n' "$wwant" | sed "s/|/$T/g" | sort > "$tmp/want"
	run "$d" || fail "window hand (width $w): exit $?"
	sort "$d/out.tsv" | cmp -s "$tmp/want" - ||
		fail "window hand (width $w): output differs: $(sort "$d/out.tsv" | diff "$tmp/want" - | head)"
	grep -q "late records" "$tmp/log" && fail "window hand: records counted late"
	grep -q "^distinct keys: 0$" "$tmp/log" || fail "window hand: state left at the end"
done
echo "ok window_join hand-computed pairs, widths 1 and 3"

# --- oracle -----------------------------------------------------------------------------
# N records per side, 40 keys, 50 ms apart in event time (right 25 ms later),
# lower = -1s, upper = 2s.
gen() { # DIR N
	awk -v n="$2" 'BEGIN { for (i = 0; i < n; i++)
		printf "k%d %d L%d\n", (i * 7) % 40, i * 50, i }' > "$1/left.txt"
	awk -v n="$2" 'BEGIN { for (i = 0; i < n; i++)
		printf "k%d %d R%d\n", (i * 11) % 40, i * 50 + 25, i }' > "$1/right.txt"
}
oracle() { # DIR VARIANT: the pairs, sorted
	awk -v lo=-1000 -v hi=2000 -v size=4000 -v variant="$2" '
		FNR == NR { n[$1]++; t[$1, n[$1]] = $2; v[$1, n[$1]] = $3; next }
		{ for (i = 1; i <= n[$1]; i++)
			if (variant == "interval" ? $2 >= t[$1, i] + lo && $2 <= t[$1, i] + hi \
						  : int($2 / size) == int(t[$1, i] / size))
				print $1 "\t" v[$1, i] "\t" $3 }' "$1/left.txt" "$1/right.txt" | sort
}
peak() { sed -n 's/.*peak key-bound state \([0-9]*\) bytes.*/\1/p' "$tmp/log"; }
for variant in interval window; do
	if [ $variant = interval ]; then
		export JOP=interval_join
		JKEYS=('lower = -1s' 'upper = 2s' 'bucket = 500ms')
	else
		export JOP=window_join
		JKEYS=('size = 4s')
	fi
	ref="$tmp/ref_$variant"
	mkdir -p "$ref"
	gen "$ref" 6000
	oracle "$ref" $variant > "$ref/want"
	[ "$(wc -l < "$ref/want")" -gt 6000 ] || fail "oracle ($variant): too few pairs to mean anything"
	RATE="rate = 20000" conf "$ref" 2 'input = el by key, er by key' "" "${JKEYS[@]}"
	run "$ref" || fail "oracle run ($variant): exit $?"
	sort "$ref/out.tsv" > "$ref/sorted"
	cmp -s "$ref/want" "$ref/sorted" ||
		fail "oracle ($variant): output differs: $(diff "$ref/want" "$ref/sorted" | head -6)"
	grep -q "late records" "$tmp/log" && fail "oracle ($variant): records counted late"
	grep -q "^distinct keys: 0$" "$tmp/log" || fail "oracle ($variant): buffers left at the end"
	echo "ok $JOP: $(wc -l < "$ref/want") pairs of 6000 + 6000 records equal the awk oracle"

	# --- flat memory ----------------------------------------------------------------
	for n in 3000 30000; do
		d="$tmp/mem$n"
		mkdir -p "$d"
		gen "$d" $n
		# unpaced, on one worker: a paced source that was descheduled
		# catches up in one burst, and on two workers one source runs
		# ahead of the other; either way the join buffers what a loaded
		# machine's timing decides (it failed under ctest -j2 on 2 CPUs).
		# Unpaced, the watermark follows every worker turn: a join that
		# evicted nothing would still hold 10x the state here
		WORKERS=1 RATE="" conf "$d" 1 'input = el by key, er by key' "" "${JKEYS[@]}"
		run "$d" || fail "memory ($variant, $n): exit $?"
		eval "peak_$n=$(peak)"
	done
	[ -n "$peak_3000" ] && [ -n "$peak_30000" ] || fail "memory: no peak in the summary"
	[ "$peak_30000" -lt $((4 * peak_3000)) ] ||
		fail "memory ($variant): peak key-bound state grew from $peak_3000 to $peak_30000 bytes with 10x the records"
	echo "ok $JOP flat memory: peak key-bound state $peak_3000 bytes for 3000, $peak_30000 for 30000 records a side"

	# --- faults: kill -9 and --rescale ----------------------------------------------
	d="$tmp/kill_$variant"
	mkdir -p "$d"
	gen "$d" 6000
	RATE="rate = 1500" conf "$d" 2 'input = el by key, er by key' \
		$'checkpoint_dir = ckpt\ncheckpoint_interval = 100ms' "${JKEYS[@]}"
	(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "kill ($variant): did not start"
	wait_manifest "$d/ckpt" || fail "kill ($variant): no checkpoint"
	sleep 0.3
	victim=$(first_child "$launcher")
	[ -n "$victim" ] || fail "kill ($variant): no worker to kill (finished too fast?)"
	kill -9 "$victim"
	wait $launcher || fail "kill ($variant): the run did not recover: exit $?"
	launcher=
	grep -q "restart" "$tmp/log" || fail "kill ($variant): no restart after kill -9"
	sort "$d/out.tsv" | cmp -s - "$ref/sorted" ||
		fail "kill ($variant): output differs from the fault-free run: $(sort "$d/out.tsv" | diff - "$ref/sorted" | head -6)"
	echo "ok kill -9 during a $JOP: output equals the fault-free run"

	d="$tmp/rescale_$variant"
	mkdir -p "$d"
	gen "$d" 6000
	for w in 2 3 1; do
		RATE="rate = 1500" conf "$d" $w 'input = el by key, er by key' \
			$'checkpoint_dir = ckpt\ncheckpoint_interval = 100ms' "${JKEYS[@]}"
		args=()
		[ $w = 2 ] || args=(--rescale)
		(cd "$d" && exec "$shmrun" "${args[@]}" job.conf) 2> "$tmp/log" &
		launcher=$!
		wait_started || fail "rescale ($variant) to $w: did not start"
		sleep 0.5
		kill -TERM $launcher 2> /dev/null || true
		wait $launcher || fail "rescale ($variant) to $w: the stop failed"
		launcher=
		grep -q "stopped at epoch" "$tmp/log" || fail "rescale ($variant) to $w: finished before the stop"
	done
	RATE="" conf "$d" 1 'input = el by key, er by key' \
		$'checkpoint_dir = ckpt\ncheckpoint_interval = 100ms' "${JKEYS[@]}"
	run "$d" || fail "rescale ($variant): final run: exit $?"
	sort "$d/out.tsv" | cmp -s - "$ref/sorted" ||
		fail "rescale ($variant): output differs from the fault-free run: $(sort "$d/out.tsv" | diff - "$ref/sorted" | head -6)"
	echo "ok stop and --rescale 2 -> 3 -> 1 of the $JOP: output equals the fault-free run"
done
echo "interval_join, window_join: all cases passed"
