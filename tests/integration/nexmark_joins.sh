#!/usr/bin/env bash
# tests/integration/nexmark_joins.sh SHMRUN SHMRUN_BENCH QUERY_DIR: the join
# queries of docs/examples/nexmark, q3 (nexmark_local_items, a regular join)
# and q8 (window_join and nexmark_new_users), beyond the runs as shipped that
# nexmark_queries.sh compares with the references (issue 12 §7). QUERY_DIR is
# the build's copy (build/docs/examples/nexmark). Each output below must equal,
# as a multiset, the single-threaded reference's
# (`shmrun-bench nexmark --reference q3|q8`):
#   - q3 with the persons slowed down, so that most auctions wait in
#     key-bound state for their seller, and a hand-made stream in which one
#     seller has 20 auctions waiting (the head's inline ids and its pages);
#   - q3 and q8 with checkpoints: kill -9 of a worker mid-run, and a stop
#     (SIGTERM) then `--rescale` from width 2 to 3 and from 3 to 1;
#   - bad input: each operator fed the wrong records fails the job naming its
#     stage and the record (exit 1); a key of theirs with a bad value, and a
#     stage with the wrong number of inputs, are refused before anything
#     starts (exit 2) at the file:line of the key or stage.
set -euo pipefail
shmrun=${1:?usage: nexmark_joins.sh SHMRUN SHMRUN_BENCH QUERY_DIR}
bench=${2:?}
qdir=${3:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# want QUERY N: the reference's sorted output over N events of seed 1 in $tmp/QUERY.want
want() {
	"$bench" nexmark --reference "$1" --events "$2" --seed 1 | sort > "$tmp/$1.want" ||
		fail "$1: the reference failed"
	[ -s "$tmp/$1.want" ] || fail "$1: the reference output nothing"
}
# same NAME QUERY DIR: DIR's out/QUERY.tsv* equal $tmp/QUERY.want as multisets
same() {
	cat "$3"/out/"$2".tsv* | sort > "$tmp/got"
	if ! cmp -s "$tmp/$2.want" "$tmp/got"; then
		diff "$tmp/$2.want" "$tmp/got" | head -8 >&2 || true
		fail "$1: output differs from the reference ($(wc -l < "$tmp/got") lines," \
			"want $(wc -l < "$tmp/$2.want"))"
	fi
}
# job QUERY DIR N WIDTH SINK_WIDTH PIECE [JOB_LINE...]: DIR/QUERY.conf, the
# shipped conf with count N, width WIDTH (the sink's SINK_WIDTH: file_sink's
# width cannot change under --rescale), piece_events PIECE, the sources
# paced to about $PACE s (default 3; `rate`), and the JOB_LINEs added to [job].
job() {
	local q=$1 d=$2 n=$3 w=$4 sw=$5 piece=$6 extra
	shift 6
	extra=$(printf '%s\\n' "$@")
	mkdir -p "$d"
	cp "$qdir/nexmark_queries.so" "$d/"
	# persons are 1 in 50 events, auctions 3 in 50
	awk -v n="$n" -v w="$w" -v sw="$sw" -v piece="$piece" -v extra="$extra" -v pace="${PACE:-3}" '
		/^\[/ { stage = $0 }
		/^plugins *=/ { print; printf "%s", extra; next }
		/^count *=/ { print "count = " n; next }
		/^piece_events *=/ { print "piece_events = " piece; next }
		/^width *=/ { print "width = " (stage == "[out]" ? sw : w); next }
		/^events *= *person/ { print; print "rate = " int(n / 50 / pace); next }
		/^events *= *auction/ { print; print "rate = " int(n * 3 / 50 / pace); next }
		{ print }' "$qdir/$q.conf" > "$d/$q.conf"
}

# ---- q3: auctions before their sellers --------------------------------------
N=200000
want q3 $N
d=$tmp/q3late
job q3 "$d" $N 2 2 10000
# the persons at 4000/s (1 s), the auctions unpaced: nearly all come first
sed -i -e '/^events = person/{n;s/^rate = .*/rate = 4000/}' -e '/^events = auction/{n;d}' "$d/q3.conf"
(cd "$d" && "$shmrun" q3.conf) 2> "$tmp/log" || fail "q3, persons late: exit $?"
same "q3, persons late" q3 "$d"
echo "ok q3 with the persons late (auctions waiting): $(wc -l < "$tmp/q3.want") rows equal the reference's"

# one seller with 20 auctions of category 10 waiting, 3 of another category,
# 2 auctions of a seller in WA: rows for the 20 only, whatever the order
d=$tmp/q3pages
mkdir -p "$d"
cp "$qdir/nexmark_queries.so" "$d/"
{
	printf '7\tperson\t2\t7\tCy Do\tc@d.com\t1 2 3 4\tBend\tOR\t1000\n' # first: paced
	printf '5\tperson\t0\t5\tAnn Lee\ta@b.com\t1 2 3 4\tBoise\tID\t1000\n'
	printf '6\tperson\t1\t6\tBo Wu\tb@c.com\t1 2 3 4\tKent\tWA\t1000\n'
} > "$d/persons.tsv"
for i in $(seq 1 23); do
	printf '5\tauction\t%d\t%d\titem\t100\t200\t1000\t2000\t5\t%d\n' $((i + 1)) $((100 + i)) \
		$((i <= 20 ? 10 : 11))
done > "$d/auctions.tsv"
printf '6\tauction\t30\t130\titem\t100\t200\t1000\t2000\t6\t10\n' >> "$d/auctions.tsv"
printf '6\tauction\t31\t131\titem\t100\t200\t1000\t2000\t6\t10\n' >> "$d/auctions.tsv"
for i in $(seq 1 20); do
	printf '5\tAnn Lee\tBoise\tID\t%d\n' $((100 + i))
done | sort > "$tmp/q3.want"
cat > "$d/q3.conf" <<-'CONF'
[job]
plugins = nexmark_queries.so
[plines]
op = file_source
path = persons.tsv
rate = 2
[persons]
op = extract
input = plines
separator = \t
key = 1
value = 2-
[alines]
op = file_source
path = auctions.tsv
[auctions]
op = extract
input = alines
separator = \t
key = 1
value = 2-
[q3]
op = nexmark_local_items
input = persons by key, auctions by key
[out]
op = file_sink
input = q3
path = out/q3.tsv
CONF
(cd "$d" && "$shmrun" q3.conf) 2> "$tmp/log" || fail "q3, 20 waiting: exit $?"
same "q3, 20 auctions waiting for one seller" q3 "$d"
echo "ok q3 with 20 auctions waiting for one seller: 20 rows, none of the other category or state"

# ---- kill -9 and --rescale, with checkpoints ---------------------------------
ckpt=("checkpoint_dir = ck" "checkpoint_interval = 100ms")

# kill9 QUERY N: kill -9 of a worker mid-run; the output is the reference's
kill9() {
	local q=$1 n=$2 d=$tmp/$1.kill rc=0 ws
	want "$q" "$n"
	job "$q" "$d" "$n" 2 2 10000 "${ckpt[@]}"
	(cd "$d" && exec "$shmrun" "$q.conf") 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "$q kill -9: the run did not start"
	for _ in $(seq 1 200); do # a checkpoint with events in it
		ls "$d"/ck/ckpt-3/MANIFEST > /dev/null 2>&1 && break
		sleep 0.05
	done
	mapfile -t ws < <(pgrep -P $launcher || true)
	[ ${#ws[@]} -eq 2 ] || fail "$q kill -9: expected 2 workers, found ${#ws[@]}"
	kill -9 "${ws[0]}" || fail "$q kill -9: the worker had ended"
	wait $launcher || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "$q kill -9: exit status $rc"
	qgrep "restart 1 of" "$tmp/log" || fail "$q: kill -9 landed after the end (no restart logged)"
	same "$q, kill -9 of a worker" "$q" "$d"
	echo "ok $q, kill -9 of a worker mid-run: $(wc -l < "$tmp/got") rows, the reference's"
}

# rescale QUERY N FROM TO SINK_WIDTH: stop at width FROM a third of the way
# (q3: persons and waiting auctions kept; q8: windows open in window_join,
# perhaps none emitted yet, as its rows come in bursts when windows close),
# then --rescale to TO. When the stop came after the end or after every row
# (a loaded machine), run again paced slower.
rescale() {
	local q=$1 n=$2 from=$3 to=$4 sw=$5 d rc n1 all pace
	want "$q" "$n"
	all=$(wc -l < "$tmp/$q.want")
	for pace in 3 6 12; do
		d=$tmp/$q.rescale-$from-$to-$pace
		rc=0
		# 20 pieces: a rescale deals each new instance pieces of several old
		# ones, which it must still make in event-time order (q8's
		# watermark_delay = 0s: no record may come late)
		PACE=$pace job "$q" "$d" "$n" "$from" "$sw" $((n / 20)) "${ckpt[@]}"
		(cd "$d" && exec "$shmrun" "$q.conf") 2> "$tmp/log" &
		launcher=$!
		wait_started || fail "$q rescale $from -> $to: the run did not start"
		sleep "$((pace / 3)).$((pace % 3 * 3))" # a third of the way, with windows open
		kill -TERM $launcher 2> /dev/null || true # (it may have ended: then slower)
		wait $launcher || rc=$?
		launcher=
		[ $rc -eq 0 ] || fail "$q rescale $from -> $to, stop: exit status $rc"
		n1=$(cat "$d"/out/"$q".tsv* | wc -l)
		if ! grep -q "stopped at epoch" "$tmp/log" || [ "$n1" -ge "$all" ]; then
			echo "# $q rescale $from -> $to paced to ${pace} s: the stop came too late; slower"
			continue
		fi
		awk -v to="$to" '
			/^\[/ { stage = $0 }
			/^width *=/ && stage != "[out]" { $0 = "width = " to }
			{ print }' "$d/$q.conf" > "$d/$q.conf.new"
		mv "$d/$q.conf.new" "$d/$q.conf"
		[ "$(grep -c "^width = $to\$" "$d/$q.conf")" -ge 3 ] ||
			fail "$q rescale $from -> $to: width not changed"
		(cd "$d" && "$shmrun" --rescale "$q.conf") 2> "$tmp/log" ||
			fail "$q --rescale $from -> $to: exit $?"
		qgrep "late records" "$tmp/log" &&
			fail "$q --rescale $from -> $to: $(grep 'late records' "$tmp/log")"
		same "$q, stop, --rescale $from -> $to" "$q" "$d"
		echo "ok $q, stop after $n1 of $all rows, --rescale $from -> $to: the reference's"
		return 0
	done
	fail "$q rescale $from -> $to: every stop came after the last row"
}

kill9 q3 200000
rescale q3 200000 2 3 2
rescale q3 200000 3 1 1
kill9 q8 1000000
rescale q8 1000000 2 3 2
rescale q8 1000000 3 1 1

# ---- bad input ----------------------------------------------------------------
d=$tmp/wrong
mkdir -p "$d"
cp "$qdir/nexmark_queries.so" "$d/"
# wrong NAME WANT-MESSAGE CONF-BODY: the job fails (exit 1), naming stage 'q'
wrong() {
	local rc=0
	# with checkpoints: a record the operator refuses (EILSEQ) is not retried,
	# the same input would come again
	rm -rf "$d/ck"
	printf '[job]\nplugins = nexmark_queries.so\nworkers = 2\ncheckpoint_dir = ck\n%s\n' "$3" > "$d/job.conf"
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 1 ] || fail "$1: exit $rc, want 1"
	qgrep "restart 1 of" "$tmp/log" && fail "$1: restarted, though the same input fails again"
	qgrep -F "stage 'q' [" "$tmp/log" || fail "$1: no message naming the stage"
	qgrep -F "$2" "$tmp/log" || fail "$1: no '$2' in the message"
	echo "ok $1: the job fails, naming the stage and the record"
}
src() { # NAME EVENTS KEY [WIDTH]
	printf '[%s]\nop = nexmark\ncount = 2000\nevents = %s\nkey = %s\nwidth = %s\n' "$1" "$2" "$3" "${4:-1}"
}
sink='[out]
op = file_sink
input = q
path = out.tsv'
wrong "nexmark_local_items, inputs swapped" \
	"a record that is not a person (the first input) of the nexmark source: 'auction\\t" \
	"$(src p person person)
$(src a auction person)
[q]
op = nexmark_local_items
input = a by key, p by key
$sink"
wrong "nexmark_local_items, auctions keyed by their id" \
	"a record that is not an auction keyed by its seller (key = person) of the nexmark source: 'auction\\t" \
	"$(src p person person)
$(src a auction join)
[q]
op = nexmark_local_items
input = p by key, a by key
$sink"
wrong "nexmark_new_users fed persons" \
	"a record that is not a window_join pair of a person and an auction of the nexmark source: 'person\\t" \
	"$(src p person person)
[q]
op = nexmark_new_users
input = p
$sink"
wrong "nexmark_new_users, size not window_join's" \
	"that size = 5000 ms gives: set size equal to the window_join's size" \
	"$(src p person person)
watermark_delay = 0s
$(src a auction person)
watermark_delay = 0s
[j]
op = window_join
input = p by key, a by key
size = 10s
[q]
op = nexmark_new_users
input = j
size = 5s
$sink"

# refused NAME LINE PATTERN CONF-BODY: exit 2 at job.conf:LINE, nothing written
refused() {
	local rc=0
	printf '[job]\nplugins = nexmark_queries.so\n%s\n' "$4" > "$d/job.conf"
	rm -f "$d/out.tsv"
	(cd "$d" && "$shmrun" job.conf) > /dev/null 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "$1: exit $rc, want 2"
	qgrep "job.conf:$2:.*$3" "$tmp/log" || fail "$1: no 'job.conf:$2: ...$3' in the error"
	[ ! -e "$d/out.tsv" ] || fail "$1: output written"
	echo "ok $1: refused at job.conf:$2 before anything starts (exit 2)"
}
# [job] and plugins are lines 1-2; each src is 6 lines: [p] 3-8, [a] 9-14, [q] 15
two="$(src p person person)
$(src a auction person)"
refused "category = ten" 18 "category" "$two
[q]
op = nexmark_local_items
input = p by key, a by key
category = ten
$sink"
refused "category = -1" 18 "category" "$two
[q]
op = nexmark_local_items
input = p by key, a by key
category = -1
$sink"
refused "nexmark_local_items with one input" 9 "two inputs" "$(src p person person)
[q]
op = nexmark_local_items
input = p by key
$sink"
refused "size = 10" 22 "size" "$two
[j]
op = window_join
input = p by key, a by key
size = 10s
[q]
op = nexmark_new_users
input = j
size = 10
$sink"
refused "size = 0s" 22 "size" "$two
[j]
op = window_join
input = p by key, a by key
size = 10s
[q]
op = nexmark_new_users
input = j
size = 0s
$sink"
refused "nexmark_new_users with two inputs" 15 "one input" "$two
[q]
op = nexmark_new_users
input = p, a
$sink"

# SHMRUN_OP_KEYED (nexmark_new_users and the other plugin operators with
# key-bound state): an input that does not send each key to one instance is
# refused before anything starts, at the line of `input`. It was accepted by
# check and failed the run at its first record: a forward edge that a width
# change made a rebalance (q8 with pairs at width 1), and a forward edge from
# a source, whose records no `by key` edge partitioned.
# [job] 1-2, [p] 3-8 and [a] 9-14 (width 2), [q] 15: its input at line 17;
# without [a], [q] is at 9 and its input at 11
refused "nexmark_local_items, an input not by key" 17 \
	"stage 'q' (op nexmark_local_items) keeps its state per key, and at width 2 .*its input 'p' is not 'by key'" \
	"$(src p person person 2)
$(src a auction person 2)
[q]
op = nexmark_local_items
input = p, a by key
width = 2
$sink"
refused "a keyed operator behind a forward edge from a source" 11 \
	"stage 'q' (op nexmark_new_users) keeps its state per key, and at width 2 the records of a key must all reach one instance: its input 'p' is not 'by key', and no 'by key' edge before it sends each key to one instance; write 'p by key', or set width = 1" \
	"$(src p person person 2)
[q]
op = nexmark_new_users
input = p
size = 10s
width = 2
$sink"
d=$tmp/keyed
mkdir -p "$d"
cp "$qdir/q8.conf" "$qdir/nexmark_queries.so" "$d/"
line=$(grep -n '^input = pairs$' "$d/q8.conf" | cut -d: -f1)
for cmd in check run; do
	args=(check --set pairs.width=1 q8.conf)
	[ $cmd = run ] && args=(--set pairs.width=1 q8.conf)
	rc=0
	(cd "$d" && "$shmrun" "${args[@]}") > /dev/null 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "q8 with pairs at width 1 ($cmd): exit $rc, want 2"
	qgrep -F "q8.conf:$line: stage 'q8' (op nexmark_new_users) keeps its state per key, and at width 2 the records of a key must all reach one instance: its input 'pairs' (width 1) is not 'by key' and has another width, so its records are dealt out in turn (rebalance); write 'pairs by key', or give both the same width" "$tmp/log" ||
		fail "q8 with pairs at width 1 ($cmd): not refused at q8.conf:$line"
	[ ! -e "$d/out" ] || fail "q8 with pairs at width 1 ($cmd): output written"
done
# the shipped widths, and q8 at width 1 (any input will do), are accepted
(cd "$d" && "$shmrun" check q8.conf && "$shmrun" check --set q8.width=1 --set out.width=1 q8.conf) \
	> /dev/null 2> "$tmp/log" || fail "q8: a width the rule allows is refused"
echo "ok a keyed plugin operator's unpartitioned input is refused before the start (exit 2)"
