#!/usr/bin/env bash
# tests/integration/sinks.sh SHMRUN: what the sinks promise, seen from outside.
#   - lines appear while the job runs: a slow job's output shows at once (the
#     sink flushes when its input drains), and a busy worker's within
#     flush_interval (the clock);
#   - a stop leaves whole lines, nothing held back: SIGTERM without checkpoints
#     (file_sink and stdout_sink), and stdout_sink's at-least-once under
#     checkpoints: every line a checkpoint covers is out when it completes, so a
#     stop/resume (the count=60 rate=20 case: 40 lines were lost) and a kill -9
#     of a worker lose nothing;
#   - file_sink's exactly-once under stop, resume and kill -9 of a worker;
#   - several stdout_sink instances in several workers never tear a line in a
#     pipe, also with lines longer than PIPE_BUF;
#   - long output paths work (a directory path of 300+ bytes), too long ones are
#     refused before the start naming the path (no silent truncation);
#   - an I/O error names the file and what to do (ENOSPC on a full tmpfs).
set -euo pipefail
shmrun=$(realpath "${1:?usage: sinks.sh path/to/shmrun}")
. "$(dirname "$0")/lib.sh"

wait_for() { # seconds command...: poll until the command succeeds
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}

start() { # dir out-file: run job.conf in dir in the background, stdout to out-file
	( cd "$1" && exec "$shmrun" job.conf ) > "$2" 2> "$tmp/log" &
	launcher=$!
	# the tests stop it "after a while": that while starts once it runs
	wait_started || fail "the run did not start within 60 s"
}

stop() { # signal: stop the background run, its exit status in $rc
	kill -"$1" "$launcher" 2>/dev/null || true
	set +e
	wait "$launcher"
	rc=$?
	set -e
	launcher=
}

has_lines() { [ -s "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }

whole_seq() { # file n name: exactly the lines "k0<TAB>i" for i in 0..n-1, in any order
	local got
	got=$(cut -f2 "$1" | sort -n | uniq -c | awk -v n="$2" '
		$1 != 1 || $2 != NR - 1 { bad++ } END { print (NR == n && !bad) ? "ok" : NR " lines, " bad+0 " wrong" }')
	[ "$got" = ok ] || fail "$3: $got (want 0..$(($2 - 1)) once each)"
}

# ---- 1. a slow job's lines appear at once -------------------------------------
d=$tmp/slow; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[gen]
op = sequence
count = 1000
rate = 10
[out]
op = stdout_sink
input = gen
CONF
start "$d" "$d/stdout"
wait_for 10 has_lines "$d/stdout" 3 || fail "slow stdout_sink: no line after 10 s at rate 10"
stop TERM
grep -q '^k0	0$' "$d/stdout" || fail "slow stdout_sink: first line missing"
echo "ok slow job: lines appear at once"

# ---- 2. a busy worker flushes by the clock (flush_interval) ----------------------
# One worker: a fast source keeps it busy (never idle), a slow one feeds file_sink
# through a forward call (no ring whose draining could trigger a flush).
d=$tmp/busy; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[fast]
op = sequence
count = 1000000000000
[drop]
op = null_sink
input = fast
[slow]
op = sequence
count = 1000
rate = 20
[out]
op = file_sink
input = slow
path = out.tsv
flush_interval = 50ms
CONF
start "$d" /dev/null
wait_for 10 has_lines "$d/out.tsv" 3 || fail "busy worker: file_sink showed nothing after 10 s"
stop TERM
echo "ok busy worker: flush_interval"
printf '[g]\nop = sequence\ncount = 1\n[o]\nop = stdout_sink\ninput = g\nflush_interval = 0ms\n' > "$tmp/fi.conf"
set +e; "$shmrun" check "$tmp/fi.conf" 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "fi.conf:7: flush_interval" "$tmp/log" ||
	fail "flush_interval = 0ms: want exit 2 at line 7, got $rc"

# ---- 3. SIGTERM without checkpoints: whole lines, nothing held back ----------------
for op in file_sink stdout_sink; do
	d=$tmp/term-$op; mkdir -p "$d"
	cat > "$d/job.conf" <<CONF
[gen]
op = sequence
count = 100000000
rate = 20000
[out]
op = $op
input = gen
path = out.tsv
CONF
	[ $op = stdout_sink ] && sed -i '/^path/d' "$d/job.conf"
	out=$d/out.tsv
	[ $op = stdout_sink ] && out=$d/stdout
	start "$d" "$d/stdout"
	wait_for 20 has_lines "$out" 2000 || fail "$op: fewer than 2000 lines after 20 s at rate 20000"
	sleep 0.3
	stop TERM
	[ "$(tail -c1 "$out" | od -An -c | tr -d ' ')" = '\n' ] || fail "$op: the output ends inside a line"
	n=$(wc -l < "$out")
	whole_seq "$out" "$n" "$op after SIGTERM"
done
echo "ok SIGTERM without checkpoints: whole lines"

# ---- 4. stdout_sink at-least-once: stop and resume (the issue's case) ---------------
d=$tmp/alo; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[job]
checkpoint_dir = ck
checkpoint_interval = 100ms
[gen]
op = sequence
count = 60
rate = 20
[out]
op = stdout_sink
input = gen
CONF
start "$d" "$d/o1"
wait_for 20 has_lines "$d/o1" 20 || fail "at-least-once: fewer than 20 lines after 20 s"
stop TERM
[ $rc -eq 0 ] || fail "at-least-once: the stop exited $rc"
e=$(sed -n 's/^stopped at epoch \([0-9]*\)$/\1/p' "$tmp/log")
[ -n "$e" ] || fail "at-least-once: no 'stopped at epoch'"
(cd "$d" && "$shmrun" job.conf) > "$d/o2" 2> "$tmp/log" || fail "at-least-once: the resume failed"
last=$(tail -1 "$d/o1" | cut -f2)
first=$(head -1 "$d/o2" | cut -f2)
[ -n "$first" ] && [ "$first" -le $((last + 1)) ] ||
	fail "at-least-once: the first run ended at $last, the resume started at ${first:-nothing}: lines lost"
cat "$d/o1" "$d/o2" | sort -u > "$d/all"
whole_seq "$d/all" 60 "stdout_sink stop/resume"
echo "ok stdout_sink at-least-once over stop/resume (stopped at epoch $e, $last -> $first)"

# ---- 5. at-least-once (stdout_sink) and exactly-once (file_sink) under kill -9 ------
for op in stdout_sink file_sink; do
	d=$tmp/kill-$op; mkdir -p "$d"
	cat > "$d/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ck
checkpoint_interval = 100ms
[gen]
op = sequence
count = 3000
rate = 600
[pass]
op = count
input = gen by key
emit = update
width = 2
[out]
op = $op
input = pass
path = out.tsv
CONF
	[ $op = stdout_sink ] && sed -i '/^path/d' "$d/job.conf"
	out=$d/out.tsv
	[ $op = stdout_sink ] && out=$d/stdout
	# stop, resume, kill -9 a worker during the resume, let it finish
	start "$d" "$d/o1"
	sleep 1.5
	stop TERM
	[ $rc -eq 0 ] || fail "$op: the stop exited $rc"
	[ $op = stdout_sink ] && cp "$d/o1" "$d/stdout.1"
	start "$d" "$d/o2"
	sleep 1.5
	mapfile -t ws < <(pgrep -P "$launcher" || true)
	[ ${#ws[@]} -gt 0 ] || fail "$op: the resumed run has no workers to kill"
	kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}"
	set +e; wait "$launcher"; rc=$?; set -e
	launcher=
	[ $rc -eq 0 ] || fail "$op: the run with a killed worker exited $rc"
	grep -q "restart 1 of" "$tmp/log" || fail "$op: the killed worker was not restarted"
	if [ $op = stdout_sink ]; then
		cat "$d/stdout.1" "$d/o2" > "$d/stdout"
		# count with emit = update: k0 gets 1..3000; every value at least once
		cut -f2 "$d/stdout" | sort -n | uniq > "$d/vals"
		seq 1 3000 | cmp -s - "$d/vals" || fail "stdout_sink: values missing after stop, resume and kill -9"
	else
		cut -f2 "$out" | sort -n > "$d/vals"
		seq 1 3000 | cmp -s - "$d/vals" || fail "file_sink: not each value exactly once after stop, resume and kill -9"
		ls -a "$d" | qgrep '\.staged$' && fail "file_sink: staging files left"
	fi
	echo "ok $op under stop, resume and kill -9"
done

# ---- 6. no torn lines in a pipe shared by several workers ----------------------------
d=$tmp/pipe; mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[job]
workers = 2
[gen]
op = sequence
count = 2000000
keys = 1000
width = 2
[out]
op = stdout_sink
input = gen rebalance
width = 2
CONF
r=$( (cd "$d" && "$shmrun" job.conf 2> "$tmp/log") |
	awk -F'\t' 'NF != 2 || $1 !~ /^k[0-9]+$/ || $2 !~ /^[0-9]+$/ { bad++ } END { print NR, bad + 0 }')
[ "$r" = "2000000 0" ] || fail "pipe: want 2000000 lines, 0 torn; got $r"
# lines longer than PIPE_BUF
awk 'BEGIN { srand(7); for (i = 0; i < 3000; i++) { n = 100 + int(rand() * 12000); s = sprintf("%06d:", i);
	while (length(s) < n) s = s "abcdefghij"; print substr(s, 1, n) } }' > "$d/long.txt"
cat > "$d/long.conf" <<'CONF'
[job]
workers = 2
[read]
op = file_source
path = long.txt
piece_bytes = 64K
width = 2
[out]
op = stdout_sink
input = read
width = 2
CONF
(cd "$d" && "$shmrun" long.conf 2> "$tmp/log") | sort > "$d/long.got"
sort "$d/long.txt" | cmp -s - "$d/long.got" || fail "pipe: lines longer than PIPE_BUF were torn"
echo "ok pipe: no torn lines (2 workers, 2 instances)"

# ---- 7. long output paths ------------------------------------------------------------
long=$tmp/long
for i in 1 2 3 4 5 6; do long=$long/$(printf 'd%.0s' $(seq 60))$i; done
mkdir -p "$long"
[ ${#long} -gt 300 ] || fail "long path: the test's directory is only ${#long} bytes"
for ck in no yes; do
	rm -rf "$long/out" "$long/ck"
	{
		[ $ck = yes ] && printf '[job]\ncheckpoint_dir = ck\n'
		printf '[gen]\nop = sequence\ncount = 1000\n[out]\nop = file_sink\ninput = gen\npath = out/x.tsv\n'
	} > "$long/job.conf"
	(cd "$long" && "$shmrun" job.conf) 2> "$tmp/log" || fail "long path (checkpoints $ck): the run failed"
	whole_seq "$long/out/x.tsv" 1000 "long path (checkpoints $ck)"
done
echo "ok long output path (${#long} bytes), with and without checkpoints"
# The conf in a directory of 3930 bytes: a relative path reaches past PATH_MAX
deep=$tmp
for i in $(seq 16); do deep=$deep/$(printf 'p%.0s' $(seq 230))$i; done
deep=$deep/$(printf 'p%.0s' $(seq $((3930 - ${#deep} - 1))))
[ ${#deep} -eq 3930 ] || fail "the test's deep directory is ${#deep} bytes"
mkdir -p "$deep"
deep_conf() { # ck(yes/no) path-length: a conf whose output path is that long in all
	{
		[ "$1" = yes ] && printf '[job]\ncheckpoint_dir = %s\n' "$tmp/ck"
		printf '[gen]\nop = sequence\ncount = 1\n[out]\nop = file_sink\ninput = gen\npath = %s\n' \
			"$(printf 'q%.0s' $(seq $(($2 - 3930 - 1))))"
	} > "$deep/job.conf"
}
# a path past PATH_MAX: refused before the start, naming it
deep_conf no 4100
set +e; (cd "$deep" && "$shmrun" check job.conf) 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "job.conf:7: .*output path too long (paths must be shorter than 4096 bytes; use a shorter path): $tmp/ppp" "$tmp/log" ||
	fail "a path past PATH_MAX: want exit 2 naming it at line 7, got $rc"
# under PATH_MAX, but its staging path is not: refused with checkpoints, fine without
deep_conf yes 4080
set +e; (cd "$deep" && "$shmrun" check job.conf) 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "output path too long for checkpoints (.*): $tmp/ppp" "$tmp/log" ||
	fail "a 4080-byte path with checkpoints: want exit 2 naming it, got $rc"
# checkpoint_dir with no room left for what goes inside it: refused with file:line
printf '[job]\ncheckpoint_dir = ck\n[gen]\nop = sequence\ncount = 1\n[o]\nop = null_sink\ninput = gen\n' > "$deep/job.conf"
set +e; (cd "$deep" && "$shmrun" check job.conf) 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q "job.conf:2: checkpoint_dir is too long (3933 bytes; at most 3840, .*); use a shorter path: $tmp/ppp" "$tmp/log" ||
	fail "a 3933-byte checkpoint_dir: want exit 2 at line 2, got $rc"
deep_conf no 4080
(cd "$deep" && "$shmrun" job.conf) 2> "$tmp/log" || fail "a 4080-byte path without checkpoints: the run failed"
[ "$(cat "$deep"/qqq*)" = "k0	0" ] || fail "a 4080-byte path: wrong output"
echo "ok too long output paths are refused before the start"

# ---- 8. an I/O error names the file and what to do -------------------------------------
# /dev/full is not a regular file, and outputs must be (refused before the
# start): a full tmpfs (64 KiB) in a private mount namespace gives the ENOSPC
mkdir -p "$tmp/full"
printf '[gen]\nop = sequence\ncount = 200000\n[out]\nop = file_sink\ninput = gen\npath = %s/out.tsv\n' \
	"$tmp/full" > "$tmp/full.conf"
if unshare -m true 2> /dev/null; then
	set +e
	unshare -m bash -c 'mount -t tmpfs -o size=64k tmpfs "$1" || exit 77; "$2" "$3"' \
		_ "$tmp/full" "$shmrun" "$tmp/full.conf" 2> "$tmp/log"
	rc=$?
	set -e
	if [ $rc -eq 77 ]; then
		echo "skipped: ENOSPC (no tmpfs mount in a mount namespace here)"
	else
		[ $rc -eq 1 ] || fail "ENOSPC: want exit 1, got $rc"
		grep -q "writing $tmp/full/out.tsv failed: No space left on device; free space" "$tmp/log" ||
			fail "ENOSPC: the message does not name the file and what to do"
		echo "ok ENOSPC names the file"
	fi
else
	echo "skipped: ENOSPC (no mount namespace here)"
fi
# (file_sink writes only regular files, so not /dev/full: a file size limit
# with SIGXFSZ ignored makes the write fail with EFBIG, as a full disk fails
# with ENOSPC, through the same message)
mkdir -p "$tmp/fsz"
printf '[gen]\nop = sequence\ncount = 200000\n[out]\nop = file_sink\ninput = gen\npath = %s/fsz/out.tsv\n' \
	"$tmp" > "$tmp/fsz.conf"
set +e; (trap '' XFSZ; ulimit -f 100; exec "$shmrun" "$tmp/fsz.conf") 2> "$tmp/log"; rc=$?; set -e
[ $rc -eq 1 ] || fail "EFBIG: want exit 1, got $rc"
grep -q "writing $tmp/fsz/out.tsv failed: File too large; the file reached the file size limit (RLIMIT_FSIZE" "$tmp/log" ||
	fail "EFBIG: the message does not name out.tsv and what to do"
echo "ok an I/O error (EFBIG) names the file"
echo "sinks: all ok"
