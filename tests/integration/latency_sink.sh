#!/usr/bin/env bash
# tests/integration/latency_sink.sh SHMRUN: sequence's event_time = now and the
# latency_sink operator (runtime/ops/latency_sink.c), seen from outside.
#   - stamped records through a shuffle into a latency_sink of width 2: each
#     instance writes path.<i>; together they measured every record, none
#     unstamped; in each summary the buckets add up to its count, every bucket
#     is [lo, hi] with lo <= hi, and p50 <= p90 <= p99 <= p99.9 <= max, all
#     within the run's duration;
#   - records without event time (the default) are counted as unstamped, and
#     the summary has count 0, percentiles 0 and no bucket;
#   - warmup_records = 300 leaves an instance's first 300 records out;
#   - event_time = now changes nothing else: the same lines reach a file_sink
#     as without it (sequence emits in batches of its budget either way);
#   - a bad event_time value is refused before the start, naming the choices;
#   - a run stopped (SIGTERM, no checkpoints) before its end of input leaves
#     an empty summary, never a stale one from an earlier run.
set -euo pipefail
shmrun=${1:?usage: latency_sink.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

field() { # file key: the value of "key N" in a summary
	awk -v k="$2" '$1 == k { print $2; found = 1 } END { if (!found) print "missing" }' "$1"
}

# ---- 1. stamped records, width 2 ---------------------------------------------
d=$tmp/stamped; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[job]
workers = 2
[gen]
op = sequence
count = 5000
keys = 64
rate = 20000
event_time = now
width = 2
[lat]
op = latency_sink
input = gen by key
path = out/lat.txt
width = 2
CONF
start=$(date +%s%N)
"$shmrun" "$d/job.conf" 2> "$tmp/log" || fail "stamped run failed"
elapsed=$(($(date +%s%N) - start))
total=0
for i in 0 1; do
	f=$d/out/lat.txt.$i
	[ -s "$f" ] || fail "no summary $f"
	head -1 "$f" | qgrep "^# latency_sink lat.$i: " || fail "$f: header: $(head -1 "$f")"
	c=$(field "$f" count)
	[ "$c" -gt 0 ] || fail "$f: count $c (keys 64 over 2 instances: both get records)"
	[ "$(field "$f" unstamped)" = 0 ] || fail "$f: unstamped records"
	[ "$(field "$f" negative)" = 0 ] || fail "$f: negative latencies"
	sum=$(awk '$1 == "bucket" { if ($2 > $3) bad = 1; s += $4 } END { print bad ? "bad" : s + 0 }' "$f")
	[ "$sum" = "$c" ] || fail "$f: buckets add up to $sum, count is $c"
	prev=0
	for k in p50_ns p90_ns p99_ns p999_ns max_ns; do
		v=$(field "$f" $k)
		[ "$v" != missing ] && [ "$v" -ge "$prev" ] || fail "$f: $k = $v below $prev"
		prev=$v
	done
	[ "$prev" -gt 0 ] && [ "$prev" -lt "$elapsed" ] ||
		fail "$f: max_ns $prev outside (0, $elapsed) (the run's duration)"
	total=$((total + c))
done
[ "$total" = 5000 ] || fail "the sinks measured $total records of 5000"

# ---- 2. records without event time ---------------------------------------------
d=$tmp/plain; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[gen]
op = sequence
count = 1000
[lat]
op = latency_sink
input = gen
path = lat.txt
CONF
"$shmrun" "$d/job.conf" 2> "$tmp/log" || fail "unstamped run failed"
f=$d/lat.txt
[ "$(field "$f" count)" = 0 ] && [ "$(field "$f" unstamped)" = 1000 ] ||
	fail "$f: want count 0, unstamped 1000: $(head -4 "$f" | tr '\n' ' ')"
for k in p50_ns p999_ns max_ns; do
	[ "$(field "$f" $k)" = 0 ] || fail "$f: $k of an empty histogram is not 0"
done
! grep -q '^bucket' "$f" || fail "$f: buckets without a measured record"
[ "$(field "$f" warmup)" = 0 ] || fail "$f: warmup without warmup_records"
sed -i 's/^count = 1000$/count = 1000\nevent_time = now/; s/^path = lat.txt$/path = lat.txt\nwarmup_records = 300/' "$d/job.conf"
"$shmrun" "$d/job.conf" 2> "$tmp/log" || fail "warmup_records run failed"
[ "$(field "$f" count)" = 700 ] && [ "$(field "$f" warmup)" = 300 ] &&
	[ "$(field "$f" unstamped)" = 0 ] ||
	fail "warmup_records = 300: $(head -5 "$f" | tr '\n' ' ')"

# ---- 3. event_time = now changes nothing else ------------------------------------
d=$tmp/same; mkdir -p "$d"
for stamp in none now; do
	cat > "$d/$stamp.conf" <<CONF
[job]
workers = 2
[gen]
op = sequence
count = 30000
keys = 7
piece_records = 1000
event_time = $stamp
width = 2
[out]
op = file_sink
input = gen by key
path = $stamp.tsv
CONF
	"$shmrun" "$d/$stamp.conf" 2> "$tmp/log" || fail "file_sink run, event_time = $stamp"
	sort "$d/$stamp.tsv" > "$d/$stamp.sorted"
done
[ "$(wc -l < "$d/now.sorted")" = 30000 ] || fail "event_time = now: $(wc -l < "$d/now.sorted") lines"
cmp -s "$d/none.sorted" "$d/now.sorted" || fail "event_time = now changed the records"
awk -F'\t' '$1 != "k" ($2 % 7) { bad++ } END { exit bad > 0 }' "$d/now.sorted" ||
	fail "a record's key is not k<i mod keys>"

# ---- 4. a bad value is refused before the start ------------------------------------
d=$tmp/bad; mkdir -p "$d"
printf '[gen]\nop = sequence\ncount = 10\nevent_time = later\n[lat]\nop = latency_sink\ninput = gen\npath = l.txt\n' > "$d/job.conf"
set +e
"$shmrun" check "$d/job.conf" > "$tmp/log" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "event_time = later: exit $rc, want 2"
grep -q "event_time" "$tmp/log" && grep -q "now" "$tmp/log" || fail "the message names neither the key nor the choices"
[ ! -e "$d/l.txt" ] || fail "check wrote the output"

# ---- 5. a stopped run leaves an empty summary, not a stale one ------------------------
d=$tmp/stopped; mkdir -p "$d"
echo "count 12345 (stale)" > "$d/lat.txt"
cat > "$d/job.conf" <<'CONF'
[gen]
op = sequence
count = 100000
rate = 100
event_time = now
[lat]
op = latency_sink
input = gen
path = lat.txt
CONF
"$shmrun" "$d/job.conf" 2> "$tmp/log" &
launcher=$!
wait_started || fail "the run did not start"
sleep 0.3
kill -TERM "$launcher"
set +e
wait "$launcher"
rc=$?
set -e
launcher=
[ $rc = 143 ] || fail "stopped run: exit $rc, want 143 (SIGTERM without checkpoints)"
[ -e "$d/lat.txt" ] && [ ! -s "$d/lat.txt" ] || fail "after a stop: $(head -2 "$d/lat.txt" 2>&1)"
echo "latency_sink: ok"
