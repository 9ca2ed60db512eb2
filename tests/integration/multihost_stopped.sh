#!/usr/bin/env bash
# tests/integration/multihost_stopped.sh SHMRUN: a host's launcher stopped
# (kill -STOP) for longer than host_timeout, then continued, on two "hosts"
# (tests/integration/mpi.sh). Host 1 runs with host_timeout = 2 s, host 0
# with 60 s (MPMD mpirun), so host 0 never gives host 1 up by itself: the
# only failure is host 1's own. Host 1's gateway sees its thread did not run
# for ~4 s and says "this host was stopped or starved for N s"; it must not
# blame host 0 ("host 0 sent nothing for …", what it said before), and host 0
# reports host 1's abort. Nothing is left behind.
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_stopped.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mpi.sh"
need_mpi "$shmrun"

name=mhs_$$
cat > "$tmp/job.conf" <<CONF
[job]
name = $name
workers = 1
host_timeout = 2s
[read]
op = sequence
count = 100000000
keys = 7
rate = 20000
width = 2
[count]
op = count
input = read by key
width = 2
[out]
op = file_sink
input = count
path = out/o.tsv
CONF
(cd "$tmp" && exec env "${mpi_env[@]}" mpirun "${mpi_flags[@]}" \
	-np 1 "$shmrun" --set job.host_timeout=60s job.conf : -np 1 "$shmrun" job.conf) \
	> "$tmp/log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
	[ "$(grep -c "gateway of host [01]: " "$tmp/log")" -ge 2 ] && break
	kill -0 $launcher 2> /dev/null || fail "the job ended before both gateways started"
	sleep 0.05
done
[ "$(grep -c "gateway of host [01]: " "$tmp/log")" -ge 2 ] || fail "the gateways did not start"
sleep 0.5
host1=
for p in $(mpi_leftovers); do
	[ "$(cat /proc/$p/comm 2> /dev/null)" = shmrun ] || continue
	tr '\0' '\n' < /proc/$p/environ 2> /dev/null | qgrep -x OMPI_COMM_WORLD_RANK=1 && host1=$p
done
[ -n "$host1" ] || fail "no launcher of host 1"
kill -STOP "$host1"
sleep 4
kill -CONT "$host1"
wait_launcher
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after host 1 was stopped for 4 s"
grep -q "launcher: this host was stopped or starved for [4-9]\.[0-9] s (longer than host_timeout, 2\.0 s)" "$tmp/log" ||
	fail "host 1 did not say it was stopped"
grep -q "launcher: host 1 aborted the job: host 1: this host was stopped or starved" "$tmp/log" ||
	fail "host 0 did not report host 1's abort"
! grep -q "host 0 sent nothing" "$tmp/log" || fail "host 1 blamed host 0 for its own stop"
! grep -q "host 1 sent nothing" "$tmp/log" || fail "host 0 (host_timeout 60 s) gave host 1 up"
echo "ok a stopped host says it was stopped, and blames no peer"
mpi_none_left
ls /dev/shm | qgrep "$name" && fail "/dev/shm segment left"
echo "ok nothing left behind"
