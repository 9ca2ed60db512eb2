#!/usr/bin/env bash
# tests/integration/forward_alignment.sh SHMRUN: regression for a task with
# two forward inputs (two width-1 sources into one width-1 stage: both edges
# are direct calls) under checkpoints. The first source's barrier held the
# stage's forward input and parked *every* forward upstream, the second
# source too, before it could inject its own barrier: the first epoch never
# aligned and the job never finished. Now only the upstream that delivered
# the barrier parks (worker.c, deliver_barrier()). Asserts: the run ends
# within 60 s with exit 0, several epochs completed (the sources run 1.5 s:
# under ASan on a loaded machine a snapshot took 60 ms, and 0.3 s gave only
# 2 epochs), and the sink wrote
# every record once.
set -euo pipefail
shmrun=${1:?usage: forward_alignment.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
export LC_ALL=C

cat > "$tmp/t.conf" << 'CONF'
[job]
checkpoint_dir = ckpt
checkpoint_interval = 20ms
checkpoint_timeout = 10s
[a]
op = sequence
count = 3000
rate = 2000
[b]
op = sequence
count = 2000
rate = 2000
[out]
op = file_sink
input = a, b
path = out.txt
CONF
rc=0
timeout 60 "$shmrun" "$tmp/t.conf" > /dev/null 2> "$tmp/log" || rc=$?
[ $rc = 0 ] || fail "run exited $rc (124: it hung at barrier alignment)"
grep -q "aborted" "$tmp/log" && fail "an epoch was aborted"
last=$(ls "$tmp/ckpt" | sed -n 's/^ckpt-\([0-9]*\)$/\1/p' | sort -n | tail -1)
[ "${last:-0}" -ge 3 ] || fail "only ${last:-0} epochs completed"
{ seq 0 2999; seq 0 1999; } | sort > "$tmp/want"
cut -f2 "$tmp/out.txt" | sort > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || fail "the sink's output is not every record once: $(diff "$tmp/want" "$tmp/got" | head -5)"
echo "forward_alignment: ok"
