#!/usr/bin/env bash
# tests/integration/window_check.sh SHMRUN: `op = window`'s settings are
# checked before anything starts, by `shmrun check` and by a run alike: exit
# status 2, a message at the file:line of the key that is wrong (or of
# `kind` when a key is missing), and nothing started. A good conf of each
# kind passes `shmrun check`.
set -euo pipefail
shmrun=${1:?usage: window_check.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# conf WINDOW_KEYS...: a job sequence -> window -> null_sink; the window
# stage's keys start at line 10 (kind = ... is line 10 when given first).
conf() {
	printf '[job]\nworkers = 1\n\n[src]\nop = sequence\ncount = 10\n\n[w]\nop = window\n'
	printf '%s\n' "$@"
	printf 'input = src by key\n\n[out]\nop = null_sink\ninput = w\n'
}
n=0
bad() { # NAME LINE PATTERN KEYS...
	local name=$1 line=$2 pat=$3
	shift 3
	n=$((n + 1))
	conf "$@" > "$tmp/$name.conf"
	for cmd in check run; do
		set +e
		if [ $cmd = run ]; then "$shmrun" "$tmp/$name.conf" > /dev/null 2> "$tmp/log"
		else "$shmrun" check "$tmp/$name.conf" > /dev/null 2> "$tmp/log"; fi
		rc=$?
		set -e
		[ $rc -eq 2 ] || fail "$name ($cmd): exit status $rc, expected 2"
		grep -q "$tmp/$name.conf:$line: .*$pat" "$tmp/log" ||
			fail "$name ($cmd): no '$name.conf:$line: ...$pat' in the message"
		grep -q "launcher: job" "$tmp/log" && fail "$name ($cmd): something was started"
	done
	return 0
}
good() { # NAME KEYS...
	local name=$1
	shift
	conf "$@" > "$tmp/$name.conf"
	"$shmrun" check "$tmp/$name.conf" > "$tmp/out" 2> "$tmp/log" ||
		fail "$name: shmrun check refused a good window: $(cat "$tmp/log")"
	grep -q ": ok " "$tmp/out" || fail "$name: no ok from shmrun check"
}

good tumbling 'kind = tumbling' 'size = 60s'
good sliding 'kind = sliding' 'size = 60s' 'slide = 20s' 'aggregate = avg' 'emit = update'
good session 'kind = session' 'gap = 500ms' 'allowed_lateness = 2s' 'time_format = ms' 'late = late.tsv'

bad no_kind 8 "kind" 'size = 60s'
bad bad_kind 10 "one of" 'kind = hopping' 'size = 60s'
bad no_size 10 "kind = tumbling needs size" 'kind = tumbling'
bad zero_size 11 "size" 'kind = tumbling' 'size = 0s'
bad sub_ms_size 11 "size" 'kind = tumbling' 'size = 0ms'
bad no_slide 10 "kind = sliding needs slide" 'kind = sliding' 'size = 60s'
bad slide_not_dividing 12 "slide (7000 ms) must divide size (60000 ms)" \
	'kind = sliding' 'size = 60s' 'slide = 7s'
bad slide_over_size 12 "must divide size" 'kind = sliding' 'size = 10s' 'slide = 20s'
bad too_many_windows 12 "size/slide = 10000 windows per record" \
	'kind = sliding' 'size = 10000s' 'slide = 1s'
bad tumbling_slide 12 "slide is only for kind = sliding" 'kind = tumbling' 'size = 60s' 'slide = 10s'
bad no_gap 10 "kind = session needs gap" 'kind = session'
bad session_size 12 "size is not used by kind = session" 'kind = session' 'gap = 5s' 'size = 60s'
bad tumbling_gap 12 "gap is only for kind = session" 'kind = tumbling' 'size = 60s' 'gap = 5s'
bad bad_aggregate 12 "one of" 'kind = tumbling' 'size = 60s' 'aggregate = median'
bad bad_lateness 12 "allowed_lateness" 'kind = tumbling' 'size = 60s' 'allowed_lateness = soon'
bad bad_emit 12 "one of" 'kind = tumbling' 'size = 60s' 'emit = sometimes'
mkdir -p "$tmp/adir"
bad late_directory 12 "directory" 'kind = tumbling' 'size = 60s' "late = $tmp/adir"
# no watermarks upstream: a warning at the stage's line (windows fire only at
# end of input); none once the source generates them
conf 'kind = tumbling' 'size = 60s' > "$tmp/nowm.conf"
"$shmrun" check "$tmp/nowm.conf" > /dev/null 2> "$tmp/log" || fail "nowm: refused"
qgrep -F "warning: $tmp/nowm.conf:8: stage 'w' (op window): no stage upstream generates watermarks, so it fires only at end of input" "$tmp/log" ||
	fail "nowm: no warning that the windows fire only at end of input"
sed 's/^count = 10$/count = 10\nwatermark_delay = 0s/' "$tmp/nowm.conf" > "$tmp/wm.conf"
"$shmrun" check "$tmp/wm.conf" > /dev/null 2> "$tmp/log" || fail "wm: refused"
qgrep "generates watermarks" "$tmp/log" && fail "wm: warned although the source generates watermarks"
echo "ok a window with no watermark upstream is warned about at its line, not once there is one"
# per-key state at width 2 needs `by key` inputs: a forward or rebalance edge
# split a key's records over instances, each aggregating a part (silently)
for op in window count; do
	for edge in "" " rebalance"; do
		{
			printf '[job]\nworkers = 2\n[src]\nop = sequence\ncount = 10\nwidth = 2\n'
			printf '[w]\nop = %s\ninput = src%s\nwidth = 2\n' "$op" "$edge"
			[ $op = window ] && printf 'kind = tumbling\nsize = 1s\n'
			printf '[out]\nop = null_sink\ninput = w\n'
		} > "$tmp/nokey.conf"
		rc=0
		"$shmrun" check "$tmp/nokey.conf" > /dev/null 2> "$tmp/log" || rc=$?
		[ $rc -eq 2 ] || fail "$op with input '$edge' at width 2: exit $rc, want 2"
		qgrep -F "$tmp/nokey.conf:9: stage 'w' [0]: $op keeps its state per key, and at width 2 the records of a key must all reach one instance" "$tmp/log" ||
			fail "$op with input '$edge' at width 2: $(cat "$tmp/log")"
	done
	sed -i 's/^width = 2$/width = 1/' "$tmp/nokey.conf"
	"$shmrun" check "$tmp/nokey.conf" > /dev/null 2> "$tmp/log" || fail "$op at width 1 with a rebalance input refused"
done
echo "ok window and count at width 2 refuse an input not by key at its line; width 1 takes any"
echo "window_check: $n bad confs refused at their line, 3 good ones accepted"
