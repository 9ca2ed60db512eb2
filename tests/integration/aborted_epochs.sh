#!/usr/bin/env bash
# tests/integration/aborted_epochs.sh SHMRUN: aborted epochs leave nothing
# behind (issue 8 item 10), and `ckpt verify` says what a restore would do.
#   - checkpoint_timeout = 3ms aborts most epochs of a 2-worker shuffle job,
#     while late snapshot writers of those epochs still run: once the job
#     has ended, no ckpt-N/ directory without a MANIFEST is left.
#   - incomplete directories left by a crash (made here: empty ones, and one
#     with a partial state file and MANIFEST.tmp) are removed at the next start,
#     after the restore selection, in one log line; the complete checkpoint
#     and a damaged one (it has a MANIFEST) are kept; a second start logs
#     nothing about them.
#   - ckpt verify with an empty newer directory: exit 0, names the checkpoint
#     a restore would use and calls the newer one incomplete.
set -euo pipefail
shmrun=$(realpath "${1:?usage: aborted_epochs.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

incomplete() { # dir: the ckpt-N directories without a MANIFEST
	for d in "$1"/ckpt-*; do
		[ -d "$d" ] && [ ! -e "$d/MANIFEST" ] && basename "$d"
	done
	return 0
}

cat > "$tmp/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 10ms
checkpoint_timeout = 3ms
restart_attempts = 0
[gen]
op = sequence
count = 100000
keys = 50000
piece_records = 1000
rate = 100000
width = 2
[count]
op = count
input = gen by key
width = 2
[out]
op = file_sink
input = count
path = out.tsv
CONF
# The final epoch may abort too (exit 1): what matters here is what is left.
set +e; (cd "$tmp" && timeout 120 "$shmrun" job.conf) 2> "$tmp/log"; set -e
aborted=$(grep -c "aborted: not complete within checkpoint_timeout" "$tmp/log" || true)
[ "$aborted" -ge 5 ] || fail "only $aborted epochs aborted: the test is void"
left=$(incomplete "$tmp/ck" | wc -l)
[ "$left" -eq 0 ] || fail "$aborted aborted epochs left $left directories without a MANIFEST: $(incomplete "$tmp/ck" | head -5 | tr '\n' ' ')"
echo "ok $aborted aborted epochs, no directory left"

# A crash leaves incomplete directories: removed at the next start.
cat > "$tmp/c.conf" <<CONF
[job]
checkpoint_dir = ck2
[gen]
op = sequence
count = 1000
rate = 1000
[out]
op = file_sink
input = gen
path = out2.tsv
CONF
(cd "$tmp" && exec "$shmrun" c.conf) 2> "$tmp/log" &
launcher=$!
wait_started
sleep 0.6
kill -TERM $launcher
wait $launcher || fail "stop: exit $?"
launcher=
good=$(ls "$tmp/ck2" | sort -t- -k2 -n | tail -1)
n=${good#ckpt-}
mkdir "$tmp/ck2/ckpt-$((n + 1))" "$tmp/ck2/ckpt-$((n + 3))"
mkdir "$tmp/ck2/ckpt-$((n + 2))"
head -c 100 /dev/urandom > "$tmp/ck2/ckpt-$((n + 2))/gen.0.state"
echo partial > "$tmp/ck2/ckpt-$((n + 2))/MANIFEST.tmp"
set +e; "$shmrun" ckpt verify "$tmp/ck2" > "$tmp/verify"; rc=$?; set -e
[ $rc -eq 0 ] || { cat "$tmp/verify"; fail "verify with incomplete newer directories: exit $rc, want 0"; }
grep -q "a restore would use $good, the newest that verifies" "$tmp/verify" || fail "verify does not name $good"
grep -q "newer ckpt-$((n + 1)), ckpt-$((n + 2)), ckpt-$((n + 3)) incomplete" "$tmp/verify" ||
	{ cat "$tmp/verify"; fail "verify does not call the newer directories incomplete"; }
grep -q "does not verify" "$tmp/verify" && fail "verify still says the newest does not verify"
echo "ok ckpt verify: names $good, newer ones incomplete, exit 0"
# a damaged older checkpoint (it has a MANIFEST) is never removed, and verify fails
older=$(ls "$tmp/ck2" | sort -t- -k2 -n | grep -v "^$good$" | head -1)
[ -e "$tmp/ck2/$older/MANIFEST" ] || fail "no older complete checkpoint to damage"
truncate -s -1 "$tmp/ck2/$older/gen.0.state"
set +e; "$shmrun" ckpt verify "$tmp/ck2" > "$tmp/verify"; rc=$?; set -e
[ $rc -eq 1 ] || fail "verify with a damaged older checkpoint: exit $rc, want 1"
grep -q "older $older damaged" "$tmp/verify" || fail "verify does not name the damaged $older"

(cd "$tmp" && exec "$shmrun" c.conf) 2> "$tmp/log" &
launcher=$!
wait_started
sleep 0.3
# the restored run may have ended by now (what is left of the input is short):
# the restore and the cleanup are what this checks, not the stop
kill -TERM $launcher 2> /dev/null || true
wait $launcher || fail "restart: exit $?"
launcher=
grep -q "restoring epoch $n" "$tmp/log" || fail "restart did not restore $good"
# exactly these three: the damaged $older has a MANIFEST and is not touched
grep -q "removed 3 incomplete checkpoint directories of .*: ckpt-$((n + 1)), ckpt-$((n + 2)), ckpt-$((n + 3))$" "$tmp/log" ||
	fail "incomplete directories not reported as removed in one line"
[ -z "$(incomplete "$tmp/ck2")" ] || fail "incomplete directories left: $(incomplete "$tmp/ck2" | tr '\n' ' ')"
grep -c "ckpt-" "$tmp/log" | { read -r c; [ "$c" -lt 10 ]; } || fail "the restart logs a line per directory"
echo "ok incomplete directories removed at the next start, in one line"
