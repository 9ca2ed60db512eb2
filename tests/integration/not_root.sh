#!/usr/bin/env bash
# tests/integration/not_root.sh SHMRUN: everything works for a user that is
# not root (issue 14 §2; docs/ci-machines.md). permissions.sh covers the modes
# of what the runtime creates; this covers running as such a user.
#
# As root the test runs shmrun as `nobody` (setpriv: its uid and gid, no
# supplementary groups, no capabilities; umask 022; its own HOME and
# XDG_RUNTIME_DIR); as another user, as that user. Then:
#   - a paced checkpointed job runs as that user; `shmrun ps` (as the user)
#     lists it, `shmrun top --json JOB` reads it; its processes run as the
#     user; SIGTERM stops it (exit 0, "stopped at epoch"), the same conf
#     resumes it to the end from its checkpoint;
#   - the output equals a run without the stop; `shmrun ckpt list` and
#     `ckpt verify` pass as the user; the checkpoints and outputs are the
#     user's;
#   - a checkpoint_dir the user may not create is refused with its path and
#     "Permission denied", nothing started (exit 2, a conf error at its line;
#     no output directory).
set -euo pipefail
shmrun=$(realpath "${1:?usage: not_root.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"

u=$tmp/u
mkdir -p "$u/run" "$u/job"
chmod 700 "$u/run"
if [ "$(id -u)" = 0 ]; then
	command -v setpriv > /dev/null || { echo "skipped: as root, needs setpriv (util-linux)" >&2; exit 77; }
	uid=$(id -u nobody 2> /dev/null) || { echo "skipped: no user nobody" >&2; exit 77; }
	gid=$(id -g nobody)
	# the binary and its libraries must be readable by nobody
	if ! setpriv --reuid="$uid" --regid="$gid" --clear-groups "$shmrun" --version > /dev/null 2>&1; then
		echo "skipped: nobody cannot run $shmrun (a directory on its path is not world-readable)" >&2
		exit 77
	fi
	chmod 711 "$tmp"
	chown -R "$uid:$gid" "$u"
	who=nobody
else
	uid=$(id -u)
	who=$(id -un)
fi
# as CMD...: run CMD as the user, umask 022, its own HOME and XDG_RUNTIME_DIR;
# "${as[@]}" CMD... the same where it must exec (the background run: its pid
# is the launcher's, to signal)
as=(env HOME="$u" XDG_RUNTIME_DIR="$u/run" sh -c 'umask 022; exec "$@"' sh)
[ "$(id -u)" != 0 ] ||
	as=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all "${as[@]}")
as() {
	"${as[@]}" "$@"
}

conf() { # dir [rate]
	cat > "$1/job.conf" <<CONF
[job]
name = notroot
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
[gen]
op = sequence
count = 100000
keys = 100
piece_records = 1000
width = 2
${2:+rate = $2}
[count]
op = count
input = gen by key
emit = update
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
}

mkdir -p "$tmp/ref"
conf "$tmp/ref"
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) || fail "the reference run failed"
cat "$tmp"/ref/out/result.tsv* | sort > "$tmp/expected"

d=$u/job
conf "$tmp" 10000 # 10 s: ps, top and the stop come well before its end
as sh -c "cat > '$d/job.conf'" < "$tmp/job.conf"
(cd "$d" && exec "${as[@]}" "$shmrun" --log-level info job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "the run as $who did not start"
wait_manifest "$d/ckpt" || fail "no checkpoint as $who"
# the launcher (setpriv, env and sh exec'd into it) and its workers
for p in $launcher $(pgrep -P $launcher || true); do
	[ -d /proc/$p ] || continue
	case $(readlink /proc/$p/exe 2> /dev/null) in "$shmrun") ;; *) continue ;; esac
	[ "$(awk '/^Uid:/ { print $2 }' /proc/$p/status)" = "$uid" ] || fail "process $p does not run as $who"
done
as "$shmrun" ps > "$tmp/ps" 2>&1 || { cat "$tmp/ps" >&2; fail "shmrun ps as $who failed"; }
awk 'NR > 1 && $1 == "notroot" { f = 1 } END { exit !f }' "$tmp/ps" || fail "shmrun ps as $who does not list the job: $(cat "$tmp/ps")"
as "$shmrun" top --json notroot > "$tmp/top" 2> "$tmp/top.err" || { cat "$tmp/top.err" >&2; fail "shmrun top --json as $who failed"; }
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if "notroot" in json.dumps(j) else 1)' "$tmp/top" ||
	fail "shmrun top --json as $who: not the job's JSON: $(head -c 300 "$tmp/top")"
sleep 0.5
kill -TERM $launcher 2> /dev/null || true
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 0 ] || fail "the stop as $who: exit status $rc, want 0"
qgrep "stopped at epoch" "$tmp/log" || fail "the run as $who did not stop with a checkpoint (it ended first?)"
conf "$tmp" # the resume unpaced: rate is tuning, not part of the fingerprint
as sh -c "cat > '$d/job.conf'" < "$tmp/job.conf"
(cd "$d" && as "$shmrun" --log-level info job.conf) 2> "$tmp/log" || fail "the resume as $who failed"
qgrep "launcher: restoring epoch " "$tmp/log" || fail "the resume as $who did not restore"
cat "$d"/out/result.tsv* | sort | cmp -s - "$tmp/expected" || fail "as $who: output differs from the reference"
as "$shmrun" ckpt list "$d/ckpt" > "$tmp/list" 2>&1 || { cat "$tmp/list" >&2; fail "ckpt list as $who failed"; }
as "$shmrun" ckpt verify "$d/ckpt" > "$tmp/verify" 2>&1 || { cat "$tmp/verify" >&2; fail "ckpt verify as $who failed"; }
bad=$(find "$d/ckpt" "$d/out" ! -uid "$uid" | head -3)
[ -z "$bad" ] || fail "files not owned by $who: $bad"
echo "ok as $who: run, ps, top --json, stop, resume, ckpt list and verify; output exact"

# a checkpoint_dir the user may not create: refused, named, nothing started
mkdir -p "$tmp/locked"
chmod 755 "$tmp/locked"
e=$u/refused
as mkdir -p "$e"
sed "s|^checkpoint_dir = ckpt|checkpoint_dir = $tmp/locked/ckpt|" "$d/job.conf" > "$tmp/refused.conf"
as sh -c "cat > '$e/job.conf'" < "$tmp/refused.conf"
if [ "$(id -u)" != 0 ]; then
	chmod 555 "$tmp/locked" # the user owns it: take the write permission away
fi
set +e
(cd "$e" && as "$shmrun" job.conf) > "$tmp/out" 2> "$tmp/log"
rc=$?
set -e
chmod 755 "$tmp/locked"
[ $rc -eq 2 ] || fail "an unwritable checkpoint_dir as $who: exit status $rc, want 2"
qgrep -F "job.conf:4: checkpoint_dir = $tmp/locked/ckpt cannot be written: directory $tmp/locked is not writable: Permission denied; make it writable or choose another path; nothing was started" "$tmp/log" ||
	fail "an unwritable checkpoint_dir: not named with the reason: $(cat "$tmp/log")"
[ ! -e "$e/out" ] || fail "an unwritable checkpoint_dir: output was created"
echo "ok as $who: an unwritable checkpoint_dir is refused, named (exit $rc)"
