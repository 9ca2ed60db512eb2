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
