# tests/integration/lib.sh: sourced by the shell tests (integration and stress).
# Gives a private $tmp (removed on exit), kills a background job still in
# $launcher on exit (so no process outlives a failed test), and fail(), which
# prints the message and the tail of $tmp/log (the last shmrun run's stderr).
tmp=$(mktemp -d)
launcher=
cleanup() {
	[ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	[ -f "$tmp/log" ] && tail -30 "$tmp/log" | sed 's/^/  log: /' >&2
	exit 1
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
