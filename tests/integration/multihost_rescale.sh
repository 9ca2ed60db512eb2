#!/usr/bin/env bash
# tests/integration/multihost_rescale.sh SHMRUN: the keyed count of
# tests/integration/mhkeyed.sh moved between host counts at checkpoints, each
# time stopped mid-way with `shmrun stop` (docs/multihost.md "Stopping a
# job"), against the same job on one host without stops:
#   - shared checkpoint_dir: 1 host (plain shmrun, 2 workers), stopped with
#     `shmrun stop NAME`; on 2 hosts x 2 workers under mpirun: refused
#     without --rescale (the host count is in the fingerprint), resumed with
#     --rescale, stopped with `shmrun stop NAME.h1` (the whole job stops at a
#     final checkpoint, mpirun exits 0); on 1 host again with --rescale to the
#     end: the exact output, nothing lost or doubled. Every host of a
#     stopped run says "stopped at epoch N", also the one the stop did not
#     come to (it said "done").
# (checkpoint_layout = per_host: multihost_per_host.sh.)
# After each run: no process, Open MPI session directory, /dev/shm file or
# temp file left. Registered only when MPI is found (tests.cmake).
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_rescale.sh path/to/shmrun}")
. "$(dirname "$0")/mhkeyed.sh" # lib.sh, mpi.sh; exit 77 without MPI

name=mhr_$$
keyed_reference

# --- shared: 1 host -> 2 hosts -> 1 host ------------------------------------
d=$tmp/shared
keyed_conf "$d" "$name" 1 2 15000 ck
in_dir "$d" "$shmrun" job.conf &
launcher=$!
wait_started
stop_midway "$d/ck" "$name" 1 "1 host"
first=$(newest_epoch "$d/ck")

keyed_conf "$d" "$name" 2 2 15000 ck
rc=0
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf || rc=$?
[ "$rc" = 2 ] || fail "1 host -> 2 hosts without --rescale: mpirun exited $rc, want 2"
qgrep "rescale" "$tmp/log" || fail "1 host -> 2 hosts without --rescale: the refusal does not name --rescale"
[ "$(newest_epoch "$d/ck")" = "$first" ] ||
	fail "the refused start wrote a checkpoint"
no_leftovers "refused 2-host start"

in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" --rescale job.conf &
launcher=$!
# the rescaled run has started once both hosts logged their workers
for _ in $(seq 600); do
	[ "$(grep -c "workers on host [01] of 2" "$tmp/log" 2> /dev/null)" = 2 ] && break
	kill -0 "$launcher" 2> /dev/null || break
	sleep 0.05
done
for _ in $(seq 600); do
	[ "$(newest_epoch "$d/ck")" -gt "$((first + 1))" ] && break
	sleep 0.05
done
stop_midway "$d/ck" "$name.h1" 2 "1 host -> 2 hosts (--rescale)"
qgrep "launcher: rescale: $d/ck/ckpt-$first re-assigned to this topology as" "$tmp/log" ||
	fail "1 host -> 2 hosts: ckpt-$first (the 1-host stop) was not rescaled"
[ "$(grep -c "launcher: restoring epoch $((first + 1)) " "$tmp/log")" = 2 ] ||
	fail "1 host -> 2 hosts: not both hosts restored the rescaled epoch $((first + 1))"

keyed_conf "$d" "$name" 1 2 100000000 ck
rc=0
in_dir "$d" "$shmrun" --rescale job.conf || rc=$?
[ "$rc" = 0 ] || fail "2 hosts -> 1 host (--rescale): exit $rc"
qgrep "launcher: restoring epoch" "$tmp/log" || fail "2 hosts -> 1 host: no restore"
keyed_exact "$d" "1 host -> 2 hosts -> 1 host"
no_leftovers "2 hosts -> 1 host"
echo "ok shared checkpoint_dir: 1 host -> 2 hosts -> 1 host with --rescale, stopped mid-way each time: exact"

echo "multihost_rescale: ok"
