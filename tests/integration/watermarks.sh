#!/usr/bin/env bash
# tests/integration/watermarks.sh SHMRUN PLUGIN_DIR: event-time watermarks
# (issue 12 §2, docs/event-time.md), seen through PLUGIN_DIR/watermark.so
# (tests/plugins/watermark.c), whose wm_probe/wm_sink write a line per
# on_watermark() call ("wm W MAXSEEN RECORDS LATE") and one at end of input.
#
#   1. min over inputs: two sequence sources with event times (event_time =
#      sequence) and watermark_delay = 5ms, `early` (event times 1..2 s,
#      4000 records/s) and `late` (1000..1001 s, 1000/s), into probes over
#      forward edges and rings, widths 1, 2 and 3, on 2 workers. Every file:
#      watermarks strictly increasing, MAX last and before end of input, no
#      late record, every record seen. A probe right behind a source over a
#      forward edge sees exactly max - delay. The probes reading both see
#      only watermarks the sources generated: early's (the minimum) while
#      early runs, with late's records already in hand, then late's once
#      early finished (a finished input counts as MAX); downstream of a ring
#      the same values again. With checkpoint_dir too (a finished source
#      sends MAX while it waits for the final checkpoint).
#   2. generation on a non-source stage: its watermarks are its own emits'
#      max - its delay, not its input's.
#   3. idle_timeout: `quiet` emits 10 records, nothing for 3 s, then 5
#      more; without idle_timeout the probes reading quiet and `a` never
#      pass quiet's watermark before the end and nothing is late; with
#      idle_timeout = 300ms they follow a's, not before quiet was silent
#      that long, and quiet's 5 records after its silence are late (the
#      watermark does not go back).
#   4. a stop (SIGTERM, checkpoint_dir) is not end of input: no MAX.
#   5. bad input: watermark_delay on a sink, a delay without unit, an
#      idle_timeout of 0: exit 2 naming file:line; watermark_interval
#      without watermark_delay: a warning.
set -euo pipefail
shmrun=$(realpath "${1:?usage: watermarks.sh path/to/shmrun PLUGIN_DIR}")
pdir=$(cd "${2:?usage: watermarks.sh path/to/shmrun PLUGIN_DIR}" && pwd -P)
. "$(dirname "$0")/lib.sh"
so="$pdir/watermark.so"
[ -f "$so" ] || fail "no $so (build the test_plugins target)"
export LC_ALL=C

run() { # dir: run dir/t.conf, log in $tmp/log
	timeout 120 "$shmrun" "$1/t.conf" > "$1/out" 2> "$tmp/log" || fail "run of $1/t.conf failed"
}

# well_formed FILE RECORDS [LATE]: wm lines strictly increasing (max last),
# then one end line with RECORDS records (or any, with -); no late record
# anywhere, or with LATE = -, any.
well_formed() {
	awk -v want="$2" -v f="$1" -v anylate="${3:-}" '
		function bad(m) { print "FAIL: " f ": " m " (line " NR ": " $0 ")"; exit 1 }
		$1 == "end" {
			if (ended) bad("two end lines")
			if (last != "max") bad("end of input before watermark MAX")
			if (want != "-" && $2 != want) bad("records " $2 ", want " want)
			if ($3 != 0 && anylate != "-") bad("late records")
			if ($4 != "max") bad("watermark at end is not MAX")
			ended = 1; next
		}
		$1 != "wm" { bad("unknown line") }
		{
			if (ended) bad("watermark after end of input")
			if (last == "max") bad("watermark after MAX")
			if ($2 == "min") bad("on_watermark(MIN)")
			if ($2 != "max" && n && $2 + 0 <= last + 0) bad("watermark not increasing")
			if ($5 != 0 && anylate != "-") bad("late records")
			last = $2; n++
		}
		END { if (!ended) bad("no end line") }' "$1" || exit 1
}

# wms FILE...: the watermarks other than MAX, one per line
wms() { awk '$1 == "wm" && $2 != "max" { print $2 }' "$@"; }

# subset A B what: every line of A is a line of B, and A has at least 3
subset() {
	local n
	n=$(wc -l < "$1")
	[ "$n" -ge 3 ] || fail "$3: only $n watermarks"
	sort -u "$2" > "$tmp/set"
	sort -u "$1" | comm -23 - "$tmp/set" > "$tmp/extra"
	[ ! -s "$tmp/extra" ] || fail "$3: watermarks nobody generated: $(head -3 "$tmp/extra" | tr '\n' ' ')"
}

# ---- 1. min over inputs, forward edges and rings --------------------------------
conf_min() { # dir [job lines...]
	local d=$1
	shift
	mkdir -p "$d"
	{
		echo "[job]"
		echo "workers = 2"
		echo "plugins = $so"
		printf '%s\n' "$@"
		cat << 'CONF'
[early]
op = sequence
count = 1000
keys = 8
rate = 4000
event_time = sequence
event_time_start = 1000
watermark_delay = 5ms
watermark_interval = 20ms

[late]
op = sequence
count = 1000
keys = 8
rate = 1000
event_time = sequence
event_time_start = 1000000
watermark_delay = 5ms
watermark_interval = 20ms

[pearly]
op = wm_sink
input = early
path = pearly.txt

[plate]
op = wm_sink
input = late
path = plate.txt

[pmin]
op = wm_probe
input = early, late
path = pmin.txt

[shuf]
op = wm_probe
width = 2
input = early by key, late by key
path = shuf.txt

[wide]
op = wm_sink
width = 3
input = shuf
path = wide.txt

[out]
op = wm_sink
input = pmin
path = out.txt
CONF
	} > "$d/t.conf"
}

check_min() { # dir
	local d=$1 f
	for f in pearly.txt plate.txt; do
		well_formed "$d/$f" 1000
		# right behind its source, over a forward edge: exactly max - delay
		awk -v f="$f" '$1 == "wm" && $2 != "max" && $2 != $3 - 5000000 {
			print "FAIL: " f ": watermark " $2 " is not max " $3 " - 5ms"; exit 1 }' \
			"$d/$f" || exit 1
	done
	# event_time = sequence: record i at event_time_start + i x 1ms, so the
	# largest is record 999's
	[ "$(awk '$2 == "max" { print $3 }' "$d/pearly.txt")" = 1999000000 ] ||
		fail "early's last event time is not 1000 ms + 999 x 1 ms"
	[ "$(awk '$2 == "max" { print $3 }' "$d/plate.txt")" = 1000999000000 ] ||
		fail "late's last event time is not 1000000 ms + 999 x 1 ms"
	well_formed "$d/pmin.txt" 2000
	well_formed "$d/out.txt" 2000
	for f in "$d"/shuf.txt.* "$d"/wide.txt.*; do
		well_formed "$f" -
	done
	[ "$(cat "$d"/shuf.txt.* | awk '$1 == "end" { s += $2 } END { print s }')" = 2000 ] ||
		fail "shuf did not see 2000 records"
	[ "$(cat "$d"/wide.txt.* | awk '$1 == "end" { s += $2 } END { print s }')" = 2000 ] ||
		fail "wide did not see 2000 records"
	wms "$d/pearly.txt" "$d/plate.txt" > "$tmp/gen"
	wms "$d/pmin.txt" > "$tmp/pmin"
	subset "$tmp/pmin" "$tmp/gen" "pmin"
	# the minimum: early's watermarks (< 3 s) while late's records (>= 1000 s) were in hand
	awk '$1 == "wm" && $2 != "max" && $2 < 3e9 && $3 >= 1e12 { ok = 1 } END { exit !ok }' \
		"$d/pmin.txt" || fail "pmin never held early's watermark with late's records in hand"
	# early finished: it counts as MAX, late's watermarks come through before the end
	[ "$(awk '$1 >= 1e12' "$tmp/pmin" | wc -l)" -ge 3 ] ||
		fail "pmin did not follow late once early had finished: $(tail -3 "$tmp/pmin" | tr '\n' ' ')"
	[ "$(awk '$1 < 3e9' "$tmp/pmin" | wc -l)" -ge 3 ] ||
		fail "pmin did not follow early while it ran"
	for f in "$d"/shuf.txt.*; do
		wms "$f" > "$tmp/one"
		subset "$tmp/one" "$tmp/gen" "$(basename "$f")"
	done
	wms "$d"/shuf.txt.* > "$tmp/shuf"
	for f in "$d"/wide.txt.*; do
		wms "$f" > "$tmp/one"
		subset "$tmp/one" "$tmp/shuf" "$(basename "$f")"
	done
	wms "$d/out.txt" > "$tmp/out"
	cmp -s "$tmp/out" "$tmp/pmin" || fail "out (forward behind pmin) saw other watermarks than pmin"
}

conf_min "$tmp/min"
run "$tmp/min"
check_min "$tmp/min"

conf_min "$tmp/minck" "checkpoint_dir = ckpt" "checkpoint_interval = 50ms"
run "$tmp/minck"
check_min "$tmp/minck"

# ---- 2. generation on a non-source stage ----------------------------------------
mkdir -p "$tmp/gen2"
cat > "$tmp/gen2/t.conf" << CONF
[job]
plugins = $so
[a]
op = sequence
count = 600
rate = 2000
event_time = sequence
watermark_delay = 5ms
watermark_interval = 20ms
[g]
op = wm_probe
input = a
path = g.txt
watermark_delay = 50ms
watermark_interval = 20ms
[s]
op = wm_sink
input = g
path = s.txt
CONF
run "$tmp/gen2"
for f in g.txt s.txt; do
	well_formed "$tmp/gen2/$f" 600
	[ "$(wms "$tmp/gen2/$f" | wc -l)" -ge 3 ] || fail "$f: fewer than 3 watermarks"
	awk -v f="$f" '$1 == "wm" && $2 != "max" && $2 != $3 - 50000000 {
		print "FAIL: " f ": watermark " $2 " is not max " $3 " - 50ms (g generates its own)"; exit 1 }' \
		"$tmp/gen2/$f" || exit 1
done

# ---- 3. idle_timeout ------------------------------------------------------------
conf_idle() { # dir [job lines...]
	local d=$1
	shift
	mkdir -p "$d"
	{
		echo "[job]"
		echo "workers = 2"
		echo "plugins = $so"
		printf '%s\n' "$@"
		cat << 'CONF'
[quiet]
op = quiet
count = 10
start = 1000
hold = 3s
again = 5
watermark_delay = 0ms
watermark_interval = 20ms

[a]
op = sequence
count = 1500
keys = 4
rate = 1000
event_time = sequence
event_time_start = 1000000
watermark_delay = 5ms
watermark_interval = 20ms

[pf]
op = wm_probe
input = quiet, a
path = pf.txt

[sf]
op = wm_sink
input = pf
path = sf.txt

[pr]
op = wm_sink
width = 2
input = quiet by key, a by key
path = pr.txt
CONF
	} > "$d/t.conf"
}

conf_idle "$tmp/noidle"
run "$tmp/noidle"
for f in "$tmp"/noidle/pf.txt "$tmp"/noidle/sf.txt "$tmp"/noidle/pr.txt.*; do
	well_formed "$f" -
	# quiet's last record is at 1.009 s: nothing may pass it while quiet is open
	awk -v f="$f" '$1 == "wm" && $2 != "max" && $2 > 1009000000 {
		print "FAIL: " f ": watermark " $2 " passed the silent input without idle_timeout"; exit 1 }' \
		"$f" || exit 1
done

# quiet's 5 records after its silence are on time: nothing passed it
[ "$(awk '$1 == "end" { print $2 }' "$tmp/noidle/pf.txt")" = 1515 ] ||
	fail "pf did not see 1515 records without idle_timeout"

conf_idle "$tmp/idle" "idle_timeout = 300ms"
run "$tmp/idle"
# quiet comes back after its silence: it counts again, but the watermark
# does not go back, and its 5 records are late (pf, and pr's instance that
# owns key q)
[ "$(awk '$1 == "end" { print $2 " " $3 }' "$tmp/idle/pf.txt")" = "1515 5" ] ||
	fail "pf: not 1515 records of which 5 late: $(tail -1 "$tmp/idle/pf.txt")"
[ "$(cat "$tmp"/idle/pr.txt.* | awk '$1 == "end" { n += $2; l += $3 } END { print n " " l }')" = "1515 5" ] ||
	fail "pr: not 1515 records of which 5 late"
for f in "$tmp"/idle/pf.txt "$tmp"/idle/sf.txt "$tmp"/idle/pr.txt.*; do
	well_formed "$f" - -
	wms "$f" > "$tmp/one"
	[ "$(awk '$1 >= 1e12' "$tmp/one" | wc -l)" -ge 3 ] ||
		fail "$(basename "$f"): idle_timeout did not release the minimum: $(tail -3 "$tmp/one" | tr '\n' ' ')"
done
# not before quiet was silent for idle_timeout: its generated watermark came
# ~20 ms in, then 300 ms of silence, while a delivers 1000 records/s
awk '$1 == "wm" && $2 != "max" && $2 >= 1e12 { if ($4 < 150) { print "FAIL: pf: released after only " $4 " records"; exit 1 } exit 0 }' \
	"$tmp/idle/pf.txt" || exit 1

# ---- 4. a stop is not end of input ------------------------------------------------
# SIGTERM with checkpoint_dir: the final checkpoint is a stop; no watermark
# jumps to MAX (nothing fires early into the checkpoint), no end of input.
conf_idle "$tmp/stop" "checkpoint_dir = ckpt" "checkpoint_interval = 100ms"
(cd "$tmp/stop" && exec "$shmrun" t.conf) > /dev/null 2> "$tmp/log" &
launcher=$!
wait_started
sleep 0.8
kill -TERM $launcher
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 0 ] || fail "SIGTERM: exit status $rc, expected 0"
grep -q "stopped at epoch [0-9]" "$tmp/log" || fail "SIGTERM: no 'stopped at epoch'"
for f in "$tmp"/stop/pf.txt "$tmp"/stop/sf.txt "$tmp"/stop/pr.txt.*; do
	[ "$(grep -c '^wm ' "$f")" -ge 1 ] || fail "$(basename "$f"): no watermark before the stop"
	if grep -q '^wm max\|^end' "$f"; then
		fail "$(basename "$f"): MAX or end of input at a stop: $(tail -2 "$f")"
	fi
done

# ---- 5. bad input -----------------------------------------------------------------
bad() { # "pattern" conf-text
	printf '%s\n' "$2" > "$tmp/bad.conf"
	set +e
	"$shmrun" check "$tmp/bad.conf" > /dev/null 2> "$tmp/log"
	rc=$?
	set -e
	[ $rc = 2 ] || fail "expected exit 2, got $rc for: $2"
	grep -qF "$1" "$tmp/log" || fail "no '$1' in: $(cat "$tmp/log")"
}
src='[s]
op = sequence
count = 10'
bad "bad.conf:8: watermark_delay in stage 'o': operator 'null_sink' is a sink" "$src
[o]
op = null_sink
input = s

watermark_delay = 1s"
bad "bad.conf:4: watermark_delay = '2' in stage 's' is not a valid duration" "$src
watermark_delay = 2
[o]
op = null_sink
input = s"
bad "bad.conf:2: idle_timeout = '0s' in [job] is out of range" "[job]
idle_timeout = 0s
$src
[o]
op = null_sink
input = s"
# event_time_start is ms and becomes ns: above 9e12 it would overflow int64_t
# (it once allowed 1e15); at the limit the run works (UBSan checks it in CI)
bad "bad.conf:5: event_time_start = '9000000000001' in stage 's' is out of range" "$src
event_time = sequence
event_time_start = 9000000000001
[o]
op = null_sink
input = s"
printf '%s\n' "$src" "event_time = sequence" "event_time_start = 9000000000000" "watermark_delay = 0s" \
	"[o]" "op = null_sink" "input = s" > "$tmp/edge.conf"
"$shmrun" "$tmp/edge.conf" > /dev/null 2> "$tmp/log" || fail "event_time_start at its limit: the run failed"
# the last record's event time must fit too: past 2^63 ns the times would
# saturate and every later record share one (sequence and nexmark, by prepare())
bad "bad.conf:1: stage 's' [0]: event_time_start + (count - 1) x event_time_step, the last record's event time, is past the last one shmrun holds" "$src
event_time = sequence
event_time_start = 9000000000000
event_time_step = 31536000s
[o]
op = null_sink
input = s"
bad "bad.conf:1: stage 'n' [0]: first_event_time + (count - 1) x (1 s / event_rate), the last record's event time, is past" "[n]
op = nexmark
count = 1000000000000
event_rate = 1
[o]
op = null_sink
input = n"
printf '%s\n' "[n]" "op = nexmark" "count = 1000000000000" "[o]" "op = null_sink" "input = n" > "$tmp/far.conf"
"$shmrun" check "$tmp/far.conf" > /dev/null 2> "$tmp/log" ||
	fail "nexmark: 10^12 events at the default event_rate (year 2004) refused: $(cat "$tmp/log")"
printf '%s\n' "$src" "watermark_interval = 1s" "[o]" "op = null_sink" "input = s" > "$tmp/warn.conf"
"$shmrun" check "$tmp/warn.conf" > /dev/null 2> "$tmp/log" || fail "watermark_interval alone refused"
grep -qF "warn.conf:4: watermark_interval has no effect in stage 's' without watermark_delay" "$tmp/log" ||
	fail "no warning for watermark_interval without watermark_delay: $(cat "$tmp/log")"

# ---- file_source pieces after --rescale: each file's in offset order --------
# A rescale deals the pieces still to read pooled by old instance; read in
# that order, a later piece of the file came before an earlier one, and with
# watermark_delay = 0s on extract the window dropped records as late.
d=$tmp/fsrescale
mkdir -p "$d"
seq 0 2999 | sed 's/^/k /' > "$d/a.txt"
fsconf() { # workers/width
	cat <<-CONF
	[job]
	workers = $1
	checkpoint_dir = ck
	[read]
	op = file_source
	path = a.txt
	rate = 1000
	width = $1
	piece_bytes = 2K
	[parse]
	op = extract
	input = read
	key = 1
	time = 2
	time_format = epoch_s
	watermark_delay = 0s
	width = $1
	[win]
	op = window
	input = parse by key
	kind = tumbling
	size = 10s
	time_format = ms
	[out]
	op = file_sink
	input = win
	path = out.tsv
	CONF
}
fsconf 2 > "$d/job.conf"
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "file_source rescale: the run did not start"
sleep 1
kill -TERM $launcher
rc=0
wait $launcher || rc=$?
launcher=
[ $rc -eq 0 ] || fail "file_source rescale, stop: exit status $rc"
grep -q "stopped at epoch" "$tmp/log" || fail "file_source rescale: the stop landed after the end"
fsconf 1 > "$d/job.conf"
(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || fail "file_source --rescale 2 -> 1: exit $?"
qgrep "late records" "$tmp/log" && fail "file_source --rescale 2 -> 1: $(grep 'late records' "$tmp/log")"
[ "$(wc -l < "$d/out.tsv")" -eq 300 ] && [ "$(awk '{ s += $4 } END { print s }' "$d/out.tsv")" -eq 3000 ] ||
	fail "file_source --rescale 2 -> 1: $(wc -l < "$d/out.tsv") windows, want 300 of 10 records"
echo "ok file_source --rescale 2 -> 1: each file's pieces in offset order, no record late, 300 windows"

# windows_while_running NAME WANT WHY OK: run $d/job.conf; 2.5 s in, some
# window must be committed (unless the run already ended: a slow start), and
# at the end WANT windows.
windows_while_running() {
	local n alive=0 rc=0
	(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "$1: the run did not start"
	sleep 2.5
	n=$(cat "$d/out.tsv" 2> /dev/null | wc -l)
	kill -0 $launcher 2> /dev/null && alive=1
	wait $launcher || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "$1: exit status $rc"
	[ "$(wc -l < "$d/out.tsv")" -eq "$2" ] || fail "$1: $(wc -l < "$d/out.tsv") windows, want $2"
	if [ $alive = 0 ]; then
		echo "# $1: the job ended within 2.5 s; only the end checked"
		return 0
	fi
	[ "$n" -gt 0 ] || fail "$1: no window committed 2.5 s into the run ($3)"
	echo "ok $4: $n windows out while the job ran"
}

# ---- a finished instance does not hold the watermark (with checkpoints) ----
# With checkpoint_dir a finished source instance waits for the final
# checkpoint, sending MAX rather than END. extract generates its own
# watermarks; behind the instance that got no piece it used to stay at none
# until the job's end, and so did every window downstream. Now a task whose
# inputs all delivered MAX goes to MAX: windows fire while the job runs.
d=$tmp/fsdone
mkdir -p "$d"
seq 0 5999 | sed 's/^/k /' > "$d/a.txt"
fsconf 2 | sed -e 's/^piece_bytes = .*/piece_bytes = 1G/' > "$d/job.conf"
windows_while_running "finished instance" 600 \
	"the watermark held by the instance with no piece" \
	"a source instance with no piece does not hold the watermark"

# ---- idle_timeout with checkpoints: barriers alone do not keep an input busy --
# One instance reads only bad lines: its extract emits nothing, so the window's
# input from it carries only checkpoint barriers. Those used to count as
# deliveries (every checkpoint_interval, shorter than idle_timeout), so the
# input was never idle and held the windows until the job's end.
d=$tmp/idlebar
mkdir -p "$d"
seq 0 2999 | sed 's/^/k /' > "$d/a.txt"
seq 0 2999 | sed 's/^/garbage/' > "$d/b.txt"
fsconf 2 | sed -e 's/^path = a.txt/path = a.txt b.txt/' -e 's/^piece_bytes = .*/piece_bytes = 1G/' \
	-e 's/^checkpoint_dir = ck/checkpoint_dir = ck\nidle_timeout = 1s\ncheckpoint_interval = 200ms/' > "$d/job.conf"
windows_while_running "idle with barriers" 300 \
	"an input with only barriers was never idle" \
	"idle_timeout 1s with checkpoints every 200 ms: an input with only barriers is idle"

echo "watermarks: ok"
