#!/usr/bin/env bash
# tests/integration/stdin.sh SHMRUN: stdin_source (runtime/ops/stdin_source.c)
# and the refusal of sources that cannot be replayed.
#   - `seq 1 100000 | shmrun job.conf` (2 workers, a rebalance edge into a
#     file_sink of width 1): the output equals the input byte for byte; the
#     run logs that the source cannot be replayed;
#   - a final line without '\n' is a record; empty input gives empty output;
#     an empty line is a record (empty value);
#   - a `tail -F`-style input (a FIFO whose writer stays open): the lines
#     written so far arrive while the job runs, only the worker running the
#     stage holds the input (the other's fd 0 is /dev/null), SIGTERM ends the
#     run (exit 143: no checkpoint_dir, it dies by the signal) and every line
#     written before it is in the output;
#   - a line longer than the largest record (ring_bytes/2 - 32) fails the
#     job naming the limit; a closed standard input fails it at the start;
#   - refused, exit 2, with file:line: width 2; two stdin_source stages; a
#     topology read from standard input (`shmrun check -`, `shmrun -`);
#     checkpoint_dir without allow_data_loss_on_crash (check and run), and
#     `shmrun stress` of a job with it set;
#   - allowed: checkpoint_dir with allow_data_loss_on_crash = true runs and
#     logs the at-most-once line.
set -euo pipefail
shmrun=${1:?usage: stdin.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

d=$tmp/job; mkdir -p "$d"
conf() { # FILE [JOB LINES] [IN LINES]: stdin_source -> file_sink out.txt
	cat > "$1" <<CONF
[job]
workers = 2
${2:-}
[in]
op = stdin_source
${3:-}
[out]
op = file_sink
input = in rebalance
path = out.txt
CONF
}

# ---- 1. a pipe, exactly -------------------------------------------------------
conf "$d/job.conf"
seq 1 100000 | "$shmrun" "$d/job.conf" 2> "$tmp/log" || fail "seq | shmrun failed"
seq 1 100000 | cmp -s - "$d/out.txt" || fail "output differs from the input"
grep -q "WARN .*in: stdin_source cannot be replayed: records it read are lost on a crash" \
	"$tmp/log" || fail "no at-most-once line at the start"
[ "$(grep -c "cannot be replayed" "$tmp/log")" = 1 ] || fail "the at-most-once line is not logged once"
grep -q "records in: *100000$" "$tmp/log" || fail "records in is not 100000"

# ---- 2. final line without '\n', empty lines, empty input -----------------------
printf 'a\n\nb\nlast' | "$shmrun" "$d/job.conf" 2> "$tmp/log" || fail "printf | shmrun failed"
[ "$(cat "$d/out.txt")" = "$(printf 'a\n\nb\nlast')" ] || fail "final line or empty line lost: $(od -c "$d/out.txt")"
"$shmrun" "$d/job.conf" < /dev/null 2> "$tmp/log" || fail "empty input failed"
[ -f "$d/out.txt" ] && [ ! -s "$d/out.txt" ] || fail "empty input did not give an empty output"

# ---- 3. a FIFO that stays open (tail -F), stopped by SIGTERM -------------------
# out of width 2 on both workers: each worker has a task
sed 's/^path = out.txt/width = 2\npath = tail.txt/' "$d/job.conf" > "$d/tail.conf"
lines() { cat "$d"/tail.txt.[01] 2> /dev/null | wc -l; }
mkfifo "$tmp/fifo"
"$shmrun" "$d/tail.conf" < "$tmp/fifo" 2> "$tmp/log" &
launcher=$!
exec 3> "$tmp/fifo"
seq 1 5000 >&3
wait_started || fail "the job did not start"
for _ in $(seq 600); do
	[ "$(lines)" -ge 5000 ] && break
	sleep 0.05
done
[ "$(lines)" = 5000 ] || fail "lines written to an open pipe did not arrive while it stayed open"
# who holds the input: the worker running the stage; the other's fd 0 is /dev/null
holders=0 nulls=0
for p in $(pgrep -P "$launcher"); do
	case $(readlink "/proc/$p/fd/0") in
	/dev/null) nulls=$((nulls + 1)) ;;
	*fifo) holders=$((holders + 1)) ;;
	esac
done
[ "$holders" = 1 ] && [ "$nulls" = 1 ] || fail "fd 0 of the workers: $holders hold the input, $nulls /dev/null (want 1 and 1)"
seq 5001 6000 >&3
for _ in $(seq 600); do
	[ "$(lines)" -ge 6000 ] && break
	sleep 0.05
done
kill -TERM "$launcher"
rc=0; wait "$launcher" || rc=$?
launcher=
exec 3>&-
[ "$rc" = 143 ] || fail "SIGTERM of a job reading an open pipe (no checkpoint_dir) exited $rc, want 143 (dies by the signal)"
cat "$d"/tail.txt.[01] | sort -n | cmp -s - <(seq 1 6000) ||
	fail "output after SIGTERM is not the 6000 lines written"

# ---- 4. a line longer than a record can be; a closed standard input -------------
conf "$d/long.conf" "ring_bytes = 64K"
{ echo short; head -c 40000 /dev/zero | tr '\0' x; echo; } > "$tmp/long.txt"
rc=0; "$shmrun" "$d/long.conf" < "$tmp/long.txt" 2> "$tmp/log" || rc=$?
[ "$rc" != 0 ] || fail "a line of 40000 bytes with ring_bytes = 64K did not fail"
grep -q "line 2 of standard input is longer than 32736 bytes.*raise ring_bytes" "$tmp/log" ||
	fail "the too-long line's message does not name the line and the limit"
rc=0; "$shmrun" "$d/job.conf" <&- 2> "$tmp/log" || rc=$?
[ "$rc" != 0 ] && grep -q "standard input is closed" "$tmp/log" || fail "a closed standard input was not an error (exit $rc)"

# ---- 5. refusals ----------------------------------------------------------------
refused() { # WHAT PATTERN CMD...: CMD exits 2 and says PATTERN
	local what=$1 pat=$2 rc=0
	shift 2
	"$@" > "$tmp/out" 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "$what: exit $rc, want 2"
	grep -q -- "$pat" "$tmp/log" || fail "$what: no message matching '$pat'"
}
conf "$d/w2.conf" "" "width = 2"
refused "width 2" "w2.conf:6: width = 2 of stage 'in': stdin_source .* width must be 1" \
	"$shmrun" check "$d/w2.conf"
cat > "$d/two.conf" <<'CONF'
[a]
op = stdin_source
[b]
op = stdin_source
[out]
op = file_sink
input = a, b
path = out.txt
CONF
refused "two stdin_source" "two.conf:4: stage 'b' is a second stdin_source (stage 'a' at line 1" \
	"$shmrun" check "$d/two.conf"
refused "check -" "<stdin>:5: stage 'in': op = stdin_source reads standard input, but the topology itself" \
	"$shmrun" check - < "$d/job.conf"
refused "run -" "<stdin>:5: stage 'in': op = stdin_source reads standard input, but the topology itself" \
	"$shmrun" - < "$d/job.conf"
conf "$d/ck.conf" "checkpoint_dir = ck"
refused "checkpoint_dir (check)" "ck.conf:5: stage 'in': op = stdin_source cannot be replayed.*remove checkpoint_dir, or set allow_data_loss_on_crash = true" \
	"$shmrun" check "$d/ck.conf"
refused "checkpoint_dir (run)" "ck.conf:5: stage 'in': op = stdin_source cannot be replayed" \
	sh -c 'seq 3 | "$0" "$1"' "$shmrun" "$d/ck.conf"
[ ! -e "$d/ck" ] || fail "a refused run created checkpoint_dir"
conf "$d/maybe.conf" "allow_data_loss_on_crash = maybe"
refused "allow_data_loss_on_crash = maybe" "maybe.conf:3: allow_data_loss_on_crash = 'maybe' in \\[job\\] is not a valid boolean" \
	"$shmrun" check "$d/maybe.conf"

# ---- 6. allowed with allow_data_loss_on_crash -----------------------------------
conf "$d/ok.conf" "checkpoint_dir = ck
allow_data_loss_on_crash = true"
"$shmrun" check "$d/ok.conf" > "$tmp/out" 2> "$tmp/log" || fail "check refused allow_data_loss_on_crash = true"
seq 1 1000 | "$shmrun" "$d/ok.conf" 2> "$tmp/log" || fail "the run with allow_data_loss_on_crash failed"
seq 1 1000 | cmp -s - "$d/out.txt" || fail "output with checkpoints differs from the input"
grep -q "in: stdin_source cannot be replayed: records read since the last checkpoint are lost on a crash (at-most-once)" \
	"$tmp/log" || fail "no at-most-once line with checkpoint_dir"
# the same job again after it finished: new input on stdin is not read (the
# finished checkpoint says there is nothing to do), and it is said at WARN,
# naming the way to read it; it was one INFO line and exit 0
seq 2001 2010 | "$shmrun" "$d/ok.conf" 2> "$tmp/log" || fail "the rerun of a finished job failed"
grep -q "WARN .*is the last checkpoint of a finished run, so nothing is read: stage 'in' (op stdin_source) cannot be replayed, and what it would read now is new input, which this run ignores; STREAM_RESET_STATE=1 starts the job over to read it" \
	"$tmp/log" || fail "a rerun after a finished run did not warn that stdin is not read"
seq 1 1000 | cmp -s - "$d/out.txt" || fail "the rerun of a finished job changed the output"
seq 2001 2010 | STREAM_RESET_STATE=1 "$shmrun" "$d/ok.conf" 2> "$tmp/log" || fail "STREAM_RESET_STATE=1 rerun failed"
seq 2001 2010 | cmp -s - "$d/out.txt" || fail "STREAM_RESET_STATE=1 did not read the new input"
refused "stress" "stage 'in' (op stdin_source) cannot be verified: its input cannot be read again" \
	"$shmrun" stress --runs 1 "$d/ok.conf"
echo "stdin: ok"
