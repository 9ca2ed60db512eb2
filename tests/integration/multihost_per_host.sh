#!/usr/bin/env bash
# tests/integration/multihost_per_host.sh SHMRUN: the keyed count of
# tests/integration/mhkeyed.sh on two "hosts" x 2 workers with
# checkpoint_layout = per_host and checkpoint_dir = ck{host} (two "hosts" on
# one machine get two directories, docs/multihost.md "Checkpoints across
# hosts"): each host's directory holds its own tasks' state files, none of
# the other's, and every complete epoch's MANIFEST (rank 0 writes it, the
# COMMIT carries its bytes to the other hosts); a run stopped with `shmrun
# stop NAME.h0` and resumed on 2 hosts restores the same epoch on both and
# gives the exact output of the one-host run; nothing is left behind.
# Registered only when MPI is found (tests/integration/tests.cmake).
set -euo pipefail
shmrun=$(realpath "${1:?usage: multihost_per_host.sh path/to/shmrun}")
. "$(dirname "$0")/mhkeyed.sh" # lib.sh, mpi.sh; exit 77 without MPI

name=mhp_$$
keyed_reference

d=$tmp/per_host
keyed_conf "$d" "$name" 2 2 15000 'ck{host}' per_host
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf &
launcher=$!
wait_manifest "$d/ck0" || fail "per_host: no checkpoint on host 0"
wait_manifest "$d/ck1" 200 || fail "per_host: host 1's directory ck1 got no MANIFEST (the COMMIT did not carry it)"
stop_midway "$d/ck0" "$name.h0" 2 "per_host, 2 hosts"
e=$(newest_epoch "$d/ck0")
[ -f "$d/ck0/ckpt-$e/MANIFEST" ] && [ -f "$d/ck1/ckpt-$e/MANIFEST" ] ||
	fail "per_host: the final ckpt-$e lacks a MANIFEST on a host"
cmp -s "$d/ck0/ckpt-$e/MANIFEST" "$d/ck1/ckpt-$e/MANIFEST" ||
	fail "per_host: the hosts' MANIFESTs of ckpt-$e differ"
n0=$(ls "$d/ck0/ckpt-$e"/*.state | wc -l)
n1=$(ls "$d/ck1/ckpt-$e"/*.state | wc -l)
[ "$n0" = 4 ] && [ "$n1" = 4 ] ||
	fail "per_host: ckpt-$e holds $n0 + $n1 state files, want 4 + 4 (gen, count x 2, out on each host)"
[ -z "$(comm -12 <(cd "$d/ck0/ckpt-$e" && ls) <(cd "$d/ck1/ckpt-$e" && ls) | grep -v '^MANIFEST$')" ] ||
	fail "per_host: a state file is in both hosts' directories"
# ckpt verify of each host's directory: ok, this host's files only (it
# called every checkpoint damaged: another host's file "missing")
for h in 0 1; do
	"$shmrun" ckpt verify "$d/ck$h" > "$tmp/verify" 2>&1 ||
		fail "per_host: ckpt verify ck$h exit $?: $(cat "$tmp/verify")"
	qgrep "^ckpt-$e .* ok .*; 4 of 8 state files here (hosts = 2)$" "$tmp/verify" ||
		fail "per_host: ckpt verify ck$h: no 'ckpt-$e ok, 4 of 8 here': $(cat "$tmp/verify")"
	qgrep "a restore would use ckpt-$e," "$tmp/verify" || fail "per_host: ckpt verify ck$h: $(cat "$tmp/verify")"
	"$shmrun" ckpt list --json "$d/ck$h" | python3 -c '
import json, sys
c = json.load(sys.stdin)["checkpoints"][0]
assert c["status"] == "ok" and c["files"] == 8 and c["files_here"] == 4, c' ||
		fail "per_host: ckpt list --json ck$h: files/files_here"
done
# a file that is here and damaged is still damage
cp -r "$d/ck1" "$tmp/ck1copy"
f=$(ls "$tmp/ck1copy/ckpt-$e"/*.state | head -1)
printf 'x' >> "$f"
rc=0
"$shmrun" ckpt verify "$tmp/ck1copy" > "$tmp/verify" 2>&1 || rc=$?
[ "$rc" = 1 ] && qgrep "^ckpt-$e .*damaged: $(basename "$f")" "$tmp/verify" ||
	fail "per_host: a damaged file of host 1 passed ckpt verify (exit $rc): $(cat "$tmp/verify")"
rm -rf "$tmp/ck1copy"
# one host on host 0's directory: refused as a checkpoint of 2 hosts, exit 2,
# with and without --rescale (it said "none verifies", exit 1, and advised
# moving the directory aside), nothing moved or written
before=$(cd "$d" && find ck0 ck1 out -printf '%p %s\n' | sort)
for args in "" "--rescale"; do
	rc=0
	in_dir "$d" "$shmrun" $args --set job.hosts=1 job.conf || rc=$?
	[ "$rc" = 2 ] || fail "per_host, 1 host ${args:-without --rescale}: exit $rc, want 2: $(grep ERROR "$tmp/log" | head -3)"
	qgrep "ck0/ckpt-$e is a checkpoint of 2 hosts with only some of its state files here (checkpoint_layout = per_host" "$tmp/log" ||
		fail "per_host, 1 host ${args:-without --rescale}: the reason not said: $(grep ERROR "$tmp/log" | head -3)"
	qgrep "STREAM_RESET_STATE\|move the directory aside" "$tmp/log" &&
		fail "per_host, 1 host ${args:-without --rescale}: advises discarding good checkpoints"
done
[ "$(cd "$d" && find ck0 ck1 out -printf '%p %s\n' | sort)" = "$before" ] ||
	fail "per_host: a refused 1-host run changed the checkpoints or outputs"
# retention works on host 1 too: it keeps a few epochs, not every one
[ "$(ls -d "$d"/ck1/ckpt-* | wc -l)" -le 3 ] || fail "per_host: host 1 retired no checkpoint"
rc=0
in_dir "$d" "${mpirun2_cmd[@]}" "$shmrun" job.conf || rc=$?
[ "$rc" = 0 ] || fail "per_host: the resumed 2-host run exited $rc"
[ "$(grep -c "launcher: restoring epoch $e " "$tmp/log")" = 2 ] ||
	fail "per_host: not both hosts restored epoch $e"
keyed_exact "$d" "per_host, 2 hosts stopped and resumed"
no_leftovers "per_host, resumed"
# an aborted epoch's directory on host 1 goes at the abort, as host 0's does
# (they piled up in ck1 while no later epoch committed, whose retention
# removes them: 45 in one run on a full disk). Epochs every 1 s; host 0's
# writers of epoch 1 take 1.5 s (SHMRUN_TEST_SLOW_SNAPSHOT, host 0 only), so
# epoch 1 times out (checkpoint_timeout 500ms) after host 1's writers wrote
# ck1/ckpt-1, and epoch 2 commits (retiring it) only ~0.5 s after the abort:
# ck1/ckpt-1 must be gone within 0.4 s of the abort.
if "$shmrun" --version | qgrep -x "fault injection: on"; then
	d=$tmp/aborted
	keyed_conf "$d" "$name" 2 2 40000 'ck{host}' per_host
	set_to=(--set job.checkpoint_timeout=500ms --set job.checkpoint_interval=1s)
	(cd "$d" && exec env "${mpi_env[@]}" mpirun "${mpi_flags[@]}" \
		-np 1 env SHMRUN_TEST_SLOW_SNAPSHOT=1:1500 "$shmrun" "${set_to[@]}" job.conf : \
		-np 1 "$shmrun" "${set_to[@]}" job.conf) > "$tmp/log" 2>&1 &
	launcher=$!
	wait_for 200 qgrep "epoch 1 aborted: not complete within checkpoint_timeout" "$tmp/log" ||
		fail "per_host: epoch 1 did not abort: the test is void: $(grep -E 'WARN|ERROR' "$tmp/log" | head -3)"
	gone=
	for _ in $(seq 8); do
		[ -e "$d/ck1/ckpt-1" ] || { gone=1; break; }
		sleep 0.05
	done
	[ -n "$gone" ] || fail "per_host: host 1 kept the aborted epoch's ck1/ckpt-1"
	wait_launcher
	[ "$rc" = 0 ] || fail "per_host, epoch 1 aborted: exit $rc: $(grep ERROR "$tmp/log" | head -3)"
	qgrep "launcher: job $name done" "$tmp/log" || fail "per_host, epoch 1 aborted: not done"
	keyed_exact "$d" "per_host, epoch 1 aborted"
	no_leftovers "per_host, epoch 1 aborted"
	echo "ok per_host: an aborted epoch's directory removed on every host"
fi
echo "multihost_per_host: ok (per_host checkpoint_dir ck{host}: stopped at epoch $e and resumed exactly)"
