#!/usr/bin/env bash
# tests/stress/crash.sh SHMRUN TRIALS: exactly-once under SIGKILL.
#
# Each trial runs a checkpointed job, SIGKILLs a random worker at a random
# moment (one to three times), lets the supervisor restart the job from its
# last complete checkpoint, and checks that the committed output equals the
# output of a run without failures (as a multiset: shuffles reorder records).
# Jobs: sequence -> count (emit = update) -> file_sink, and word count.
set -euo pipefail
shmrun=${1:?usage: crash.sh path/to/shmrun [trials]}
trials=${2:-3}
. "$(dirname "$0")/../integration/lib.sh"

seq_conf() { # dir
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
ring_bytes = 64K
[gen]
op = sequence
count = 600000
keys = 500
piece_records = 5000
rate = 400000
width = 2
[count]
op = count
input = gen by key
emit = update
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
}

wc_conf() { # dir
	mkdir -p "$1/in"
	for i in $(seq 1 30); do
		seq 1 $((i * 300)) | sed "s/^/alpha$((i % 7)) beta w/" > "$1/in/f$i.txt"
	done
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
[read]
op = file_source
path = in
piece_bytes = 8K
rate = 60000
width = 2
[words]
op = tokenize
input = read
width = 2
[count]
op = count
input = words by key
emit = update
width = 4
[out]
op = file_sink
input = count
path = out/result.tsv
width = 1
CONF
}

expected() { # kind -> $tmp/<kind>.expected, from a run without failures
	local d="$tmp/ref-$1"
	mkdir -p "$d"
	"${1}_conf" "$d"
	(cd "$d" && "$shmrun" --log-level error job.conf) || fail "$1: the reference run failed"
	cat "$d"/out/result.tsv* | sort > "$tmp/$1.expected"
	[ -s "$tmp/$1.expected" ] || fail "$1: empty reference"
}

trial() { # kind n
	local kind=$1 n=$2 d="$tmp/$1-$2" kills
	mkdir -p "$d"
	"${kind}_conf" "$d"
	( cd "$d" && exec "$shmrun" --log-level info job.conf ) 2> "$tmp/log" &
	launcher=$!
	kills=$((1 + RANDOM % 3))
	for k in $(seq 1 $kills); do
		sleep "0.$((2 + RANDOM % 6))"
		mapfile -t ws < <(pgrep -P $launcher || true)
		[ ${#ws[@]} -gt 0 ] || break
		kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}" 2>/dev/null || true
		sleep 0.3 # let the supervisor notice and restart
	done
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	[ $rc -eq 0 ] || fail "$kind trial $n: exit status $rc after $kills kill(s)"
	grep -q "restart 1 of" "$tmp/log" || echo "note: $kind trial $n ended before a kill landed"
	cat "$d"/out/result.tsv* | sort > "$d/got"
	if ! cmp -s "$tmp/$kind.expected" "$d/got"; then
		diff "$tmp/$kind.expected" "$d/got" | head -10 >&2 || true
		cp -r "$d" "${TMPDIR:-/tmp}/shmrun-crash-failed-$kind-$n" 2>/dev/null &&
			cp "$tmp/log" "${TMPDIR:-/tmp}/shmrun-crash-failed-$kind-$n/shmrun.log" || true
		fail "$kind trial $n: committed output differs from the failure-free output"
	fi
	ls -a "$d/out" | qgrep '\.staged$' && fail "$kind trial $n: staging files left behind"
	echo "ok $kind trial $n ($kills kill(s), $(grep -c 'restart .* of' "$tmp/log") restart(s))"
}

expected seq
expected wc
for n in $(seq 1 "$trials"); do
	trial seq "$n"
	trial wc "$n"
done
echo "crash: $trials trials of each job: committed output exact"
