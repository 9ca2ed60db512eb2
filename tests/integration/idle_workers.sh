#!/usr/bin/env bash
# tests/integration/idle_workers.sh SHMRUN: many more workers than tasks
# (and than CPUs) cost next to nothing while they wait. A worker the placement
# gave no task only waits for the end of the job; it used to look at the
# control area every millisecond when checkpoints were on, so 4096 workers on
# 2 CPUs woke 4 million times a second and the job never finished.
#   - 128 workers, 4 tasks, checkpoints, a 3 s rate-limited source: the whole
#     job (launcher and every worker) uses less than 1 s of CPU more than the
#     same job on 2 workers, and its output is exact;
#   - SIGTERM during such a run stops it promptly (final checkpoint, exit 0);
#   - an idle worker descheduled at a restart's start does not read the
#     restored checkpoint, which retention may have removed meanwhile.
set -euo pipefail
shmrun=$(realpath "${1:?usage: idle_workers.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

cat > "$tmp/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 200ms
[gen]
op = sequence
count = 3000
rate = 1000
width = 2
[out]
op = file_sink
input = gen
path = out.tsv
width = 2
CONF
TIMEFORMAT='%U %S'
cpu_of() { # workers -> CPU seconds of the whole run in $cpu; output checked
	rm -rf "$tmp/ck" "$tmp"/out.tsv*
	sed -i "s/^workers = .*/workers = $1/" "$tmp/job.conf"
	{ time (cd "$tmp" && "$shmrun" job.conf 2> "$tmp/log"); } 2> "$tmp/time" || fail "workers = $1: exit $?"
	read -r user sys < "$tmp/time"
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
	[ "$(cat "$tmp"/out.tsv.* | wc -l)" -eq 3000 ] || fail "workers = $1: $(cat "$tmp"/out.tsv.* | wc -l) records, want 3000"
	[ "$(cut -f2 "$tmp"/out.tsv.* | sort -n | uniq | wc -l)" -eq 3000 ] || fail "workers = $1: records lost or doubled"
}
cpu_of 2
base=$cpu
cpu_of 128
# 126 idle workers for 3 s: 126 x 30 naps and their start; it was 126 x 3000
awk -v c="$cpu" -v b="$base" 'BEGIN { exit !(c - b < 1.0) }' ||
	fail "126 idle workers cost $cpu - $base s of CPU in a 3 s job; want < 1 s"
echo "ok 126 idle workers in a 3 s job: $cpu s of CPU against $base s with 2 workers, output exact"

rm -rf "$tmp/ck" "$tmp"/out.tsv*
(cd "$tmp" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started
sleep 1
start=$SECONDS
kill -TERM $launcher
wait $launcher || fail "SIGTERM: exit $?"
launcher=
[ $((SECONDS - start)) -le 10 ] || fail "the stop took $((SECONDS - start)) s"
grep -q "stopped at epoch [0-9]" "$tmp/log" || fail "no 'stopped at epoch'"
echo "ok SIGTERM stops 128 workers at once"

# an idle worker that dies is named as one ("tasks none"): worker 1 of 2,
# found by its CPU (pinned to the second CPU this process may use); with
# checkpoints it waits for the final epoch (without, it exits at once)
cpu1=$(nth_cpu 2)
if [ -z "$cpu1" ]; then
	echo "skipped: an idle worker killed (one CPU: workers cannot be told apart)"
	exit 0
fi
cat > "$tmp/idle.conf" <<CONF
[job]
workers = 2
checkpoint_dir = idle.ck
restart_attempts = 0
[gen]
op = sequence
count = 100000
rate = 1000
[out]
op = null_sink
input = gen
CONF
(cd "$tmp" && exec "$shmrun" idle.conf) 2> "$tmp/log" &
launcher=$!
wait_started
w1=$(worker_on_cpu "$cpu1")
[ -n "$w1" ] || fail "worker 1 (CPU $cpu1) not found"
kill -9 "$w1"
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 1 ] || fail "an idle worker killed: exit $rc, want 1"
grep -q "worker 1 (CPU $cpu1, tasks none) was killed by signal 9" "$tmp/log" ||
	fail "the killed idle worker is not named as one with no tasks"
echo "ok a killed idle worker is named with 'tasks none'"

# --- an idle worker late to its restore -------------------------------------------
# No barrier waits for a worker without tasks: while it was descheduled at
# its start the others completed epochs, retention (checkpoint_retain = 1)
# removed the restored checkpoint, and the idle worker, reading its MANIFEST
# then, failed ("restore from ...: No such file or directory"). It restores
# nothing and reads nothing now. SHMRUN_TEST_SLOW_RESTORE=2:1500 holds worker
# 2 (idle) 1.5 s before its restore.
need_fault_injection "$shmrun"
mkdir -p "$tmp/late"
cat > "$tmp/late/job.conf" <<CONF
[job]
workers = 3
checkpoint_dir = ck
checkpoint_interval = 20ms
checkpoint_retain = 1
[gen]
op = sequence
count = 6000
keys = 10
rate = 2000
[count]
op = count
input = gen by key
emit = update
[out]
op = file_sink
input = count
path = out.tsv
CONF
(cd "$tmp/late" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "late restore: the first run did not start"
wait_manifest "$tmp/late/ck" || fail "late restore: no checkpoint"
sleep 0.3
kill -TERM "$launcher"
wait "$launcher" || fail "late restore: the stop failed"
launcher=
grep -q "stopped at epoch" "$tmp/log" || fail "late restore: the first run ended before the stop"
rc=0
(cd "$tmp/late" && SHMRUN_TEST_SLOW_RESTORE=2:1500 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "late restore: the resumed run exited $rc"
grep -q "restart" "$tmp/log" && fail "late restore: a worker failed and the job restarted"
for k in $(seq 0 9); do
	[ "$(awk -v k="k$k" -F'\t' '$1 == k' "$tmp/late/out.tsv" | sort -n -k2 | cut -f2 | tr "\n" " ")" = "$(seq -s " " 1 600) " ] ||
		fail "late restore: key $k does not have its 600 updates once each"
done
echo "ok an idle worker late to its restore reads no checkpoint (retention may have removed it)"
