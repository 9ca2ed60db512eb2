#!/usr/bin/env bash
# tests/integration/jobsock.sh SHMRUN: the job's socket (issue 13 §2, §8):
# `shmrun ps` (text and --json) shows a running job's name, launcher pid,
# workers, state, conf; workers carry their process titles; `shmrun stop JOB`
# stops a checkpointed job at a final checkpoint (exit 0) and the rerun
# resumes from it; a job without checkpoint_dir ends by SIGTERM (exit 1);
# --timeout gives up on a job that cannot stop yet; a second job of the same
# name is refused naming the first one's pid; a kill -9'd launcher's socket
# is stale (ps leaves it out, stop says so) and the next run replaces it; the
# socket and lock go on every way out (done, stopped, signal, failure); modes
# 0600/0700 under umask 000; unknown jobs and usage errors; a runtime
# directory too long for sun_path; a job without counters.
set -euo pipefail
shmrun=${1:?usage: jobsock.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
run="$XDG_RUNTIME_DIR/shmrun"

# conf DIR COUNT RATE CKPT(yes|no): DIR/wc.conf, a job named wc (its file
# name), 2 workers, COUNT records at RATE per second, counted per key.
conf() {
	mkdir -p "$1"
	{
		printf '[job]\nworkers = 2\n'
		[ "$4" = yes ] && printf 'checkpoint_dir = ckpt\ncheckpoint_interval = 200ms\n'
		printf '[read]\nop = sequence\ncount = %s\nkeys = 7\nrate = %s\n' "$2" "$3"
		printf '[count]\nop = count\ninput = read by key\nwidth = 2\n'
		printf '[out]\nop = file_sink\ninput = count\npath = out/r.tsv\n'
	} > "$1/wc.conf"
}
# start DIR: run DIR/wc.conf in the background ($launcher), stderr in DIR/log.
start() {
	"$shmrun" "$1/wc.conf" 2> "$1/log" &
	launcher=$!
}
# listed NAME: whether `shmrun ps` lists job NAME.
listed() {
	"$shmrun" ps | awk -v n="$1" 'NR > 1 && $1 == n { f = 1 } END { exit !f }'
}
# wait_listed NAME: until ps lists NAME, at most 60 s, while $launcher lives.
wait_listed() {
	for _ in $(seq 1200); do
		listed "$1" && return 0
		kill -0 "$launcher" 2> /dev/null || return 1
		sleep 0.05
	done
	return 1
}
# finish: wait for $launcher; its exit status in $lrc.
finish() {
	set +e
	wait "$launcher"
	lrc=$?
	set -e
	launcher=
}
# gone: JOB.sock and JOB.lock of wc are removed.
gone() {
	[ ! -e "$run/wc.sock" ] && [ ! -e "$run/wc.lock" ]
}

# --- nothing runs: a header, an empty array, exit 0 ---------------------------
"$shmrun" ps > "$tmp/ps" || fail "ps with no job: exit status"
[ "$(wc -l < "$tmp/ps")" -eq 1 ] && head -1 "$tmp/ps" | qgrep "^JOB  *PID  *WORKERS  *UPTIME  *STATE" ||
	fail "ps with no job: expected the header alone, got: $(cat "$tmp/ps")"
[ "$("$shmrun" ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin))')" = "[]" ] ||
	fail "ps --json with no job: not []"
echo "ok ps with no job"

# --- usage errors: exit 2 ------------------------------------------------------
set +e
for args in "stop" "stop a b" "stop --timeout 0 wc" "stop --timeout x wc" "stop --bogus wc" \
	"stop a/b" "ps --bogus" "ps wc"; do
	# shellcheck disable=SC2086
	"$shmrun" $args > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "shmrun $args: exit $rc, expected 2"
	qgrep "Try 'shmrun --help'" "$tmp/err" || fail "shmrun $args: no pointer to --help"
done
"$shmrun" stop nope 2> "$tmp/err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "stop of an unknown job with none running: exit $rc"
qgrep "no job named nope is running (running: none)" "$tmp/err" || fail "stop nope: $(cat "$tmp/err")"
echo "ok usage errors"

# --- a job name that cannot name a file: refused at its line, by check and run --
mkdir -p "$tmp/dots"
for n in . ..; do
	printf '[job]\nname = %s\n[read]\nop = sequence\ncount = 10\n[out]\nop = file_sink\ninput = read\npath = o.tsv\n' \
		"$n" > "$tmp/dots/t.conf"
	for cmd in check run; do
		set +e
		"$shmrun" $cmd "$tmp/dots/t.conf" > /dev/null 2> "$tmp/err"
		rc=$?
		set -e
		[ $rc -eq 2 ] && qgrep "t.conf:2: name = '$n' in \[job\] cannot be '.' or '..'" "$tmp/err" ||
			fail "name = $n ($cmd): exit $rc: $(cat "$tmp/err")"
	done
done
[ ! -e "$tmp/dots/o.tsv" ] && [ -z "$(ls -A "$run" 2> /dev/null)" ] || fail "name = ..: something was created"
# the default name of a file named ..conf is "job", not ".."
sed '/^name/d' "$tmp/dots/t.conf" > "$tmp/dots/..conf"
"$shmrun" plan "$tmp/dots/..conf" > "$tmp/plan"
head -1 "$tmp/plan" | qgrep "^job job: " || fail "the default name of ..conf: $(head -1 "$tmp/plan")"
echo "ok [job] name . and .. are refused at their line"

# --- ps of a running job; process titles ----------------------------------------
a="$tmp/a"
conf "$a" 200000 2000 yes
start "$a"
wait_listed wc || fail "ps never listed the running job wc"
"$shmrun" ps --json > "$tmp/ps.json"
python3 -m json.tool < "$tmp/ps.json" > /dev/null || fail "ps --json does not parse"
python3 - "$tmp/ps.json" "$launcher" "$a/wc.conf" << 'EOF' || fail "ps --json fields: $(cat "$tmp/ps.json")"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
assert r["job"] == "wc", r
assert r["pid"] == int(sys.argv[2]), r
assert r["counters"] is True, r
assert r["workers"] == 2, r
assert r["state"] == "running", r
assert r["conf"] == sys.argv[3], r
assert r["restarts"] == 0, r
assert 0 < r["uptime_seconds"] < 120, r
assert "last_checkpoint" in r, r
EOF
"$shmrun" ps > "$tmp/ps"
grep -Eq "^wc +$launcher +2 +[0-9][0-9a-z.]* +running +0 " "$tmp/ps" ||
	fail "ps text: no row 'wc $launcher 2 UPTIME running 0': $(cat "$tmp/ps")"
[ "$(stat -c %a "$run/wc.sock")" = 600 ] && [ "$(stat -c %a "$run/wc.lock")" = 600 ] &&
	[ "$(stat -c %a "$run")" = 700 ] || fail "modes: socket, lock, directory"
[ "$(cat "$run/wc.lock")" = "$launcher" ] || fail "wc.lock does not hold the launcher's pid"
for w in 0 1; do
	cpu=$(nth_cpu $((w + 1)))
	[ -n "$cpu" ] || cpu=$(nth_cpu 1) # one CPU: both workers on it
	found=
	for p in $(pgrep -P "$launcher"); do
		if [ "$(ps -o args= -p "$p")" = "shmrun: wc worker $w cpu $cpu" ]; then
			found=$p
		fi
	done
	[ -n "$found" ] || fail "no worker titled 'shmrun: wc worker $w cpu $cpu': $(ps -o pid=,args= --ppid "$launcher")"
	[ "$(cat "/proc/$found/comm")" = "shmrun w$w wc" ] || fail "worker $w comm: $(cat "/proc/$found/comm")"
done
[ "$(ps -o args= -p "$launcher")" = "$shmrun $a/wc.conf" ] || fail "the launcher's title changed"
echo "ok ps and process titles"

# --- ps: the newest checkpoint, once worker 0 publishes it (metrics.h) --------
# A build whose workers do not publish the checkpoint line yet shows "-"
# (null): said in a note, and stop then says "stopped" without the epoch.
wait_manifest "$a/ckpt" || fail "no checkpoint within 30 s"
published=
end=$((SECONDS + 5))
while [ $SECONDS -lt $end ]; do
	"$shmrun" ps --json > "$tmp/ps.json"
	if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[0]["last_checkpoint"] is None)' \
		"$tmp/ps.json"; then
		published=1
		break
	fi
	sleep 0.1
done
if [ -n "$published" ]; then
	python3 - "$tmp/ps.json" "$a/ckpt" << 'EOF' || fail "ps --json last_checkpoint: $(cat "$tmp/ps.json")"
import json, os, sys
c = json.load(open(sys.argv[1]))[0]["last_checkpoint"]
complete = [int(d[5:]) for d in os.listdir(sys.argv[2])
            if d.startswith("ckpt-") and os.path.exists(os.path.join(sys.argv[2], d, "MANIFEST"))]
assert 1 <= c["epoch"] <= max(complete) + 1, (c, complete)
assert 0 <= c["age_seconds"] < 30, c
EOF
	"$shmrun" ps > "$tmp/ps"
	grep -Eq "^wc +$launcher +2 +[0-9][0-9a-z.]* +running +0 +[1-9][0-9]* +[0-9][0-9a-z.]*$" "$tmp/ps" ||
		fail "ps text: no checkpoint epoch and age: $(cat "$tmp/ps")"
	echo "ok ps shows the newest checkpoint"
else
	echo "note: this build's workers publish no checkpoint line: ps shows none"
fi

# --- a second job named wc: refused naming the first's pid, nothing touched ----
b="$tmp/b"
conf "$b" 1000 1000000 yes
set +e
"$shmrun" "$b/wc.conf" 2> "$tmp/log"
rc=$?
set -e
[ $rc -eq 2 ] || fail "a second job named wc: exit $rc, expected 2"
qgrep "$b/wc.conf: job wc is already running (pid $launcher); stop it (shmrun stop wc) or give this one another \[job\] name; nothing was started" "$tmp/log" ||
	fail "a second job named wc: the refusal does not name pid $launcher"
kill -0 "$launcher" || fail "the first job died of the second's start"
[ "$(cat "$run/wc.lock")" = "$launcher" ] && [ -S "$run/wc.sock" ] || fail "the first job's socket or lock was touched"
[ "$("$shmrun" ps --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["pid"])')" = "$launcher" ] ||
	fail "after the refusal, ps does not reach the first job"
[ ! -e "$b/out" ] && [ ! -e "$b/ckpt" ] || fail "the refused job created its output or checkpoint_dir"
echo "ok a second job of the same name is refused"

# --- stop with a final checkpoint; the rerun resumes ----------------------------
set +e
"$shmrun" stop nope 2> "$tmp/err"
rc=$?
set -e
[ $rc -eq 1 ] && qgrep "no job named nope is running (running: wc)" "$tmp/err" ||
	fail "stop of an unknown job: exit $rc, $(cat "$tmp/err")"
wait_manifest "$a/ckpt" || fail "no checkpoint before the stop"
"$shmrun" stop wc > "$tmp/stop.out" 2> "$tmp/stop.err" || fail "stop wc: exit $?: $(cat "$tmp/stop.err")"
kill -0 "$launcher" 2> /dev/null && fail "stop returned while the launcher runs"
finish
cp "$a/log" "$tmp/log"
[ $lrc -eq 0 ] || fail "the stopped job exited $lrc"
epoch=$(sed -n 's/^stopped at epoch \([0-9]*\)$/\1/p' "$a/log")
[ -n "$epoch" ] && [ "$epoch" -ge 1 ] && [ -f "$a/ckpt/ckpt-$epoch/MANIFEST" ] ||
	fail "no final checkpoint (epoch '$epoch')"
qgrep "a stop was requested over its socket" "$a/log" || fail "the launcher did not log the request"
qgrep "shmrun stop: taking a final checkpoint, then stopping (shmrun stop again to stop at once)" "$a/log" &&
	! qgrep "Terminated" "$a/log" || fail "the stop is logged as a signal: $(grep -i "stop" "$a/log")"
# the final epoch, from the block (without it where workers do not publish it)
if [ -n "$published" ]; then
	grep -qx "job wc stopped at epoch $epoch" "$tmp/stop.out" || fail "stop wc said: $(cat "$tmp/stop.out")"
else
	grep -qx "job wc stopped" "$tmp/stop.out" || fail "stop wc said: $(cat "$tmp/stop.out")"
fi
gone || fail "socket or lock left after a stop"
sed -i 's/^rate = .*/rate = 1000000/' "$a/wc.conf"
"$shmrun" "$a/wc.conf" 2> "$tmp/log" > /dev/null || fail "the rerun failed"
qgrep "restoring epoch $epoch from" "$tmp/log" || fail "the rerun did not resume from epoch $epoch"
[ "$(cat "$a"/out/r.tsv* | awk '{ n++; s += $2 } END { print n, s }')" = "7 200000" ] ||
	fail "stop and resume: counts are not 7 keys summing to 200000"
gone || fail "socket or lock left after a job ended by itself"
echo "ok stop at a final checkpoint, resumed"

# --- stop without checkpoint_dir: SIGTERM, exit 1 --------------------------------
c="$tmp/c"
conf "$c" 100000000 2000 no
start "$c"
wait_listed wc || fail "job c never listed"
set +e
"$shmrun" stop wc > "$tmp/stop.out" 2>&1
rc=$?
set -e
finish
[ $rc -eq 1 ] && [ $lrc -eq 143 ] || fail "stop without checkpoints: stop exit $rc, job $lrc"
qgrep "job wc ended by Terminated without a final checkpoint (it has no checkpoint_dir) (exit status 143)" \
	"$tmp/stop.out" || fail "stop without checkpoints said: $(cat "$tmp/stop.out")"
gone || fail "socket or lock left after a job died by SIGTERM"
echo "ok stop without checkpoints"

# --- a failed job (a worker killed, no restarts) removes them too -----------------
start "$c"
wait_listed wc || fail "job c never listed (2)"
kill -9 "$(first_child "$launcher")"
finish
[ $lrc -eq 1 ] || fail "a job whose worker was killed exited $lrc"
gone || fail "socket or lock left after a failure"
echo "ok failure removes the socket"

# --- --timeout: a stop that cannot finish yet --------------------------------------
rm -rf "$a/ckpt" "$a/out"
sed -i 's/^rate = .*/rate = 2000/' "$a/wc.conf"
start "$a"
wait_listed wc || fail "job a never listed (timeout)"
wait_manifest "$a/ckpt" || fail "no checkpoint (timeout)"
w1=$(pgrep -P "$launcher" | tail -1)
kill -STOP "$w1"
set +e
"$shmrun" stop --timeout 1 wc > /dev/null 2> "$tmp/err"
rc=$?
set -e
kill -CONT "$w1"
[ $rc -eq 1 ] && qgrep "job wc (pid $launcher) has not exited within 1 s" "$tmp/err" ||
	fail "stop --timeout 1 of a job that cannot stop: exit $rc: $(cat "$tmp/err")"
finish
[ $lrc -eq 0 ] || fail "the job stopped after SIGCONT exited $lrc"
qgrep "^stopped at epoch [1-9]" "$a/log" || fail "no final checkpoint after SIGCONT"
gone || fail "socket or lock left (timeout)"
echo "ok stop --timeout"

# --- kill -9 of the launcher: a stale socket, replaced by the next run ----------
rm -rf "$a/ckpt" "$a/out"
(
	umask 000
	exec "$shmrun" "$a/wc.conf" 2> "$a/log"
) &
launcher=$!
wait_listed wc || fail "job a never listed (umask 000)"
[ "$(stat -c %a "$run/wc.sock")" = 600 ] && [ "$(stat -c %a "$run/wc.lock")" = 600 ] ||
	fail "under umask 000: socket $(stat -c %a "$run/wc.sock"), lock $(stat -c %a "$run/wc.lock")"
workers=$(pgrep -P "$launcher" | tr '\n' ' ')
kill -9 "$launcher"
finish
for _ in $(seq 200); do
	alive=0
	for p in $workers; do kill -0 "$p" 2> /dev/null && alive=1; done
	[ $alive = 0 ] && break
	sleep 0.05
done
[ $alive = 0 ] || fail "workers outlived their killed launcher"
[ -S "$run/wc.sock" ] || fail "kill -9 left no socket behind (test premise)"
listed wc && fail "ps lists a job whose launcher was killed"
set +e
"$shmrun" stop wc 2> "$tmp/err"
rc=$?
set -e
[ $rc -eq 1 ] && qgrep "job wc is not running: $run/wc.sock was left by a launcher that was killed" "$tmp/err" ||
	fail "stop of a killed job: exit $rc: $(cat "$tmp/err")"
start "$a"
wait_listed wc || fail "the rerun after kill -9 never listed"
qgrep "job wc: replaced the socket $run/wc.sock left by a launcher that is gone" "$a/log" ||
	fail "the rerun did not say it replaced the stale socket"
[ "$(cat "$run/wc.lock")" = "$launcher" ] || fail "the rerun's lock does not hold its pid"
"$shmrun" stop wc > /dev/null || fail "stop of the rerun"
finish
[ $lrc -eq 0 ] || fail "the rerun exited $lrc"
gone || fail "socket or lock left after the rerun"
echo "ok kill -9: stale socket detected and replaced"

# --- a runtime directory too long for sun_path; a job without counters ----------
long="$tmp/$(printf 'r%.0s' $(seq 120))"
mkdir -m 700 "$long"
export XDG_RUNTIME_DIR="$long"
rm -rf "$a/ckpt" "$a/out"
SHMRUN_COUNTERS=off "$shmrun" "$a/wc.conf" 2> "$a/log" &
launcher=$!
wait_listed wc || fail "a job under a long XDG_RUNTIME_DIR never listed"
[ -S "$long/shmrun/wc.sock" ] || fail "no socket in the long directory"
"$shmrun" ps > "$tmp/ps"
grep -Eq "^wc +$launcher +- +- +- " "$tmp/ps" || fail "ps of a job without counters: $(cat "$tmp/ps")"
"$shmrun" ps --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r == [{"job": "wc", "pid": int(sys.argv[1]), "counters": False}], r' "$launcher" ||
	fail "ps --json of a job without counters"
set +e
"$shmrun" stop wc > "$tmp/stop.out" 2>&1
rc=$?
set -e
finish
[ $rc -eq 1 ] && [ $lrc -eq 0 ] && qgrep "job wc ended (its exit status is unknown" "$tmp/stop.out" ||
	fail "stop of a job without counters: stop $rc, job $lrc: $(cat "$tmp/stop.out")"
[ ! -e "$long/shmrun/wc.sock" ] && [ ! -e "$long/shmrun/wc.lock" ] || fail "long directory: left behind"
echo "ok long runtime directory, job without counters"

# --- a job whose name starts with '-': stop -- -NAME ---------------------------
conf "$tmp/dash" 100000000 2000 yes
sed -i '1a name = -dash' "$tmp/dash/wc.conf"
start "$tmp/dash"
wait_listed -dash || fail "job -dash never listed: $(cat "$tmp/dash/log")"
set +e
"$shmrun" stop -dash 2> "$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] && qgrep -- "shmrun stop -- -NAME" "$tmp/err" ||
	fail "stop -dash: exit $rc (want 2 and the hint): $(cat "$tmp/err")"
"$shmrun" stop -- -dash > "$tmp/stop.out" 2>&1 || fail "stop -- -dash: exit $?: $(cat "$tmp/stop.out")"
finish
[ $lrc -eq 0 ] && qgrep "job -dash stopped at epoch" "$tmp/stop.out" ||
	fail "stop -- -dash: job exit $lrc: $(cat "$tmp/stop.out")"
echo "ok a job named -dash stops with stop -- -dash"
