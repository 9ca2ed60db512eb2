#!/usr/bin/env bash
# tests/integration/permissions.sh SHMRUN: nothing the runtime creates for
# checkpoints can be read by other users, whatever the umask (issue 8 item 5).
#   - under umask 022 and 000: a lookup table of mode 600 holding a secret,
#     a checkpointed job stopped with SIGTERM, restarted with
#     STREAM_RESET_STATE=1 (the reset-<time>/ aside directory), stopped
#     again, rescaled (--rescale writes a new ckpt-<epoch>/): every directory
#     under checkpoint_dir (checkpoint_dir itself and its parents, created by
#     the runtime) is 0700 and every file (state files, MANIFEST) 0600.
#   - a file_sink's hidden staging files (.NAME.EPOCH.staged), seen while the
#     job runs, are 0600; its committed output keeps the umask (0644 under
#     022, 0666 under 000), as any program's output does.
set -euo pipefail
shmrun=$(realpath "${1:?usage: permissions.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"

conf() { # dir width
	cat > "$1/job.conf" <<CONF
[job]
checkpoint_dir = state/ck
checkpoint_interval = 50ms
[gen]
op = sequence
count = 4000
keys = 10
piece_records = 100
rate = 2000
[look]
op = lookup
input = gen
table = secret.tsv
width = $2
[out]
op = file_sink
input = look
path = out/result.tsv
CONF
}

stop_after() { # dir seconds [args]: run, SIGTERM after the delay, expect exit 0
	local d=$1 s=$2
	shift 2
	(cd "$d" && exec "$shmrun" "$@" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_started
	sleep "$s"
	kill -TERM $launcher 2> /dev/null || true
	wait $launcher || fail "run in $d did not stop with exit 0"
	launcher=
}

for mask in 022 000; do
	d=$tmp/u$mask
	mkdir -p "$d"
	printf 'k1\tthe-secret\n' > "$d/secret.tsv"
	chmod 600 "$d/secret.tsv"
	conf "$d" 2
	(
		umask $mask
		# staging files, caught while the job runs
		(cd "$d" && exec "$shmrun" job.conf) 2> "$tmp/log" &
		launcher=$!
		seen=
		for _ in $(seq 1 400); do
			seen=$(find "$d/out" -name '.*.staged' -printf '%m\n' 2> /dev/null | sort -u | tr '\n' ' ')
			[ -n "$seen" ] && break
			sleep 0.01
		done
		kill -TERM $launcher 2> /dev/null || true
		wait $launcher || fail "umask $mask: first run did not stop with exit 0"
		launcher=
		[ -n "$seen" ] || fail "umask $mask: no staging file seen while the job ran"
		[ "$seen" = "600 " ] || fail "umask $mask: staging files have modes '$seen', want 600"
		want_out=$(printf '%o' $((0666 & ~0$mask)))
		got_out=$(stat -c %a "$d/out/result.tsv")
		[ "$got_out" = "$want_out" ] || fail "umask $mask: committed output is $got_out, want $want_out (the umask's)"

		STREAM_RESET_STATE=1 stop_after "$d" 1
		ls -d "$d"/state/ck/reset-* > /dev/null 2>&1 || fail "umask $mask: no reset-<time>/ directory"
		conf "$d" 1
		stop_after "$d" 0.5 --rescale
	) || exit 1
	grep -rq "the-secret" "$d/state/ck" || fail "umask $mask: the table is not in the checkpoints (test is void)"
	bad=$(find "$d/state" \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) -printf '%m %p\n')
	[ -z "$bad" ] || fail "umask $mask: readable by others:
$bad"
	nd=$(find "$d/state" -type d | wc -l)
	nf=$(find "$d/state" -type f -name MANIFEST | wc -l)
	[ "$nd" -ge 4 ] && [ "$nf" -ge 2 ] || fail "umask $mask: only $nd directories, $nf MANIFESTs checked"
done
echo "permissions: ok"
