#!/usr/bin/env bash
# tests/integration/supervise.sh SHMRUN: `shmrun supervise`, the outer restart
# loop of multi-host jobs (runtime/supervise.c, docs/multihost.md "Failures").
# A fake COMMAND (a script that counts its runs) ends in each way that matters:
#   - exit 75 twice, then 0: exit 0 after exactly 2 restarts, a line each;
#   - exit 3: exit 3 at once, one run;
#   - always 75 with --restarts 2: exit 75 after 3 runs, "giving up";
#   - killed by SIGKILL, exit 137 (mpirun's report of a rank kill -9'd):
#     restarted; exit 143 (SIGTERM) and exit 1: not;
#   - SIGTERM to supervise while COMMAND runs: forwarded to COMMAND's group
#     (COMMAND and its background child gone), no restart, supervise ends as
#     COMMAND did (killed by SIGTERM; or exit 0 when COMMAND stopped cleanly);
#   - SIGTERM during the backoff: no rerun, killed by SIGTERM;
#   - what COMMAND leaves in its group is killed before the rerun;
#   - usage errors (exit 2), --help, a COMMAND that cannot run (127, 126);
# then, under real mpirun (tests/integration/mpi.sh; skipped without one), a
# rank kill -9'd (mpirun exits 137) and a rank exiting 75 are rerun, and a
# SIGTERM to supervise ends mpirun and every rank without a rerun.
set -euo pipefail
shmrun=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/mpi.sh"

# fake.sh MODE: appends its pid to $tmp/runs, then behaves as MODE says
cat > "$tmp/fake.sh" << 'EOF'
#!/usr/bin/env bash
echo $$ >> "$FAKE_DIR/runs"
n=$(wc -l < "$FAKE_DIR/runs")
case $1 in
twice75) [ "$n" -le 2 ] && exit 75; exit 0 ;;
always75) exit 75 ;;
exit) exit "$2" ;;
kill9once) [ "$n" -le 1 ] && kill -9 $$; exit 0 ;;
exit137once) [ "$n" -le 1 ] && exit 137; exit 0 ;;
hang)
	sleep 300 &
	echo $! > "$FAKE_DIR/child"
	wait
	;;
clean_stop) # as shmrun with checkpoint_dir: a stop signal, a final checkpoint, exit 0
	trap 'echo stopped > "$FAKE_DIR/stopped"; exit 0' TERM HUP
	echo ready > "$FAKE_DIR/ready"
	while :; do sleep 0.05; done
	;;
leave75once) # leaves a process in its group, then asks for a rerun
	if [ "$n" -le 1 ]; then
		sleep 300 &
		echo $! > "$FAKE_DIR/child"
		exit 75
	fi
	exit 0
	;;
esac
EOF
chmod +x "$tmp/fake.sh"
export FAKE_DIR=$tmp

# sv EXPECTED_STATUS ARGS...: run supervise with ARGS, output in $tmp/log;
# fail unless it exits EXPECTED_STATUS. Fresh run count.
sv() {
	local want=$1 rc=0
	shift
	rm -f "$tmp/runs" "$tmp/child"
	"$shmrun" supervise "$@" > "$tmp/out" 2> "$tmp/log" || rc=$?
	[ "$rc" = "$want" ] || fail "supervise $*: exit $rc, expected $want"
}
# sv_bg ARGS...: supervise with ARGS in the background ($launcher), output in
# $tmp/out and $tmp/log. Fresh run count.
sv_bg() {
	rm -f "$tmp/runs" "$tmp/child"
	"$shmrun" supervise "$@" > "$tmp/out" 2> "$tmp/log" &
	launcher=$!
}
runs() {
	wc -l < "$tmp/runs"
}
gone() { # gone PID: true once PID has ended (waits up to 10 s)
	for _ in $(seq 200); do
		kill -0 "$1" 2> /dev/null || return 0
		sleep 0.05
	done
	return 1
}

# exit 75 twice, then 0: two restarts, one line each, exit 0
sv 0 --backoff 10ms -- "$tmp/fake.sh" twice75
[ "$(runs)" = 3 ] || fail "twice75: $(runs) runs, expected 3"
[ "$(grep -c 'exited with status 75 (restartable); restart [12] of 10 in' "$tmp/log")" = 2 ] ||
	fail "twice75: expected 2 restart lines"
grep -q "restart 2 of 10 in 20ms" "$tmp/log" || fail "twice75: the backoff does not double"

# exit 3: at once, one run
sv 3 --backoff 10ms -- "$tmp/fake.sh" exit 3
[ "$(runs)" = 1 ] || fail "exit 3: $(runs) runs"
grep -q "fake.sh exited with status 3; not restarted" "$tmp/log" || fail "exit 3: no message"
# exit 0 at once: nothing said
sv 0 -- "$tmp/fake.sh" exit 0
[ "$(runs)" = 1 ] && [ ! -s "$tmp/log" ] || fail "exit 0: $(runs) runs, or a message"
# 1 (a failed job), 2 (a refused start), 143 (a rank stopped by SIGTERM): final
for s in 1 2 143 130; do
	sv $s --backoff 10ms -- "$tmp/fake.sh" exit $s
	[ "$(runs)" = 1 ] || fail "exit $s: $(runs) runs, expected 1"
done
grep -q "exited with status 130: a process was killed by SIGINT (not restarted after it)" \
	"$tmp/log" || fail "exit 130: the message"

# --restarts exhausted: the last status, non-zero, with a message
sv 75 --restarts 2 --backoff 10ms -- "$tmp/fake.sh" always75
[ "$(runs)" = 3 ] || fail "always75: $(runs) runs, expected 3"
grep -q "giving up after 2 restarts (--restarts 2)" "$tmp/log" || fail "always75: no give-up line"
sv 75 --restarts 0 -- "$tmp/fake.sh" always75
[ "$(runs)" = 1 ] || fail "--restarts 0: $(runs) runs"

# killed by SIGKILL; exit 137 as mpirun reports a rank kill -9'd: restarted
sv 0 --backoff 0s -- "$tmp/fake.sh" kill9once
[ "$(runs)" = 2 ] || fail "kill9once: $(runs) runs"
grep -q "fake.sh was killed by SIGKILL; restart 1 of 10 in 0s" "$tmp/log" || fail "kill9once: message"
sv 0 --backoff 0s -- "$tmp/fake.sh" exit137once
[ "$(runs)" = 2 ] || fail "exit137once: $(runs) runs"
grep -q "exited with status 137: a process was killed by SIGKILL; restart 1 of 10" "$tmp/log" ||
	fail "exit137once: message"

# what a run leaves in its group is killed before the rerun
sv 0 --backoff 0s -- "$tmp/fake.sh" leave75once
[ "$(runs)" = 2 ] || fail "leave75once: $(runs) runs"
gone "$(cat "$tmp/child")" || fail "leave75once: the first run's background child outlived it"

# SIGTERM to supervise: forwarded to the whole group, no restart, and
# supervise dies by SIGTERM as COMMAND did
sv_bg --backoff 0s -- "$tmp/fake.sh" hang
wait_for 200 test -s "$tmp/child" || fail "hang: the fake command did not start"
kill -TERM "$launcher"
wait_launcher
[ "$rc" = 143 ] || fail "SIGTERM: supervise exit $rc, expected death by SIGTERM (143)"
[ "$(runs)" = 1 ] || fail "SIGTERM: $(runs) runs, expected 1 (no restart after a signal)"
gone "$(head -1 "$tmp/runs")" || fail "SIGTERM: the command outlived supervise"
gone "$(cat "$tmp/child")" || fail "SIGTERM: the command's background child was left"
grep -q "SIGTERM: forwarding it to .* process group; no restart after it" "$tmp/log" ||
	fail "SIGTERM: no message"

# a command that stops cleanly on the forwarded signal (shmrun's final
# checkpoint): supervise exits 0, as it did. (Not SIGINT here: bash starts a
# background job with SIGINT ignored, and supervise keeps what its caller
# ignores ignored.)
rm -f "$tmp/ready" "$tmp/stopped"
sv_bg -- "$tmp/fake.sh" clean_stop
wait_for 200 test -s "$tmp/ready" || fail "clean_stop: the fake command did not start"
kill -HUP "$launcher"
wait_launcher
[ "$rc" = 0 ] && [ -s "$tmp/stopped" ] || fail "clean_stop: exit $rc, or the command got no SIGHUP"
[ "$(runs)" = 1 ] || fail "clean_stop: $(runs) runs"

# SIGTERM during the backoff: no rerun, supervise dies by it
sv_bg --backoff 60s -- "$tmp/fake.sh" always75
wait_for 200 grep -q "restart 1 of 10 in 1m" "$tmp/log" || fail "backoff: no restart line"
kill -TERM "$launcher"
wait_launcher
[ "$rc" = 143 ] || fail "SIGTERM in the backoff: exit $rc, expected 143"
[ "$(runs)" = 1 ] || fail "SIGTERM in the backoff: $(runs) runs, expected 1"
grep -q "SIGTERM before restart 1: .*fake.sh is not run again" "$tmp/log" ||
	fail "SIGTERM in the backoff: no message"

# usage
sv 2
grep -q "^shmrun supervise: missing COMMAND" "$tmp/log" || fail "no COMMAND: message"
grep -q "^Try 'shmrun supervise --help'" "$tmp/log" || fail "no COMMAND: no Try line"
sv 2 --restarts many -- true
grep -q -- "--restarts 'many' is not a count of restarts" "$tmp/log" || fail "--restarts many"
sv 2 --backoff 5 -- true
grep -q -- "--backoff '5' is not a duration" "$tmp/log" || fail "--backoff 5"
sv 2 --frob -- true
grep -q "unrecognized option '--frob'" "$tmp/log" || fail "--frob"
sv 0 --help
grep -q "^usage: shmrun supervise \[--restarts N\] \[--backoff DUR\]" "$tmp/out" || fail "--help"
"$shmrun" --help | qgrep "shmrun supervise \[--restarts N\]" || fail "shmrun --help lacks supervise"
sv 127 -- "$tmp/no-such-command"
grep -q "cannot run '$tmp/no-such-command': No such file or directory" "$tmp/log" ||
	fail "not found: message"
sv 126 -- "$tmp"
# `env [-u NAME] [NAME=VALUE]... PROGRAM`: messages name PROGRAM
sv 3 -- env -u NOPE A=1 "$tmp/fake.sh" exit 3
grep -q "^shmrun supervise: $tmp/fake.sh exited with status 3; not restarted" "$tmp/log" ||
	fail "env: not named by its program: $(cat "$tmp/log")"
# COMMAND's own options are its own: supervise stops at COMMAND
sv 0 --backoff 0s "$tmp/fake.sh" exit 0
"$shmrun" supervise -- sh -c 'echo "$@"' sh --restarts 5 > "$tmp/out" 2> "$tmp/log"
[ "$(cat "$tmp/out")" = "--restarts 5" ] || fail "COMMAND's options were taken"

# ---- under real mpirun ----------------------------------------------------
if ! command -v mpirun > /dev/null 2>&1; then
	echo "supervise: no mpirun: the mpirun cases are skipped" >&2
	exit 0
fi
# rank.sh MODE: rank 1 does MODE on the first run, every rank exits 0 on the next
cat > "$tmp/rank.sh" << 'EOF'
#!/usr/bin/env bash
[ "$OMPI_COMM_WORLD_RANK" = 0 ] && echo $$ >> "$FAKE_DIR/runs"
echo $$ >> "$FAKE_DIR/pids"
if [ "$OMPI_COMM_WORLD_RANK" = 1 ] && [ ! -e "$FAKE_DIR/done.$1" ]; then
	: > "$FAKE_DIR/done.$1"
	case $1 in
	kill9) kill -9 $$ ;;
	exit75) exit 75 ;;
	esac
fi
[ "$1" = hang ] && { echo ready >> "$FAKE_DIR/ready"; while :; do sleep 0.05; done; }
exit 0
EOF
chmod +x "$tmp/rank.sh"
for mode in kill9 exit75; do
	rm -f "$tmp/runs"
	rc=0
	"$shmrun" supervise --backoff 0s -- "${mpirun2_cmd[@]}" "$tmp/rank.sh" $mode \
		> "$tmp/out" 2> "$tmp/log" || rc=$?
	[ "$rc" = 0 ] || fail "mpirun, rank 1 $mode: supervise exit $rc, expected 0"
	[ "$(runs)" = 2 ] || fail "mpirun, rank 1 $mode: $(runs) runs, expected 2"
	case $mode in
	kill9) grep -q "^shmrun supervise: mpirun exited with status 137: a process was killed by SIGKILL; restart 1" "$tmp/log" ;;
	exit75) grep -q "^shmrun supervise: mpirun exited with status 75 (restartable); restart 1" "$tmp/log" ;;
	esac || fail "mpirun, rank 1 $mode: the restart line"
done
[ -z "$(mpi_leftovers)" ] || fail "mpirun: processes left: $(mpi_leftovers)"
# SIGTERM to supervise: mpirun ends its ranks and exits 1 (Open MPI 4.1),
# supervise exits 1, no rerun, no rank left
rm -f "$tmp/ready"
sv_bg --backoff 0s -- "${mpirun2_cmd[@]}" "$tmp/rank.sh" hang
both_ready() { [ "$(cat "$tmp/ready" 2> /dev/null | wc -l)" = 2 ]; }
wait_for 600 both_ready || fail "mpirun hang: the ranks did not start"
kill -TERM "$launcher"
wait_launcher
[ "$rc" = 1 ] || fail "mpirun, SIGTERM: supervise exit $rc, expected 1 (mpirun's)"
[ "$(runs)" = 1 ] || fail "mpirun, SIGTERM: $(runs) runs, expected 1"
for p in $(cat "$tmp/pids"); do
	gone "$p" || fail "mpirun, SIGTERM: rank $p left"
done
[ -z "$(mpi_leftovers)" ] || fail "mpirun, SIGTERM: processes left: $(mpi_leftovers)"
echo "supervise: ok"
