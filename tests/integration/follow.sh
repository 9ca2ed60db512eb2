#!/usr/bin/env bash
# tests/integration/follow.sh SHMRUN: file_source with follow = true
# (docs/operators.md, "Following files").
#   - exactly-once: a writer appends numbered lines to logs/app.log while the
#     test rotates it by rename-and-create and by copytruncate (the copies
#     matched by `match = app.log*`), kill -9s a worker (restarted from the
#     last checkpoint), kill -9s the launcher, rotates both ways while the job
#     is down (also to a name `match` does not take: found by its inode),
#     runs the same command again, rotates again; then the writer
#     stops, and once the output holds every line SIGTERM stops the job
#     (exit 0, a final checkpoint): every line arrived exactly once, also those
#     of a file that only existed before the start and of a file created in
#     the watched directory while the job ran.
#   - three watches (directories) at width 2, stopped, then --rescale to
#     width 3 under SHMRUN_TEST_NO_INOTIFY=1 (polling alone), with growing,
#     new and rotated files: every line once; each instance says it polls.
#   - a last line without '\n' is emitted once its file is rotated away and
#     drained, not before.
#   - a copy shorter than what was read, made while the job was down: not
#     read again.
#   - max_open_files = 3 with 20 files: at most 3 open, every line once,
#     also lines appended to closed files and while stopped.
#   - without checkpoint_dir SIGTERM ends the job (143) with every line out.
#   - bad input: a FIFO in path, a bad poll_interval or follow value: exit 2,
#     file:line, nothing started.
set -euo pipefail
shmrun=${1:?usage: follow.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
need_fault_injection "$shmrun" # SHMRUN_TEST_NO_INOTIFY
writer=
cleanup_follow() {
	[ -n "$writer" ] && kill -9 "$writer" 2> /dev/null || true
	cleanup
}
trap cleanup_follow EXIT

# wait_lines FILE N [SECONDS]: until FILE holds at least N lines (default 60 s).
wait_lines() {
	local end=$((SECONDS + ${3:-60}))
	until [ "$(cat "$1" 2> /dev/null | wc -l)" -ge "$2" ]; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}
# stop_job: SIGTERM the launcher; it must exit 0 after a final checkpoint.
stop_job() {
	kill -TERM "$launcher"
	local rc=0
	wait "$launcher" || rc=$?
	launcher=
	[ $rc -eq 0 ] || fail "SIGTERM: exit $rc (expected 0)"
	qgrep "stopped at epoch" "$tmp/log" || fail "SIGTERM: no final checkpoint"
}
# exact FILE N: FILE holds 1..N, each once.
exact() {
	sort "$1" | uniq -d > "$tmp/dups"
	[ ! -s "$tmp/dups" ] || fail "$1: $(wc -l < "$tmp/dups") lines twice, e.g. $(sed -n 1p "$tmp/dups")"
	sort -n "$1" > "$tmp/got"
	seq 1 "$2" > "$tmp/want"
	cmp -s "$tmp/got" "$tmp/want" || {
		diff "$tmp/want" "$tmp/got" | head -5 >&2 || true
		fail "$1: $(wc -l < "$1") lines, expected 1..$2 once each"
	}
}

# --- exactly-once under rotations, kills and a restart ---------------------
d="$tmp/one"
mkdir -p "$d/logs"
cat > "$d/job.conf" << 'CONF'
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[src]
op = file_source
path = logs
match = app.log*
follow = true
poll_interval = 100ms
[out]
op = file_sink
input = src
path = out/lines.txt
CONF
seq 1 300 > "$d/logs/app.log.old" # only existed before the start
N=9000
start() {
	(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
	launcher=$!
	wait_started || fail "no start"
	kill -0 "$launcher" 2> /dev/null || fail "the job ended at its start"
}
start
# the writer: lines 301..N, about 1000 a second, reopening app.log each time
# (so a rename makes it create a new one, as logrotate's `create` does)
(
	for ((i = 301; i <= N; i++)); do
		echo "$i" >> "$d/logs/app.log"
		((i % 25)) || sleep 0.025
	done
) &
writer=$!
rot=0
rename() {
	rot=$((rot + 1))
	mv "$d/logs/app.log" "$d/logs/app.log.r$rot" 2> /dev/null || true
}
rename_out() { # to a name `match` does not take: drained through the open fd
	rot=$((rot + 1))
	mv "$d/logs/app.log" "$d/logs/rotated.$rot" 2> /dev/null || true
}
copytruncate() { # the writer paused, as logrotate's copy and truncate race it otherwise
	rot=$((rot + 1))
	kill -STOP "$writer"
	if [ -f "$d/logs/app.log" ]; then
		cp "$d/logs/app.log" "$d/logs/app.log.c$rot"
		: > "$d/logs/app.log"
	fi
	kill -CONT "$writer"
}
sleep 0.7
rename
sleep 0.5
copytruncate
sleep 0.5
w=$(first_child "$launcher")
[ -n "$w" ] || fail "no worker"
kill -9 "$w"
rename
sleep 0.7
copytruncate
sleep 0.5
seq 100001 100100 > "$d/logs/app.log.new" # a new file while the job runs
w=$(pgrep -n -P "$launcher" || true)
[ -n "$w" ] && kill -9 "$w"
sleep 0.7
rename_out
sleep 0.5
# the launcher killed: rotations while the job is down
workers=$(pgrep -P "$launcher" | tr '\n' ' ' || true)
kill -9 "$launcher"
wait "$launcher" 2> /dev/null || true
launcher=
for _ in $(seq 200); do
	alive=0
	for p in $workers; do kill -0 "$p" 2> /dev/null && alive=1; done
	[ $alive = 0 ] && break
	sleep 0.05
done
[ $alive = 0 ] || fail "workers outlived their killed launcher"
sleep 0.3
rename_out # found by its inode under any name in the directory
sleep 0.3
rename
sleep 0.3
copytruncate
sleep 0.5
start
sleep 0.7
copytruncate
sleep 0.5
rename
wait "$writer"
writer=
total=$((N + 100))
wait_lines "$d/out/lines.txt" "$total" 90 || fail "only $(wc -l < "$d/out/lines.txt") of $total lines arrived"
sleep 0.5 # a line too many would come now
stop_job
[ "$(grep -c "was killed by signal 9" "$tmp/log")" -ge 2 ] || fail "test premise: the worker kills were not seen"
qgrep "restoring epoch" "$tmp/log" || fail "the second start did not restore"
grep -v '^1000[0-9][0-9]$\|^100100$' "$d/out/lines.txt" > "$tmp/main.txt"
exact "$tmp/main.txt" "$N"
[ "$(grep -c '^100[01][0-9][0-9]$' "$d/out/lines.txt")" -eq 100 ] || fail "the new file's lines: not 100"
[ "$(ls "$d/logs" | grep -c '^app.log.c')" -ge 4 ] || fail "test premise: fewer copytruncates than planned"
echo "ok exactly-once: $N lines through $rot rotations, 2 worker kills, a launcher kill and a restart"

# --- three watches at width 2, then --rescale to width 3, polling only -------
: > "$tmp/log"
d="$tmp/two"
mkdir -p "$d/a" "$d/b" "$d/c"
cat > "$d/job.conf" << 'CONF'
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 100ms
[src]
op = file_source
path = a b c
follow = true
poll_interval = 50ms
width = 2
[out]
op = file_sink
input = src
path = out/lines.txt
CONF
seq 1 100 > "$d/a/x.log"
seq 101 200 > "$d/b/y.log"
seq 201 300 > "$d/c/w.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 300 || fail "width 2: the first files were not read"
seq 301 400 >> "$d/a/x.log"
wait_lines "$d/out/lines.txt" 400 || fail "width 2: a growing file was not read"
stop_job
# while stopped: more lines; then instances 0, 1, 2 get the watches a, c, b
# (the entries pooled in instance order and dealt out), not a, b, c
seq 401 500 >> "$d/b/y.log"
seq 501 600 >> "$d/c/w.log"
sed -i 's/^width = 2$/width = 3/' "$d/job.conf"
: > "$tmp/log"
(cd "$d" && SHMRUN_TEST_NO_INOTIFY=1 exec "$shmrun" --rescale job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start after --rescale"
seq 601 700 >> "$d/c/w.log"
seq 701 800 > "$d/b/z.log"
mv "$d/a/x.log" "$d/a/x.log.1" # rotated: still read to its end
seq 801 900 >> "$d/a/x.log.1"
seq 901 1000 > "$d/a/x.log"
wait_lines "$d/out/lines.txt" 1000 || fail "width 3: only $(wc -l < "$d/out/lines.txt") of 1000 lines"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 1000
[ "$(grep -c "SHMRUN_TEST_NO_INOTIFY=1: following files by polling every 50 ms" "$tmp/log")" -eq 3 ] ||
	fail "width 3: not every instance polled"
echo "ok three watches: width 2, then --rescale to 3; new, growing and rotated files; polling alone"

# --- a last line without '\n' ------------------------------------------------
: > "$tmp/log"
d="$tmp/partial"
mkdir -p "$d/logs"
sed -e 's/^match = .*//' -e 's/^path = logs$/path = logs\/p.log/' "$tmp/one/job.conf" > "$d/job.conf"
printf '1\n2\npart' > "$d/logs/p.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 2 || fail "partial: the whole lines were not read"
sleep 0.6
qgrep part "$d/out/lines.txt" && fail "partial: a line without '\\n' was emitted while its file was followed"
printf 'ial\n3' >> "$d/logs/p.log"
wait_lines "$d/out/lines.txt" 3 || fail "partial: the completed line was not read"
mv "$d/logs/p.log" "$d/logs/p.log.1" # rotated away: drained, its last line emitted
wait_lines "$d/out/lines.txt" 4 10 || fail "partial: the rotated file's last line was not emitted"
sleep 0.3
stop_job
printf '1\n2\npartial\n3\n' | cmp -s - "$d/out/lines.txt" || fail "partial: got $(tr '\n' ' ' < "$d/out/lines.txt")"
echo "ok a last line without '\\n': held while followed, emitted once rotated away"

# --- a copy shorter than the offset read, made while the job was down -------
: > "$tmp/log"
d="$tmp/short"
mkdir -p "$d/logs"
cp "$tmp/one/job.conf" "$d/job.conf"
seq 1 2000 > "$d/logs/app.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 2000 || fail "short copy: the file was not read"
stop_job
# a copy of its first 1000 lines (all read), then truncated: not read again
head -n 1000 "$d/logs/app.log" > "$d/logs/app.log.1"
seq 2001 2100 > "$d/logs/app.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 2100 || fail "short copy: the new lines were not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 2100
echo "ok a copy shorter than the offset read (made while down) is not read again"

# --- a copy written into a file that was found while still empty ------------
# The copy is tracked (PROBE) while empty; it is filled and the original is
# truncated before the job looks again, so both changes meet in one turn. Its
# head was not read again then: no copy found, the original's unread lines
# lost, and the copy read from 0 later (every line twice: failed under load).
: > "$tmp/log"
d="$tmp/emptycopy"
mkdir -p "$d/logs"
sed 's/^poll_interval = .*/poll_interval = 2s/' "$tmp/one/job.conf" > "$d/job.conf"
seq 1 500 > "$d/logs/app.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 500 || fail "empty copy: the file was not read"
for round in 1 2 3; do
	: > "$d/logs/app.log.c$round" # as cp opens it: found empty
	sleep 0.5
	seq $((round * 1000 + 1)) $((round * 1000 + 200)) >> "$d/logs/app.log" # unread when copied
	cat "$d/logs/app.log" > "$d/logs/app.log.c$round"
	: > "$d/logs/app.log"
	sleep 0.5
done
seq 9001 9010 >> "$d/logs/app.log"
wait_lines "$d/out/lines.txt" 1110 || fail "empty copy: lines missing"
sleep 0.5
stop_job
sort -n "$d/out/lines.txt" > "$tmp/got"
{ seq 1 500; seq 1001 1200; seq 2001 2200; seq 3001 3200; seq 9001 9010; } | sort -n > "$tmp/want"
cmp -s "$tmp/got" "$tmp/want" || {
	diff "$tmp/want" "$tmp/got" | head -5 >&2 || true
	fail "a copy found while empty: $(wc -l < "$tmp/got") lines, want 1110 once each"
}
! grep -q "no copy of it was found" "$tmp/log" || fail "a copy found while empty was not taken for the copy"
echo "ok a copy found while still empty is taken for the copy when the original is truncated"

# --- lines written to a file just after it is renamed away -----------------
# logrotate's create: the writer appends to the renamed file until it reopens
# its log. The file had been quiet for longer than poll_interval, and the
# grace before a renamed file is finished counted from its last growth: it
# was closed at once, and the late lines were lost (12 runs in 13).
: > "$tmp/log"
d="$tmp/late"
mkdir -p "$d/logs"
printf '[job]\ncheckpoint_dir = ckpt\ncheckpoint_interval = 100ms\n[src]\nop = file_source\npath = logs/app.log\nfollow = true\npoll_interval = 1s\n[out]\nop = file_sink\ninput = src\npath = out/lines.txt\n' > "$d/job.conf"
seq 1 100 > "$d/logs/app.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
wait_lines "$d/out/lines.txt" 100 || fail "late lines: the file was not read"
for round in 1 2 3; do
	sleep 1.5 # quiet for longer than poll_interval
	exec 7>> "$d/logs/app.log" # the writer's open log
	mv "$d/logs/app.log" "$d/logs/app.log.$round"
	seq $((round * 1000 + 1)) $((round * 1000 + 50)) >&7 # before it reopens
	exec 7>&-
	seq $((round * 1000 + 51)) $((round * 1000 + 60)) > "$d/logs/app.log" # the new log
done
wait_lines "$d/out/lines.txt" 280 || fail "late lines: $(wc -l < "$d/out/lines.txt") of 280 lines"
sleep 1.5
stop_job
sort -n "$d/out/lines.txt" > "$tmp/got"
{ seq 1 100; for r in 1 2 3; do seq $((r * 1000 + 1)) $((r * 1000 + 60)); done; } > "$tmp/want"
cmp -s "$tmp/got" "$tmp/want" || fail "late lines: $(wc -l < "$tmp/got") lines, want 280 once each"
echo "ok lines written to a file just after it was renamed away are read"

# --- max_open_files: files read to their end are closed, reopened on change --
: > "$tmp/log"
d="$tmp/many"
mkdir -p "$d/logs"
sed 's/^poll_interval = .*/poll_interval = 100ms\nmax_open_files = 3/' "$tmp/one/job.conf" > "$d/job.conf"
for i in $(seq 0 19); do seq $((i * 100 + 1)) $((i * 100 + 50)) > "$d/logs/app.log.$i"; done
start_many() {
	(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
	launcher=$!
	wait_started || fail "no start"
}
open_logs() { # the files of logs/ open in the job's workers
	local n=0
	for p in $(pgrep -P "$launcher"); do
		n=$((n + $(ls -l "/proc/$p/fd" 2> /dev/null | grep -c "$d/logs/" || true)))
	done
	echo $n
}
start_many
wait_lines "$d/out/lines.txt" 1000 || fail "max_open_files: the files were not read"
sleep 0.3
[ "$(open_logs)" -le 3 ] || fail "max_open_files = 3: $(open_logs) files open"
for i in 0 7 13 19; do seq $((i * 100 + 51)) $((i * 100 + 75)) >> "$d/logs/app.log.$i"; done
wait_lines "$d/out/lines.txt" 1100 || fail "max_open_files: lines appended to closed files not read"
stop_job
for i in 2 5 11; do seq $((i * 100 + 51)) $((i * 100 + 75)) >> "$d/logs/app.log.$i"; done
start_many
wait_lines "$d/out/lines.txt" 1175 || fail "max_open_files: lines appended while stopped not read"
sleep 0.3
[ "$(open_logs)" -le 3 ] || fail "max_open_files = 3 after a resume: $(open_logs) files open"
stop_job
for i in $(seq 0 19); do cat "$d/logs/app.log.$i"; done | sort > "$tmp/want"
sort "$d/out/lines.txt" > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || fail "max_open_files: output differs from the files' lines"
echo "ok max_open_files = 3: 20 files followed, closed and reopened, across a resume"

# --- without checkpoint_dir: a stop ends the job, by the signal -------------
: > "$tmp/log"
d="$tmp/nockpt"
mkdir -p "$d/logs"
grep -v '^checkpoint' "$tmp/one/job.conf" > "$d/job.conf"
seq 1 50 > "$d/logs/app.log"
(cd "$d" && exec "$shmrun" job.conf) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "no start"
seq 51 100 >> "$d/logs/app.log"
wait_lines "$d/out/lines.txt" 100 || fail "no checkpoint_dir: lines not read"
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
launcher=
[ $rc -eq 143 ] || fail "no checkpoint_dir: SIGTERM gave exit $rc, expected 143 (died by the signal)"
exact "$d/out/lines.txt" 100
echo "ok without checkpoint_dir: SIGTERM ends the job (143), every line written"

# --- the job of the sections below: one worker, one directory -------------
mkdir -p "$tmp/away/d"
cat > "$tmp/away/job.conf" << 'CONF'
[job]
workers = 1
checkpoint_dir = ck
checkpoint_interval = 100ms
[src]
op = file_source
path = d
follow = true
poll_interval = 100ms
[out]
op = file_sink
input = src
path = out/lines.txt
CONF
start_in() { # DIR [ARGS...]: start the job of DIR/job.conf
	local dir=$1
	shift
	(cd "$dir" && exec "$shmrun" "$@" job.conf) 2>> "$tmp/log" &
	launcher=$!
	wait_started || fail "no start in $dir"
}

# --- a watched directory moved away and back: nothing read twice ------------
# (a scan that cannot list a watch changes nothing; it was taken for "every
# file rotated away": each file finished, then found again and read from 0)
: > "$tmp/log"
d="$tmp/away"
for i in 1 2 3; do echo "$i" > "$d/d/f$i.log"; done
start_in "$d"
wait_lines "$d/out/lines.txt" 3 || fail "away: the files were not read"
mv "$d/d" "$d/d.away"
sleep 1 # several poll_intervals: long enough to finish every file
mv "$d/d.away" "$d/d"
sleep 1
echo 4 >> "$d/d/f1.log"
wait_lines "$d/out/lines.txt" 4 || fail "away: the line appended after the return was not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 4
qgrep "cannot list '.*away/d': No such file or directory: its 3 tracked files are kept" "$tmp/log" ||
	fail "away: no warning about the watch that could not be listed"
qgrep "'.*away/d' can be listed again" "$tmp/log" || fail "away: no word that it is listed again"
# the same with a glob: its directory moved away
: > "$tmp/log"
d="$tmp/awayglob"
mkdir -p "$d/d"
sed 's/^path = d$/path = d\/*.log/' "$tmp/away/job.conf" > "$d/job.conf"
for i in 1 2 3; do echo "$i" > "$d/d/f$i.log"; done
start_in "$d"
wait_lines "$d/out/lines.txt" 3 || fail "away (glob): the files were not read"
mv "$d/d" "$d/d.away"
sleep 1
mv "$d/d.away" "$d/d"
sleep 1
echo 4 >> "$d/d/f2.log"
wait_lines "$d/out/lines.txt" 4 || fail "away (glob): the line appended after the return was not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 4
qgrep "cannot list '.*awayglob/d': No such file or directory: its 3 tracked files are kept" "$tmp/log" ||
	fail "away (glob): no warning about the directory that could not be listed"
d="$tmp/away"
# a directory that cannot be read (a user without permission: root reads anyway)
if [ "$(id -u)" != 0 ]; then
	: > "$tmp/log"
	rm -rf "$d/out" "$d/ck"
	start_in "$d"
	wait_lines "$d/out/lines.txt" 4 || fail "eacces: the files were not read"
	chmod 000 "$d/d"
	sleep 1
	chmod 755 "$d/d"
	sleep 1
	echo 5 >> "$d/d/f2.log"
	wait_lines "$d/out/lines.txt" 5 || fail "eacces: the new line was not read"
	sleep 0.5
	stop_job
	exact "$d/out/lines.txt" 5
	qgrep "cannot list '.*away/d': Permission denied" "$tmp/log" || fail "eacces: no warning"
	# an unreadable subdirectory keeps only its own files: a file of the
	# watch deleted is still finished (its last line without '\n' emitted)
	: > "$tmp/log"
	mkdir "$d/d/sub"
	chmod 000 "$d/d/sub"
	start_in "$d"
	printf '6\n7' > "$d/d/f6.log"
	wait_lines "$d/out/lines.txt" 6 || fail "eacces sub: the new file was not read"
	rm "$d/d/f6.log"
	wait_lines "$d/out/lines.txt" 7 || fail "eacces sub: a deleted file was not finished"
	sleep 0.5
	stop_job
	chmod 755 "$d/d/sub"
	exact "$d/out/lines.txt" 7
	qgrep "cannot list '.*away/d/sub': Permission denied: its 0 tracked files" "$tmp/log" ||
		fail "eacces sub: no warning"
fi
echo "ok a watched directory moved away and back (or unreadable): nothing read twice"

# --- a file moved out of the watch and back: read on from its offset ---------
# (dropped as rotated away, it is remembered by (dev, ino) and head; also
# across a stop: the remembered files are in the checkpoint)
: > "$tmp/log"
d="$tmp/back"
mkdir -p "$d/d"
sed 's/^path = d$/path = d\nmatch = *.log/' "$tmp/away/job.conf" > "$d/job.conf"
seq 1 10 > "$d/d/a.log"
seq 11 20 > "$d/d/b.log"
start_in "$d"
wait_lines "$d/out/lines.txt" 20 || fail "back: the files were not read"
mv "$d/d/a.log" "$d/a.saved"   # out of the directory
mv "$d/d/b.log" "$d/d/b.saved" # out of the match
sleep 1                        # finished and dropped
mv "$d/a.saved" "$d/d/a.log"
mv "$d/d/b.saved" "$d/d/b.log"
sleep 0.5
seq 21 25 >> "$d/d/a.log"
wait_lines "$d/out/lines.txt" 25 || fail "back: lines appended after the return were not read"
mv "$d/d/a.log" "$d/a.saved" # again, then stopped while it is away
sleep 1
stop_job
mv "$d/a.saved" "$d/d/a.log"
seq 26 30 >> "$d/d/a.log"
start_in "$d"
wait_lines "$d/out/lines.txt" 30 || fail "back: lines appended while stopped were not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 30
qgrep "input '.*d/a.log' (was '.*d/a.log') is followed again: reading on from offset 21" "$tmp/log" ||
	fail "back: no word that a.log is followed again"
echo "ok a file moved out of the watch and back, also while stopped: read on from its offset"

# --- more files than fds (ulimit -n): no copies, a warning ------------------
: > "$tmp/log"
d="$tmp/fds"
mkdir -p "$d/d"
cp "$tmp/away/job.conf" "$d/job.conf"
for i in $(seq 1 1000); do echo "$i" > "$d/d/f$i.log"; done
(
	ulimit -n 200
	cd "$d" && exec "$shmrun" job.conf
) 2>> "$tmp/log" &
launcher=$!
wait_started || fail "fds: no start"
wait_lines "$d/out/lines.txt" 1000 90 || fail "fds: only $(wc -l < "$d/out/lines.txt") of 1000 lines"
echo 1001 >> "$d/d/f7.log"
wait_lines "$d/out/lines.txt" 1001 || fail "fds: a line appended later was not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 1001
qgrep "RLIMIT_NOFILE (ulimit -n) is 200, which leaves 136 open followed files per instance, below max_open_files = 1024" "$tmp/log" ||
	fail "fds: no warning naming the fd limit"
qgrep "Too many open files" "$tmp/log" && fail "fds: something ran out of fds"
echo "ok 1000 files under ulimit -n 200: read by turns, once each, fds left to checkpoints"

# --- a file replaced by a longer copy of itself (atomic rename) -------------
: > "$tmp/log"
d="$tmp/replace"
mkdir -p "$d/d"
cp "$tmp/away/job.conf" "$d/job.conf"
echo 1 > "$d/d/x.log"
start_in "$d"
wait_lines "$d/out/lines.txt" 1 || fail "replace: the file was not read"
(
	cat "$d/d/x.log"
	echo 2
) > "$d/x.tmp"
mv "$d/x.tmp" "$d/d/x.log"
sleep 1
echo 3 >> "$d/d/x.log"
wait_lines "$d/out/lines.txt" 3 || fail "replace: $(tr '\n' ' ' < "$d/out/lines.txt"): a line is lost"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 3
echo "ok a file replaced by a longer copy of itself: the new lines read, none twice"

# --- poll_interval and max_open_files change speed, not state ---------------
: > "$tmp/log"
echo 4 >> "$d/d/x.log"
start_in "$d" --set src.poll_interval=1s --set src.max_open_files=10
wait_lines "$d/out/lines.txt" 4 || fail "tuning: the resumed job did not read on"
sleep 0.5
stop_job
qgrep "restoring epoch" "$tmp/log" || fail "tuning: another poll_interval refused the checkpoint"
exact "$d/out/lines.txt" 4
echo "ok poll_interval and max_open_files may change at a resume"

# --- files added by rotations: no "per-worker state grew" warning -----------
# (one entry per followed file: bounded by the directory, not by the data)
: > "$tmp/log"
d="$tmp/grow"
mkdir -p "$d/d"
cp "$tmp/away/job.conf" "$d/job.conf"
start_in "$d"
for i in $(seq 1 60); do
	echo "$i" > "$d/d/r$i.log"
	sleep 0.03 # a few files per checkpoint (checkpoint_interval = 100ms)
done
wait_lines "$d/out/lines.txt" 60 || fail "grow: the files were not read"
sleep 0.5
stop_job
exact "$d/out/lines.txt" 60
qgrep "per-worker state grew at each of the last" "$tmp/log" &&
	fail "grow: the per-worker state growth warning fired for followed files"
echo "ok files added one per checkpoint: no per-worker state growth warning"

# --- bad input ----------------------------------------------------------------
d="$tmp/bad"
mkdir -p "$d/logs"
mkfifo "$d/fifo"
bad() { # conf-text grep-pattern
	printf '%b' "$1" > "$d/job.conf"
	local rc=0
	(cd "$d" && "$shmrun" job.conf) > "$tmp/log" 2>&1 || rc=$?
	[ $rc -eq 2 ] || fail "bad input: exit $rc (expected 2) for: $1"
	grep -q -- "$2" "$tmp/log" || fail "bad input: no message '$2'"
	[ ! -e "$d/out" ] || fail "bad input: output made"
}
sink='[out]\nop = file_sink\ninput = src\npath = out/o.txt\n'
bad "[src]\nop = file_source\npath = fifo\nfollow = true\n$sink" \
	"job.conf:3: stage 'src' \[0\]: input '.*fifo' in path = is not a regular file (a FIFO)"
bad "[src]\nop = file_source\npath = logs\nfollow = true\npoll_interval = 0\n$sink" \
	"job.conf:5: poll_interval = '0' in stage 'src' is not a valid duration"
bad "[src]\nop = file_source\npath = logs\nfollow = true\npoll_interval = 2h\n$sink" \
	"job.conf:5: poll_interval = '2h'"
bad "[src]\nop = file_source\npath = logs\nfollow = maybe\n$sink" \
	"job.conf:4: follow = 'maybe' in stage 'src' is not a valid boolean"
bad "[src]\nop = file_source\npath = nothere\nfollow = true\n$sink" "input '.*nothere': No such file"
echo "ok bad input refused: FIFO, poll_interval, follow, a missing path"
