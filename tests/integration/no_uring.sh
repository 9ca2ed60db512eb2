#!/usr/bin/env bash
# tests/integration/no_uring.sh SHMRUN NO_URING: checkpoints and recovery stay
# exact where io_uring is blocked (issue 14 §2; docs/ci-machines.md).
#
# NO_URING (tests/integration/no_uring.c) runs its command under a seccomp
# filter that makes io_uring_setup/enter/register fail, as Docker's default
# profile does: with EPERM, then with ENOSYS. Under it, for each errno:
#   - a checkpointed keyed count (sequence -> count, emit = update ->
#     file_sink) is killed with kill -9 twice (a worker each time), then
#     stopped with SIGTERM and resumed to its end, all under the filter: its
#     committed output equals a run without faults (not under the filter), as
#     a multiset;
#   - each run (launcher process) logs exactly one line "io_uring is
#     unavailable: io_uring_setup failed with <ERRNO>: <cause>; checkpoints
#     use pwrite+fsync", as a warning, and no other line about io_uring: the
#     restarted workers fall back without a word;
#   - `shmrun ckpt verify` (also under the filter) passes on its checkpoints.
# SHMRUN_NO_IO_URING=1 gives its own single line. Exit 77 if seccomp filters
# cannot be installed here.
set -euo pipefail
shmrun=$(realpath "${1:?usage: no_uring.sh path/to/shmrun path/to/no_uring}")
no_uring=$(realpath "${2:?usage: no_uring.sh path/to/shmrun path/to/no_uring}")
. "$(dirname "$0")/lib.sh"

if ! "$no_uring" true 2> "$tmp/probe"; then
	echo "skipped: seccomp filters cannot be installed here: $(cat "$tmp/probe")" >&2
	exit 77
fi

conf() { # dir
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
ring_bytes = 64K
[gen]
op = sequence
count = 400000
keys = 300
piece_records = 5000
rate = 50000
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

mkdir -p "$tmp/ref"
conf "$tmp/ref"
sed -i '/^rate = /d' "$tmp/ref/job.conf" # rate is tuning: the same output, sooner
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) || fail "the reference run failed"
cat "$tmp"/ref/out/result.tsv* | sort > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq 400000 ] || fail "reference: $(wc -l < "$tmp/expected") lines, want 400000"

for err in EPERM ENOSYS; do
	d=$tmp/$err
	mkdir -p "$d"
	conf "$d"
	: > "$tmp/log"
	(cd "$d" && exec "$no_uring" --errno $err "$shmrun" --log-level info job.conf) 2>> "$tmp/log" &
	launcher=$!
	wait_started || fail "$err: the run did not start"
	wait_manifest "$d/ckpt" || fail "$err: no complete checkpoint under the filter"
	kills=0
	for k in 1 2; do
		# the (k)th start of the job: its workers are up; on a loaded machine a
		# restore can take a second or two
		for _ in $(seq 400); do
			[ "$(grep -c "launcher: job job: 2 workers" "$tmp/log")" -ge $k ] && break
			sleep 0.05
		done
		sleep 0.4
		ws=()
		for _ in $(seq 100); do
			mapfile -t ws < <(pgrep -P $launcher || true)
			[ ${#ws[@]} -lt 2 ] || break
			sleep 0.05
		done
		[ ${#ws[@]} -gt 0 ] || break
		kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}" 2> /dev/null && kills=$((kills + 1))
		for _ in $(seq 100); do # the supervisor saw it
			grep -q "restart $kills of" "$tmp/log" && break
			sleep 0.05
		done
	done
	for _ in $(seq 400); do # the restarted job runs again before the stop
		[ "$(grep -c "launcher: job job: 2 workers" "$tmp/log")" -ge 3 ] && break
		sleep 0.05
	done
	sleep 0.3
	kill -TERM $launcher 2> /dev/null || true
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	[ $rc -eq 0 ] || fail "$err: exit status $rc after $kills kill(s) and SIGTERM, want 0"
	[ $kills -eq 2 ] || fail "$err: the job ended before two kills landed"
	grep -q "restart 2 of" "$tmp/log" || fail "$err: no second restart logged"
	if grep -q "stopped at epoch" "$tmp/log"; then
		# resume to the end, still under the filter
		(cd "$d" && exec "$no_uring" --errno $err "$shmrun" --log-level info job.conf) 2>> "$tmp/log" ||
			fail "$err: the resume failed"
		runs=2
	else
		runs=1 # it finished before the SIGTERM
		echo "note: $err: the job ended before the SIGTERM"
	fi
	grep -q "launcher: restoring epoch " "$tmp/log" ||
		fail "$err: no restore from a checkpoint logged"

	cat "$d"/out/result.tsv* | sort > "$d/got"
	if ! cmp -s "$tmp/expected" "$d/got"; then
		diff "$tmp/expected" "$d/got" | head -10 >&2 || true
		fail "$err: committed output differs from the fault-free output"
	fi

	# one line per run, a warning, naming the errno and the cause
	n=$(grep -c "io_uring" "$tmp/log" || true)
	[ "$n" -eq $runs ] || fail "$err: $n lines about io_uring in $runs run(s), want one per run"
	case $err in
	EPERM) cause="a seccomp filter (Docker's default profile blocks io_uring)" ;;
	ENOSYS) cause="a kernel built without io_uring, or a seccomp filter" ;;
	esac
	want="WARN  launcher: io_uring is unavailable: io_uring_setup failed with $err: $cause"
	[ "$(grep -cF "$want" "$tmp/log")" -eq $runs ] ||
		fail "$err: the line about io_uring is not '$want...'"
	grep "io_uring is unavailable" "$tmp/log" | qgrep "; checkpoints use pwrite+fsync$" ||
		fail "$err: the line does not end with '; checkpoints use pwrite+fsync'"

	"$no_uring" --errno $err "$shmrun" ckpt verify "$d/ckpt" > "$d/verify" 2>&1 ||
		{ cat "$d/verify" >&2; fail "$err: shmrun ckpt verify failed"; }
	qgrep -i "ok\|verified" "$d/verify" || fail "$err: ckpt verify printed no verdict"
	echo "ok $err: $kills kills, SIGTERM and resume ($runs runs): output exact, one io_uring line per run, ckpt verify passes"
done

# the user's switch: its own single line, checkpoints as well
d=$tmp/switch
mkdir -p "$d"
conf "$d"
sed -i '/^rate = /d' "$d/job.conf"
(cd "$d" && SHMRUN_NO_IO_URING=1 "$shmrun" job.conf) 2> "$tmp/log" || fail "SHMRUN_NO_IO_URING=1: the run failed"
[ "$(grep -c "io_uring" "$tmp/log")" -eq 1 ] || fail "SHMRUN_NO_IO_URING=1: want one line about io_uring"
qgrep -F "WARN  launcher: io_uring is not used: SHMRUN_NO_IO_URING=1 is set; checkpoints use pwrite+fsync" "$tmp/log" ||
	fail "SHMRUN_NO_IO_URING=1: the line is not as documented"
cat "$d"/out/result.tsv* | sort | cmp -s - "$tmp/expected" || fail "SHMRUN_NO_IO_URING=1: output differs"
echo "ok SHMRUN_NO_IO_URING=1: one line, output exact"
