#!/usr/bin/env bash
# tests/integration/incurable.sh SHMRUN: failures a restart cannot cure stop a
# checkpointed job at once (exit 1, the reason, no "restart N of"):
#   - a record bigger than a ring (EMSGSIZE), logged once, not once per restart;
#   - a worker killed by SIGXFSZ (a file_sink output past `ulimit -f`): the
#     message says RLIMIT_FSIZE and names the output file;
#   - while a crash (SIGSEGV here: kill -SEGV of a worker) is still restarted.
set -euo pipefail
shmrun=${1:?usage: incurable.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

# --- EMSGSIZE ------------------------------------------------------------------------
mkdir -p "$tmp/big"
head -c 5000 /dev/zero | tr '\0' 'y' > "$tmp/big/big.txt"
echo >> "$tmp/big/big.txt"
cat > "$tmp/big/job.conf" <<'CONF'
[job]
workers = 2
ring_bytes = 4K
checkpoint_dir = ck
[read]
op = file_source
path = big.txt
[out]
op = file_sink
input = read
path = out.tsv
width = 2
CONF
rc=0
(cd "$tmp/big" && timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 1 ] || fail "record larger than a ring: exit $rc, expected 1"
grep -q "restart [0-9]* of" "$tmp/log" && fail "record larger than a ring: restarted"
[ "$(grep -c "raise ring_bytes" "$tmp/log")" -le 3 ] || fail "record larger than a ring: message repeated"
grep -q "a restart cannot cure" "$tmp/log" || fail "record larger than a ring: no 'a restart cannot cure'"
echo "ok a record bigger than a ring stops a checkpointed job at once (exit 1)"

# --- SIGXFSZ ---------------------------------------------------------------------------
mkdir -p "$tmp/fsz"
cat > "$tmp/fsz/job.conf" <<'CONF'
[job]
workers = 1
checkpoint_dir = ck
checkpoint_interval = 50ms
[gen]
op = sequence
count = 2000000
[out]
op = file_sink
input = gen
path = out.tsv
CONF
rc=0
(cd "$tmp/fsz" && ulimit -f 100 && timeout 120 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 1 ] || fail "SIGXFSZ: exit $rc, expected 1"
grep -q "restart [0-9]* of" "$tmp/log" && fail "SIGXFSZ: restarted"
grep -q "RLIMIT_FSIZE" "$tmp/log" || fail "SIGXFSZ: RLIMIT_FSIZE not named"
grep -q "SIGXFSZ.*out.tsv" "$tmp/log" || fail "SIGXFSZ: the output file is not named"
grep -q "a restart cannot cure" "$tmp/log" || fail "SIGXFSZ: no 'a restart cannot cure'"
echo "ok a worker killed by SIGXFSZ stops the job at once, naming RLIMIT_FSIZE and out.tsv"

# --- a crash still restarts ----------------------------------------------------------
mkdir -p "$tmp/seg"
sed -e 's/^count = .*/count = 200000/' -e '/^\[gen\]/a rate = 50000' "$tmp/fsz/job.conf" > "$tmp/seg/job.conf"
# Regression: $tmp/log still held the previous run's start line until the
# background shell truncated it, so wait_started could return at once, before
# any worker was forked, and pgrep finding none ended the test (set -e).
: > "$tmp/log"
(cd "$tmp/seg" && exec "$shmrun" job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "crash: no start"
for _ in $(seq 100); do w=$(first_child "$launcher"); [ -n "$w" ] && break; sleep 0.05; done
[ -n "$w" ] || fail "crash: no worker to kill"
kill -SEGV "$w"
rc=0
wait "$launcher" || rc=$?
launcher=
[ $rc -eq 0 ] || fail "crash: exit $rc, expected 0 after a restart"
grep -q "restart 1 of" "$tmp/log" || fail "crash: not restarted"
echo "ok a worker killed by SIGSEGV is still restarted"
