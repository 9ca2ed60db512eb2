#!/usr/bin/env bash
# tests/integration/combine.sh SHMRUN: the combiner (docs/data-path.md).
#
# - A word count with the combiner (the default for count, emit = final) and
#   with `combine = false` gives the coreutils reference, for 1, 2 and 3
#   workers and count widths that split vnodes unevenly.
# - With checkpoints, a run stopped (SIGTERM) at random moments and resumed
#   until done, with the combiner on, still gives exactly the reference: no
#   partial is lost or counted twice across a checkpoint.
# - The run's summary says how many frames went on channels and how many of
#   them through an overflow queue.
# - Refused with exit 2 and file:line: combine = true on an operator without
#   a combiner, combine = true on count with emit = update, a non-boolean.
set -euo pipefail
shmrun=${1:?usage: combine.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

mkdir -p "$tmp/in"
for f in /usr/share/common-licenses/*; do
	[ -f "$f" ] && cat "$f"
done > "$tmp/in/licenses.txt"
for i in $(seq 1 30); do
	seq 1 $((i * 211)) | sed "s/^/Key$((i % 7)) k/"
done > "$tmp/in/gen.txt"
for f in "$tmp"/in/*; do
	tr -c 'A-Za-z0-9' '\n' < "$f"
	echo
done | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{print $2 "\t" $1}' | sort > "$tmp/expected"
[ -s "$tmp/expected" ] || fail "empty reference"

conf() { # name workers wcount combine(""|true|false) [extra job lines]
	local c=""
	[ -n "$4" ] && c="combine = $4"
	cat > "$tmp/$1.conf" <<CONF
[job]
workers = $2
ring_bytes = 64K
${5:-}
[read]
op = file_source
path = in
piece_bytes = 64K
width = $2
[words]
op = tokenize
input = read
width = $2
[count]
op = count
input = words by key
width = $3
$c
[out]
op = file_sink
input = count
path = out/$1.tsv
width = 1
CONF
}

check_out() { # name
	sort "$tmp/out/$1.tsv" > "$tmp/$1.got"
	diff -q "$tmp/expected" "$tmp/$1.got" > /dev/null || {
		diff "$tmp/expected" "$tmp/$1.got" | head -20 >&2 || true
		fail "$1: output differs from the coreutils reference"
	}
}

for w in 1 2 3; do
	for mode in "" false; do
		name=w$w-${mode:-default}
		conf "$name" "$w" $((w * 2 + 1)) "$mode"
		"$shmrun" "$tmp/$name.conf" 2> "$tmp/log" || fail "$name: exit $?"
		check_out "$name"
		# the summary: frames on channels, and how many took the overflow queue
		grep -Eq "frames [0-9]+ on channels \([0-9]+ through an overflow queue, [0-9.]+%\)" "$tmp/log" ||
			fail "$name: no frames line in the summary"
		echo "ok $name"
	done
done
# the combiner sends fewer frames: the default run's frame count is below
# the combine = false run's, for 2 workers
for m in default false; do
	"$shmrun" "$tmp/w2-$m.conf" 2> "$tmp/w2-$m.log" || fail "w2-$m rerun"
done
f_on=$(grep -o "frames [0-9]*" "$tmp/w2-default.log" | awk '{print $2}')
f_off=$(grep -o "frames [0-9]*" "$tmp/w2-false.log" | awk '{print $2}')
[ "$f_on" -lt "$f_off" ] || fail "combiner on sent $f_on frames, off $f_off: expected fewer"
echo "ok frames: combine $f_on < no combine $f_off"

# width 1 -> 1 `by key` is a direct call, still combined
conf one 1 1 ""
"$shmrun" plan "$tmp/one.conf" > "$tmp/plan"
grep -q "words -> count: forward, local (in-process call) x1, combined" "$tmp/plan" ||
	fail "plan: width-1 keyed edge not combined"
"$shmrun" "$tmp/one.conf" 2> "$tmp/log" || fail "one: exit $?"
check_out one
echo "ok width 1 -> 1 combined"

# stop at random moments and resume, with checkpoints: exactly the reference,
# through channels (2 workers) and through the direct call (width 1)
for shape in "stop 2 3" "stop1 1 1"; do
set -- $shape
name=$1
conf "$name" "$2" "$3" "" "checkpoint_dir = ck-$name
checkpoint_interval = 20ms"
sed -i 's/^piece_bytes = 64K$/piece_bytes = 64K\nrate = 40000/' "$tmp/$name.conf"
rm -rf "$tmp/ck-$name" "$tmp/out/$name.tsv"
stops=0
for round in $(seq 1 12); do
	"$shmrun" "$tmp/$name.conf" 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "round $round: no start"
	sleep "0.$((RANDOM % 4 + 1))"
	kill -TERM "$launcher" 2> /dev/null || true
	rc=0
	wait "$launcher" || rc=$?
	launcher=
	[ "$rc" -eq 0 ] || fail "round $round: exit $rc (a stop exits 0)"
	grep -q "stopped at epoch" "$tmp/log" || break # it had finished
	stops=$round
done
"$shmrun" "$tmp/$name.conf" 2> "$tmp/log" || fail "$name: final resume: exit $?"
check_out "$name"
[ "$stops" -ge 2 ] || fail "$name: stopped only $stops times: the input ran out too soon"
echo "ok $name: stopped $stops times and resumed: exact"
done

# plan says which shuffle edges carry partials
"$shmrun" plan "$tmp/w2-default.conf" > "$tmp/plan"
grep -q "words -> count: shuffle by key, 10 channels, combined" "$tmp/plan" || fail "plan: combined edge"
"$shmrun" plan "$tmp/w2-false.conf" > "$tmp/plan"
grep -q "words -> count: shuffle by key, 10 channels$" "$tmp/plan" || fail "plan: plain edge"
echo "ok plan"

# refusals
refuse() { # name expected-message-part
	local rc=0
	"$shmrun" check "$tmp/$1.conf" 2> "$tmp/log" || rc=$?
	[ "$rc" -eq 2 ] || fail "$1: exit $rc, expected 2"
	grep -q "$2" "$tmp/log" || fail "$1: no message '$2'"
	echo "ok refused $1"
}
conf bad1 1 1 ""
sed -i 's/^input = read$/input = read\ncombine = true/' "$tmp/bad1.conf"
refuse bad1 "bad1.conf:[0-9]*: .*combine = true in stage 'words', but operator 'tokenize' has no combiner"
conf bad2 1 1 true
sed -i 's/^input = words by key$/input = words by key\nemit = update/' "$tmp/bad2.conf"
refuse bad2 "bad2.conf:$(grep -n '^combine = true' "$tmp/bad2.conf" | cut -d: -f1): combine = true in stage 'count', but operator 'count' cannot combine"
# combine = true where no input is `by key`: it could never take effect
conf bad4 2 3 true
sed -i 's/^input = words by key$/input = words/' "$tmp/bad4.conf"
refuse bad4 "bad4.conf:$(grep -n '^combine = true' "$tmp/bad4.conf" | cut -d: -f1): combine = true in stage 'count', but none of its inputs is 'by key'"
# reported with the file's other errors, at once
conf bad5 1 1 true
sed -i 's/^input = words by key$/input = words by key\nemit = update\nwidht = 1/' "$tmp/bad5.conf"
refuse bad5 "cannot combine"
grep -q "widht" "$tmp/log" || fail "bad5: the other error is not reported with it"
conf bad3 1 1 maybe
refuse bad3 "bad3.conf:[0-9]*: .*combine"
# emit = update without the key: no combining, one update per record
conf upd 2 2 ""
sed -i 's/^input = words by key$/input = words by key\nemit = update/' "$tmp/upd.conf"
"$shmrun" "$tmp/upd.conf" 2> "$tmp/log" || fail "upd: exit $?"
n_upd=$(wc -l < "$tmp/out/upd.tsv")
n_tok=$(awk -F'\t' '{ s += $2 } END { print s }' "$tmp/expected")
[ "$n_upd" -eq "$n_tok" ] || fail "emit = update: $n_upd lines, expected one per word ($n_tok)"
echo "ok emit = update is not combined"
