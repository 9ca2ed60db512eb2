#!/usr/bin/env bash
# tests/integration/operator_crash.sh SHMRUN: crash containment (issue 11 §5),
# through the test-only switch SHMRUN_TEST_CALLBACK (runtime/ckpt/fault.h),
# which crashes or hangs a built-in operator's callback:
#   - SIGSEGV in count's process_batch(), armed once a checkpoint is complete:
#     the launcher names the worker, the signal, the callback, the stage,
#     instance and operator (built-in); the job restarts from that checkpoint
#     and its output equals a run without the crash;
#   - abort() in file_sink's commit(): the same, SIGABRT;
#   - SIGFPE in open(), SIGILL in end_of_input(), SIGBUS in process(),
#     without checkpoint_dir: each named, exit 1, no restart;
#   - a process_batch() that sleeps 1 s with operator_timeout = 200ms: one
#     warning naming the call and the pid, then "returned after", and the
#     job completes with the same output; without operator_timeout: silence;
#   - SIGSEGV in prepare(), which runs in the launcher: its own line, and
#     shmrun dies by the signal.
set -euo pipefail
shmrun=${1:?usage: operator_crash.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
need_fault_injection "$shmrun"

conf() { # dir [job lines...]: gen (2) -> count (2, by key, emit = update) -> out (2)
	local d=$1
	shift
	mkdir -p "$d"
	{
		echo "[job]"
		echo "workers = 2"
		printf '%s\n' "$@"
		cat <<'CONF'
[gen]
op = sequence
count = 200000
keys = 500
rate = 200000
width = 2
[count]
op = count
input = gen by key
emit = update
width = 2
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
	} > "$d/job.conf"
}
ckpt=("checkpoint_dir = ckpt" "checkpoint_interval = 50ms")

# The reference: the same job without faults (output as a multiset).
conf "$tmp/ref" "${ckpt[@]}"
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) 2> "$tmp/log" || fail "reference run failed"
cat "$tmp/ref"/out/result.tsv* | sort > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq 200000 ] || fail "reference: $(wc -l < "$tmp/expected") lines"

same_output() { # dir what
	cat "$1"/out/result.tsv* | sort > "$1/got"
	cmp -s "$tmp/expected" "$1/got" || fail "$2: output differs from the run without faults"
}

# armed_run DIR RULE: run DIR's job with SHMRUN_TEST_CALLBACK=RULE:$DIR/fired,
# armed (fired removed) once the first checkpoint is complete. Return: exit status.
armed_run() {
	local d=$1 rc=0
	touch "$d/fired"
	(cd "$d" && SHMRUN_TEST_CALLBACK="$2:$d/fired" exec "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_manifest "$d/ckpt" || fail "$2: no checkpoint"
	rm "$d/fired"
	wait "$launcher" || rc=$?
	launcher=
	[ -e "$d/fired" ] || fail "$2: the fault never fired (the job ended first)"
	return $rc
}

# --- SIGSEGV in process_batch(), with checkpoints -----------------------------------
conf "$tmp/segv" "${ckpt[@]}"
rc=0
armed_run "$tmp/segv" "count.process_batch:segv:1" || rc=$?
[ $rc -eq 0 ] || fail "segv: exit $rc, expected 0 after a restart"
grep -Eq "ERROR launcher: worker [01] \(CPU [0-9]+, tasks [^)]*\) was killed by signal 11 \(SIGSEGV, Segmentation fault\) while in process_batch\(\) of stage count, instance [01], operator count \(built-in\)$" "$tmp/log" ||
	fail "segv: no message naming the signal, callback, stage, instance and operator"
grep -q "restart 1 of 10 in 0.1 s after: worker .*(SIGSEGV, .* while in process_batch() of stage count" "$tmp/log" ||
	fail "segv: the restart does not say why"
grep -Eq "restoring epoch [1-9][0-9]* from" "$tmp/log" || fail "segv: not restored from a checkpoint"
same_output "$tmp/segv" segv
echo "ok SIGSEGV in count's process_batch(): named, restarted from its checkpoint, same output"

# --- abort() in commit(), with checkpoints ------------------------------------------
conf "$tmp/abort" "${ckpt[@]}"
rc=0
armed_run "$tmp/abort" "file_sink.commit:abort:1" || rc=$?
[ $rc -eq 0 ] || fail "abort: exit $rc, expected 0 after a restart"
grep -Eq "was killed by signal 6 \(SIGABRT, Aborted\) while in commit\(\) of stage out, instance [01], operator file_sink \(built-in\)$" "$tmp/log" ||
	fail "abort: no message naming SIGABRT and commit() of stage out"
grep -q "restart 1 of" "$tmp/log" || fail "abort: not restarted"
same_output "$tmp/abort" abort
ls -a "$tmp/abort/out" | qgrep '\.staged$' && fail "abort: staging files left behind"
echo "ok abort() in file_sink's commit(): named, restarted, same output"

# --- SIGFPE, SIGILL, SIGBUS without checkpoints: named, exit 1, no restart -----------
for c in "count.open:fpe:1 8 SIGFPE open() count" \
	 "count.end_of_input:ill:1 4 SIGILL end_of_input() count" \
	 "file_sink.process:bus:100 7 SIGBUS process() out"; do
	read -r rule num name cb stage <<< "$c"
	d="$tmp/nock-$name"
	conf "$d"
	sed -i -e 's/^count = .*/count = 20000/' -e '/^rate = /d' "$d/job.conf"
	rc=0
	(cd "$d" && SHMRUN_TEST_CALLBACK=$rule timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 1 ] || fail "$name: exit $rc, expected 1"
	grep -Eq "was killed by signal $num \($name, [^)]*\) while in ${cb//[()]/.} of stage $stage, instance [01], operator [a-z_]+ \(built-in\)" "$tmp/log" ||
		fail "$name: no message naming $name and $cb of stage $stage"
	grep -q "no checkpoint_dir: not restarted" "$tmp/log" || fail "$name: not 'not restarted'"
	echo "ok $name in $cb of stage $stage without checkpoints: named, exit 1"
done

# --- a callback that does not return within operator_timeout ------------------------
conf "$tmp/hang" "${ckpt[@]}" "operator_timeout = 200ms"
rc=0
armed_run "$tmp/hang" "count.process_batch:hang=1000:1" || rc=$?
[ $rc -eq 0 ] || fail "hang: exit $rc, expected 0"
grep -Eq "WARN  launcher: worker [01] \(pid [0-9]+, CPU [0-9]+\): process_batch\(\) of stage count, instance [01], operator count \(built-in\) has not returned for 0\.[2-9][0-9] s \(operator_timeout 0\.2 s\); the job waits for it\. If it is stuck, \`kill -KILL [0-9]+\` ends the worker: the job then restarts from its last complete checkpoint" "$tmp/log" ||
	fail "hang: no operator_timeout warning naming the call"
# one report for the hung call; under load another call (a sink's) may pass
# operator_timeout too and be reported on its own line, which is not a repeat
[ "$(grep "has not returned" "$tmp/log" | grep -cF "process_batch() of stage count")" -eq 1 ] ||
	fail "hang: the hung call reported more than once"
grep -Eq "INFO  launcher: worker [01] \(pid [0-9]+\): process_batch\(\) of stage count, instance [01], operator count \(built-in\) returned (after about|within) (0\.[89]|[1-9]\.[0-9])[0-9] s" "$tmp/log" ||
	fail "hang: no 'returned after' line"
grep -q "restart [0-9]* of" "$tmp/log" && fail "hang: restarted"
same_output "$tmp/hang" hang
echo "ok a process_batch() sleeping 1 s: reported once past operator_timeout = 200ms, then its return; the job completes"

conf "$tmp/quiet" "${ckpt[@]}"
rc=0
armed_run "$tmp/quiet" "count.process_batch:hang=500:1" || rc=$?
[ $rc -eq 0 ] || fail "no timeout: exit $rc"
grep -q "has not returned" "$tmp/log" && fail "no timeout: reported without operator_timeout"
echo "ok without operator_timeout nothing is reported"

# --- prepare() runs in the launcher: its own line, shmrun dies by the signal ---------
mkdir -p "$tmp/prep"
echo hello > "$tmp/prep/in.txt"
cat > "$tmp/prep/job.conf" <<'CONF'
[read]
op = file_source
path = in.txt
[out]
op = null_sink
input = read
CONF
rc=0
(cd "$tmp/prep" && SHMRUN_TEST_CALLBACK=file_source.prepare:segv:1 timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 139 ] || fail "prepare: exit $rc, expected 139 (SIGSEGV)"
grep -qx "ERROR launcher: prepare() of stage read, instance 0, operator file_source (built-in) crashed with SIGSEGV in the launcher, before any worker started; nothing was started" "$tmp/log" ||
	fail "prepare: no line naming prepare() of stage read"
echo "ok SIGSEGV in prepare() (in the launcher): named, shmrun dies by SIGSEGV"
