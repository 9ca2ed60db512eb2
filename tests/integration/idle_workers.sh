#!/usr/bin/env bash
# tests/integration/idle_workers.sh SHMRUN: many more workers than tasks
# (and than CPUs) cost next to nothing while they wait. A worker the placement
# gave no task only waits for the end of the job; it used to look at the
# control area every millisecond when checkpoints were on, so 4096 workers on
# 2 CPUs woke 4 million times a second and the job never finished.
#   - 128 workers, 4 tasks, checkpoints, a 3 s rate-limited source: the whole
#     job (launcher and every worker) uses less than 1 s of CPU, and its
#     output is exact;
#   - SIGTERM during such a run stops it promptly (final checkpoint, exit 0).
set -euo pipefail
shmrun=$(realpath "${1:?usage: idle_workers.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

cat > "$tmp/job.conf" <<CONF
[job]
workers = 128
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
{ time (cd "$tmp" && "$shmrun" job.conf 2> "$tmp/log"); } 2> "$tmp/time" || fail "exit $?"
read -r user sys < "$tmp/time"
cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
[ "$(cat "$tmp"/out.tsv.* | wc -l)" -eq 3000 ] || fail "$(cat "$tmp"/out.tsv.* | wc -l) records, want 3000"
[ "$(cut -f2 "$tmp"/out.tsv.* | sort -n | uniq | wc -l)" -eq 3000 ] || fail "records lost or doubled"
awk -v c="$cpu" 'BEGIN { exit !(c < 1.0) }' ||
	fail "128 workers (126 idle) used $cpu s of CPU for a 3 s job; want < 1 s"
echo "ok 128 workers, 4 tasks, 3 s: $cpu s of CPU, output exact"

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
