#!/usr/bin/env bash
# tests/integration/exclusion.sh SHMRUN: one live run per checkpoint_dir and per
# output (issue 8, item 4).
#   - while a checkpointed job runs, the same conf again (also with
#     STREAM_RESET_STATE=1), a conf with another checkpoint_dir writing the
#     same output, and one without checkpoints writing it are refused with
#     exit 2 and the first run's pid, before touching anything: the
#     checkpoints are not moved, the output is not changed, and the first
#     run's final output is exact. So is a run writing the first run's output
#     through a hard link (the output file itself is locked), and a refused
#     run creates nothing: no checkpoint_dir, no output directory, no lock file.
#   - the locks hold across a restart (a worker killed with SIGKILL), are
#     not held by workers, and end with the launcher (kill -9): a new run
#     then starts and resumes.
set -euo pipefail
shmrun=${1:?usage: exclusion.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

count=300000
conf() { # dir rate [checkpoint_dir|-]
	mkdir -p "$1"
	{
		echo "[job]"
		echo "workers = 2"
		[ "${3:-ckpt}" != - ] && echo "checkpoint_dir = ${3:-ckpt}" &&
			echo "checkpoint_interval = 100ms"
		cat <<CONF
[gen]
op = sequence
count = $count
keys = 1000
width = 2
rate = $2
[out]
op = file_sink
input = gen
path = out/result.tsv
CONF
	} > "$1/job.conf"
}

wait_ckpt() { # dir
	for _ in $(seq 300); do
		ls "$1"/ckpt/ckpt-*/MANIFEST > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "no checkpoint within 30 s"
}

snapshot() { # dir: what a second run must not change
	(cd "$1" && ls -a ckpt | grep -v '^ckpt-' ; ls -a out; md5sum out/result.tsv 2> /dev/null) || true
}

conf "$tmp/ref" 100000000
(cd "$tmp/ref" && "$shmrun" job.conf) 2> "$tmp/log" || fail "reference run failed"
sort "$tmp/ref/out/result.tsv" > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq $count ] || fail "reference: wrong line count"

# --- a second run while the first is live ---------------------------------------
d="$tmp/a"
conf "$d" 10000
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/first.log" &
launcher=$!
first=$launcher
wait_ckpt "$d"
# the same conf, the same conf with a reset, another checkpoint_dir, none
conf "$tmp/b" 10000 ckpt2
sed -i "s|^path = .*|path = $d/out/result.tsv|" "$tmp/b/job.conf"
conf "$tmp/c" 10000 -
sed -i "s|^path = .*|path = $d/out/result.tsv|" "$tmp/c/job.conf"
# the first run's output through a hard link (excluded by the file's identity)
conf "$tmp/h" 10000 -
ln "$d/out/result.tsv" "$tmp/h/hard.tsv"
sed -i "s|^path = .*|path = $tmp/h/hard.tsv|" "$tmp/h/job.conf"
# a new checkpoint_dir and a new output directory beside the contested output:
# a refused run must not create them
conf "$tmp/f" 10000 "$tmp/f/new/ckpt"
sed -i "s|^path = .*|path = $d/out/result.tsv|" "$tmp/f/job.conf"
printf '[out2]\nop = file_sink\ninput = gen\npath = %s\n' "$tmp/f/newout/x.tsv" >> "$tmp/f/job.conf"
# the first run's checkpoint_dir given by --set (no line of the file): the
# refusal names the file alone, never "job.conf:0:" (issue 16 polish)
conf "$tmp/s" 10000 -
for second in same reset other-ckpt no-ckpt hardlink fresh set-ckpt; do
	ws=$(pgrep -P $first || true)
	kill -STOP $first $ws # hold the first run still while we compare
	before=$(snapshot "$d")
	case $second in
	same) dir=$d env= ;;
	reset) dir=$d env=STREAM_RESET_STATE=1 ;;
	other-ckpt) dir=$tmp/b env= ;;
	no-ckpt) dir=$tmp/c env= ;;
	hardlink) dir=$tmp/h env= ;;
	fresh) dir=$tmp/f env= ;;
	set-ckpt) dir=$tmp/s env= ;;
	esac
	sets=()
	[ $second = set-ckpt ] && sets=(--set "job.checkpoint_dir=$d/ckpt")
	set +e
	(cd "$dir" && env $env "$shmrun" "${sets[@]}" job.conf) > "$tmp/out" 2> "$tmp/log"
	rc=$?
	set -e
	after=$(snapshot "$d")
	kill -CONT $first $ws
	[ $rc -eq 2 ] || fail "$second: a second live run exited $rc, expected 2"
	grep -q "in use by another run of shmrun (pid $first" "$tmp/log" ||
		fail "$second: the refusal does not name the first run's pid $first"
	if [ $second = set-ckpt ]; then
		grep -q "launcher: job.conf: checkpoint_dir = $d/ckpt is in use by another run" "$tmp/log" ||
			fail "$second: the refusal does not name job.conf alone"
		! grep -q "job.conf:-\?[0-9]*:" "$tmp/log" || fail "$second: a line number for --set"
	else
		grep -q "job.conf:[0-9]*: .*nothing was started" "$tmp/log" || fail "$second: no conf:line"
	fi
	[ "$before" = "$after" ] || fail "$second: the refused run changed the first run's files"
	ls "$d/ckpt" | qgrep '^reset-' && fail "$second: the live run's checkpoints were moved aside"
	[ ! -s "$tmp/out" ] || fail "$second: the refused run wrote to stdout"
	[ ! -e "$tmp/f/new" ] && [ ! -e "$tmp/f/newout" ] ||
		fail "$second: the refused run created its checkpoint_dir or output directory"
	[ ! -e "$tmp/h/.hard.tsv.lock" ] || fail "$second: the refused run created a lock file"
	echo "ok a second live run ($second) is refused with exit 2 and the first run's pid"
done
# the first run is not disturbed: stop it, resume, exact output
kill -TERM $first
wait $first || fail "first run: stop failed"
sed -i 's/^rate = .*/rate = 100000000/' "$d/job.conf"
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "first run: resume failed"
sort "$d/out/result.tsv" > "$d/got"
cmp -s "$tmp/expected" "$d/got" || fail "first run: output differs from an uninterrupted run"
echo "ok the first run's output is exact"

# --- locks across a restart, not in workers, gone with the launcher -----------------
d="$tmp/r"
conf "$d" 10000
(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_ckpt "$d"
for w in $(pgrep -P $launcher); do
	ls -l /proc/$w/fd 2> /dev/null | qgrep '\.lock' && fail "worker $w holds a lock file"
done
kill -9 "$(first_child "$launcher")"
for _ in $(seq 300); do grep -q "restart 1 of" "$tmp/log" && break; sleep 0.1; done
grep -q "restart 1 of" "$tmp/log" || fail "no restart after a worker was killed"
for _ in $(seq 300); do [ "$(grep -c "job job: 2 workers" "$tmp/log")" -ge 2 ] && break; sleep 0.1; done
set +e
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/second.log"
rc=$?
set -e
[ $rc -eq 2 ] || fail "after a restart: a second run exited $rc, expected 2"
echo "ok the locks hold across a restart and are not held by workers"
ws=$(pgrep -P $launcher || true)
kill -9 $launcher
wait $launcher 2> /dev/null || true
launcher=
for _ in $(seq 100); do
	alive=0
	for w in $ws; do if kill -0 $w 2> /dev/null; then alive=1; fi; done
	[ $alive = 0 ] && break
	sleep 0.1
done
sed -i 's/^rate = .*/rate = 100000000/' "$d/job.conf"
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "after kill -9 of the launcher: the next run failed"
grep -q "restoring epoch" "$tmp/log" || fail "after kill -9 of the launcher: no restore"
sort "$d/out/result.tsv" > "$d/got"
cmp -s "$tmp/expected" "$d/got" || fail "after kill -9 of the launcher: output differs"
echo "ok the locks end with the launcher (kill -9): the next run resumes, exact output"

# ---- the holder named is the live one, not a lock file's stale pid ----------
# A run writes its pid into its lock files only after it took every lock, so a
# run refused in between used to name the pid left there by a run before it
# (dead). The holder comes from /proc/locks. Here a stale pid sits in the
# file while flock(1) holds it.
d=$tmp/stale
conf "$d" 100000000
mkdir -p -m 0700 "$d/ckpt"
echo 1 > "$d/ckpt/.lock"
chmod 600 "$d/ckpt/.lock"
flock -x -n "$d/ckpt/.lock" sleep 60 &
holder=$!
for _ in $(seq 100); do qgrep "FLOCK .* $holder " /proc/locks && break; sleep 0.1; done
set +e
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log"
rc=$?
set -e
kill $holder 2> /dev/null || true
wait $holder 2> /dev/null || true
[ $rc -eq 2 ] || fail "a held checkpoint_dir with a stale pid in its lock file: exit $rc, expected 2"
qgrep "in use by another run of shmrun (pid $holder," "$tmp/log" ||
	fail "the refusal names the lock file's stale pid, not the holder $holder"
echo "ok a refusal names the live holder from /proc/locks, not a stale pid in the lock file"
