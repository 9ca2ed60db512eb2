#!/usr/bin/env bash
# tests/integration/signals.sh SHMRUN: stop signals, whoever receives them, and
# the exit status shells and systemd see (issue 8, items 3 and 16).
#   - SIGTERM, SIGINT and SIGHUP to the whole process group (systemd's
#     KillMode=control-group, kill -- -PGID), and SIGTERM to one worker only,
#     stop a checkpointed job exactly as a SIGTERM to the launcher does: one
#     final checkpoint, "stopped at epoch e" on stderr, exit 0, no restart; the
#     resumed run's output is exact.
#   - without checkpoints, a group SIGTERM/SIGINT kills the launcher by that
#     signal (not exit(128+N)), so `bash -c 'shmrun x; echo next'` stops too.
#   - Ctrl-C in a real terminal (tmux): with checkpoints exit 0 and the shell
#     goes on; without, the shell stops (skipped with a message without tmux).
set -euo pipefail
shmrun=${1:?usage: signals.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

conf() { # dir checkpoints(yes/no)
	mkdir -p "$1"
	{
		echo "[job]"
		echo "workers = 2"
		[ "$2" = yes ] && echo "checkpoint_dir = ckpt" && echo "checkpoint_interval = 100ms"
		cat <<CONF
[gen]
op = sequence
count = 300000
keys = 1000
width = 2
rate = 20000
[out]
op = file_sink
input = gen
path = out/result.tsv
width = 2
CONF
	} > "$1/job.conf"
}

# Start a command in a new session: sets $pid (also its process group id) and
# $helper (the python3 waiting for it); its exit status, or -SIG when a signal
# killed it, lands in the status file.
start_session() { # dir statusfile cmd...
	local d=$1 st=$2
	shift 2
	rm -f "$tmp/pid"
	python3 - "$d" "$st" "$@" > "$tmp/pid" <<'PY' &
import os, signal, subprocess, sys
d, st, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
# a background job of a script starts with SIGINT ignored: undo that, as a
# terminal's foreground job would have it
p = subprocess.Popen(cmd, cwd=d, start_new_session=True, stderr=open(os.path.join(d, "log"), "w"),
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
print(p.pid, flush=True)
rc = p.wait()
open(st, "w").write("%d\n" % rc)
PY
	helper=$!
	for _ in $(seq 300); do [ -s "$tmp/pid" ] && break; sleep 0.1; done
	pid=$(cat "$tmp/pid")
	launcher=$pid
}

wait_file() { # path seconds
	for _ in $(seq $(($2 * 10))); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}

wait_ckpt() { # dir: the first checkpoint is complete
	for _ in $(seq 300); do
		ls "$1"/ckpt/ckpt-*/MANIFEST > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "no checkpoint within 30 s"
}

# The reference output: the job without interruptions.
conf "$tmp/ref" no
sed -i 's/^rate = .*/rate = 100000000/' "$tmp/ref/job.conf"
(cd "$tmp/ref" && "$shmrun" job.conf) 2> "$tmp/log" || fail "reference run failed"
sort "$tmp/ref"/out/result.tsv.* > "$tmp/expected"

# --- with checkpoints: every receiver, every stop signal ---------------------
for how in group-TERM group-INT group-HUP worker-TERM worker-HUP; do
	d="$tmp/$how"
	conf "$d" yes
	start_session "$d" "$d/status" "$shmrun" job.conf
	wait_ckpt "$d"
	sig=${how#*-}
	case $how in
	group-*) kill -"$sig" -- -"$pid" ;;
	worker-*)
		w=$(first_child "$pid")
		[ -n "$w" ] || fail "$how: no worker found"
		kill -"$sig" "$w"
		;;
	esac
	wait_file "$d/status" 60 || fail "$how: the job did not stop within 60 s"
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	rc=$(cat "$d/status")
	[ "$rc" -eq 0 ] || fail "$how: exit status $rc, expected 0 (a stop with a final checkpoint)"
	grep -q "stopped at epoch [1-9]" "$d/log" || fail "$how: no 'stopped at epoch'"
	grep -q "restart [0-9]* of" "$d/log" && fail "$how: the job was restarted instead of stopped"
	[ "$(grep -c "taking a final checkpoint" "$d/log")" -eq 1 ] ||
		fail "$how: expected one 'taking a final checkpoint'"
	# resume to the end: exact output
	sed -i 's/^rate = .*/rate = 100000000/' "$d/job.conf"
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "$how: resume failed"
	sort "$d"/out/result.tsv.* > "$d/got"
	cmp -s "$tmp/expected" "$d/got" || fail "$how: resumed output differs from an uninterrupted run"
	echo "ok $how with checkpoints: final checkpoint, exit 0, no restart, exact resume"
done

# --- without checkpoints: die by the signal ------------------------------------
for sig in TERM INT; do
	d="$tmp/nock-$sig"
	conf "$d" no
	start_session "$d" "$d/status" "$shmrun" job.conf
	wait_file "$d/out/result.tsv.0" 30 || fail "nock-$sig: job did not start"
	sleep 0.3
	kill -"$sig" -- -"$pid"
	wait_file "$d/status" 60 || fail "nock-$sig: the job did not stop within 60 s"
	wait "$helper" 2> /dev/null || true
	launcher=
	cp "$d/log" "$tmp/log"
	want=-$(kill -l "$sig")
	[ "$(cat "$d/status")" -eq "$want" ] ||
		fail "nock-$sig: status $(cat "$d/status"), expected killed by SIG$sig ($want)"
	grep -q "restart [0-9]* of" "$d/log" && fail "nock-$sig: restarted"

	# a shell running it stops too (it went on with exit(130))
	rm -f "$d/next"
	start_session "$d" "$d/status2" bash -c "\"$shmrun\" job.conf; echo next > next"
	sleep 1
	kill -"$sig" -- -"$pid"
	wait_file "$d/status2" 60 || fail "nock-$sig: bash -c did not stop within 60 s"
	wait "$helper" 2> /dev/null || true
	launcher=
	[ ! -e "$d/next" ] || fail "nock-$sig: bash -c 'shmrun x; echo next' went on to 'next'"
	echo "ok group SIG$sig without checkpoints: killed by SIG$sig, the calling shell stops"
done

# --- a stop signal after the job ended: exit 0, not killed by it ------------------
# A job that reached end of input has its outcome: a SIGTERM while the launcher
# exits (slow under a leak checker; SHMRUN_TEST_SLOW_EXIT widens the window in
# a test build) must not turn it into "killed by SIGTERM" (CI once saw a
# rescale test's run end so, under ASan).
if "$shmrun" --version | grep -x "fault injection: on" > /dev/null; then
	for ck in yes no; do
		d="$tmp/late-$ck"
		conf "$d" $ck
		sed -i 's/^rate = .*/rate = 100000000/; s/^count = .*/count = 20000/' "$d/job.conf"
		start_session "$d" "$d/status" env SHMRUN_TEST_SLOW_EXIT=1500 "$shmrun" job.conf
		for _ in $(seq 600); do grep -q "launcher: job .* done in" "$d/log" && break; sleep 0.05; done
		grep -q "launcher: job .* done in" "$d/log" || fail "late-$ck: the job did not end"
		kill -TERM -- -"$pid"
		wait_file "$d/status" 60 || fail "late-$ck: the launcher did not exit"
		wait "$helper" 2> /dev/null || true
		launcher=
		cp "$d/log" "$tmp/log"
		[ "$(cat "$d/status")" -eq 0 ] ||
			fail "late-$ck: status $(cat "$d/status") for a SIGTERM after the job ended, expected 0"
		[ "$(cat "$d"/out/result.tsv.* | wc -l)" -eq 20000 ] || fail "late-$ck: output incomplete"
		echo "ok SIGTERM after the job ended (checkpoints $ck): exit 0"
	done
else
	echo "skipped: a stop signal after the job ended (no fault injection in this build)"
fi

# --- Ctrl-C in a real terminal -----------------------------------------------------
if ! command -v tmux > /dev/null 2>&1; then
	echo "skipped: Ctrl-C in a terminal (tmux is not installed; tools/bootstrap.sh installs it)"
	exit 0
fi
sock="$tmp/tmux.sock"
trap 'tmux -S "$sock" kill-server 2> /dev/null || true; cleanup' EXIT
tmux_keep "$sock"
for ck in yes no; do
	d="$tmp/tty-$ck"
	conf "$d" $ck
	tmux -S "$sock" new-session -d -s "tty$ck" -x 200 -y 50 \
		"cd '$d' && bash -c '\"$shmrun\" job.conf 2> log; echo \$? > status; echo next > next'; sleep 600"
	if [ $ck = yes ]; then wait_ckpt "$d"; else wait_file "$d/out/result.tsv.0" 30 || fail "tty: no start"; fi
	sleep 0.3
	tmux -S "$sock" send-keys -t "tty$ck" C-c
	for _ in $(seq 600); do # until the status is written or no shmrun runs in $d
		[ -e "$d/status" ] && break
		running=0
		for p in $(pgrep -x shmrun || true); do
			[ "$(readlink "/proc/$p/cwd" 2> /dev/null)" = "$d" ] && running=1
		done
		[ $running = 0 ] && break
		sleep 0.1
	done
	sleep 0.5
	cp "$d/log" "$tmp/log"
	if [ $ck = yes ]; then
		[ -e "$d/next" ] && [ "$(cat "$d/status")" -eq 0 ] ||
			fail "tty Ctrl-C with checkpoints: expected exit 0 and the shell going on"
		grep -q "stopped at epoch [1-9]" "$d/log" || fail "tty Ctrl-C: no 'stopped at epoch'"
	else
		[ ! -e "$d/next" ] || fail "tty Ctrl-C without checkpoints: the shell went on to 'next'"
	fi
	grep -q "restart [0-9]* of" "$d/log" && fail "tty Ctrl-C ($ck checkpoints): restarted"
	tmux -S "$sock" kill-session -t "tty$ck" 2> /dev/null || true
	echo "ok Ctrl-C in a terminal, checkpoints $ck"
done
