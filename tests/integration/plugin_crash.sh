#!/usr/bin/env bash
# tests/integration/plugin_crash.sh SHMRUN PLUGIN_DIR: a plugin that crashes or
# hangs (issue 11 §5), with PLUGIN_DIR/crash.so (tests/plugins/crash.c):
#   - its process() dereferences NULL (segv_at), without checkpoint_dir: the
#     launcher names the worker, SIGSEGV, process(), the stage, the instance,
#     the operator and the plugin's name, version and file; exit 1;
#   - the same once, with checkpoints: restarted from the last checkpoint,
#     output equal to a run without the crash;
#   - abort() (abort_at): SIGABRT, named the same way;
#   - exit(0) in process() (exit_at): a failure, not a job done, named the
#     same way, exit 1; once, with checkpoints: restarted, same output;
#   - a process() that sleeps 1 s with operator_timeout = 200ms: one warning
#     naming the plugin's file, then its return; the job completes with the
#     same output.
set -euo pipefail
shmrun=${1:?usage: plugin_crash.sh path/to/shmrun PLUGIN_DIR}
pdir=$(cd "${2:?usage: plugin_crash.sh path/to/shmrun PLUGIN_DIR}" && pwd -P)
. "$(dirname "$0")/lib.sh"
so="$pdir/crash.so"
[ -f "$so" ] || fail "no $so (build the test_plugins target)"

conf() { # dir "boom keys" [job lines...]: gen (2) -> boom (crash, 2, forward) -> out (2)
	local d=$1 keys=$2
	shift 2
	mkdir -p "$d"
	{
		echo "[job]"
		echo "workers = 2"
		echo "plugins = $so"
		printf '%s\n' "$@"
		cat <<CONF
[gen]
op = sequence
count = 200000
keys = 1000
rate = 200000
width = 2
[boom]
op = crash
input = gen
width = 2
$keys
[out]
op = file_sink
input = boom
path = out/result.tsv
width = 2
CONF
	} > "$d/job.conf"
}
ckpt=("checkpoint_dir = ckpt" "checkpoint_interval = 50ms")
re_op="operator crash of plugin crash 1\.0\.0 \(${so//./\\.}\)"

conf "$tmp/ref" "" "${ckpt[@]}"
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) 2> "$tmp/log" || fail "reference run failed"
cat "$tmp/ref"/out/result.tsv* | sort > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq 200000 ] || fail "reference: $(wc -l < "$tmp/expected") lines"
same_output() { # dir what
	cat "$1"/out/result.tsv* | sort > "$1/got"
	cmp -s "$tmp/expected" "$1/got" || fail "$2: output differs from the run without faults"
}

# --- SIGSEGV, no checkpoints: named, exit 1 -------------------------------------------
conf "$tmp/segv" "segv_at = 5000"
rc=0
(cd "$tmp/segv" && timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 1 ] || fail "segv: exit $rc, expected 1"
grep -Eq "ERROR launcher: worker [01] \(CPU [0-9]+, tasks [^)]*\) was killed by signal 11 \(SIGSEGV, Segmentation fault\) while in process\(\) of stage boom, instance [01], $re_op$" "$tmp/log" ||
	fail "segv: no message naming SIGSEGV, process(), stage boom, the instance and the plugin file"
grep -q "no checkpoint_dir: not restarted" "$tmp/log" || fail "segv: no 'not restarted'"
echo "ok a plugin's NULL dereference in process(): worker, signal, callback, stage, instance, operator and plugin file named"

# --- SIGSEGV once, with checkpoints: restarted, same output ----------------------------
conf "$tmp/segv-ck" "segv_at = 20000
once = fired
after_commit = true" "${ckpt[@]}"
rc=0
(cd "$tmp/segv-ck" && timeout 120 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "segv with checkpoints: exit $rc, expected 0"
[ -e "$tmp/segv-ck/fired" ] || fail "segv with checkpoints: never crashed"
grep -Eq "restart 1 of 10 in 0\.1 s after: worker .*SIGSEGV.* while in process\(\) of stage boom, instance [01], $re_op$" "$tmp/log" ||
	fail "segv with checkpoints: the restart does not name the plugin"
grep -Eq "restoring epoch [1-9][0-9]* from" "$tmp/log" || fail "segv with checkpoints: not restored from a checkpoint"
same_output "$tmp/segv-ck" "segv with checkpoints"
echo "ok the same crash with checkpoints: restarted from the last checkpoint, same output"

# --- abort() ---------------------------------------------------------------------------
conf "$tmp/abort" "abort_at = 3000"
rc=0
(cd "$tmp/abort" && timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 1 ] || fail "abort: exit $rc, expected 1"
grep -Eq "was killed by signal 6 \(SIGABRT, Aborted\) while in process\(\) of stage boom, instance [01], $re_op$" "$tmp/log" ||
	fail "abort: no message naming SIGABRT and the plugin"
echo "ok a plugin's abort(): named"

# --- exit(0) in process(): a failure, never "done" ------------------------------------
conf "$tmp/exit" "exit_at = 3000"
rc=0
(cd "$tmp/exit" && timeout 60 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 1 ] || fail "exit(0): exit $rc, expected 1"
grep -Eq "ERROR launcher: worker [01] \(CPU [0-9]+, tasks [^)]*\) exited with exit status 0 while in process\(\) of stage boom, instance [01], $re_op: an operator must not call exit\(\)" "$tmp/log" ||
	fail "exit(0): no message naming exit status 0, process() and the plugin"
grep -q "job .* done" "$tmp/log" && fail "exit(0): the job was reported done"
conf "$tmp/exit-ck" "exit_at = 60000
once = fired" "${ckpt[@]}"
rc=0
(cd "$tmp/exit-ck" && timeout 120 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "exit(0) with checkpoints: exit $rc, expected 0"
[ -e "$tmp/exit-ck/fired" ] || fail "exit(0) with checkpoints: never exited"
grep -Eq "restart 1 of 10 in 0\.1 s after: worker .*exit status 0 while in process\(\) of stage boom" "$tmp/log" ||
	fail "exit(0) with checkpoints: not restarted"
same_output "$tmp/exit-ck" "exit(0) with checkpoints"
echo "ok a plugin's exit(0) in process(): a failure naming the plugin; with checkpoints restarted, same output"

# --- a process() sleeping 1 s past operator_timeout = 200ms -------------------------------
conf "$tmp/hang" "sleep_at = 20000
sleep = 1s
once = slept" "${ckpt[@]}" "operator_timeout = 200ms"
rc=0
(cd "$tmp/hang" && timeout 120 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "hang: exit $rc, expected 0"
grep -Eq "WARN  launcher: worker [01] \(pid [0-9]+, CPU [0-9]+\): process\(\) of stage boom, instance [01], $re_op has not returned for 0\.[2-9][0-9] s \(operator_timeout 0\.2 s\)" "$tmp/log" ||
	fail "hang: no warning naming the plugin's process()"
# one report for the hung call; under load another call (a sink's) may pass
# operator_timeout too and be reported on its own line, which is not a repeat
[ "$(grep "has not returned" "$tmp/log" | grep -cF "process() of stage boom")" -eq 1 ] ||
	fail "hang: the hung call reported more than once"
grep -Eq "INFO  launcher: worker [01] \(pid [0-9]+\): process\(\) of stage boom, instance [01], $re_op returned (after about|within) [0-9]+\.[0-9]+ s" "$tmp/log" ||
	fail "hang: no 'returned after' line"
grep -q "restart [0-9]* of" "$tmp/log" && fail "hang: restarted"
same_output "$tmp/hang" hang
echo "ok a plugin's process() sleeping 1 s: reported past operator_timeout, then its return; the job completes"
