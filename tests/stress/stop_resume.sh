#!/usr/bin/env bash
# tests/stress/stop_resume.sh SHMRUN CYCLES: exactly-once across stops.
#
# For sources of width 1, 2 and 3, `sequence` and `file_source` (through
# tokenize), a checkpointed job on 2 workers is stopped with SIGTERM at a
# random moment and resumed, up to CYCLES times, then run to its end. Its
# committed output must equal that of a run without stops, as a multiset
# (sorted): the records straight into an exactly-once file_sink, and the same
# records through a shuffle into count (emit = update) and a second sink. A
# duplicate (a source instance reading again what it had read) or a loss
# shows up as a difference. The work is sized so the job is still running for
# about CYCLES stops. SEED=n in the environment repeats a run.
set -euo pipefail
shmrun=${1:?usage: stop_resume.sh path/to/shmrun [cycles]}
cycles=${2:-20}
. "$(dirname "$0")/../integration/lib.sh"
seed=${SEED:-$$}
RANDOM=$seed
echo "stop_resume: $cycles cycles, SEED=$seed"

rate=2000
records=$((rate * (4 * cycles + 10) / 10)) # ~0.4 s of work per cycle, plus 1 s

conf() { # dir kind width rate(0 = unlimited)
	local d=$1 kind=$2 width=$3 src=gen ratekey=
	mkdir -p "$d"
	[ "$4" -gt 0 ] && ratekey="rate = $4"
	{
		cat <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 100ms
CONF
		if [ "$kind" = seq ]; then
			cat <<CONF
[gen]
op = sequence
count = $records
keys = 97
piece_records = $((records / 7 + 1))
width = $width
$ratekey
CONF
		else
			cat <<CONF
[gen]
op = file_source
path = $tmp/in
piece_bytes = 16K
width = $width
$ratekey
[words]
op = tokenize
input = gen
width = $width
CONF
			src=words
		fi
		cat <<CONF
[raw]
op = file_sink
input = $src
path = out/raw.tsv
[count]
op = count
input = $src by key
emit = update
width = 2
[counted]
op = file_sink
input = count
path = out/counted.tsv
CONF
	} > "$d/job.conf"
}

# file_source input: 7 files of lines, about $records lines (records) in all
mkdir -p "$tmp/in"
for f in $(seq 1 7); do
	awk -v n=$((records / 7)) -v f=$f 'BEGIN { for (i = 0; i < n; i++) printf "w%d x%d line %d.%d\n", i % 53, i % 7, f, i }' > "$tmp/in/f$f.txt"
done
: > "$tmp/in/empty.txt"

output() { # dir -> sorted committed output in dir/got
	{ sort "$1/out/raw.tsv"; echo ---; sort "$1/out/counted.tsv"; } > "$1/got"
}

total_stops=0
for kind in seq file; do
	for width in 1 2 3; do
		name="$kind width $width"
		ref=$tmp/ref-$kind-$width
		conf "$ref" $kind $width 0
		(cd "$ref" && "$shmrun" --log-level error job.conf) 2> "$tmp/log" ||
			fail "$name: the reference run failed"
		output "$ref"
		d=$tmp/$kind-$width
		conf "$d" $kind $width $rate
		stops=0
		for c in $(seq 1 "$cycles"); do
			(cd "$d" && exec "$shmrun" --log-level info job.conf) 2> "$tmp/log" &
			launcher=$!
			# once it runs (a SIGTERM during exec kills it before its
			# handlers exist: nothing started, nothing to test), at random
			for _ in $(seq 1 400); do
				grep -q "^.* launcher: job .*worker" "$tmp/log" && break
				kill -0 $launcher 2> /dev/null || break
				sleep 0.025
			done
			sleep "0.$((RANDOM % 8))$((RANDOM % 10))"
			kill -TERM $launcher 2>/dev/null || true
			rc=0
			wait $launcher || rc=$?
			launcher=
			[ $rc -eq 0 ] || fail "$name, cycle $c: exit status $rc"
			grep -q "stopped at epoch" "$tmp/log" || break # it had finished
			stops=$((stops + 1))
		done
		(cd "$d" && "$shmrun" --log-level info job.conf) 2> "$tmp/log" ||
			fail "$name: the final run failed"
		output "$d"
		if ! cmp -s "$ref/got" "$d/got"; then
			diff "$ref/got" "$d/got" | head -10 >&2 || true
			cp -r "$d" "${TMPDIR:-/tmp}/shmrun-stop-resume-failed-$kind-$width" 2>/dev/null || true
			fail "$name: output after $stops stops differs from the run without stops (SEED=$seed)"
		fi
		ls -a "$d/out" | qgrep '\.staged$' && fail "$name: staging files left behind"
		total_stops=$((total_stops + stops))
		echo "ok $name: $stops stops, output exact"
	done
done
[ $total_stops -ge $cycles ] || fail "only $total_stops stops landed in all (the jobs ended too soon)"
echo "stop_resume: $total_stops stops over 6 jobs, every output exact"
