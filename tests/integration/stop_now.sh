#!/usr/bin/env bash
# tests/integration/stop_now.sh SHMRUN: a stop is served at once, whoever sent it
# and whenever it came.
#   - group SIGTERM without checkpoint_dir (10 times): every worker stops within
#     a few seconds (not SIGKILLed after the grace period: the group's copy
#     still pending in a worker merges with the launcher's SIGTERM), the
#     launcher dies by SIGTERM, every output line is whole, and no file grows
#     after the exit.
#   - a second group SIGTERM 0.2 s after the first, during a final checkpoint
#     of a large state, stops at once (no worker SIGKILLed, death by SIGTERM).
#   - a stop signal before the run loop (while the conf is still being read
#     from standard input) is a stop request, not a kill: with checkpoints a
#     final checkpoint and exit 0; without, the workers stop and shmrun dies by
#     SIGTERM after logging the stop.
#   - a worker killed while a stop's final checkpoint is taken: exit 0 at the
#     last complete checkpoint, and the resumed output is exact.
set -euo pipefail
shmrun=${1:?usage: stop_now.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

# run_session DIR STATUS CMD...: start CMD in a new session in DIR (stderr to
# DIR/log); sets $pid (the process group); the exit status (or -SIG) lands in
# STATUS.
run_session() {
	local d=$1 st=$2
	shift 2
	rm -f "$tmp/pid" "$st"
	python3 - "$d" "$st" "$@" > "$tmp/pid" <<'PY' &
import os, subprocess, sys
d, st, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
p = subprocess.Popen(cmd, cwd=d, start_new_session=True, stderr=open(os.path.join(d, "log"), "w"))
print(p.pid, flush=True)
rc = p.wait()
open(st, "w").write("%d\n" % rc)
PY
	helper=$!
	for _ in $(seq 300); do [ -s "$tmp/pid" ] && break; sleep 0.1; done
	pid=$(cat "$tmp/pid")
	launcher=$pid
}

# --- 1. group SIGTERM without checkpoints, 10 times -----------------------------
d="$tmp/g"
mkdir -p "$d"
cat > "$d/g.conf" <<'CONF'
[job]
workers = 3
[gen]
op = sequence
count = 1000000
piece_records = 1000
rate = 3000
width = 3
[out]
op = file_sink
input = gen
path = out.tsv
width = 3
CONF
for i in $(seq 10); do
	rm -f "$d"/out.tsv*
	run_session "$d" "$d/status" "$shmrun" g.conf
	wait_started "$d/log" || fail "trial $i: no start line within 60 s"
	sleep 0.5
	t0=$(date +%s%N)
	kill -TERM -- -"$pid"
	for _ in $(seq 600); do [ -s "$d/status" ] && break; sleep 0.01; done
	t1=$(date +%s%N)
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	[ -s "$d/status" ] || fail "trial $i: did not exit within 6 s of a group SIGTERM"
	ms=$(((t1 - t0) / 1000000))
	[ "$ms" -lt 3000 ] || fail "trial $i: took $ms ms to stop after a group SIGTERM (expected < 3 s)"
	[ "$(cat "$d/status")" -eq -15 ] || fail "trial $i: status $(cat "$d/status"), expected killed by SIGTERM"
	grep -q "SIGKILL" "$d/log" && fail "trial $i: a worker had to be SIGKILLed"
	pgrep -g "$pid" > /dev/null 2>&1 && fail "trial $i: a process of the job outlived it"
	sizes=$(stat -c %s "$d"/out.tsv.* | tr '\n' ' ')
	sleep 0.3
	[ "$sizes" = "$(stat -c %s "$d"/out.tsv.* | tr '\n' ' ')" ] ||
		fail "trial $i: output files grew after the exit"
	for f in "$d"/out.tsv.*; do
		[ ! -s "$f" ] || [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] ||
			fail "trial $i: $f ends in a torn line"
	done
	n=$(cat "$d"/out.tsv.* | wc -l)
	[ "$n" -gt 0 ] || fail "trial $i: no output before the stop"
	echo "ok trial $i: stopped in $ms ms, $n whole lines"
done

# --- second group SIGTERM with checkpoints: stop at once ------------------------
# A large keyed state makes the final checkpoint take seconds; a second group
# SIGTERM 0.2 s after the first must stop the job at once: every worker stops
# (none SIGKILLed) and shmrun dies by SIGTERM.
d="$tmp/twice"
mkdir -p "$d"
cat > "$d/g.conf" <<'CONF'
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 3600s
[gen]
op = sequence
count = 100000000
keys = 100000000
width = 2
[c]
op = count
input = gen by key
width = 2
[out]
op = null_sink
input = c
CONF
run_session "$d" "$d/status" "$shmrun" g.conf
wait_started "$d/log" || fail "twice: no start line within 60 s"
sleep 4
kill -TERM -- -"$pid"
sleep 0.2
t0=$(date +%s%N)
if kill -TERM -- -"$pid" 2> /dev/null; then
	for _ in $(seq 1000); do [ -s "$d/status" ] && break; sleep 0.01; done
	t1=$(date +%s%N)
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	ms=$(((t1 - t0) / 1000000))
	if grep -q "stopped at epoch" "$d/log"; then
		echo "skipped: second signal (the final checkpoint was done within 0.2 s)"
	else
		[ -s "$d/status" ] && [ "$ms" -lt 4000 ] ||
			fail "twice: a second group SIGTERM took $ms ms to stop the job"
		[ "$(cat "$d/status")" -eq -15 ] || fail "twice: status $(cat "$d/status"), expected killed by SIGTERM"
		grep -q "Terminated: stopping 2 workers" "$d/log" || fail "twice: the second signal was not served as a stop at once"
		grep -q "SIGKILL" "$d/log" && fail "twice: a worker had to be SIGKILLed"
		echo "ok a second group SIGTERM stops a checkpointed job at once ($ms ms)"
	fi
else
	wait "$helper" 2> /dev/null || true
	launcher=
	echo "skipped: second signal (the job had stopped within 0.2 s)"
fi

# --- 2. a stop signal before the run loop ---------------------------------------
# shmrun reads the topology from a FIFO on its stdin: the SIGTERM comes while
# it is still in main() reading it.
for ck in yes no; do
	d="$tmp/early-$ck"
	mkdir -p "$d"
	{
		echo "[job]"
		echo "workers = 2"
		[ $ck = yes ] && echo "checkpoint_dir = ck"
		sed -n '/^\[gen\]/,$p' "$tmp/g/g.conf" | sed 's/^width = 3/width = 2/'
	} > "$d/g.conf"
	mkfifo "$d/in"
	run_session "$d" "$d/status" bash -c "exec \"$shmrun\" - < in"
	exec 7> "$d/in" # opens once shmrun opened its end
	for _ in $(seq 600); do
		[ "$(readlink "/proc/$pid/exe" 2> /dev/null)" = "$(readlink -f "$shmrun")" ] &&
			grep -q '^State:.*S' "/proc/$pid/status" 2> /dev/null && break
		sleep 0.01
	done
	kill -TERM "$pid"
	sleep 0.2
	cat "$d/g.conf" >&7
	exec 7>&-
	for _ in $(seq 600); do [ -s "$d/status" ] && break; sleep 0.1; done
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	rc=$(cat "$d/status")
	if [ $ck = yes ]; then
		[ "$rc" -eq 0 ] || fail "early SIGTERM with checkpoints: status $rc, expected 0 (a stop)"
		grep -q "stopped at epoch" "$d/log" || fail "early SIGTERM: no 'stopped at epoch'"
	else
		[ "$rc" -eq -15 ] || fail "early SIGTERM without checkpoints: status $rc, expected -15"
		grep -q "stopping 2 workers" "$d/log" ||
			fail "early SIGTERM without checkpoints: killed before the run loop, not stopped"
	fi
	echo "ok a SIGTERM before the run loop is a stop (checkpoints $ck, status $rc)"
done

# Two copies of one stop request, back to back, to the launcher and then to
# its group, as GNU `timeout` sends them: one request, a final checkpoint and
# exit 0 (they once stopped at once, exit 143, without the checkpoint).
d="$tmp/copies"
mkdir -p "$d"
cat > "$d/c.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 50ms
[gen]
op = sequence
count = 100000000
keys = 1000
rate = 200000
width = 2
[out]
op = null_sink
input = gen
CONF
for trial in 1 2 3; do
	rm -rf "$d/ck" "$d/log" "$d/status"
	run_session "$d" "$d/status" "$shmrun" c.conf
	wait_started "$d/log" || fail "copies: no start line within 60 s"
	sleep 0.5
	kill -TERM "$pid"
	kill -TERM -- -"$pid" 2> /dev/null || true
	for _ in $(seq 1200); do [ -s "$d/status" ] && break; sleep 0.05; done
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	[ "$(cat "$d/status")" = 0 ] || fail "copies (trial $trial): status $(cat "$d/status"), expected 0"
	grep -q "stopped at epoch" "$d/log" || fail "copies (trial $trial): no final checkpoint"
done
echo "ok two copies of one SIGTERM (launcher, then its group) are one stop request"

# A worker that dies while the final checkpoint of a stop is being taken: the
# stop ends at the last complete checkpoint, exit 0 and `stopped at epoch e`,
# as a stop during the restart backoff after such a death does (it once died
# by SIGTERM, exit 143: whether the death or the signal came first, by a
# millisecond, decided the outcome). Worker 1 is held by SIGSTOP so that the
# final epoch cannot complete before it is killed. The rerun resumes and the
# output is exact.
d="$tmp/deathstop"
mkdir -p "$d"
cat > "$d/d.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 100ms
[gen]
op = sequence
count = 60000
piece_records = 1000
rate = 20000
width = 2
[out]
op = file_sink
input = gen
path = out.tsv
width = 1
CONF
run_session "$d" "$d/status" "$shmrun" d.conf
wait_started "$d/log" || fail "death during stop: no start line within 60 s"
wait_manifest "$d/ck" || fail "death during stop: no checkpoint"
w1=$(worker_on_cpu "$(nth_cpu 2)")
[ -n "$w1" ] || w1=$(pgrep -n -P "$pid")
kill -STOP "$w1"
kill -TERM "$pid"
sleep 0.5
kill -KILL "$w1"
kill -CONT "$w1" 2> /dev/null || true
for _ in $(seq 1200); do [ -s "$d/status" ] && break; sleep 0.05; done
wait "$helper" 2> /dev/null || true
launcher=
cp "$d/log" "$tmp/log"
[ "$(cat "$d/status")" = 0 ] || fail "death during stop: status $(cat "$d/status"), expected 0"
qgrep "the final checkpoint was not taken after: worker" "$d/log" || fail "death during stop: no warning naming the death"
qgrep "^stopped at epoch [1-9]" "$d/log" || fail "death during stop: no 'stopped at epoch'"
(cd "$d" && timeout 120 "$shmrun" d.conf 2> "$tmp/log") || fail "death during stop: resume exit $?"
[ "$(sort -n "$d/out.tsv" | uniq | wc -l)" = 60000 ] && [ "$(wc -l < "$d/out.tsv")" = 60000 ] ||
	fail "death during stop: output not exact after the resume ($(wc -l < "$d/out.tsv") lines)"
echo "ok a worker's death during a stop's final checkpoint stops at the last complete one, exit 0"
