#!/usr/bin/env bash
# tests/integration/stalled_worker.sh SHMRUN: a worker that stops making
# progress is named (issue 8 item 11). A 2-worker checkpointed job; worker 1
# is SIGSTOPped: the epoch times out, and the message names the tasks that
# did not report and says that worker 1 (its pid, CPU and tasks) has made no
# progress and that its process is stopped. After SIGCONT the job goes on:
# checkpoints complete again, and it stops cleanly with exact output.
set -euo pipefail
shmrun=$(realpath "${1:?usage: stalled_worker.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

cat > "$tmp/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 100ms
checkpoint_timeout = 2s
[gen]
op = sequence
count = 6000
keys = 100
piece_records = 100
rate = 1000
width = 2
[count]
op = count
input = gen by key
emit = final
width = 2
[out]
op = file_sink
input = count
path = out.tsv
CONF
stopped=
cleanup_stop() { [ -n "$stopped" ] && kill -CONT "$stopped" 2> /dev/null || true; }
trap 'cleanup_stop; cleanup' EXIT

(cd "$tmp" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
# worker 1: the launcher's child whose log lines say "worker 1"; wait for the
# first complete checkpoint so both workers are running
wait_manifest "$tmp/ck" 300 || true
pids=$(pgrep -P $launcher | sort -n)
[ "$(echo "$pids" | wc -l)" -ge 2 ] || fail "workers not found"
# worker 1 is pinned to the second CPU this process may use (docs/topology.md)
cpu1=$(nth_cpu 2)
w1=
[ -n "$cpu1" ] && w1=$(worker_on_cpu "$cpu1")
# one CPU: both workers share it; worker 1 was forked second
[ -n "$cpu1" ] || w1=$(echo "$pids" | sed -n 2p)
[ -n "$w1" ] || fail "worker 1 (pinned to CPU $cpu1) not found among $pids"
kill -STOP "$w1"
stopped=$w1
for _ in $(seq 1 200); do
	grep -q "aborted: not complete within checkpoint_timeout" "$tmp/log" && break
	sleep 0.1
done
kill -CONT "$w1"
stopped=
line=$(grep -m1 "aborted: not complete within checkpoint_timeout" "$tmp/log") || fail "no epoch timed out while worker 1 was stopped"
echo "$line" | qgrep "not reported by .*\[1\] (worker 1)" || fail "the message does not name the tasks of worker 1: $line"
echo "$line" | qgrep "worker 1 (pid $w1, CPU [0-9]*, tasks gen\[1\], count\[1\]) has made no progress for [0-9.]* s (process is stopped: SIGSTOP?)" ||
	fail "the message does not name the stopped worker: $line"
echo "$line" | qgrep "worker 0 (pid" && fail "the running worker 0 is named as stuck: $line"
echo "ok SIGSTOP: $line" | cut -c1-300
# after SIGCONT it goes on: a later checkpoint completes, then a clean stop
before=$(grep -c "aborted" "$tmp/log" || true)
e0=$(ls "$tmp/ck" | sed 's/ckpt-//' | sort -n | tail -1)
for _ in $(seq 1 300); do
	e=$(ls "$tmp/ck" | sed 's/ckpt-//' | sort -n | tail -1)
	[ "$e" -gt "$e0" ] && [ -e "$tmp/ck/ckpt-$e/MANIFEST" ] && break
	sleep 0.05
done
[ "$e" -gt "$e0" ] || fail "no checkpoint completed after SIGCONT"
wait $launcher || fail "exit $? after SIGCONT"
launcher=
# exact: 6000 records over 100 keys, 60 each, every key once
[ "$(wc -l < "$tmp/out.tsv")" -eq 100 ] || fail "$(wc -l < "$tmp/out.tsv") output lines, want 100"
[ "$(cut -f2 "$tmp/out.tsv" | sort -u)" = 60 ] || fail "counts are not all 60"
echo "ok SIGCONT: checkpoints complete again ($before aborted while stopped), exit 0"

# Worker 0 itself stopped, in a job without checkpoints: no coordinator can
# name it, so the launcher's watchdog does, after 5 s, and again when it runs.
cat > "$tmp/solo.conf" <<CONF
[gen]
op = sequence
count = 3000
rate = 300
[out]
op = file_sink
input = gen
path = solo.tsv
CONF
(cd "$tmp" && exec "$shmrun" solo.conf) 2> "$tmp/log" &
launcher=$!
w0=
for _ in $(seq 1 300); do
	w0=$(first_child "$launcher") && [ -n "$w0" ] && break
	sleep 0.05
done
[ -n "$w0" ] || fail "worker 0 not found"
sleep 0.5
kill -STOP "$w0"
stopped=$w0
for _ in $(seq 1 150); do
	grep -q "has been stopped for" "$tmp/log" && break
	sleep 0.1
done
kill -CONT "$w0"
stopped=
line=$(grep -m1 "has been stopped for" "$tmp/log") || fail "the launcher did not name the stopped worker 0"
echo "$line" | qgrep "worker 0 (pid $w0, CPU [0-9]*, tasks gen\[0\], out\[0\]) has been stopped for [0-9]* s (SIGSTOP or job control); .*kill -CONT $w0" ||
	fail "the watchdog's message is not right: $line"
wait $launcher || fail "exit $? after SIGCONT of worker 0"
launcher=
grep -q "worker 0 (pid $w0) runs again" "$tmp/log" || fail "no 'runs again' after SIGCONT"
[ "$(sort -n "$tmp/solo.tsv" | uniq | wc -l)" -eq 3000 ] && [ "$(wc -l < "$tmp/solo.tsv")" -eq 3000 ] ||
	fail "output after SIGCONT is not every record once"
echo "ok the launcher names a stopped worker 0 (no checkpoints), and says when it runs again"

# A stop with checkpoint while worker 0 (the coordinator, which judges
# checkpoint_timeout) is stopped: the launcher gives the final checkpoint
# checkpoint_timeout and 5 s more, then stops without it (dies by SIGTERM),
# and a rerun resumes exactly.
sed -i 's/^checkpoint_timeout = .*/checkpoint_timeout = 1s/; s/^count = .*/count = 600000/' "$tmp/job.conf"
rm -rf "$tmp/ck" "$tmp/out.tsv"
(cd "$tmp" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_manifest "$tmp/ck" 300 || true
w0=$(first_child "$launcher") # forked first
[ -n "$w0" ] || fail "worker 0 not found"
kill -STOP "$w0"
stopped=$w0
start=$SECONDS
kill -TERM $launcher
set +e; wait $launcher; rc=$?; set -e
launcher=
kill -CONT "$w0" 2> /dev/null || true
stopped=
[ $rc -eq 143 ] || fail "stop with worker 0 stopped: exit $rc, want 143 (died by SIGTERM)"
[ $((SECONDS - start)) -le 30 ] || fail "stop with worker 0 stopped took $((SECONDS - start)) s"
grep -q "the final checkpoint did not complete within checkpoint_timeout (1.0 s) and 5 s more: stopping without it" "$tmp/log" ||
	fail "no message that the final checkpoint was given up"
sed -i 's/^rate = .*/rate = 1000000/' "$tmp/job.conf"
(cd "$tmp" && "$shmrun" job.conf) 2> "$tmp/log" || fail "resume after the stop: exit $?"
[ "$(wc -l < "$tmp/out.tsv")" -eq 100 ] || fail "$(wc -l < "$tmp/out.tsv") output lines after the resume, want 100"
[ "$(cut -f2 "$tmp/out.tsv" | sort -u)" = 6000 ] || fail "counts after the resume are not all 6000"
echo "ok a stop while worker 0 is stopped ends after checkpoint_timeout + 5 s; the rerun resumes exactly"
