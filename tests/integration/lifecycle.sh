#!/usr/bin/env bash
# tests/integration/lifecycle.sh SHMRUN: the launcher's promises, with real
# processes: a worker killed with SIGKILL stops the job with a message naming
# the worker, its tasks and the signal; kill -9 of the launcher takes its
# workers with it; SIGINT and SIGTERM stop everything; a missing input stops
# the job before anything starts; a record too large for a ring is an error
# naming the stage; two workers shuffling into each other through tiny rings
# do not deadlock and count exactly; no process and no segment is left behind.
set -euo pipefail
shmrun=${1:?usage: lifecycle.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
shm_before=$(ls /dev/shm | grep -ci shmrun || true)

# A slow job: sequence at a limited rate, so it is still running when we act.
slow_conf() {
	cat > "$tmp/slow.conf" <<CONF
[job]
workers = 2
[gen]
op = sequence
count = 100000000
keys = 10
rate = 20000
width = 2
[count]
op = count
input = gen by key
width = 2
[out]
op = null_sink
input = count
width = 2
CONF
}

# workers_of PID: the launcher's children
workers_of() { pgrep -P "$1" || true; }

wait_gone() { # pid... : all exited within 5 s
	for _ in $(seq 1 100); do
		local alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive -eq 0 ] && return 0
		sleep 0.05
	done
	return 1
}

start_slow() {
	slow_conf
	"$shmrun" "$tmp/slow.conf" 2> "$tmp/log" &
	launcher=$!
	for _ in $(seq 1 100); do
		[ "$(workers_of $launcher | wc -w)" -eq 2 ] && grep -q "2 workers" "$tmp/log" && return 0
		sleep 0.05
	done
	fail "the slow job did not start 2 workers"
}

# 1. SIGKILL of a worker
start_slow
mapfile -t ws < <(workers_of $launcher)
kill -9 "${ws[1]}"
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 1 ] || fail "worker SIGKILL: exit status $rc, expected 1"
grep -Eq "worker [01] \(CPU [0-9]+, tasks .*\) was killed by signal 9" "$tmp/log" ||
	fail "worker SIGKILL: no message naming the worker, tasks and signal"
wait_gone "${ws[@]}" || fail "worker SIGKILL: workers left behind"
echo "ok worker SIGKILL -> exit 1, named, nothing left"

# 2. kill -9 of the launcher: workers die with it
start_slow
mapfile -t ws < <(workers_of $launcher)
kill -9 $launcher
wait $launcher 2>/dev/null || true
launcher=
wait_gone "${ws[@]}" || fail "launcher SIGKILL: workers outlived it"
echo "ok launcher SIGKILL -> workers gone"

# 3. SIGINT and SIGTERM
for sig in INT TERM; do
	start_slow
	mapfile -t ws < <(workers_of $launcher)
	kill -$sig $launcher
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	want=$((128 + $(kill -l $sig)))
	[ $rc -eq $want ] || fail "SIG$sig: exit status $rc, expected $want"
	wait_gone "${ws[@]}" || fail "SIG$sig: workers left behind"
	echo "ok SIG$sig -> exit $rc, nothing left"
done

# 4. A missing input: exit 2 naming it, nothing started
cat > "$tmp/missing.conf" <<CONF
[read]
op = file_source
path = does/not/exist.txt
[out]
op = null_sink
input = read
CONF
set +e; "$shmrun" "$tmp/missing.conf" 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] || fail "missing input: exit status $rc, expected 2"
grep -q "does/not/exist.txt" "$tmp/log" || fail "missing input: path not named"
grep -q "workers" "$tmp/log" && fail "missing input: workers were started"
echo "ok missing input -> exit 2, named, nothing started"

# 5. A record too large for a ring: error naming the stage and size
head -c 5000 /dev/zero | tr '\0' 'y' > "$tmp/big.txt"
cat > "$tmp/big.conf" <<CONF
[job]
workers = 2
ring_bytes = 4K
[read]
op = file_source
path = big.txt
[out]
op = null_sink
input = read
width = 2
CONF
set +e; timeout 20 "$shmrun" "$tmp/big.conf" 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 1 ] || fail "large record: exit status $rc, expected 1"
grep -q "stage 'read'.*record of 5000 bytes of key + value" "$tmp/log" || fail "large record: no message naming stage and size"
echo "ok record larger than a ring -> exit 1, named"

# 6. Two workers shuffling into each other through 4 KiB rings
cat > "$tmp/cross.conf" <<CONF
[job]
workers = 2
ring_bytes = 4K
[gen]
op = sequence
count = 300000
keys = 1000
piece_records = 1000
width = 2
[count]
op = count
input = gen by key
width = 2
[back]
op = count
input = count by key
width = 2
[out]
op = file_sink
input = back
path = out/cross.tsv
width = 2
CONF
timeout 120 "$shmrun" "$tmp/cross.conf" 2> "$tmp/log" || fail "tiny rings: exit $?"
lines=$(cat "$tmp"/out/cross.tsv.* | wc -l)
[ "$lines" -eq 1000 ] || fail "tiny rings: $lines keys, expected 1000"
bad=$(cat "$tmp"/out/cross.tsv.* | awk -F'\t' '$2 != 1' | wc -l)
[ "$bad" -eq 0 ] || fail "tiny rings: $bad keys with a count other than 1 in the second count"
echo "ok two workers through 4 KiB rings: exact"

# 7. A stdout_sink whose reader goes away (shmrun job | head): exit 141, no restart.
cat > "$tmp/pipe.conf" <<CONF
[job]
checkpoint_dir = ck
[gen]
op = sequence
count = 50000000
[out]
op = stdout_sink
input = gen
CONF
set +e
"$shmrun" "$tmp/pipe.conf" 2> "$tmp/log" | head -3 > "$tmp/head.out"
rc=${PIPESTATUS[0]}
set -e
[ $rc -eq 141 ] || fail "closed output pipe: exit status $rc, expected 141"
grep -q "output pipe was closed" "$tmp/log" || fail "closed output pipe: no message"
grep -q "restart" "$tmp/log" && fail "closed output pipe: restarted"
[ "$(wc -l < "$tmp/head.out")" -eq 3 ] || fail "closed output pipe: head got no lines"
echo "ok closed output pipe -> exit 141, no restart"

shm_after=$(ls /dev/shm | grep -ci shmrun || true)
[ "$shm_after" -eq "$shm_before" ] || fail "segments left in /dev/shm"
echo "lifecycle: all cases passed"
