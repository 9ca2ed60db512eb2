#!/usr/bin/env bash
# tests/integration/commit_race.sh SHMRUN: a checkpoint committed while worker
# 0 looks away is kept. The coordinator read complete_epoch, then looked for
# the MANIFEST child's exit; a child that committed and exited between the two
# was judged "MANIFEST could not be written", and its epoch — committed, sinks
# maybe already past it — was aborted and removed (on the final epoch the job
# failed and ran again from scratch). SHMRUN_TEST_SLOW_JUDGE=ms widens that
# window to ms milliseconds at every look.
#   - every epoch commits: no "MANIFEST could not be written", exit 0;
#   - the final checkpoint stands (ckpt verify) and the output is exact.
set -euo pipefail
shmrun=$(realpath "${1:?usage: commit_race.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
need_fault_injection "$shmrun"

cat > "$tmp/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 100ms
checkpoint_retain = 1
[gen]
op = sequence
count = 20000
keys = 50
rate = 20000
width = 2
[cnt]
op = count
input = gen by key
width = 2
[out]
op = file_sink
input = cnt
path = out.tsv
CONF
rc=0
(cd "$tmp" && SHMRUN_TEST_SLOW_JUDGE=40 timeout 120 "$shmrun" job.conf 2> "$tmp/log") || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc, want 0: $(grep -E 'ERROR|WARN' "$tmp/log" | head -3)"
if grep -q "MANIFEST could not be written" "$tmp/log"; then
	fail "a committed epoch was aborted: $(grep 'MANIFEST could not' "$tmp/log" | head -2)"
fi
if grep -q "restart" "$tmp/log"; then fail "the job restarted: $(grep restart "$tmp/log" | head -2)"; fi
"$shmrun" ckpt verify "$tmp/ck" > "$tmp/verify" 2>&1 || fail "ckpt verify: $(cat "$tmp/verify")"
want=$(for i in $(seq 0 49); do printf 'k%d\t400\n' "$i"; done | sort)
[ "$(sort "$tmp"/out.tsv)" = "$want" ] || fail "output differs: $(sort "$tmp"/out.tsv | head -3)"
echo "commit_race: ok"
