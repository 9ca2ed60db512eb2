#!/usr/bin/env bash
# tests/integration/sources.sh SHMRUN: sources across stops, restores and rates
# (issue 8, items 1, 2, 7, 11, 17).
#   - a source instance that had finished restores as finished: stopped and
#     resumed (sequence, file_source), after kill -9 of a worker, and after a
#     --rescale that deals an instance no entry, every value appears once;
#   - a worker without tasks, rings, state or keys idles; the job exits 0 with
#     the right output, with and without checkpoint_dir;
#   - an input file replaced, modified in place or truncated between stop and
#     resume is refused before anything starts (exit 2, naming it); one that
#     only grew resumes and its appended bytes are not read;
#   - FIFOs, devices, /proc and /sys files are refused before anything starts
#     (by `check` too);
#   - a job directory moved between stop and resume resumes (positions are
#     saved relative to the conf's directory); a copied one is refused;
#   - a symbolic link to a directory named in path (or matched) is followed;
#     a named directory without files warns, and alone is refused;
#   - every brace alternative in path is an entry of its own: one naming a
#     missing file, or a pattern matching nothing, is refused by check and run
#     (exit 2, file:line, the path), like the same entry written alone;
#   - `rate` holds for the whole stage (one piece, or instances on two
#     workers), and a worker waiting for its rate-limited source sleeps.
set -euo pipefail
shmrun=${1:?usage: sources.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

# start DIR [args]: run job.conf of DIR in the background; log in $tmp/log
start() {
	local d=$1
	shift
	(cd "$d" && exec "$shmrun" "$@" job.conf) 2> "$tmp/log" &
	launcher=$!
}
finish() { # name: wait for the background run; it must exit 0
	local rc=0
	wait $launcher || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "$1: exit status $rc"
}
run() { # dir [env...]: run to completion, log in $tmp/log
	local d=$1
	shift
	(cd "$d" && env "$@" "$shmrun" job.conf) 2> "$tmp/log"
}
stop_after() { # dir seconds name: start, SIGTERM after the delay, expect exit 0
	start "$1"
	wait_started
	sleep "$2"
	kill -TERM $launcher 2>/dev/null || true
	finish "$3 (stopped)"
	grep -q "stopped at epoch" "$tmp/log" || echo "note: $3 ended before the stop landed"
}
once() { # name expected-file got-file: the same multiset, every line once
	sort "$2" > "$tmp/exp.sorted"
	sort "$3" > "$tmp/got.sorted"
	if ! cmp -s "$tmp/exp.sorted" "$tmp/got.sorted"; then
		diff "$tmp/exp.sorted" "$tmp/got.sorted" | head -8 >&2 || true
		fail "$1: output differs (duplicates or losses)"
	fi
}

seq_conf() { # dir count piece rate width [workers]
	mkdir -p "$1"
	cat > "$1/job.conf" <<CONF
[job]
workers = ${6:-1}
checkpoint_dir = ck
checkpoint_interval = 100ms
[gen]
op = sequence
count = $2
piece_records = $3
rate = $4
width = $5
[out]
op = file_sink
input = gen
path = out.tsv
CONF
}
seq_expect() { # count -> $tmp/expect
	for ((i = 0; i < $1; i++)); do printf 'k0\t%d\n' $i; done > "$tmp/expect"
}

# ---- item 1: a finished instance restores as finished --------------------

# The issue's reproduction: instance 1 (one record) has finished at the stop.
d=$tmp/seq3
seq_conf "$d" 3 1 2 2
stop_after "$d" 0.5 "sequence count=3"
run "$d" || fail "sequence count=3: resume failed"
seq_expect 3
once "sequence count=3 stopped and resumed" "$tmp/expect" "$d/out.tsv"
echo "ok sequence width 2: stopped and resumed, every value once"

# Width 3: instance 2 has one record and ends at once; two stops.
d=$tmp/seq9
seq_conf "$d" 41 20 20 3
stop_after "$d" 0.6 "sequence width 3"
stop_after "$d" 0.5 "sequence width 3, second run"
run "$d" || fail "sequence width 3: resume failed"
seq_expect 41
once "sequence width 3 stopped twice" "$tmp/expect" "$d/out.tsv"
echo "ok sequence width 3: stopped twice, every value once"

# file_source, three files at width 2: instance 1 reads b (one line) and ends.
d=$tmp/fs3
mkdir -p "$d/in"
seq -f "a%g" 1 40 > "$d/in/a"
echo b1 > "$d/in/b"
seq -f "c%g" 1 40 > "$d/in/c"
cat > "$d/job.conf" <<CONF
[job]
checkpoint_dir = ck
checkpoint_interval = 100ms
[read]
op = file_source
path = in/a in/b in/c
rate = 40
width = 2
[out]
op = file_sink
input = read
path = out.tsv
CONF
stop_after "$d" 0.8 "file_source width 2"
run "$d" || fail "file_source width 2: resume failed"
cat "$d"/in/* > "$tmp/expect"
once "file_source width 2 stopped and resumed" "$tmp/expect" "$d/out.tsv"
echo "ok file_source width 2 (3 files): stopped and resumed, every line once"

# kill -9 of a worker: the restart restores instance 1 (on worker 1) finished.
d=$tmp/kill
seq_conf "$d" 61 60 20 2 2
start "$d"
for _ in $(seq 1 200); do # a checkpoint after instance 1 ended
	ls "$d"/ck/ckpt-3/MANIFEST > /dev/null 2>&1 && break
	sleep 0.05
done
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -eq 2 ] || fail "kill -9: expected 2 workers, found ${#ws[@]}"
kill -9 "${ws[0]}"
finish "kill -9 of a worker"
grep -q "restart 1 of" "$tmp/log" || echo "note: kill -9 landed after the end"
seq_expect 61
once "sequence after kill -9 of a worker" "$tmp/expect" "$d/out.tsv"
echo "ok kill -9 of a worker: restarted, every value once"

# --rescale 2 -> 6: 8 ranges of 5, a few done at the stop; the remaining
# ones are dealt to 6 instances, so the last ones get none.
d=$tmp/rescale
seq_conf "$d" 40 5 20 2
stop_after "$d" 1.0 "rescale, before"
sed -i 's/^width = 2/width = 6/' "$d/job.conf"
(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || fail "--rescale to width 6: exit $?"
seq_expect 40
once "sequence rescaled 2 -> 6" "$tmp/expect" "$d/out.tsv"
echo "ok --rescale 2 -> 6 (instances dealt no range): every value once"

# ---- item 2: workers with nothing to do -----------------------------------

zero_conf() { # dir workers vnodes gen-width count-width ckpt(0/1)
	mkdir -p "$1"
	{
		echo "[job]"
		echo "workers = $2"
		echo "vnodes = $3"
		[ "$6" = 1 ] && printf 'checkpoint_dir = ck\ncheckpoint_interval = 50ms\n'
		cat <<CONF
[gen]
op = sequence
count = 5000
keys = 37
width = $4
[count]
op = count
input = gen by key
width = $5
[out]
op = file_sink
input = count
path = out.tsv
CONF
	} > "$1/job.conf"
}
zero_conf "$tmp/zref" 1 256 1 1 0
run "$tmp/zref" || fail "zero cases: reference run failed"
for ck in 0 1; do
	for c in "2 256 1 1" "3 256 2 2" "2 1 1 1" "4 256 1 1"; do
		d=$tmp/zero-$ck-${c// /-}
		zero_conf "$d" $c $ck
		run "$d" || fail "workers/vnodes/widths $c (checkpoints $ck): exit $?"
		once "workers/vnodes/widths $c (checkpoints $ck)" "$tmp/zref/out.tsv" "$d/out.tsv"
	done
done
echo "ok idle workers (no task, ring, state or key): exit 0, exact output, with and without checkpoints"

# An idle worker takes part in a stop and a resume.
d=$tmp/zero-stop
seq_conf "$d" 60 10 40 1 2
stop_after "$d" 0.7 "idle worker, stop"
run "$d" || fail "idle worker: resume failed"
seq_expect 60
once "idle worker stopped and resumed" "$tmp/expect" "$d/out.tsv"
echo "ok idle worker: stopped and resumed, exact"

# ---- item 7: inputs changed between stop and resume ----------------------

fs_case() { # name: a stopped single-file job in $tmp/fsc-name, reading in/data
	d=$tmp/fsc-$1
	mkdir -p "$d/in"
	seq -f "line-%g" 1 2000 > "$d/in/data"
	cat > "$d/job.conf" <<CONF
[job]
checkpoint_dir = ck
checkpoint_interval = 50ms
[read]
op = file_source
path = in/data
rate = 500
[out]
op = file_sink
input = read
path = out.tsv
CONF
	start "$d"
	wait_started
	# a checkpoint past the first (ckpt-2 lives only ~100 ms: any later one)
	for _ in $(seq 1 400); do
		ls "$d"/ck/ckpt-*/MANIFEST 2> /dev/null | qgrep -v '/ckpt-1/' && break
		sleep 0.02
	done
	kill -TERM $launcher
	finish "$1 (stopped)"
	grep -q "stopped at epoch" "$tmp/log" || fail "$1: the job ended before the stop"
}
refused() { # name what: the resume is refused with exit 2, naming the file
	local rc=0
	run "$d" || rc=$?
	[ $rc -eq 2 ] || fail "$1: resume exit status $rc, expected 2"
	grep -q "input '.*in/data' changed since checkpoint epoch" "$tmp/log" ||
		fail "$1: the refusal does not name the file"
	grep -q "$2" "$tmp/log" || fail "$1: the refusal does not say '$2'"
	grep -q "STREAM_RESET_STATE=1" "$tmp/log" || fail "$1: the refusal does not say what to do"
	grep -q "nothing was started" "$tmp/log" || fail "$1: refused after starting"
}

fs_case replaced
seq -f "other-%g" 1 2000 > "$d/in/new" && mv "$d/in/new" "$d/in/data"
refused "replaced file" "it was replaced"
run "$d" STREAM_RESET_STATE=1 || fail "replaced file: STREAM_RESET_STATE=1 run failed"
grep -q "^other-2000$" "$d/out.tsv" || fail "replaced file: a fresh start did not read the new file"
echo "ok file replaced (mv) between stop and resume: refused, exit 2; STREAM_RESET_STATE=1 reads it"

fs_case modified
printf 'LINE' | dd of="$d/in/data" bs=1 seek=0 conv=notrunc status=none
touch -d '2001-01-01' "$d/in/data"
refused "file modified in place" "modified in place"
echo "ok file modified in place (same inode and size): refused, exit 2"

fs_case truncated
truncate -s 100 "$d/in/data"
refused "truncated file" "it shrank"
echo "ok file truncated: refused, exit 2"

fs_case grown
seq -f "more-%g" 1 50 >> "$d/in/data"
run "$d" || fail "grown file: resume exit $?"
seq -f "line-%g" 1 2000 > "$tmp/expect"
once "grown file" "$tmp/expect" "$d/out.tsv"
echo "ok file that only grew: resumed, each line once, the appended bytes not read"

# a job directory moved (mv, same file system) between stop and resume: the
# saved positions name files relative to the conf's directory, so it resumes
fs_case moved
mv "$d" "$d.moved"
d=$d.moved
run "$d" || fail "moved job directory: resume exit status $?"
grep -q "changed since checkpoint" "$tmp/log" && fail "moved job directory: refused"
seq -f "line-%g" 1 2000 > "$tmp/expect"
once "moved job directory" "$tmp/expect" "$d/out.tsv"
echo "ok job directory moved between stop and resume: resumed, each line once"

# a copy (cp -a, new inodes) of a stopped job is refused, naming the file
fs_case copied
cp -a "$d" "$d.copy"
d=$d.copy
refused "copied job directory" "it was replaced"
echo "ok job directory copied between stop and resume: refused (new inodes), exit 2"

# ---- item 11: non-regular inputs ------------------------------------------

d=$tmp/special
mkdir -p "$d"
mkfifo "$d/fifo"
sysfile=
for f in /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/profiling \
	/sys/devices/system/cpu/online /sys/power/state; do
	[ -r "$f" ] && { sysfile=$f; break; }
done
for p in "$d/fifo" /dev/null /proc/self/status $sysfile; do
	cat > "$d/job.conf" <<CONF
[read]
op = file_source
path = $p
[out]
op = null_sink
input = read
CONF
	rc=0
	timeout 20 "$shmrun" "$d/job.conf" 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "input $p: exit status $rc, expected 2 (124 = it hung)"
	grep -q "job.conf:3: stage 'read' \[0\]: input '$p' in path = " "$tmp/log" ||
		fail "input $p: the refusal does not name the stage, path and key"
done
echo "ok FIFO, device, /proc and /sys ($sysfile) inputs: refused before starting, exit 2"
# `shmrun check` refuses them too (prepare), not only a run
rc=0
timeout 20 "$shmrun" check "$d/job.conf" 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] || fail "check of input ${sysfile:-/proc/self/status}: exit $rc, expected 2"
grep -q "pseudo file system" "$tmp/log" || fail "the /sys or /proc refusal does not say why"
echo "ok check refuses a pseudo file system input, saying why"

# ---- a symbolic link to a directory named in path is followed -------------

d=$tmp/symdir
mkdir -p "$d/data/sub" "$d/empty"
seq -f "d-%g" 1 5 > "$d/data/a.txt"
seq -f "s-%g" 1 3 > "$d/data/sub/b.txt"
echo "other" > "$d/other.txt"
ln -s data "$d/dsym"
ln -s data "$d/data/sub/loop" # a link inside a directory: not followed
symconf() { # path value
	cat > "$d/job.conf" <<CONF
[read]
op = file_source
path = $1
[out]
op = file_sink
input = read
path = out.tsv
CONF
}
symconf "dsym other.txt"
run "$d" || fail "symlinked directory: exit $?"
{ seq -f "d-%g" 1 5; seq -f "s-%g" 1 3; echo other; } > "$tmp/expect"
once "symlinked directory and a file" "$tmp/expect" "$d/out.tsv"
symconf "dsym"
run "$d" || fail "symlinked directory alone: exit $?"
{ seq -f "d-%g" 1 5; seq -f "s-%g" 1 3; } > "$tmp/expect"
once "symlinked directory alone" "$tmp/expect" "$d/out.tsv"
symconf "ds*"
run "$d" || fail "symlinked directory by a pattern: exit $?"
once "symlinked directory by a pattern" "$tmp/expect" "$d/out.tsv"
for v in "dsym/" "dsym//" "ds*/"; do # a trailing slash still names the link
	symconf "$v"
	run "$d" || fail "symlinked directory as $v: exit $?"
	once "symlinked directory as $v" "$tmp/expect" "$d/out.tsv"
done
echo "ok a symlink to a directory, named or matched, is followed (links inside are not)"
# a named directory that yields nothing is said, not skipped silently
symconf "empty other.txt"
run "$d" || fail "empty directory and a file: exit $?"
grep -q "WARN  launcher: job.conf:[0-9]*: stage 'read' \[0\]: input directory '.*empty' (in path) holds no regular file" "$tmp/log" ||
	fail "an empty named directory is skipped without a warning naming file:line: $(grep WARN "$tmp/log")"
symconf "empty"
rc=0
run "$d" || rc=$?
[ $rc -eq 2 ] || fail "only an empty directory: exit $rc, expected 2"
echo "ok a named directory without files: a warning; nothing at all: refused, exit 2"
# ---- brace alternatives: each is an entry of its own (B4) -----------------
# A brace alternative without wildcards names a file: missing, it is refused
# like a plain missing path, by check and by the run (exit 2, file:line, the
# path); one with a wildcard that matches nothing is refused like a plain
# pattern that matches nothing.
brace_refused() { # name path-value message: check and run exit 2 saying it
	local cmd rc
	symconf "$2"
	rm -f "$d/out.tsv"
	for cmd in check run; do
		rc=0
		if [ $cmd = check ]; then
			(cd "$d" && "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" || rc=$?
		else
			run "$d" > /dev/null || rc=$?
		fi
		[ $rc -eq 2 ] || fail "$1: shmrun $cmd exited $rc, expected 2"
		grep -qF -- "$3" "$tmp/log" || {
			cat "$tmp/log" >&2
			fail "$1: shmrun $cmd does not say: $3"
		}
	done
	[ ! -e "$d/out.tsv" ] || fail "$1: the refused run created its output"
}
brace_refused "brace alternative naming a missing file" "{other,none}.txt" \
	"job.conf:3: stage 'read' [0]: input '$d/none.txt': No such file or directory"
brace_refused "the same file named plainly" "other.txt none.txt" \
	"job.conf:3: stage 'read' [0]: input '$d/none.txt': No such file or directory"
brace_refused "nested brace alternative naming a missing file" "{other,data/{a,zz}}.txt" \
	"job.conf:3: stage 'read' [0]: input '$d/data/zz.txt': No such file or directory"
brace_refused "brace alternative with a wildcard matching nothing" "{other,no*}.txt" \
	"input '$d/no*.txt': No such file or directory (no file matches the pattern)"
brace_refused "a plain pattern matching nothing" "other.txt no*.txt" \
	"input '$d/no*.txt': No such file or directory (no file matches the pattern)"
symconf "{other,data/{a,sub/b}}.txt"
run "$d" || fail "brace alternatives that all exist: exit $?"
{ seq -f "d-%g" 1 5; seq -f "s-%g" 1 3; echo other; } > "$tmp/expect"
once "brace alternatives that all exist" "$tmp/expect" "$d/out.tsv"
symconf "{oth*,data/a.txt}"
run "$d" || fail "brace alternatives with a matching wildcard: exit $?"
{ seq -f "d-%g" 1 5; echo other; } > "$tmp/expect"
once "brace alternatives with a matching wildcard" "$tmp/expect" "$d/out.tsv"
echo "ok a brace alternative naming a missing file (or a pattern matching nothing) is refused by check and run, exit 2"

# ---- item 17, item 11: rate per stage; a paced worker sleeps ---------------

timed() { # dir -> elapsed seconds in $elapsed
	local t0 t1
	t0=$(date +%s.%N)
	run "$1" || fail "$1: exit $?"
	t1=$(date +%s.%N)
	elapsed=$(echo "$t1 - $t0" | bc)
}
rate_conf() { # dir workers width piece
	mkdir -p "$1"
	cat > "$1/job.conf" <<CONF
[job]
workers = $2
[gen]
op = sequence
count = 4000
piece_records = $4
rate = 1000
width = $3
[out]
op = null_sink
input = gen
CONF
}
# one piece at width 2: instance 1 has nothing; the stage still runs at 1000/s
rate_conf "$tmp/rate1" 1 2 1000000
timed "$tmp/rate1"
echo "$elapsed >= 3.5 && $elapsed < 6.5" | bc | qgrep 1 ||
	fail "rate 1000, width 2, one piece: 4000 records took $elapsed s, expected ~4 s"
# two instances on two workers share the stage's rate (not 1000/s each)
rate_conf "$tmp/rate2" 2 2 2000
timed "$tmp/rate2"
echo "$elapsed >= 3.5 && $elapsed < 6.5" | bc | qgrep 1 ||
	fail "rate 1000 on 2 workers: 4000 records took $elapsed s, expected ~4 s"
echo "ok rate holds for the stage (one piece at width 2; two workers)"

d=$tmp/sleepy
mkdir -p "$d"
cat > "$d/job.conf" <<CONF
[job]
idle = sleep
[gen]
op = sequence
count = 16
rate = 4
[out]
op = null_sink
input = gen
CONF
TIMEFORMAT='%U %S'
cpu=$({ time run "$d" > /dev/null; } 2>&1 | tail -1)
cpu=$(echo "$cpu" | awk '{print $1 + $2}')
echo "$cpu < 0.4" | bc | qgrep 1 ||
	fail "a worker waiting 4 s for a rate-limited source used $cpu s of CPU"
echo "ok a rate-limited source's worker sleeps until its next record ($cpu s CPU in 4 s)"
echo "sources: all ok"
