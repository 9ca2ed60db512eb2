# tests/integration/lib.sh: sourced by the shell tests (integration and stress).
# Gives a private $tmp (removed on exit) and XDG_RUNTIME_DIR in it, kills a background job still in
# $launcher on exit (so no process outlives a failed test), and fail(), which
# prints the message and the tail of $tmp/log (the last shmrun run's stderr).
# Helpers below, each with its comment: qgrep, need_fault_injection,
# wait_started, wait_launcher, wait_for, newest_epoch, wait_manifest,
# first_child, tmux_keep, nth_cpu, worker_on_cpu.
tmp=$(mktemp -d)
# Each test's jobs serve their sockets (docs/observability.md) in a runtime
# directory of its own: tests run in parallel (ctest -j) with jobs of the same
# name, which would refuse each other in the user's shared one.
export XDG_RUNTIME_DIR="$tmp/run"
mkdir -m 700 "$XDG_RUNTIME_DIR"
launcher=
cleanup() {
	[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
# qgrep ARGS...: `grep -q` that reads all of its input. In a pipe under
# `set -o pipefail`, `cmd | grep -q x` fails at random: grep exits at the first
# match and cmd, still writing, dies of SIGPIPE. Use `cmd | qgrep x` instead.
qgrep() {
	grep "$@" > /dev/null
}
fail() {
	echo "FAIL: $*" >&2
	[ -f "$tmp/log" ] && tail -30 "$tmp/log" | sed 's/^/  log: /' >&2
	exit 1
}
# need_fault_injection SHMRUN: exit 77 (skipped) unless SHMRUN was built with
# the test-only fault switches (-DSHMRUN_FAULT_INJECTION=ON, as
# tools/bootstrap.sh builds it): SHMRUN_FAULT and SHMRUN_TEST_* do nothing
# without them (runtime/ckpt/fault.h).
need_fault_injection() {
	if ! "$1" --version | qgrep -x "fault injection: on"; then
		echo "skipped: $1 is built without -DSHMRUN_FAULT_INJECTION=ON" >&2
		exit 77
	fi
}
# wait_started [LOG]: wait until the run in $launcher has logged its start
# line ("launcher: job NAME: N workers, ..."), or has exited; at most 60 s.
# From that line on the launcher takes SIGTERM as a stop; before it (exec,
# dynamic loading, parsing: slow on a loaded machine) SIGTERM kills it. So a
# test that stops a run "after a while" waits for this first.
wait_started() {
	local log=${1:-$tmp/log} end=$((SECONDS + 60))
	until grep -q "launcher: job .*: [0-9]* worker" "$log" 2> /dev/null; do
		kill -0 "$launcher" 2> /dev/null || return 0
		[ $SECONDS -lt $end ] || return 1
		sleep 0.02
	done
}
# wait_launcher: wait for the run in $launcher to end; its exit status is
# then in $rc, and $launcher is empty (nothing left for cleanup to kill).
# shellcheck disable=SC2034 # rc is the caller's
wait_launcher() {
	rc=0
	wait "$launcher" || rc=$?
	launcher=
}
# wait_for TRIES CMD...: run CMD every 0.05 s until it succeeds, at most TRIES
# times. Return: 1 if it never did.
wait_for() {
	local tries=$1
	shift
	for _ in $(seq "$tries"); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}
# newest_epoch DIR: the highest epoch N of a DIR/ckpt-N (complete or not);
# empty if there is none.
newest_epoch() {
	{ ls -d "$1"/ckpt-* 2> /dev/null || true; } | sed 's/.*ckpt-//' | sort -n | tail -1
}
# wait_manifest DIR [TRIES]: wait, in 0.05 s steps (default 600: 30 s), until
# the checkpoint_dir DIR holds a complete checkpoint (a ckpt-*/MANIFEST).
# Return: 1 if none came.
wait_manifest() {
	for _ in $(seq "${2:-600}"); do
		ls "$1"/ckpt-*/MANIFEST > /dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}
# first_child PID: the oldest child of PID (its worker 0 when PID is a
# launcher), waiting up to 5 s for one; empty if none. Not `pgrep -P PID |
# head -1`: under `set -o pipefail` that fails when pgrep, still writing, dies
# of SIGPIPE after head exited, or when there is no child yet.
first_child() {
	local p
	for _ in $(seq 100); do
		p=$(pgrep -o -P "$1" || true)
		[ -n "$p" ] && echo "$p" && return 0
		sleep 0.05
	done
}
# tmux_keep SOCK: start the tmux server of SOCK with a session that lasts
# (sleep), before the test's own sessions. tmux ends its server with its last
# session, and a new-session racing that exit fails ("server exited
# unexpectedly"): with this one the server lives until kill-server.
tmux_keep() {
	tmux -S "$1" new-session -d -s keep "sleep 3600"
}
# nth_cpu N: the N-th CPU (from 1) this process may run on, empty if there
# are fewer. Worker k is pinned to the (k+1)-th (docs/topology.md).
nth_cpu() {
	awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status | tr ',' '\n' |
		awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | sed -n "$1p"
}
# worker_on_cpu CPU: the pid of the child of $launcher pinned to CPU alone,
# waiting up to 5 s (each worker pins itself just after its fork); empty if
# none.
worker_on_cpu() {
	local p
	for _ in $(seq 100); do
		for p in $(pgrep -P "$launcher"); do
			[ "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$p/status 2> /dev/null)" = "$1" ] &&
				echo "$p" && return 0
		done
		sleep 0.05
	done
}
