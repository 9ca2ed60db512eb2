#!/usr/bin/env bash
# tests/integration/ckpt_dirs.sh SHMRUN: what shmrun does with the ckpt-N
# directories of checkpoint_dir.
#   1. it removes only files it made, never through a symlink: a ckpt-N that
#      is a symlink to a user's directory, or that holds a user's file, is left
#      alone (and its target untouched), reported once, never written into.
#   2. new epochs number past every directory there, whatever the restored
#      epoch (none, or an older one): no epoch stalls to checkpoint_timeout.
#   3. `ckpt verify` on the directory of a running job with retention says no
#      damage that is not there, and names the live run holding .lock.
#   4. retention counts only restorable checkpoints: a damaged newer one does
#      not take the place of a good older one.
#   5. a late snapshot writer of an aborted epoch still running when the job
#      ends removes what it wrote: no directory of that epoch is left.
#   6. an epoch timeout names no worker without a late task (idle workers).
#   7. a snapshot writer (a fork of its worker) does not carry the worker's
#      process title: one process per "shmrun: JOB worker N", the writer
#      titled "shmrun: JOB snapshot writer of worker N epoch E", comm
#      "shmrun snap" (a pgrep for a worker found two pids, CI 2026-12-02).
set -euo pipefail
shmrun=$(realpath "${1:?usage: ckpt_dirs.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
need_fault_injection "$shmrun" # SHMRUN_TEST_SLOW_SNAPSHOT
stopped=
trap '[ -n "$stopped" ] && kill -CONT $stopped 2> /dev/null; cleanup' EXIT

incomplete() { # dir: the ckpt-N directories without a MANIFEST
	for d in "$1"/ckpt-*; do
		[ -d "$d" ] && [ ! -L "$d" ] && [ ! -e "$d/MANIFEST" ] && basename "$d"
	done
	return 0
}

# ---- 1: a symlink and a user's file in ckpt-N -------------------------------
mkdir -p "$tmp/store" "$tmp/victim" "$tmp/store/ckpt-7"
echo precious > "$tmp/victim/keep.txt"
ln -s ../victim "$tmp/store/ckpt-3"
echo mine > "$tmp/store/ckpt-7/notes.txt"
cat > "$tmp/s.conf" <<CONF
[job]
checkpoint_dir = store
checkpoint_interval = 50ms
checkpoint_timeout = 30s
checkpoint_retain = 1
restart_attempts = 0
[g]
op = sequence
count = 300
rate = 1000
[o]
op = file_sink
input = g
path = s.tsv
CONF
(cd "$tmp" && timeout 60 "$shmrun" s.conf) 2> "$tmp/log" > /dev/null || fail "symlinked ckpt-3: exit $?"
[ "$(cat "$tmp/victim/keep.txt" 2> /dev/null)" = precious ] || fail "victim/keep.txt, behind the symlink ckpt-3, was removed"
[ "$(ls "$tmp/victim")" = keep.txt ] || fail "something was written through the symlink: $(ls "$tmp/victim")"
[ -L "$tmp/store/ckpt-3" ] || fail "the symlink ckpt-3 was removed"
[ "$(cat "$tmp/store/ckpt-7/notes.txt" 2> /dev/null)" = mine ] || fail "ckpt-7/notes.txt, a user's file, was removed"
grep -q "ckpt-3 has no MANIFEST but is left alone: ckpt-3 is a symbolic link" "$tmp/log" || fail "ckpt-3 not reported"
grep -q "ckpt-7 has no MANIFEST but is left alone: ckpt-7/notes.txt was not made by shmrun" "$tmp/log" || fail "ckpt-7 not reported"
grep -q "removed .* incomplete" "$tmp/log" && fail "a user's directory was counted as removed"
[ "$(wc -l < "$tmp/s.tsv")" -eq 300 ] || fail "$(wc -l < "$tmp/s.tsv") lines, want 300"
for d in "$tmp"/store/ckpt-*; do
	n=${d##*ckpt-}
	[ "$n" -gt 7 ] || [ "$n" = 3 ] || [ "$n" = 7 ] || fail "an epoch wrote into ckpt-$n, not past the existing directories"
done
echo "ok 1: symlinked and user directories left alone, reported"

# ---- 2: a leftover incomplete directory does not stall the first epoch -------
cat > "$tmp/f.conf" <<CONF
[job]
checkpoint_dir = fresh
checkpoint_interval = 50ms
checkpoint_timeout = 30s
restart_attempts = 0
[g]
op = sequence
count = 3
[o]
op = file_sink
input = g
path = f.tsv
CONF
for i in $(seq 1 15); do
	rm -rf "$tmp/fresh" "$tmp/f.tsv"
	mkdir -p "$tmp/fresh/ckpt-1"
	start=$SECONDS
	(cd "$tmp" && timeout 60 "$shmrun" f.conf) 2> "$tmp/log" > /dev/null || fail "run $i with a leftover ckpt-1: exit $?"
	[ $((SECONDS - start)) -lt 20 ] || fail "run $i took $((SECONDS - start)) s: an epoch stalled"
	grep -q "epoch [0-9]* aborted\|restart [0-9]" "$tmp/log" && fail "run $i: an epoch aborted"
	[ "$(sort -u "$tmp/f.tsv" | wc -l)" -eq 3 ] || fail "run $i: output $(wc -l < "$tmp/f.tsv") lines"
done
# restored from an older epoch with a newer incomplete directory
cat > "$tmp/r.conf" <<CONF
[job]
checkpoint_dir = older
checkpoint_interval = 50ms
checkpoint_timeout = 30s
restart_attempts = 0
[g]
op = sequence
count = 1500
rate = 1000
[o]
op = file_sink
input = g
path = r.tsv
CONF
(cd "$tmp" && exec "$shmrun" r.conf) 2> "$tmp/log" > /dev/null &
launcher=$!
wait_started || fail "no start"
sleep 0.5
kill -TERM $launcher
wait $launcher || fail "stop: exit $?"
launcher=
n=$(ls "$tmp/older" | grep ckpt- | sed 's/ckpt-//' | sort -n | tail -1)
mkdir "$tmp/older/ckpt-$((n + 5))"
(cd "$tmp" && timeout 60 "$shmrun" r.conf) 2> "$tmp/log" > /dev/null || fail "resume past ckpt-$((n + 5)): exit $?"
grep -q "restoring epoch $n " "$tmp/log" || fail "did not restore epoch $n"
grep -q "epoch [0-9]* aborted\|restart [0-9]" "$tmp/log" && fail "resume: an epoch aborted"
[ "$(sort -u "$tmp/r.tsv" | wc -l)" -eq 1500 ] && [ "$(wc -l < "$tmp/r.tsv")" -eq 1500 ] || fail "resume: $(wc -l < "$tmp/r.tsv") lines, want 1500 distinct"
echo "ok 2: leftover incomplete directories (fresh start, older restore) do not stall an epoch"

# ---- 3: ckpt verify on a running job with retention -------------------------
cat > "$tmp/v.conf" <<CONF
[job]
workers = 2
checkpoint_dir = live
checkpoint_interval = 10ms
checkpoint_timeout = 30s
checkpoint_retain = 2
[g]
op = sequence
count = 100000
keys = 1000
rate = 20000
width = 2
[c]
op = count
input = g by key
width = 2
[o]
op = file_sink
input = c
path = v.tsv
CONF
(cd "$tmp" && exec "$shmrun" v.conf) 2> "$tmp/log" > /dev/null &
launcher=$!
wait_started || fail "no start"
wait_manifest "$tmp/live" 200 || true
checks=0 live=0
while kill -0 $launcher 2> /dev/null && [ $checks -lt 40 ]; do
	set +e
	out=$("$shmrun" ckpt verify "$tmp/live" 2>&1)
	rc=$?
	set -e
	kill -0 $launcher 2> /dev/null || break
	[ $rc -eq 0 ] || fail "ckpt verify on a running job: exit $rc: $out"
	echo "$out" | qgrep "damaged" && fail "ckpt verify reports damage on a running job: $out"
	echo "$out" | qgrep "a live run (pid $launcher) holds" && live=$((live + 1))
	checks=$((checks + 1))
done
[ $checks -ge 5 ] || fail "only $checks checks ran while the job ran: the test is void"
[ $live -ge 1 ] || fail "ckpt verify never named the live run (pid $launcher): $out"
kill -TERM $launcher 2> /dev/null || true
wait $launcher || true
launcher=
"$shmrun" ckpt verify "$tmp/live" > "$tmp/vout" 2>&1 || fail "verify after the stop: $(cat "$tmp/vout")"
grep -q "a live run" "$tmp/vout" && fail "a live run named after the job ended"
echo "ok 3: $checks verifies of a running job: no false damage, the live run named"

# ---- 4: retention keeps good checkpoints, not damaged ones ------------------
cat > "$tmp/k.conf" <<CONF
[job]
checkpoint_dir = keep
checkpoint_interval = 3600s
checkpoint_timeout = 30s
checkpoint_retain = 2
restart_attempts = 0
[g]
op = sequence
count = 1500
rate = 1000
[o]
op = file_sink
input = g
path = k.tsv
CONF
(cd "$tmp" && exec "$shmrun" k.conf) 2> "$tmp/log" > /dev/null &
launcher=$!
wait_started || fail "no start"
sleep 0.5
kill -TERM $launcher
wait $launcher || fail "stop: exit $?"
launcher=
n=$(ls "$tmp/keep" | grep ckpt- | sed 's/ckpt-//' | sort -n | tail -1)
[ -e "$tmp/keep/ckpt-$n/MANIFEST" ] || fail "no checkpoint after the stop"
# a damaged newer checkpoint: a MANIFEST, a state file cut short
mkdir "$tmp/keep/ckpt-$((n + 1))"
cp "$tmp/keep/ckpt-$n"/* "$tmp/keep/ckpt-$((n + 1))/"
sed -i "s/^epoch $n\$/epoch $((n + 1))/" "$tmp/keep/ckpt-$((n + 1))/MANIFEST"
for f in "$tmp/keep/ckpt-$((n + 1))"/*.state; do truncate -s 10 "$f"; done
(cd "$tmp" && timeout 60 "$shmrun" k.conf) 2> "$tmp/log" > /dev/null || fail "resume: exit $?"
[ -e "$tmp/keep/ckpt-$n/MANIFEST" ] || fail "retention removed the good ckpt-$n and kept the damaged ckpt-$((n + 1)): $(ls "$tmp/keep")"
ok=$("$shmrun" ckpt list "$tmp/keep" | grep -c " listed \| ok " || true)
set +e; "$shmrun" ckpt verify "$tmp/keep" > "$tmp/vout" 2>&1; set -e
[ "$(grep -c " ok " "$tmp/vout")" -eq 2 ] || fail "want 2 restorable checkpoints: $(cat "$tmp/vout")"
echo "ok 4: retention kept 2 good checkpoints past a damaged one"

# ---- 5: a late writer of an aborted epoch outlives the job's work -----------
cat > "$tmp/l.conf" <<CONF
[job]
checkpoint_dir = late
checkpoint_interval = 200ms
checkpoint_timeout = 500ms
checkpoint_retain = 100
restart_attempts = 0
[g]
op = sequence
count = 900
rate = 400
[o]
op = file_sink
input = g
path = l.tsv
CONF
# the writers of epoch 1 (started at 0.2 s) wait 1.5 s (it aborts at 0.7 s),
# create its directory and file, and wait 1.5 s more: the job ends (~2.3 s)
# meanwhile (retention, with so large a retain, removes none of it)
(cd "$tmp" && SHMRUN_TEST_SLOW_SNAPSHOT=1:1500 timeout 60 "$shmrun" l.conf) 2> "$tmp/log" > /dev/null || fail "late writer: exit $?"
grep -q "epoch 1 aborted" "$tmp/log" || fail "epoch 1 did not abort: the test is void"
[ -z "$(incomplete "$tmp/late")" ] || fail "an aborted epoch's directory is left: $(incomplete "$tmp/late")"
echo "ok 5: a late writer of an aborted epoch removed what it wrote"

# ---- 6: an epoch timeout names only workers that hold it up ------------------
cat > "$tmp/w.conf" <<CONF
[job]
workers = 3
checkpoint_dir = idle
checkpoint_interval = 100ms
checkpoint_timeout = 1s
[g]
op = sequence
count = 100000
rate = 2000
width = 2
[o]
op = file_sink
input = g
width = 2
path = w.tsv
CONF
"$shmrun" plan "$tmp/w.conf" | qgrep " 2  *[0-9]*  *\[" && fail "worker 2 has a task: the test is void"
(cd "$tmp" && exec "$shmrun" w.conf) 2> "$tmp/log" > /dev/null &
launcher=$!
wait_manifest "$tmp/idle" 300 || true
pids=$(pgrep -P $launcher | sort -n)
[ "$(echo "$pids" | wc -l)" -ge 3 ] || fail "workers not found: $pids"
w1=$(echo "$pids" | sed -n 2p) w2=$(echo "$pids" | sed -n 3p)
kill -STOP $w1 $w2
stopped="$w1 $w2"
for _ in $(seq 1 200); do
	grep -q "aborted: not complete within checkpoint_timeout" "$tmp/log" && break
	sleep 0.1
done
kill -CONT $w1 $w2
stopped=
line=$(grep -m1 "aborted: not complete within checkpoint_timeout" "$tmp/log") || fail "no epoch timed out"
echo "$line" | qgrep "worker 1 (pid $w1, " || fail "the stopped worker 1 is not named: $line"
echo "$line" | qgrep "worker 2 (" && fail "the idle worker 2 (no tasks) is named: $line"
kill -TERM $launcher
wait $launcher || fail "stop after SIGCONT: exit $?"
launcher=
echo "ok 6: $line" | cut -c1-250

# ---- 7: snapshot writers name themselves, never as their worker -------------
cat > "$tmp/titles.conf" <<CONF
[job]
name = ttl
workers = 2
checkpoint_dir = titles
checkpoint_interval = 200ms
checkpoint_timeout = 30s
[g]
op = sequence
count = 4000
rate = 1000
width = 2
[o]
op = file_sink
input = g
width = 2
path = t.tsv
CONF
# epoch 1's writers sleep 3 s before they write: found while they run
(cd "$tmp" && SHMRUN_TEST_SLOW_SNAPSHOT=1:3000 exec "$shmrun" "$tmp/titles.conf") 2> "$tmp/log" > /dev/null &
launcher=$!
writers=
for _ in $(seq 1 200); do
	writers=$(for w in $(pgrep -P $launcher); do pgrep -x -P "$w" "shmrun snap"; done || true)
	[ "$(echo "$writers" | grep -c .)" = 4 ] && break
	sleep 0.05
done
[ "$(echo "$writers" | grep -c .)" = 4 ] || fail "7: want 4 snapshot writers of epoch 1 (2 tasks on each of 2 workers), found: $writers"
for w in 0 1; do
	n=$(pgrep -c -f "^shmrun: ttl worker $w " || true)
	[ "$n" = 1 ] || fail "7: $n processes titled as worker $w: $(pgrep -af "^shmrun: ttl ")"
done
for p in $writers; do
	args=$(ps -o args= -p "$p") || continue
	echo "$args" | grep -Eq "^shmrun: ttl snapshot writer of worker [01] epoch 1" ||
		fail "7: writer $p is titled '$args'"
	par=$(ps -o ppid= -p "$p" | tr -d ' ')
	ps -o args= -p "$par" | qgrep "^shmrun: ttl worker " || fail "7: writer $p is not a worker's child"
done
wait $launcher || fail "7: exit $?"
launcher=
echo "ok 7: snapshot writers are titled as writers, one process per worker title"
