#!/usr/bin/env bash
# tests/integration/timers.sh SHMRUN PLUGIN_DIR: keyed timers and namespaced
# key-bound state across checkpoints and rescales (issue 12 §3), with
# PLUGIN_DIR/timers.so (tests/plugins/timers.c: operator `windows`, a
# tumbling-window count and sum per key whose windows live in
# shmrun_keyed_state_ns() and close on an event-time timer per (key, window)):
#   - a fault-free run: one line per (key, window), each with the count and
#     sum an awk oracle computes from the same records, and at most one
#     "tick" line from a processing-time timer (one where the worker loop
#     fires processing-time timers: that is the watermark code's, issue 12
#     §2; without it none, and then none in any run below either);
#   - the same job stopped (SIGTERM: final checkpoint with windows open and
#     timers pending), rescaled 2 -> 3 -> 1 -> 4 with a stop after each, then
#     run to the end: the output, as a multiset, equals the fault-free run's —
#     every timer fired exactly once, no window lost or doubled, the tick
#     as often as in the fault-free run; the windows still open at end of input are none (the operator
#     fails the job otherwise);
#   - a stop and a restart at the same width: the same output;
#   - kill -9 of a worker mid-run: the job restarts from its last checkpoint
#     (timers and windows restored) and the output is the same;
#   - where the job generates watermarks (issue 12 §2; skipped otherwise):
#     windows over event time close during the run, are correct when they
#     do, and after a stop and rescales 2 -> 3 -> 1 with the restored
#     watermarks every window is in the output once, as the oracle says.
set -euo pipefail
shmrun=${1:?usage: timers.sh path/to/shmrun PLUGIN_DIR}
pdir=$(cd "${2:?usage: timers.sh path/to/shmrun PLUGIN_DIR}" && pwd -P)
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
so="$pdir/timers.so"
[ -f "$so" ] || fail "no $so (build the test_plugins target)"

COUNT=500000 KEYS=40 SIZE=1000
conf() { # dir width rate
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
plugins = $so
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = $COUNT
keys = $KEYS
piece_records = 5000
rate = $3
width = 2
[win]
op = windows
input = gen by key
size = $SIZE
tick = 50ms
width = $2
[out]
op = file_sink
input = win
path = out/result.tsv
CONF
}
run() { (cd "$1" && shift && "$shmrun" "$@" job.conf) 2> "$tmp/log"; }
stop_after() { # dir seconds [args]: start, SIGTERM after a while, expect a stop
	local d=$1 s=$2
	shift 2
	(cd "$d" && exec "$shmrun" "$@" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "$d: did not start"
	sleep "$s"
	kill -TERM $launcher 2> /dev/null || true
	wait $launcher || fail "$d: stop failed"
	launcher=
	grep -q "stopped at epoch" "$tmp/log" || fail "$d: finished before the stop; slow it down"
}

# --- the oracle: record i has key k(i mod KEYS) and time i --------------------
awk -v n=$COUNT -v k=$KEYS -v s=$SIZE 'BEGIN {
	for (i = 0; i < n; i++) { key = "k" (i % k); w = i - i % s; c[key "\t" w]++; m[key "\t" w] += i }
	for (x in c) printf "%s\t%d\t%d\n", x, c[x], m[x]
}' | sort > "$tmp/oracle"

# --- fault-free run ---------------------------------------------------------
d="$tmp/ref"
mkdir -p "$d"
conf "$d" 2 100000 # 5 s: the 50 ms tick fires well before the end
run "$d" || fail "reference run: exit $?"
sort "$d/out/result.tsv" > "$tmp/expected"
ticks=$(grep -c $'\ttick$' "$tmp/expected" || true)
[ "$ticks" -le 1 ] || fail "reference run: the processing-time timer fired $ticks times"
grep -v $'\ttick$' "$tmp/expected" | cmp -s "$tmp/oracle" - ||
	fail "reference run differs from the oracle: $(grep -v $'\ttick$' "$tmp/expected" | diff "$tmp/oracle" - | head -5)"
echo "ok fault-free run: one line per (key, window) with the oracle's count and sum, $ticks tick(s)"

# --- stopped, rescaled 2 -> 3 -> 1 -> 4, finished -----------------------------
d="$tmp/rescale"
mkdir -p "$d"
conf "$d" 2 100000
stop_after "$d" 0.5
for w in 3 1 4; do
	conf "$d" $w 100000
	run "$d" check --rescale > /dev/null || fail "check --rescale to width $w: exit $?"
	stop_after "$d" 0.4 --rescale
	grep -q "rescale: .* re-assigned" "$tmp/log" || fail "width $w: no rescale happened"
done
conf "$d" 4 100000000
run "$d" || fail "final run: exit $?"
sort "$d/out/result.tsv" > "$tmp/got"
cut -f1,2 "$tmp/got" | uniq -d > "$tmp/dup"
[ ! -s "$tmp/dup" ] || fail "a window fired twice: $(head -3 "$tmp/dup")"
cmp -s "$tmp/expected" "$tmp/got" ||
	fail "stopped and rescaled 2 -> 3 -> 1 -> 4: output differs from the fault-free run: $(diff "$tmp/expected" "$tmp/got" | head -5)"
echo "ok stopped and rescaled 2 -> 3 -> 1 -> 4: every timer fired exactly once, every window whole"

# --- a plain restart (same width) after a stop -------------------------------
d="$tmp/restart"
mkdir -p "$d"
conf "$d" 3 100000
stop_after "$d" 0.6
conf "$d" 3 100000000
run "$d" || fail "restart: exit $?"
sort "$d/out/result.tsv" | cmp -s "$tmp/expected" - ||
	fail "stopped and restarted at width 3: output differs from the fault-free run"
echo "ok stopped and restarted at the same width: output equal to the fault-free run"
# --- kill -9 of a worker mid-run: restarted from the last checkpoint ----------
d="$tmp/kill"
mkdir -p "$d"
conf "$d" 3 100000
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "kill: did not start"
wait_manifest "$d/ckpt" || fail "kill: no checkpoint within 30 s"
sleep 0.3
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -gt 0 ] || fail "kill: no worker to kill"
kill -9 "${ws[0]}"
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 0 ] || fail "kill: exit $rc after kill -9 of a worker"
grep -q "restart 1 of" "$tmp/log" || fail "kill: the job was not restarted (finished before the kill?)"
sort "$d/out/result.tsv" | cmp -s "$tmp/expected" - ||
	fail "kill -9 and restart: output differs from the fault-free run"
echo "ok kill -9 of a worker: restored timers and windows, output equal to the fault-free run"
# --- event time: windows closed by watermarks during the run ------------------
# Only where the job generates watermarks (watermark_delay, issue 12 §2):
# shmrun check says whether this build knows the keys.
econf() { # dir width rate
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
plugins = $so
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[gen]
op = sequence
count = $COUNT
keys = $KEYS
piece_records = 5000
rate = $3
width = 2
event_time = sequence
watermark_delay = 0ms
watermark_interval = 10ms
[win]
op = windows
input = gen by key
size = $SIZE
time = event
width = $2
[out]
op = file_sink
input = win
path = out/result.tsv
CONF
}
d="$tmp/event"
mkdir -p "$d"
econf "$d" 2 100000
if ! "$shmrun" check "$d/job.conf" > /dev/null 2> "$tmp/log"; then
	grep -q "unknown key 'event_time\|unknown key 'watermark_delay\|not one of" "$tmp/log" ||
		fail "event time: check refused the job for another reason"
	echo "skipped event-time windows: this shmrun generates no watermarks (watermark_delay)"
	echo "timers: all cases passed"
	exit 0
fi
# record i: event time 1000 ms + i ms (sequence's event_time_start, event_time_step)
awk -v n=$COUNT -v k=$KEYS -v s=$SIZE 'BEGIN {
	for (i = 0; i < n; i++) { t = 1000 + i; key = "k" (i % k); w = t - t % s; c[key "\t" w]++; m[key "\t" w] += t }
	for (x in c) printf "%s\t%d\t%d\n", x, c[x], m[x]
}' | sort > "$tmp/eoracle"
stop_after "$d" 1.0
sort "$d/out/result.tsv" > "$tmp/early"
[ -s "$tmp/early" ] || fail "event time: no window closed during the first second (no watermark fired a timer)"
comm -23 "$tmp/early" "$tmp/eoracle" > "$tmp/wrong"
[ ! -s "$tmp/wrong" ] || fail "event time: windows closed early or wrong: $(head -3 "$tmp/wrong")"
early=$(wc -l < "$tmp/early")
for w in 3 1; do
	econf "$d" $w 100000
	stop_after "$d" 0.5 --rescale
done
econf "$d" 1 100000000
run "$d" || fail "event time: final run: exit $?"
sort "$d/out/result.tsv" > "$tmp/got"
cut -f1,2 "$tmp/got" | uniq -d > "$tmp/dup"
[ ! -s "$tmp/dup" ] || fail "event time: a window fired twice: $(head -3 "$tmp/dup")"
cmp -s "$tmp/eoracle" "$tmp/got" ||
	fail "event time, stopped and rescaled 2 -> 3 -> 1: output differs from the oracle: $(diff "$tmp/eoracle" "$tmp/got" | head -5)"
echo "ok event time: $early windows closed by watermarks before the first stop; rescaled 2 -> 3 -> 1: each once, output equal to the oracle"
echo "timers: all cases passed"
