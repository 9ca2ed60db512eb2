#!/usr/bin/env bash
# tests/integration/nexmark.sh SHMRUN SOURCE_DIR: the nexmark source (issue 12 §7).
#   - the same seed gives the same events, another seed others;
#   - over N events the kinds are exactly those of n mod 50 (1 : 3 : 46), every
#     event number 0..N-1 appears once, ids and times follow from n, the
#     record key is the join key (or the person with key = person), and the
#     hot auction and hot bidder shares are near NEXMark's 1/2 and 3/4;
#   - at widths 3 (two workers, small pieces) the union of the instances'
#     output is the width-1 output: no event twice, none lost; `events = bid`
#     is the bids of the full stream;
#   - kill -9 of a worker, and a stop then --rescale 2 -> 3 and 3 -> 1, give the
#     fault-free output exactly (exactly-once file_sink);
#   - q5's count step (docs/examples/nexmark/q5.conf: window counts of bids per
#     auction, sliding 10 s every 2 s, at width 2) equals awk's sliding-window
#     counts over the same bids (the whole q5 is checked against its reference
#     by nexmark_queries.sh);
#   - bad keys are refused before anything starts (exit 2, file:line).
set -euo pipefail
shmrun=${1:?usage: nexmark.sh path/to/shmrun SOURCE_DIR}
src=${2:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# conf DIR [stage lines...]: a job nexmark -> file_sink out.tsv; the extra
# lines go into the [gen] stage; [job] from $JOB (default: one worker).
conf() {
	local d=$1
	shift
	mkdir -p "$d"
	{
		printf '[job]\n%b\n[gen]\nop = nexmark\n' "${JOB:-workers = 1}"
		printf '%s\n' "$@"
		printf '[out]\nop = file_sink\ninput = gen\npath = out.tsv\n'
	} > "$d/job.conf"
}
run() { # dir: run to completion, log in $tmp/log
	(cd "$1" && "$shmrun" job.conf) 2> "$tmp/log" || fail "$1: exit $?"
}
same() { # name a b: the same lines as multisets
	sort "$2" > "$tmp/a.sorted"
	sort "$3" > "$tmp/b.sorted"
	if ! cmp -s "$tmp/a.sorted" "$tmp/b.sorted"; then
		diff "$tmp/a.sorted" "$tmp/b.sorted" | head -8 >&2 || true
		fail "$1: output differs"
	fi
}

# ---- determinism ----------------------------------------------------------
N=5000
conf "$tmp/s7a" "count = $N" "seed = 7"
conf "$tmp/s7b" "count = $N" "seed = 7"
conf "$tmp/s8" "count = $N" "seed = 8"
run "$tmp/s7a"
run "$tmp/s7b"
run "$tmp/s8"
[ "$(wc -l < "$tmp/s7a/out.tsv")" -eq $N ] || fail "seed 7: $(wc -l < "$tmp/s7a/out.tsv") records, want $N"
cmp -s "$tmp/s7a/out.tsv" "$tmp/s7b/out.tsv" || fail "seed 7 twice: different events"
cmp -s "$tmp/s7a/out.tsv" "$tmp/s8/out.tsv" && fail "seeds 7 and 8: the same events"
# ids and times depend on n alone: equal across seeds; names, prices differ
cut -f1-4 "$tmp/s7a/out.tsv" | grep -v "	bid	" > "$tmp/ids7"
cut -f1-4 "$tmp/s8/out.tsv" | grep -v "	bid	" > "$tmp/ids8"
cmp -s "$tmp/ids7" "$tmp/ids8" || fail "person and auction ids differ between seeds"
echo "ok seed 7 twice: the same $N events; seed 8: others, with the same ids"

# ---- the mix, ids, keys, times -------------------------------------------
# 12345 events: not a multiple of 50, so the last, partial epoch counts too.
N=12345
conf "$tmp/mix" "count = $N" "seed = 3" "event_rate = 1000" "first_event_time = 5000"
run "$tmp/mix"
awk -F'\t' -v N=$N '
function last_auction(n,   e, o) {
	e = int(n / 50); o = n % 50
	if (o < 1) { e--; o = 2 } else if (o >= 4) o = 2; else o -= 1
	return e * 3 + o
}
{
	n = $3 + 0
	if (seen[n]++) { print "event " n " twice"; bad = 1 }
	o = n % 50
	want = o < 1 ? "person" : o < 4 ? "auction" : "bid"
	if ($2 != want) { print "event " n ": " $2 ", want " want; bad = 1 }
	kinds[$2]++
	if ($NF != 5000 + n && $2 != "auction") { print "event " n ": time " $NF; bad = 1 }
	if ($2 == "person" && ($4 != 1000 + int(n / 50) || $1 != $4)) { print "person " n ": id " $4 " key " $1; bad = 1 }
	if ($2 == "auction" && ($4 != 1000 + last_auction(n) || $1 != $4 || $8 != 5000 + n || $9 <= $8)) {
		print "auction " n ": id " $4 " key " $1 " time " $8 " expires " $9; bad = 1
	}
	if ($2 == "bid") {
		if ($1 != $4) { print "bid " n ": key " $1 " auction " $4; bad = 1 }
		if ($4 == 1000 + int(last_auction(n) / 2) * 2) hot++
		if ($5 == 1000 + int(n / 50 / 4) * 4 + 1) hotb++
		if ($4 > 1000 + last_auction(n) + 10 || $6 < 100) { print "bid " n ": auction " $4 " price " $6; bad = 1 }
	}
}
END {
	for (n = 0; n < N; n++) {
		o = n % 50
		w[o < 1 ? "person" : o < 4 ? "auction" : "bid"]++
		if (!(n in seen)) { print "event " n " missing"; bad = 1 }
	}
	for (k in w) if (kinds[k] != w[k]) { print k ": " kinds[k] ", want " w[k]; bad = 1 }
	if (hot / kinds["bid"] < 0.49 || hot / kinds["bid"] > 0.53) { print "hot auction share " hot / kinds["bid"]; bad = 1 }
	if (hotb / kinds["bid"] < 0.74 || hotb / kinds["bid"] > 0.80) { print "hot bidder share " hotb / kinds["bid"]; bad = 1 }
	printf "%d person, %d auction, %d bid; hot auction %.3f, hot bidder %.3f\n", kinds["person"],
		kinds["auction"], kinds["bid"], hot / kinds["bid"], hotb / kinds["bid"] > "/dev/stderr"
	exit bad
}' "$tmp/mix/out.tsv" > "$tmp/mix.err" 2> "$tmp/mix.summary" || fail "mix: $(head -5 "$tmp/mix.err")"
echo "ok $N events: $(cat "$tmp/mix.summary"); each event number once, ids, keys and times from n"
conf "$tmp/byperson" "count = 500" "seed = 3" "key = person" "event_rate = 1000" "first_event_time = 5000"
run "$tmp/byperson"
awk -F'\t' '($2 == "bid" && $1 != $5) || ($2 == "auction" && $1 != $10) || ($2 == "person" && $1 != $4) { bad = 1; print }
	END { exit bad }' "$tmp/byperson/out.tsv" > "$tmp/kp.err" || fail "key = person: $(head -3 "$tmp/kp.err")"
cut -f2- "$tmp/byperson/out.tsv" > "$tmp/kp.values"
head -500 "$tmp/mix/out.tsv" | cut -f2- > "$tmp/mix500.values"
cmp -s "$tmp/kp.values" "$tmp/mix500.values" || fail "key = person changed the values"
echo "ok key = person: bid -> bidder, auction -> seller, person -> id; values unchanged"

# ---- widths: no duplicates, no gaps ----------------------------------------
N=20000
conf "$tmp/w1" "count = $N" "seed = 5"
run "$tmp/w1"
JOB='workers = 2' conf "$tmp/w3" "count = $N" "seed = 5" "width = 3" "piece_events = 999"
sed -i 's/^path = out.tsv/path = out.tsv\nwidth = 3/' "$tmp/w3/job.conf"
run "$tmp/w3"
cat "$tmp"/w3/out.tsv.* > "$tmp/w3.all"
[ "$(wc -l < "$tmp/w3.all")" -eq $N ] || fail "width 3: $(wc -l < "$tmp/w3.all") records, want $N"
same "width 3 against width 1" "$tmp/w1/out.tsv" "$tmp/w3.all"
for i in 0 1 2; do
	[ -s "$tmp/w3/out.tsv.$i" ] || fail "width 3: instance $i produced nothing"
done
echo "ok width 3 (2 workers, pieces of 999): the union of the instances is width 1's $N events"
JOB='workers = 2' conf "$tmp/bids" "count = $N" "seed = 5" "width = 2" "events = bid" "piece_events = 1000"
run "$tmp/bids"
grep "	bid	" "$tmp/w1/out.tsv" > "$tmp/w1.bids"
same "events = bid at width 2" "$tmp/w1.bids" "$tmp/bids/out.tsv"
echo "ok events = bid at width 2: the bids of the full stream, $(wc -l < "$tmp/w1.bids")"

# ---- kill -9 and --rescale --------------------------------------------------
N=3000
conf "$tmp/ref" "count = $N" "seed = 9"
run "$tmp/ref"
ck_conf() { # dir width
	JOB='workers = 2\ncheckpoint_dir = ck\ncheckpoint_interval = 100ms' \
		conf "$1" "count = $N" "seed = 9" "width = $2" "piece_events = 250" "rate = 1500"
}
d=$tmp/kill
ck_conf "$d" 2
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "kill -9: the run did not start"
for _ in $(seq 1 200); do # a checkpoint with events in it
	ls "$d"/ck/ckpt-3/MANIFEST > /dev/null 2>&1 && break
	sleep 0.05
done
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -eq 2 ] || fail "kill -9: expected 2 workers, found ${#ws[@]}"
kill -9 "${ws[0]}"
rc=0
wait $launcher || rc=$?
launcher=
[ $rc -eq 0 ] || fail "kill -9: exit status $rc"
grep -q "restart 1 of" "$tmp/log" || fail "kill -9 landed after the end (no restart logged)"
same "kill -9 of a worker" "$tmp/ref/out.tsv" "$d/out.tsv"
echo "ok kill -9 of a worker: restarted, the $N events exactly once"

rescale() { # from to: stop a run at width FROM, --rescale to width TO
	local d=$tmp/rescale-$1-$2 rc=0 n1
	ck_conf "$d" "$1"
	(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "rescale $1 -> $2: the run did not start"
	sleep 0.8
	kill -TERM $launcher
	wait $launcher || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "rescale $1 -> $2, stop: exit status $rc"
	grep -q "stopped at epoch" "$tmp/log" || fail "rescale $1 -> $2: the stop landed after the end"
	n1=$(wc -l < "$d/out.tsv")
	[ "$n1" -gt 0 ] && [ "$n1" -lt $N ] || fail "rescale $1 -> $2: $n1 events before the stop"
	sed -i "s/^width = $1\$/width = $2/" "$d/job.conf"
	grep -q "^width = $2\$" "$d/job.conf" || fail "rescale $1 -> $2: width not changed"
	(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || fail "--rescale $1 -> $2: exit $?"
	same "stop, --rescale $1 -> $2" "$tmp/ref/out.tsv" "$d/out.tsv"
	echo "ok stop after $n1 events, --rescale $1 -> $2: the $N events exactly once"
}
rescale 2 3
rescale 3 1

# ---- pacing is fair between instances on one worker -------------------------
# The stage's rate is shared by its instances; on one worker, visited in one
# order every turn, the first used to take every token until it finished, so
# the other's events (and the watermark, their minimum) lagged without bound.
JOB='workers = 1' conf "$tmp/fair" "count = 100000" "width = 2" "piece_events = 5000" "rate = 100000"
run "$tmp/fair"
awk -F'\t' 'NR <= 50000 { n = $3; i = int(n / 5000) % 2; if (n > m[i]) m[i] = n }
	END { d = m[0] - m[1]; if (d < 0) d = -d
	      printf "%d %d %d\n", m[0], m[1], d }' "$tmp/fair/out.tsv" > "$tmp/fair.m"
read -r m0 m1 d < "$tmp/fair.m"
[ "$d" -le 20000 ] || fail "pacing on one worker: at the 50000th event the instances are at events $m0 and $m1"
echo "ok pacing on one worker: at the 50000th event the two instances are at events $m0 and $m1"

# ---- event-time order after --rescale ---------------------------------------
# A rescale deals the pieces still to make pooled by old instance, so a new
# instance may be dealt a later piece before an earlier one; it must still
# make them in increasing order, or watermark_delay = 0s would make records
# late downstream (a window drops them). Width 2 -> 3 of the source alone.
wconf() { # dir width
	mkdir -p "$1"
	cat > "$1/job.conf" <<-CONF
	[job]
	workers = 2
	checkpoint_dir = ck
	checkpoint_interval = 100ms
	[gen]
	op = nexmark
	count = 300000
	seed = 4
	events = bid
	width = $2
	piece_events = 5000
	watermark_delay = 0s
	rate = 120000
	[w]
	op = window
	input = gen by key
	kind = tumbling
	size = 1s
	[out]
	op = file_sink
	input = w
	path = out.tsv
	CONF
}
wconf "$tmp/wref" 2
sed -i 's/^rate = .*/rate = 100000000/' "$tmp/wref/job.conf"
run "$tmp/wref"
d=$tmp/wrescale
wconf "$d" 2
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "order after rescale: the run did not start"
sleep 1.2
kill -TERM $launcher
rc=0
wait $launcher || rc=$?
launcher=
[ $rc -eq 0 ] || fail "order after rescale, stop: exit status $rc"
grep -q "stopped at epoch" "$tmp/log" || fail "order after rescale: the stop landed after the end"
sed -i 's/^width = 2$/width = 3/' "$d/job.conf"
(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || fail "order after rescale: --rescale exit $?"
qgrep "late records" "$tmp/log" && fail "after --rescale 2 -> 3 of the source: $(grep 'late records' "$tmp/log")"
same "window counts after --rescale 2 -> 3 of the source" "$tmp/wref/out.tsv" "$d/out.tsv"
echo "ok --rescale 2 -> 3 of a source: its events stay in event-time order (no late record), exact window counts"

# ---- q5's count step against awk ------------------------------------------
mkdir -p "$tmp/q5"
cat > "$tmp/q5/job.conf" <<'CONF'
[job]
workers = 2
[bids]
op = nexmark
count = 200000
seed = 1
events = bid
width = 2
piece_events = 10000
watermark_delay = 0s
[counts]
op = window
input = bids by key
kind = sliding
size = 10s
slide = 2s
aggregate = count
time_format = ms
width = 2
[out]
op = file_sink
input = counts
path = out/q5.tsv
CONF
run "$tmp/q5"
# the same bids, width 1, no window
conf "$tmp/q5bids" "count = 200000" "seed = 1" "events = bid" "event_rate = 10000"
run "$tmp/q5bids"
# a bid at t ms is in the 5 windows [s, s + 10000) with s a multiple of 2000
awk -F'\t' '{
	t = $NF + 0
	s0 = t - t % 2000
	for (k = 0; k < 5; k++) n[$1 "\t" (s0 - 2000 * k)]++
}
END {
	for (x in n) {
		split(x, p, "\t")
		printf "%s\t%d\t%d\t%d\n", p[1], p[2], p[2] + 10000, n[x]
	}
}' "$tmp/q5bids/out.tsv" > "$tmp/q5.want"
[ -s "$tmp/q5.want" ] || fail "q5: the oracle counted nothing"
same "q5's count step against awk" "$tmp/q5.want" "$tmp/q5/out/q5.tsv"
echo "ok q5's count step (sliding window counts at width 2): $(wc -l < "$tmp/q5.want") (auction, window) counts equal awk's"

# ---- bad keys ---------------------------------------------------------------
bad() { # name line-of-the-key pattern stage-lines...
	local name=$1 line=$2 pat=$3 rc=0
	shift 3
	conf "$tmp/bad" "$@"
	(cd "$tmp/bad" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "$name: exit $rc, want 2"
	grep -q "job.conf:$line:.*$pat" "$tmp/log" || fail "$name: no 'job.conf:$line: ...$pat' in the error"
	[ ! -e "$tmp/bad/out.tsv" ] || fail "$name: output written"
	rm -rf "$tmp/bad"
}
# [job], workers, [gen], op: the stage lines start at line 5
bad "count = 0" 5 "count" "count = 0"
bad "no count" 3 "count" "seed = 1"
bad "seed = -1" 6 "seed" "count = 10" "seed = -1"
bad "events = bids" 6 "events" "count = 10" "events = bids"
bad "key = auction" 6 "key" "count = 10" "key = auction"
bad "first_event_time too large" 6 "first_event_time" "count = 10" "first_event_time = 4000000000001"
bad "event_rate = 0" 6 "event_rate" "count = 10" "event_rate = 0"
bad "unknown key" 6 "inter_event_delay" "count = 10" "inter_event_delay = 1ms"
echo "ok bad keys refused at their line before anything starts (exit 2)"
