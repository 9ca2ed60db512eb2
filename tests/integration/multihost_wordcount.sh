#!/usr/bin/env bash
# tests/integration/multihost_wordcount.sh SHMRUN: the word count on two
# "hosts" (two MPI processes on this machine, tests/integration/mpi.sh) with
# [job] hosts = 2, workers = 2 and a checkpoint_dir both hosts share, equals
# the same job on one host and the coreutils reference, as multisets of
# lines; checkpoints complete along the way (several epochs, each with every
# task's state file, one MANIFEST, `shmrun ckpt verify`), each host locks its
# own checkpoint_dir lock; kill -9 of a worker on host 1 ends the run with
# 75 on both hosts and a rerun restores and gives the exact output again;
# a stop asked on host 1 stops both hosts at one final epoch and the resume
# is exact; checkpoint_layout = per_host with {host}: the same output, rank 0's MANIFEST
# installed on host 1, retention on both; nothing is left running.
# Registered only when MPI is found
# (tests/integration/tests.cmake).
set -euo pipefail
shmrun=${1:?usage: multihost_wordcount.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mpi.sh"
need_mpi "$shmrun"

# reference FILE... -> "word<TAB>count" lines, sorted (as wordcount.sh)
reference() {
	for f in "$@"; do
		tr -c 'A-Za-z0-9' '\n' < "$f"
		echo
	done | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{print $2 "\t" $1}' | sort
}

mkdir -p "$tmp/in"
for i in $(seq 1 30); do
	seq 1 $((i * 150)) | sed "s/^/Word$i w/" > "$tmp/in/gen$i.txt"
done
printf 'no final newline' > "$tmp/in/nofinal.txt"
cp /usr/share/common-licenses/GPL-3 "$tmp/in/" 2> /dev/null || true
name=mhwc_$$

conf() { # hosts workers out ckpt name
	cat <<CONF
[job]
name = $5
hosts = $1
workers = $2
ring_bytes = 64K
checkpoint_dir = $4
checkpoint_interval = 100ms
[read]
op = file_source
path = in
piece_bytes = 4096
rate = 30000
width = 3
[words]
op = tokenize
input = read
width = 3
[count]
op = count
input = words by key
width = 5
[out]
op = file_sink
input = count
path = $3
width = 2
CONF
}
conf 1 4 out/one.tsv ck1 "${name}_1" > "$tmp/one.conf"
conf 2 2 out/two.tsv ck2 "$name" > "$tmp/two.conf"

reference "$tmp"/in/* > "$tmp/ref.tsv"
"$shmrun" "$tmp/one.conf" > "$tmp/log" 2>&1 || fail "one-host run failed"
sort "$tmp"/out/one.tsv.* > "$tmp/one.sorted"
cmp -s "$tmp/ref.tsv" "$tmp/one.sorted" || fail "one-host output differs from the reference"

# the two-host run: both launchers under one mpirun; exit 0 from both
rc=0
mpi_run 2 "$shmrun" "$tmp/two.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "two-host run: mpirun exited $rc"
for h in 0 1; do
	qgrep "2 workers on host $h of 2 (workers $((2 * h)) to $((2 * h + 1)) of 4)" "$tmp/log" &&
		qgrep "gateway of host $h: [1-9][0-9]* rings to or from other hosts" "$tmp/log" || fail "host $h did not start its gateway with its rings"
done
[ "$(grep -c "launcher: job $name done" "$tmp/log")" = 2 ] || fail "not both hosts reported done"
sort "$tmp"/out/two.tsv.* > "$tmp/two.sorted"
[ -s "$tmp/two.sorted" ] || fail "no output from the two-host run"
cmp -s "$tmp/one.sorted" "$tmp/two.sorted" ||
	fail "two-host output differs from the one-host run: $(diff "$tmp/one.sorted" "$tmp/two.sorted" | head -5)"
# each sink instance wrote its file on its own host: two files, each non-empty
for k in 0 1; do
	[ -s "$tmp/out/two.tsv.$k" ] || fail "out/two.tsv.$k is empty"
done

# checkpoints: several epochs completed, the last one has every task's state
# file (both hosts wrote into the shared directory) and verifies
last=$(newest_epoch "$tmp/ck2")
[ "${last:-0}" -ge 3 ] || fail "only ${last:-no} epochs completed (checkpoint_interval 100ms)"
[ -f "$tmp/ck2/ckpt-$last/MANIFEST" ] || fail "ckpt-$last has no MANIFEST"
n=$(ls "$tmp/ck2/ckpt-$last"/*.state | wc -l)
[ "$n" = 13 ] || fail "ckpt-$last holds $n state files, want 13 (3 + 3 + 5 + 2 tasks)"
"$shmrun" ckpt verify "$tmp/ck2" > "$tmp/verify" 2>&1 || fail "ckpt verify: $(cat "$tmp/verify")"
qgrep "a restore would use ckpt-$last" "$tmp/verify" || fail "verify: $(tail -1 "$tmp/verify")"
# each host locked its own lock in the shared directory
[ -f "$tmp/ck2/.lock.h0" ] && [ -f "$tmp/ck2/.lock.h1" ] || fail "no per-host checkpoint_dir locks"

# kill -9 of a worker on host 1 mid-run: host 1 aborts the job, host 0
# stops too, mpirun exits 75 (restartable); the rerun (what `shmrun
# supervise` does) restores the last complete checkpoint on both hosts and
# the output is exact again (the sinks' staged output of the lost epoch is
# not committed twice)
rm -rf "$tmp/ck2" "$tmp"/out/two.tsv.*
sed -i 's/^rate = 30000/rate = 6000/' "$tmp/two.conf"
mpi_run 2 "$shmrun" "$tmp/two.conf" > "$tmp/log" 2>&1 &
launcher=$!
wait_manifest "$tmp/ck2" || fail "no checkpoint before the kill"
victim=$(pgrep -o -f "shmrun: $name worker 2 " || true) # -o: not a snapshot writer just forked
[ -n "$victim" ] || fail "no worker 2 on host 1 to kill"
kill -9 $victim
wait_launcher
[ "$rc" = 75 ] || fail "after kill -9 of a worker: mpirun exited $rc, want 75"
qgrep "host 0: host 1 aborted the job: host 1: worker 2 .* killed by signal 9" "$tmp/log" ||
	fail "host 0 did not name host 1's dead worker"
rc=0
mpi_run 2 "$shmrun" "$tmp/two.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "rerun after the kill: mpirun exited $rc"
[ "$(grep -c "launcher: restoring epoch" "$tmp/log")" = 2 ] ||
	fail "the rerun did not restore a checkpoint on both hosts"
sort "$tmp"/out/two.tsv.* > "$tmp/two.sorted"
cmp -s "$tmp/one.sorted" "$tmp/two.sorted" ||
	fail "output after kill -9 and rerun differs: $(diff "$tmp/one.sorted" "$tmp/two.sorted" | head -5)"

# a stop asked on host 1 (`shmrun stop NAME.h1`, each host's job socket has
# its own name) stops the whole job with a final checkpoint: both hosts say
# "stopped at epoch E" with the same E, exit 0; a rerun resumes and the output
# is exact
rm -rf "$tmp/ck2" "$tmp"/out/two.tsv.*
mpi_run 2 "$shmrun" "$tmp/two.conf" > "$tmp/log" 2>&1 &
launcher=$!
wait_manifest "$tmp/ck2" || fail "no checkpoint before the stop"
"$shmrun" stop "$name.h1" > /dev/null 2>&1 || fail "shmrun stop $name.h1 failed"
wait_launcher
[ "$rc" = 0 ] || fail "stop on host 1: mpirun exited $rc"
[ "$(grep -c '^stopped at epoch' "$tmp/log")" = 2 ] || fail "not both hosts stopped"
[ "$(grep '^stopped at epoch' "$tmp/log" | sort -u | wc -l)" = 1 ] ||
	fail "the hosts stopped at different epochs: $(grep '^stopped at epoch' "$tmp/log")"
rc=0
mpi_run 2 "$shmrun" "$tmp/two.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "resume after the stop: mpirun exited $rc"
sort "$tmp"/out/two.tsv.* > "$tmp/two.sorted"
cmp -s "$tmp/one.sorted" "$tmp/two.sorted" || fail "output after stop and resume differs"

# checkpoint_layout = per_host, checkpoint_dir with {host}: each host writes
# its own tasks' state files into its own directory, rank 0's MANIFEST
# reaches host 1 in the COMMIT and is installed there before host 1 publishes
# the epoch; retention keeps checkpoint_retain (2) on each host
sed -e "s#^checkpoint_dir = ck2#checkpoint_dir = $tmp/ph{host}\ncheckpoint_layout = per_host#" \
	-e 's/^rate = 6000/rate = 30000/' -e 's#out/two.tsv#out/ph.tsv#' "$tmp/two.conf" > "$tmp/ph.conf"
rc=0
mpi_run 2 "$shmrun" "$tmp/ph.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "per_host run: mpirun exited $rc"
sort "$tmp"/out/ph.tsv.* > "$tmp/ph.sorted"
cmp -s "$tmp/one.sorted" "$tmp/ph.sorted" || fail "per_host output differs from the one-host run"
e0=$(newest_epoch "$tmp/ph0")
e1=$(newest_epoch "$tmp/ph1")
[ "${e0:-0}" -ge 3 ] && [ "$e0" = "${e1:-}" ] || fail "per_host: newest epochs ${e0:-none} and ${e1:-none}"
cmp -s "$tmp/ph0/ckpt-$e0/MANIFEST" "$tmp/ph1/ckpt-$e1/MANIFEST" ||
	fail "per_host: host 1's MANIFEST is not rank 0's"
for h in 0 1; do
	[ "$(ls -d "$tmp/ph$h"/ckpt-* | wc -l)" -le 2 ] || fail "per_host: host $h keeps $(ls "$tmp/ph$h")"
done
# host 1 runs read.2, words.2, count.3, count.4, out.1 (placement ⌊i·4/n⌋ / 2)
n0=$(ls "$tmp/ph0/ckpt-$e0"/*.state | wc -l)
n1=$(ls "$tmp/ph1/ckpt-$e1"/*.state | wc -l)
[ $((n0 + n1)) = 13 ] && [ "$n1" -gt 0 ] && [ "$n0" -gt 0 ] ||
	fail "per_host: $n0 + $n1 state files, want 13 split between the hosts"

# nothing left running: no worker, launcher or mpirun of this job
sleep 0.2
if pgrep -f "$name" > /dev/null; then
	fail "processes left: $(pgrep -af "$name")"
fi
echo "multihost_wordcount: ok (epochs up to $last)"
