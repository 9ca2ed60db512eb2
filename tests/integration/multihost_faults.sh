#!/usr/bin/env bash
# tests/integration/multihost_faults.sh SHMRUN: a keyed count on two "hosts"
# (two MPI processes on this machine, tests/integration/mpi.sh) of two workers
# each, with one checkpoint_dir both share, under
# `shmrun supervise -- mpirun ... shmrun job.conf` (docs/multihost.md
# "Failures"), against the same job on one host without faults
# (tests/integration/mhkeyed.sh: every key's updates 1..n, exactly once):
#   (a) kill -9 of a worker of host 1 mid-run: host 1's launcher aborts the
#       job, mpirun exits 75, supervise reruns it once (one "restart" line),
#       both hosts restore the last checkpoint: exact output, exit 0;
#   (b) kill -9 of host 1's launcher mid-run (not of mpirun): its workers die
#       with it (PR_SET_PDEATHSIG; none outlives it), mpirun ends the job with
#       137, supervise reruns it once: exact output, exit 0;
#   (c) SIGTERM to supervise mid-run (a person stopping it): forwarded to
#       mpirun, no rerun, nothing left; a later run of the same command
#       resumes from the checkpoint: exact output;
#   (d) kill -9 of mpirun itself (supervise --backoff 0s): its ranks outlive
#       it for about a second, holding their hosts' run locks; supervise, a
#       child subreaper, kills them before the rerun, which is not refused
#       (it was: exit 2, "in use by another run", and supervise gave up).
# After each: no process, Open MPI session directory, /dev/shm file or temp
# file left. Registered only when MPI is found (tests/integration/tests.cmake).
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_faults.sh path/to/shmrun}")
. "$(dirname "$0")/mhkeyed.sh" # lib.sh, mpi.sh; exit 77 without MPI

name=mhf_$$
keyed_reference

# start_supervised DIR: `shmrun supervise -- mpirun -np 2 ... shmrun job.conf`
# in the background ($launcher), stderr in $tmp/log; waits for its first
# complete checkpoint, so what follows lands mid-run
start_supervised() {
	(cd "$1" && exec "$shmrun" supervise --backoff 0s -- "${mpirun2_cmd[@]}" \
		"$shmrun" job.conf) > "$tmp/log" 2>&1 &
	launcher=$!
	wait_manifest "$1/ck" || fail "$1: no checkpoint completed"
}
# worker G: the pid of global worker G of the job (host G / 2)
worker() {
	local p
	for _ in $(seq 100); do
		# -o: the oldest, the worker; a snapshot writer it forks carries its
		# title for an instant, until it names itself
		p=$(pgrep -o -f "^shmrun: $name worker $1 " || true)
		[ -n "$p" ] && echo "$p" && return 0
		sleep 0.05
	done
	fail "no worker $1 running"
}
# finish WHAT: wait for supervise; it must exit 0 after exactly one restart,
# both hosts having restored a checkpoint in the rerun
finish() {
	local rc
	wait_launcher
	[ "$rc" = 0 ] || fail "$1: supervise exited $rc, want 0"
	[ "$(grep -c '^shmrun supervise: .*restart [0-9]* of' "$tmp/log")" = 1 ] ||
		fail "$1: want exactly one restart line: $(grep '^shmrun supervise' "$tmp/log" | tr '\n' ' ')"
	[ "$(grep -c "launcher: restoring epoch" "$tmp/log")" = 2 ] ||
		fail "$1: the rerun did not restore a checkpoint on both hosts"
	[ "$(grep -c "launcher: job $name done" "$tmp/log")" = 2 ] || fail "$1: not both hosts reported done"
}

# (a) kill -9 of a worker of host 1
d=$tmp/a
keyed_conf "$d" "$name" 2 2 20000 ck
start_supervised "$d"
kill -9 "$(worker 3)"
finish "kill -9 of worker 3"
qgrep "^shmrun supervise: mpirun exited with status 75 (restartable); restart 1 of 10" "$tmp/log" ||
	fail "kill -9 of worker 3: mpirun did not exit 75"
qgrep "host 0: host 1 aborted the job: host 1: worker 3 .* killed by signal 9" "$tmp/log" ||
	fail "kill -9 of worker 3: host 0 did not name host 1's dead worker"
keyed_exact "$d" "kill -9 of worker 3"
no_leftovers "kill -9 of worker 3"
echo "ok (a) kill -9 of a worker of host 1: one restart, exact"

# (b) kill -9 of host 1's launcher: the parent of its workers 2 and 3
d=$tmp/b
keyed_conf "$d" "$name" 2 2 20000 ck
start_supervised "$d"
w2=$(worker 2)
w3=$(worker 3)
l1=$(ps -o ppid= -p "$w2" | tr -d ' ')
[ "$(ps -o ppid= -p "$w3" | tr -d ' ')" = "$l1" ] || fail "workers 2 and 3 have different parents"
tr '\0' '\n' < "/proc/$l1/environ" | qgrep -x "OMPI_COMM_WORLD_RANK=1" ||
	fail "the parent of worker 2 ($l1) is not rank 1"
kill -9 "$l1"
# no worker of the killed launcher outlives it (they die on its death, not
# when mpirun gets around to the job: give them 5 s)
for p in $w2 $w3; do
	for _ in $(seq 100); do
		kill -0 "$p" 2> /dev/null || break
		sleep 0.05
	done
	kill -0 "$p" 2> /dev/null && fail "worker $p of the killed launcher outlived it"
done
finish "kill -9 of host 1's launcher"
qgrep "^shmrun supervise: mpirun exited with status 137: a process was killed by SIGKILL; restart 1 of 10" "$tmp/log" ||
	fail "kill -9 of host 1's launcher: mpirun did not exit 137"
keyed_exact "$d" "kill -9 of host 1's launcher"
no_leftovers "kill -9 of host 1's launcher"
echo "ok (b) kill -9 of host 1's launcher: its workers died with it, one restart, exact"

# (c) SIGTERM to supervise: no rerun, nothing left; the same command later
# resumes to the exact output
d=$tmp/c
keyed_conf "$d" "$name" 2 2 20000 ck
start_supervised "$d"
sleep 0.5
kill -TERM "$launcher"
wait_launcher
[ "$rc" = 1 ] || fail "SIGTERM to supervise: exit $rc, want 1 (mpirun's after a signal)"
qgrep "SIGTERM: forwarding it to .* process group; no restart after it" "$tmp/log" ||
	fail "SIGTERM to supervise: no forwarding line"
qgrep "restart [0-9]* of" "$tmp/log" && fail "SIGTERM to supervise: it restarted the job"
qgrep "launcher: job $name done" "$tmp/log" && fail "the job ended before the SIGTERM; slow it down"
no_leftovers "SIGTERM to supervise"
mv "$tmp/log" "$tmp/log.c1"
rc=0
(cd "$d" && exec "$shmrun" supervise --backoff 0s -- "${mpirun2_cmd[@]}" "$shmrun" job.conf) \
	> "$tmp/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "the run after SIGTERM to supervise: exit $rc"
[ "$(grep -c "launcher: restoring epoch" "$tmp/log")" = 2 ] ||
	fail "the run after SIGTERM to supervise did not resume from a checkpoint on both hosts"
qgrep "restart [0-9]* of" "$tmp/log" && fail "the run after SIGTERM needed a restart"
keyed_exact "$d" "SIGTERM to supervise, then a new run"
no_leftovers "the run after SIGTERM to supervise"
echo "ok (c) SIGTERM to supervise: no rerun, nothing left; the next run resumes exactly"
# (d) kill -9 of mpirun: the rerun is not refused by its orphaned ranks
d=$tmp/d
keyed_conf "$d" "$name" 2 2 20000 ck
start_supervised "$d"
mpirun_pid=$(pgrep -P "$launcher" -x mpirun || pgrep -P "$(pgrep -P "$launcher" | head -1)" -x mpirun || true)
[ -n "$mpirun_pid" ] || fail "(d): no mpirun under supervise: $(ps -o pid,args --ppid "$launcher")"
kill -9 "$mpirun_pid"
finish "kill -9 of mpirun"
qgrep "in use by another run" "$tmp/log" && fail "kill -9 of mpirun: the rerun met the old run's lock"
qgrep "^shmrun supervise: mpirun was killed by SIGKILL; restart 1 of 10" "$tmp/log" ||
	fail "kill -9 of mpirun: no restart line for it: $(grep '^shmrun supervise' "$tmp/log" | tr '\n' ' ')"
keyed_exact "$d" "kill -9 of mpirun"
# a kill -9'd mpirun cannot remove its own session directory (mpi.sh)
rm -rf "$tmp"/ompi.*/pid."$mpirun_pid"
rmdir "$tmp"/ompi.* 2> /dev/null || true
no_leftovers "kill -9 of mpirun"
echo "ok (d) kill -9 of mpirun: its orphaned ranks killed, one restart, exact"
echo "multihost_faults: ok"
