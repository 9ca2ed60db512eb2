#!/usr/bin/env bash
# tests/integration/multihost_stop.sh SHMRUN: stops of a two-host job (two MPI
# processes on this machine, tests/integration/mpi.sh) asked on several hosts
# at once, or whose final checkpoint fails, against the one-host run of the
# keyed count (tests/integration/mhkeyed.sh):
#   (a) SIGTERM to host 1's launcher, then 5 ms later to host 0's (a
#       scheduler or systemd signalling every host): one stop at a final
#       checkpoint, not a "second signal, stop at once": exit 0, both hosts
#       `stopped at epoch N`, host 0 says a stop is already under way; the
#       rerun resumes to the exact output. (It ended 143 without a final
#       checkpoint: host 0 took its own SIGTERM for a second request.)
#   (b) `shmrun stop NAME.h1` under `shmrun supervise` with a final
#       checkpoint that cannot be taken (checkpoint_timeout = 1ms): stopped
#       at the last complete checkpoint on both hosts, exit 0, no restart.
#       (Host 0, which got no signal itself, exited 75 and supervise started
#       the job the user had stopped again.)
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_stop.sh path/to/shmrun}")
. "$(dirname "$0")/mhkeyed.sh" # lib.sh, mpi.sh; exit 77 without MPI

name=mhs_$$
keyed_reference

# launcher_of RANK: the pid of the launcher of host RANK of this job
launcher_of() {
	local p
	for _ in $(seq 200); do
		for p in $(pgrep -f "$shmrun job.conf" || true); do
			tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null |
				qgrep -x "OMPI_COMM_WORLD_RANK=$1" && echo "$p" && return 0
		done
		sleep 0.05
	done
	fail "no launcher of host $1"
}

# (a) two SIGTERMs 5 ms apart, host 1 first
d=$tmp/a
keyed_conf "$d" "$name" 2 2 20000 ck
(cd "$d" && exec "${mpirun2_cmd[@]}" "$shmrun" job.conf) > "$tmp/log" 2>&1 &
launcher=$!
wait_manifest "$d/ck" || fail "(a): no checkpoint completed"
l1=$(launcher_of 1)
l0=$(launcher_of 0)
kill -TERM "$l1"
sleep 0.005
kill -TERM "$l0"
wait_launcher
[ "$rc" = 0 ] || fail "(a) SIGTERM to both hosts: mpirun exited $rc, want 0: $(grep -E 'WARN|ERROR' "$tmp/log" | head -5)"
[ "$(grep -c "launcher: stopped at epoch" "$tmp/log")" = 2 ] ||
	fail "(a): not both hosts stopped at a final checkpoint: $(grep -E 'WARN|ERROR' "$tmp/log" | head -5)"
grep -E "launcher: (Terminated|shmrun stop): stopping [0-9]+ worker|final checkpoint was not taken" "$tmp/log" &&
	fail "(a): a host stopped at once, without a final checkpoint"
qgrep "launcher: job $name done" "$tmp/log" && fail "(a): the job ended before the stop; slow it down"
# which host's stop was first depends on the mirroring: either one says so
qgrep "a stop at a final checkpoint is already under way (asked on another host)" "$tmp/log" ||
	echo "note (a): both hosts took their own SIGTERM first (the mirrored stop came later)"
no_leftovers "(a)"
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf || fail "(a) the rerun: exit $?"
[ "$(grep -c "launcher: restoring epoch" "$tmp/log")" = 2 ] || fail "(a): the rerun did not resume on both hosts"
keyed_exact "$d" "(a) SIGTERM to both hosts, then a rerun"
no_leftovers "(a) rerun"
echo "ok (a) SIGTERM to both hosts 5 ms apart: one stop at a final checkpoint, exact after the rerun"

# (b) a stop whose final checkpoint fails, under supervise
d=$tmp/b
keyed_conf "$d" "$name" 2 2 20000 ck
sed -i 's/^checkpoint_interval = 100ms$/checkpoint_interval = 100ms\ncheckpoint_timeout = 1ms/' "$d/job.conf"
qgrep -x "checkpoint_timeout = 1ms" "$d/job.conf" || fail "(b): conf not changed"
(cd "$d" && exec "$shmrun" supervise --backoff 0s -- "${mpirun2_cmd[@]}" "$shmrun" job.conf) > "$tmp/log" 2>&1 &
launcher=$!
wait_for 200 qgrep "epoch 3 aborted" "$tmp/log" || fail "(b): epochs did not abort: $(tail -3 "$tmp/log")"
"$shmrun" stop "$name.h1" > "$tmp/stop.out" 2>&1 || fail "(b) shmrun stop $name.h1: $(cat "$tmp/stop.out")"
wait_launcher
[ "$rc" = 0 ] || fail "(b) a stop whose final checkpoint failed: supervise exited $rc, want 0: $(grep -E 'ERROR|supervise' "$tmp/log" | head -5)"
qgrep "restart [0-9]* of" "$tmp/log" && fail "(b): supervise restarted a stopped job"
qgrep "exit status 75" "$tmp/log" && fail "(b): a host exited 75 after a stop"
[ "$(grep -c "the final checkpoint was not taken after: .*; stopping at the last complete checkpoint" "$tmp/log")" = 2 ] ||
	fail "(b): not both hosts stopped at the last complete checkpoint: $(grep -E 'WARN|ERROR' "$tmp/log" | grep -v aborted | head -5)"
qgrep "a stop asked on another host: the final checkpoint was not taken" "$tmp/log" ||
	fail "(b): host 0 did not name the stop asked on host 1"
no_leftovers "(b)"
echo "ok (b) a stop whose final checkpoint fails: stopped on both hosts, exit 0, no restart"
echo "multihost_stop: ok"
