#!/usr/bin/env bash
# tests/integration/setup_failure.sh SHMRUN: a worker whose setup fails stops
# the job with the reason, it never runs on half set up. Key-bound state that
# could not be allocated (ENOMEM) used to be dropped on the way out of setup(),
# which then returned success, and the worker ran its tasks without state.
#   - without checkpoint_dir: exit 1, "worker setup failed: Cannot allocate
#     memory" named by the worker and by the launcher, no output, no restart;
#   - the same job without the fault gives its exact output.
set -euo pipefail
shmrun=$(realpath "${1:?usage: setup_failure.sh path/to/shmrun}")
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
need_fault_injection "$shmrun"

cat > "$tmp/job.conf" <<CONF
[job]
workers = 2
[gen]
op = sequence
count = 1000
keys = 100
[cnt]
op = count
input = gen
[out]
op = file_sink
input = cnt
path = out.tsv
CONF
rc=0
(cd "$tmp" && SHMRUN_TEST_STATE_ENOMEM=1 timeout 60 "$shmrun" job.conf > "$tmp/stdout" 2> "$tmp/log") || rc=$?
[ "$rc" -eq 1 ] || fail "setup ENOMEM: exit $rc, want 1 ($(tail -3 "$tmp/log"))"
grep -q "ERROR worker 0: worker setup failed: Cannot allocate memory" "$tmp/log" ||
	fail "setup ENOMEM: the worker did not say why: $(cat "$tmp/log")"
grep -q "launcher: worker 0 (.*) failed with exit status 1: worker setup failed: Cannot allocate memory" "$tmp/log" ||
	fail "setup ENOMEM: the launcher did not name the failure: $(cat "$tmp/log")"
grep -q "not restarted" "$tmp/log" || fail "setup ENOMEM: no 'not restarted': $(cat "$tmp/log")"
if grep -qi "segmentation\|signal SIG" "$tmp/log"; then fail "setup ENOMEM: a worker crashed: $(cat "$tmp/log")"; fi
[ ! -s "$tmp/out.tsv" ] || fail "setup ENOMEM: output written by a worker without state"

# The same job without the fault: 100 keys k0..k99, 10 records each.
(cd "$tmp" && timeout 60 "$shmrun" job.conf 2> "$tmp/log") || fail "clean run: exit $? ($(tail -3 "$tmp/log"))"
want=$(for i in $(seq 0 99); do printf 'k%d\t10\n' "$i"; done | sort)
[ "$(cat "$tmp"/out.tsv* | sort)" = "$want" ] || fail "clean run: wrong counts: $(cat "$tmp"/out.tsv* | head -3)"
echo "setup_failure: ok"
