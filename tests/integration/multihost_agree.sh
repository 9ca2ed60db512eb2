#!/usr/bin/env bash
# tests/integration/multihost_agree.sh SHMRUN: the hosts of a multi-host job
# agree before anything starts (runtime/gateway.c "the start exchange";
# docs/multihost.md "Starting: the hosts agree"), with the keyed count of
# tests/integration/mhkeyed.sh on two "hosts" x 2 workers:
#   1. a job that differs between the ranks (mpirun MPMD, a --set on rank 1
#      only: a tuning key the checkpoint fingerprint leaves out; another
#      worker count) is refused on every host, exit 2, naming host 1, before
#      any output file exists;
#   2. checkpoint_layout = per_host, stopped at epoch e, then host 1's
#      MANIFEST of e removed (a crash after rank 0 wrote it, before its
#      COMMIT reached host 1): host 1 would restore e-1, host 0 e; the rerun
#      restores e on both (host 1 with rank 0's MANIFEST) and the output is
#      exactly the one-host run's;
#   3. that finished job run again with host 1's checkpoint_dir gone: rank
#      0's checkpoint ends a finished run, so every host says nothing to do
#      and exits 0, outputs untouched (host 1 used to start empty, truncate
#      its output and hang).
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_agree.sh path/to/shmrun}")
. "$(dirname "$0")/mhkeyed.sh" # lib.sh, mpi.sh; exit 77 without MPI

name=mha_$$
keyed_reference

# 1. another job on rank 1
d=$tmp/differ
keyed_conf "$d" "$name" 2 2 100000000 'ck{host}' per_host
for set in gen.rate=99999 job.workers=1; do
	rc=0
	(cd "$d" && timeout 120 env "${mpi_env[@]}" mpirun "${mpi_flags[@]}" -np 1 "$shmrun" job.conf \
		: -np 1 "$shmrun" run --set "$set" job.conf) > "$tmp/log" 2>&1 || rc=$?
	[ "$rc" = 2 ] || fail "--set $set on rank 1 only: exit $rc, want 2"
	case $set in
	gen.*) want="host 1 runs another job than host 0" ;;
	*) want="host 1 has 1 workers, host 0 2" ;;
	esac
	qgrep -F "$want" "$tmp/log" || fail "--set $set on rank 1 only: no '$want'"
	# the gateway's reason, not the errno text of the code carrying it
	qgrep -F "the hosts did not agree to start (see above)" "$tmp/log" ||
		fail "--set $set on rank 1 only: no 'did not agree to start'"
	qgrep "Invalid cross-device link\|No such file or directory" "$tmp/log" &&
		fail "--set $set on rank 1 only: an errno text for a refusal: $(grep -i 'invalid\|no such' "$tmp/log" | head -2)"
	# each launcher creates and locks its outputs before the exchange (empty);
	# no byte is written before the hosts agree
	[ -z "$(find "$d" -path "$d/out/result.tsv*" -type f -size +0c)" ] ||
		fail "--set $set on rank 1 only: an output was written: $(find "$d/out" -type f -size +0c)"
	no_leftovers "--set $set on rank 1"
done

# 2. host 1 missed the COMMIT of the last epoch
d=$tmp/commit
keyed_conf "$d" "$name" 2 2 15000 'ck{host}' per_host
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf &
launcher=$!
wait_manifest "$d/ck1" || fail "per_host: host 1 got no MANIFEST"
sleep 0.5 # a few epochs, so that host 1 keeps an older one
stop_midway "$d/ck0" "$name.h0" 2 "per_host, 2 hosts"
e=$(newest_epoch "$d/ck0")
[ -f "$d/ck1/ckpt-$e/MANIFEST" ] || fail "host 1 has no MANIFEST of the final epoch $e"
prev=$(ls "$d"/ck1/ckpt-*/MANIFEST | sed 's/.*ckpt-//; s,/MANIFEST,,' | sort -n | grep -vx "$e" | tail -1)
[ -n "$prev" ] || fail "host 1 kept no checkpoint older than $e"
rm "$d/ck1/ckpt-$e/MANIFEST"
rc=0
in_dir "$d" timeout 200 "$shmrun" supervise -- "${mpirun2_cmd[@]}" "$shmrun" job.conf || rc=$?
[ "$rc" = 0 ] || fail "after host 1 lost the MANIFEST of $e: exit $rc"
qgrep -F "host 1 had chosen epoch $prev, rank 0 epoch $e: host 1 restores epoch $e instead" "$tmp/log" ||
	fail "no message that host 1 restores epoch $e instead of $prev"
[ "$(grep -c "launcher: restoring epoch $e " "$tmp/log")" = 2 ] ||
	fail "not both hosts restored epoch $e"
keyed_exact "$d" "per_host, host 1 missed the COMMIT of epoch $e"
no_leftovers "per_host, host 1 missed a COMMIT"

# 3. the finished job again, host 1's checkpoints gone
rm -rf "$d/ck1"
sum=$(cat "$d"/out/result.tsv.* | md5sum)
rc=0
in_dir "$d" timeout 120 "$shmrun" supervise -- "${mpirun2_cmd[@]}" "$shmrun" job.conf || rc=$?
[ "$rc" = 0 ] || fail "a finished job run again (host 1 without checkpoints): exit $rc (124: hung)"
qgrep -F "nothing to do on host 1 either" "$tmp/log" || fail "host 1 did not say there is nothing to do"
[ "$(cat "$d"/out/result.tsv.* | md5sum)" = "$sum" ] || fail "a finished job run again changed its output"
keyed_exact "$d" "a finished job run again"
no_leftovers "a finished job run again"
# 4. host 1 cannot restore the agreed epoch (its own state file damaged):
# every host refuses at once (host 1 hung in MPI_Finalize while host 0 ran,
# until host_timeout ended the job with 75, which supervise reran)
d=$tmp/damaged
keyed_conf "$d" "$name" 2 2 15000 'ck{host}' per_host
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf &
launcher=$!
wait_manifest "$d/ck1" || fail "damaged: host 1 got no MANIFEST"
sleep 0.5
stop_midway "$d/ck0" "$name.h0" 2 "damaged, 2 hosts"
e=$(newest_epoch "$d/ck0")
f=$(ls "$d/ck1/ckpt-$e"/count.*.state | head -1)
[ -n "$f" ] || fail "damaged: host 1 has no count state file in ckpt-$e"
printf 'x' >> "$f"
rc=0
SECONDS=0
in_dir "$d" timeout 120 "$shmrun" supervise -- "${mpirun2_cmd[@]}" "$shmrun" job.conf || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 75 ] ||
	fail "host 1's state file of the agreed epoch damaged: exit $rc after $SECONDS s, want a refusal (not 0, 75 or 124)"
qgrep "restart [0-9]* of" "$tmp/log" && fail "damaged: supervise restarted the job"
qgrep "host_timeout" "$tmp/log" && fail "damaged: a host waited for host_timeout: $(grep host_timeout "$tmp/log" | head -2)"
qgrep "ckpt-$e, the epoch the hosts agreed on, cannot be restored on host 1" "$tmp/log" ||
	fail "damaged: host 1 did not say why: $(grep ERROR "$tmp/log" | head -3)"
qgrep -F "another host cannot restore epoch $e (see its log); nothing was started" "$tmp/log" ||
	fail "damaged: host 0 did not refuse with host 1: $(grep ERROR "$tmp/log" | head -3)"
no_leftovers "damaged, refused"
echo "ok a host that cannot restore the agreed epoch: every host refuses at once (exit $rc, ${SECONDS} s)"
echo "multihost_agree: ok (another job on rank 1 refused; host 1 restored epoch $e instead of $prev; a finished job: nothing to do on both hosts)"
