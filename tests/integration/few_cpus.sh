#!/usr/bin/env bash
# tests/integration/few_cpus.sh SHMRUN: more workers than CPUs this process
# may run on, as in a CI container with a cpuset of one CPU (issue 14 §2;
# docs/ci-machines.md). idle_workers.sh covers the cost of many idle workers;
# this test covers the warning and the output.
#
# Under `taskset -c C` (the first allowed CPU, then the second when there is
# one), a checkpointed keyed count with workers = 3:
#   - exits 0 with output equal to a run with one worker and no CPU limit;
#   - logs exactly one warning, at the conf's line, naming the worker count,
#     the one allowed CPU and what follows ("workers = 3 exceeds the 1 CPU
#     this process may run on (C)"), also across a kill -9 and its restart;
#   - pins every worker to C (their Cpus_allowed_list);
#   - `shmrun check` prints the same single warning and exits 0.
set -euo pipefail
shmrun=$(realpath "${1:?usage: few_cpus.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"

command -v taskset > /dev/null || { echo "skipped: no taskset" >&2; exit 77; }

conf() { # dir workers [rate]
	cat > "$1/job.conf" <<CONF
[job]
workers = $2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
[gen]
op = sequence
count = 200000
keys = 100
piece_records = 2000
width = 2
${3:+rate = $3}
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
conf "$tmp/ref" 1
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) || fail "the reference run failed"
cat "$tmp"/ref/out/result.tsv* | sort > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq 200000 ] || fail "reference: want 200000 lines"

cpus=$(nth_cpu 1)
[ -n "$(nth_cpu 2)" ] && cpus="$cpus $(nth_cpu 2)"
for cpu in $cpus; do
	d=$tmp/cpu$cpu
	mkdir -p "$d"
	conf "$d" 3 25000 # 8 s: slow builds (ASan) still get killed mid-run
	want="job.conf:2: workers = 3 exceeds the 1 CPU this process may run on ($cpu); workers share CPUs round-robin, expect lower throughput"

	(cd "$d" && taskset -c "$cpu" "$shmrun" check job.conf) > "$tmp/check.out" 2>&1 ||
		{ cat "$tmp/check.out" >&2; fail "CPU $cpu: shmrun check failed"; }
	[ "$(grep -c "^warning: " "$tmp/check.out")" -eq 1 ] || fail "CPU $cpu: check: want one warning, got: $(cat "$tmp/check.out")"
	qgrep -xF "warning: $want" "$tmp/check.out" || fail "CPU $cpu: check: the warning is not '$want': $(cat "$tmp/check.out")"

	(cd "$d" && exec taskset -c "$cpu" "$shmrun" --log-level info job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "CPU $cpu: the run did not start"
	for _ in $(seq 100); do # the start line may come before the last fork
		mapfile -t ws < <(pgrep -P $launcher || true)
		[ ${#ws[@]} -lt 3 ] || break
		sleep 0.05
	done
	[ ${#ws[@]} -eq 3 ] || fail "CPU $cpu: ${#ws[@]} workers, want 3"
	for w in "${ws[@]}"; do
		got=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$w/status 2> /dev/null || true)
		[ -z "$got" ] || [ "$got" = "$cpu" ] || fail "CPU $cpu: worker $w runs on CPUs $got, want $cpu"
	done
	wait_manifest "$d/ckpt" || fail "CPU $cpu: no checkpoint"
	kill -9 "${ws[1]}" 2> /dev/null || true
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	[ $rc -eq 0 ] || fail "CPU $cpu: exit status $rc, want 0"
	cat "$d"/out/result.tsv* | sort | cmp -s - "$tmp/expected" ||
		fail "CPU $cpu: output differs from the one-worker run"
	grep -q "launcher: restart 1 of" "$tmp/log" || fail "CPU $cpu: the kill -9 was not followed by a restart"
	# the restart's line is a warning too; the CPU warning must be the only other one
	grep "WARN " "$tmp/log" | grep -v "launcher: restart 1 of" > "$tmp/warnings" || true
	[ "$(wc -l < "$tmp/warnings")" -eq 1 ] || fail "CPU $cpu: want one warning besides the restart, got: $(cat "$tmp/warnings")"
	qgrep -F "WARN  launcher: $want" "$tmp/warnings" ||
		fail "CPU $cpu: the warning is not '$want': $(cat "$tmp/warnings")"
	echo "ok taskset -c $cpu, workers = 3: one warning, across a kill -9 and its restart; output exact"
done
