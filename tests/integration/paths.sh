#!/usr/bin/env bash
# tests/integration/paths.sh SHMRUN: the files a job reads and writes, checked
# before the start (issue 8, items 6, 9 and 15).
#   - an output that is an input (same path, a hard link, through a symlinked
#     directory, inside an input directory, matched by an input's glob or brace
#     pattern, nested braces too, inside a directory an input pattern would match
#     once the run creates it, a lock file an input pattern matches; a lookup
#     table; checkpoint_dir inside an input directory) and one output
#     written by two stages: `shmrun check` and the run refuse with exit 2,
#     naming both stages and keys with file:line; the input is unchanged.
#   - an output that is not a regular file (/dev/null, a FIFO) is refused and no
#     lock file is made beside it; a path too long for its lock file
#     (.<name>.lock) is refused by check and run with the whole reason.
#   - an unwritable checkpoint_dir or output directory (as a non-root user),
#     and a read-only file system (a read-only bind mount in a private mount
#     namespace): check and run refuse with exit 2, the path and the reason,
#     without a restart.
#   - an output path naming a directory (last component empty, '.' or '..':
#     o2/, o.tsv/., sub/.., ., /; width 1 and 2) or an existing directory, and
#     an output or checkpoint_dir whose directory cannot be created (under
#     /proc, where root passes every permission test; behind a dangling
#     symlink): check and run refuse with exit 2 and nothing is created (no
#     directory, lock file or output).
#   - checkpoint_dir becoming unwritable while the job runs: the job stops at
#     once (no restart), the message names the full path of the state file.
# Parts that need a non-root user or a mount namespace are skipped, with a
# "skipped:" line, where the sandbox does not allow them.
set -euo pipefail
shmrun=${1:?usage: paths.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

refused() { # name conf pattern...: check and run both exit 2 with every pattern
	local name=$1 conf=$2 rc
	shift 2
	for cmd in check run; do
		set +e
		(cd "$(dirname "$conf")" && "$shmrun" $cmd "$(basename "$conf")") > "$tmp/out" 2> "$tmp/log"
		rc=$?
		set -e
		[ $rc -eq 2 ] || fail "$name: shmrun $cmd exited $rc, expected 2"
		for pat in "$@"; do
			grep -q -- "$pat" "$tmp/log" || fail "$name: shmrun $cmd does not say: $pat"
		done
		grep -q "restart [0-9]* of" "$tmp/log" && fail "$name: shmrun $cmd restarted"
	done
	return 0
}

d="$tmp/io"
mkdir -p "$d/in" "$d/real"
seq 1 1000 > "$d/data.txt"
printf 'k\tv\n' > "$d/table.tsv"
seq 1 10 > "$d/in/a.txt"
ln "$d/data.txt" "$d/alias.txt"
ln -s real "$d/link"
seq 1 5 > "$d/real/x.txt"
sum=$(md5sum "$d/data.txt" "$d/in/a.txt" "$d/real/x.txt" "$d/table.tsv")

job() { # name source-path sink-path [extra [job] lines]
	{
		echo "[job]"
		[ -n "${4:-}" ] && echo "$4"
		cat <<CONF
[read]
op = file_source
path = $2
[out]
op = file_sink
input = read
path = $3
CONF
	} > "$d/$1.conf"
}

job same data.txt ./data.txt
refused "same file" "$d/same.conf" \
	"same.conf:8: stage 'out' path = .*data.txt is the same file as the input of stage 'read' path = .*data.txt (same.conf:4)"
job hardlink data.txt alias.txt
refused "hard link" "$d/hardlink.conf" "same.*file as the input of stage 'read' path"
job symlink real/x.txt link/x.txt
refused "symlinked directory" "$d/symlink.conf" "same file as the input"
job indir in out.tsv
sed -i 's|^path = out.tsv|path = in/sub/out.tsv|' "$d/indir.conf"
refused "inside an input directory" "$d/indir.conf" "lies inside .*/in, an input directory of stage 'read' path"
job glob 'in/*.txt' in/new.txt
refused "input glob" "$d/glob.conf" "in/new.txt matches the input pattern of stage 'read' path = .*in/\*.txt"
job ckindir in out/o.tsv "checkpoint_dir = in/ck"
refused "checkpoint_dir in an input directory" "$d/ckindir.conf" \
	"ckindir.conf:2: checkpoint_dir = .*in/ck lies inside .*an input directory of stage 'read' path = .* (ckindir.conf:5)"
[ ! -e "$d/in/ck" ] || fail "checkpoint_dir in an input directory: it was created"
cat > "$d/table.conf" <<CONF
[read]
op = file_source
path = data.txt
[look]
op = lookup
input = read
table = table.tsv
[out]
op = file_sink
input = look
path = table.tsv
CONF
refused "lookup table" "$d/table.conf" "table.conf:11: stage 'out' path = .*is the same file as the input of stage 'look' table = .* (table.conf:7)"
cat > "$d/twice.conf" <<CONF
[read]
op = file_source
path = data.txt
[a]
op = file_sink
input = read
path = o.tsv
[b]
op = file_sink
input = read
path = ./o.tsv
CONF
refused "two stages, one output" "$d/twice.conf" "twice.conf:11: stage 'b' path = .*o.tsv is also written by stage 'a' path (twice.conf:7)"
# one file under two names (a hard link), by two stages or by two instances
echo > "$d/hx.tsv"
ln "$d/hx.tsv" "$d/hy.tsv"
sed 's|path = o.tsv|path = hx.tsv|; s|path = ./o.tsv|path = hy.tsv|' "$d/twice.conf" > "$d/hard2.conf"
refused "two stages, one file by two names" "$d/hard2.conf" "hard2.conf:11: stage 'b' path = .*hy.tsv is also written by stage 'a' path (hard2.conf:7) as the same file under another name (a hard link)"
echo > "$d/hw.0"
ln "$d/hw.0" "$d/hw.1"
printf '[g]\nop = sequence\ncount = 6\n[a]\nop = file_sink\ninput = g\npath = hw\nwidth = 2\n' > "$d/hard1.conf"
refused "two instances, one file by two names" "$d/hard1.conf" "stage 'a' path = .*hw.1 is also written by stage 'a' path .* (a hard link)"
[ "$(cat "$d/hw.0")" = "" ] || fail "hard link: the refused run wrote into it"
# brace patterns, nested too (every alternative exists: a missing one is refused,
# see "brace alternatives" in sources.sh)
seq 1 10 > "$d/in/b.txt"
sum=$(md5sum "$d/data.txt" "$d/in/a.txt" "$d/real/x.txt" "$d/table.tsv" "$d/in/b.txt")
job brace 'in/{a,b}.txt' in/a.txt
refused "brace pattern" "$d/brace.conf" \
	"brace.conf:8: stage 'out' path = .*in/a.txt is the same file as the input of stage 'read' path (the brace pattern .*in/{a,b}.txt gives)"
job nested 'in/{a,{a,b}}.txt' in/b.txt
refused "nested brace pattern" "$d/nested.conf" "is the same file as the input of stage 'read' path (the brace pattern"
job braceglob 'in/{a,*}.txt' in/new.txt
refused "brace pattern with a glob" "$d/braceglob.conf" "in/new.txt matches the input pattern"
job braceck '{in,real}' out/o.tsv "checkpoint_dir = in/ck"
refused "checkpoint_dir in a brace input" "$d/braceck.conf" "braceck.conf:2: checkpoint_dir = .*in/ck lies inside .*in, an input directory"
[ ! -e "$d/in/ck" ] || fail "checkpoint_dir in a brace input: it was created"
# inside a directory that an input pattern matches once the run creates it
job subdir 'in/*' in/sub/new.txt
refused "directory an input pattern would match" "$d/subdir.conf" \
	"subdir.conf:8: stage 'out' path = .*in/sub/new.txt lies inside .*in/sub, a directory the input pattern matches"
[ ! -e "$d/in/sub" ] || fail "directory an input pattern would match: it was created"
# a lock file an input would read (.o.tsv.lock beside o.tsv)
echo 1 > "$d/in/.other"
job lockread 'in/.o*' in/o.tsv
refused "lock file read by an input" "$d/lockread.conf" "has its lock file .*in/.o.tsv.lock, which matches the input pattern"
[ ! -e "$d/in/o.tsv" ] && [ ! -e "$d/in/.o.tsv.lock" ] || fail "lock file read by an input: created"
rm "$d/in/.other"
# not a regular file: no lock file beside it
job devnull data.txt /dev/null
refused "/dev/null" "$d/devnull.conf" "/dev/null is a character device, and file_sink writes only regular files"
[ ! -e /dev/.null.lock ] || fail "/dev/null: /dev/.null.lock was created"
mkfifo "$d/fifo"
job fifo data.txt fifo
refused "a FIFO" "$d/fifo.conf" "fifo is a FIFO, and file_sink writes only regular files"
[ ! -e "$d/.fifo.lock" ] || fail "FIFO: a lock file was created beside it"
[ "$(md5sum "$d/data.txt" "$d/in/a.txt" "$d/real/x.txt" "$d/table.tsv" "$d/in/b.txt")" = "$sum" ] ||
	fail "an input was changed by a refused run"
# a different file of the same directory is fine
job fine data.txt out/data.txt
(cd "$d" && "$shmrun" fine.conf) 2> "$tmp/log" || fail "a distinct output was refused"
cmp -s "$d/data.txt" "$d/out/data.txt" || fail "distinct output: wrong content"
echo "ok an output (or checkpoint_dir) that is an input is refused by check and run, naming both"

# --- a path too long for its lock file (.<name>.lock: 6 bytes more) -----------------
# a conf in a directory of about 4050 bytes names its output relative to it
deep=$d
while [ $((${#deep} + 201)) -lt 4050 ]; do
	deep=$deep/$(printf 'a%.0s' $(seq 200))
done
mkdir -p "$deep"
for total in 4089 4090 4095; do
	name=$(printf 'n%.0s' $(seq $((total - ${#deep} - 1))))
	printf '[read]\nop = file_source\npath = %s/data.txt\n[out]\nop = file_sink\ninput = read\npath = %s\n' \
		"$d" "$name" > "$deep/long.conf"
	if [ $total -le 4089 ]; then
		(cd "$deep" && "$shmrun" check long.conf) > /dev/null 2> "$tmp/log" ||
			fail "a $total-byte output path (lock path 4095 bytes) was refused"
		continue
	fi
	refused "a $total-byte output path" "$deep/long.conf" \
		"long.conf:7: stage 'out' path: the path is too long for its lock file (.<name>.lock needs 6 bytes more" \
		"choose a shorter path; nothing was started: .*….*nnnn$"
	awk 'length > 1000 { exit 1 }' "$tmp/log" || fail "a $total-byte output path: the message is not shortened"
	ls -a "$deep" | qgrep '^\.n*\.lock$' && fail "a $total-byte output path: a lock file was created"
done
echo "ok a path too long for its lock file is refused by check and run, the message whole"

# --- an output that names a directory, or whose directory cannot be created --------
# Refused by check and run alike (exit 2) before anything is created: no
# checkpoint_dir, no output directory, no lock file, no output file.
od="$tmp/outdir"
mkdir -p "$od/somedir"
seq 1 3 > "$od/in.txt"
ln -s "$od/missing" "$od/dangling"
outjob() { # width path [checkpoint_dir]: $od/t.conf; the path is at line 14
	printf '[job]\ncheckpoint_dir = %s\n[read]\nop = file_source\npath = in.txt\n[o]\nop = file_sink\ninput = read\npath = newdir/o.tsv\n[o2]\nop = file_sink\ninput = read\nwidth = %s\npath = %s\n' \
		"${3:-ck}" "$1" "$2" > "$od/t.conf"
}
outjob 1 o.tsv
before=$(cd "$od" && find . | sort)
untouched() { # name: nothing in $od was created
	[ "$(cd "$od" && find . | sort)" = "$before" ] ||
		fail "$1: the refused run created $(cd "$od" && find . | sort | comm -13 <(echo "$before") - | tr '\n' ' ')"
}
for w in 1 2; do
	for p in o2/ o.tsv/. sub/.. . .. / ./ o2//; do
		e=$p
		[ "${p%/}" = "$p" ] && e=$p/
		outjob $w "$p"
		refused "path = $p, width $w" "$od/t.conf" \
			"t.conf:14: stage 'o2' path = '$p' names a directory; name a file (e.g. ${e}out.tsv)"
		untouched "path = $p, width $w"
	done
done
outjob 1 somedir
refused "an existing directory" "$od/t.conf" "t.conf:14: stage 'o2' .*somedir is a directory, and file_sink writes only regular files"
untouched "an existing directory"
# as root too, where permission bits let everything pass: /proc refuses mkdir
for p in /proc/nope/o.tsv /proc/o.tsv; do
	outjob 1 "$p"
	refused "path = $p" "$od/t.conf" \
		"t.conf:14: stage 'o2' path = $p cannot be written: .*/proc is"
	untouched "path = $p"
done
outjob 1 o.tsv /proc/nope/ck
refused "checkpoint_dir = /proc/nope/ck" "$od/t.conf" "t.conf:2: checkpoint_dir = /proc/nope/ck cannot be written: .*/proc is"
untouched "checkpoint_dir = /proc/nope/ck"
outjob 1 dangling/o.tsv
refused "a dangling symlink" "$od/t.conf" \
	"t.conf:14: stage 'o2' path = .*/dangling/o.tsv cannot be written: .*/dangling is a symbolic link to a missing target"
untouched "a dangling symlink"
[ ! -e "$od/missing" ] || fail "a dangling symlink: its target was created"
# the output or checkpoint_dir itself a dangling symlink: check refuses it as the run does
ln -s "$od/nowhere/o.tsv" "$od/dl"
ln -s "$od/nowhere/ck" "$od/ckl"
before=$(cd "$od" && find . | sort)
outjob 1 dl
refused "an output that is a dangling symlink" "$od/t.conf" \
	"t.conf:14: stage 'o2' path = .*/dl cannot be written: it is a symbolic link to a missing target"
untouched "an output that is a dangling symlink"
outjob 1 o.tsv ckl
refused "a checkpoint_dir that is a dangling symlink" "$od/t.conf" \
	"t.conf:2: checkpoint_dir = .*/ckl cannot be written: it is a symbolic link to a missing target"
untouched "a checkpoint_dir that is a dangling symlink"
# ".." after a directory that does not exist yet: the path is what it leads to
# (x/../in.txt is in.txt), compared like any other; it once slipped past every
# overlap check and the run emptied its own input
outjob 1 x/../in.txt
refused "x/../in.txt" "$od/t.conf" "t.conf:14: stage 'o2' path = .*/x/../in.txt is the same file as the input of stage 'read'"
untouched "x/../in.txt"
[ "$(cat "$od/in.txt")" = "$(seq 1 3)" ] || fail "x/../in.txt: the input was changed"
outjob 1 x/../newdir/o.tsv
refused "x/../newdir/o.tsv" "$od/t.conf" "t.conf:14: stage 'o2' path = .*/x/../newdir/o.tsv is also written by stage 'o' path (t.conf:9)"
untouched "x/../newdir/o.tsv"
outjob 1 o.tsv ck/..
refused "checkpoint_dir = ck/.." "$od/t.conf" "t.conf:2: checkpoint_dir = .*/ck/.. is also written by stage 'o' path (t.conf:9), inside the checkpoint_dir"
untouched "checkpoint_dir = ck/.."
echo "ok dangling symlinks and '..' through missing directories are refused by check and run alike, nothing created"
# a path that only holds dots names a file: it runs
outjob 1 sub/./..o
(cd "$od" && "$shmrun" t.conf) > /dev/null 2> "$tmp/log" || fail "path = sub/./..o: the run failed"
[ "$(cat "$od/sub/..o")" = "$(cat "$od/in.txt")" ] || fail "path = sub/./..o: wrong output"
echo "ok an output naming a directory (o/, o/., o/.., ., /, an existing one) or in a directory that cannot be created (/proc, a dangling symlink) is refused by check and run, nothing created"

# --- unwritable paths, as a user chmod applies to ------------------------------------
nobody=""
if command -v setpriv > /dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
	nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
	$nobody true 2> /dev/null || nobody=""
elif [ "$(id -u)" -ne 0 ]; then
	nobody="env" # not root: chmod binds us already
fi
u="$tmp/user"
mkdir -p "$u"
chmod 755 "$tmp"
chmod 777 "$u"
# the unprivileged user's jobs serve their sockets in a runtime directory of
# its own here (lib.sh's is root's), not in a /tmp/shmrun-65534 left behind
if [ -n "$nobody" ] && [ "$nobody" != env ]; then
	mkdir -m 700 "$tmp/run-nobody"
	chown 65534:65534 "$tmp/run-nobody"
	nobody="$nobody env XDG_RUNTIME_DIR=$tmp/run-nobody"
fi
cat > "$u/job.conf" <<CONF
[job]
checkpoint_dir = ck
checkpoint_interval = 100ms
[gen]
op = sequence
count = 200000
rate = 20000
[out]
op = file_sink
input = gen
path = out/o.tsv
CONF
chmod 644 "$u/job.conf"
as_user() { # cmd...: in $u as the unprivileged user, log in $tmp/log
	(cd "$u" && $nobody "$@") > "$tmp/out" 2> "$tmp/log"
}
if [ -z "$nobody" ] || ! $nobody test -x "$shmrun" || ! $nobody test -r "$u/job.conf"; then
	echo "skipped: unwritable checkpoint_dir and output as a non-root user (no way to drop root here)"
else
	mkdir -m 555 "$u/ck"
	mkdir -m 777 "$u/out"
	for cmd in check run; do
		set +e
		as_user "$shmrun" $cmd job.conf
		rc=$?
		set -e
		[ $rc -eq 2 ] || fail "read-only checkpoint_dir: $cmd exited $rc, expected 2"
		grep -q "job.conf:2: checkpoint_dir = $u/ck cannot be written: directory $u/ck is not writable: Permission denied" "$tmp/log" ||
			fail "read-only checkpoint_dir: $cmd does not name the path and the reason"
		grep -q "restart [0-9]* of" "$tmp/log" && fail "read-only checkpoint_dir: $cmd restarted"
	done
	chmod 777 "$u/ck"
	chmod 555 "$u/out"
	for cmd in check run; do
		set +e
		as_user "$shmrun" $cmd job.conf
		rc=$?
		set -e
		[ $rc -eq 2 ] || fail "read-only output directory: $cmd exited $rc, expected 2"
		grep -q "job.conf:11: stage 'out' path = $u/out/o.tsv cannot be written: directory $u/out is not writable: Permission denied" "$tmp/log" ||
			fail "read-only output directory: $cmd does not name the path and the reason"
	done
	chmod 777 "$u/out"
	echo "ok an unwritable checkpoint_dir or output directory is refused before the start (exit 2)"

	# the checkpoint_dir turns read-only while the job runs: stop at once
	rm -rf "$u/ck" "$u/out"
	mkdir -m 777 "$u/ck" "$u/out"
	(cd "$u" && exec $nobody "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_manifest "$u/ck" || true
	chmod 555 "$u/ck"
	start=$(date +%s)
	set +e
	wait $launcher
	rc=$?
	set -e
	launcher=
	chmod 777 "$u/ck"
	[ $rc -eq 1 ] || fail "checkpoint_dir read-only at run time: exit $rc, expected 1"
	grep -q "restart [0-9]* of" "$tmp/log" && fail "checkpoint_dir read-only at run time: restarted"
	grep -q "writing $u/ck/ckpt-[0-9]*/[a-z]*\.0\.state failed: Permission denied" "$tmp/log" ||
		fail "checkpoint_dir read-only at run time: the message does not name the full path"
	grep -q "a restart cannot cure Permission denied" "$tmp/log" ||
		fail "checkpoint_dir read-only at run time: no 'a restart cannot cure'"
	echo "ok a checkpoint_dir turned read-only at run time stops the job at once, naming the path"

	# the output directory turns read-only while the job runs: the same
	rm -rf "$u/ck" "$u/out"
	mkdir -m 777 "$u/ck" "$u/out"
	(cd "$u" && exec $nobody "$shmrun" job.conf) 2> "$tmp/log" &
	launcher=$!
	wait_manifest "$u/ck" || true
	chmod 555 "$u/out"
	set +e
	wait $launcher
	rc=$?
	set -e
	launcher=
	chmod 777 "$u/out"
	[ $rc -eq 1 ] || fail "output directory read-only at run time: exit $rc, expected 1"
	grep -q "restart [0-9]* of" "$tmp/log" && fail "output directory read-only at run time: restarted"
	grep -q "$u/out/.*Permission denied.*; a restart cannot cure Permission denied" "$tmp/log" ||
		fail "output directory read-only at run time: no message naming the path and 'a restart cannot cure'"
	echo "ok an output directory turned read-only at run time stops the job at once, naming the path"
fi

# --- a read-only file system --------------------------------------------------------
ro="$tmp/ro"
mkdir -p "$ro/ck"
cat > "$ro/job.conf" <<CONF
[job]
checkpoint_dir = ck
[gen]
op = sequence
count = 10
[out]
op = null_sink
input = gen
CONF
if unshare -m true 2> /dev/null; then
	set +e
	unshare -m bash -c 'mount --bind "$1/ck" "$1/ck" && mount -o remount,bind,ro "$1/ck" || exit 77
		cd "$1" && "$2" check job.conf 2> check.log; c=$?
		"$2" job.conf 2> run.log; r=$?
		echo "$c $r" > rcs' _ "$ro" "$shmrun"
	rc=$?
	set -e
	if [ $rc -eq 77 ]; then
		echo "skipped: read-only file system (no read-only bind mount here)"
	else
		cp "$ro/run.log" "$tmp/log"
		[ "$(cat "$ro/rcs")" = "2 2" ] || fail "read-only file system: check/run exited $(cat "$ro/rcs"), expected 2 2"
		grep -q "checkpoint_dir = $ro/ck cannot be written: directory $ro/ck is not writable: Read-only file system" "$ro/check.log" ||
			fail "read-only file system: check does not say so"
		grep -q "Read-only file system" "$ro/run.log" || fail "read-only file system: run does not say so"
		echo "ok a checkpoint_dir on a read-only file system is refused before the start"
	fi
else
	echo "skipped: read-only file system (no mount namespace here)"
fi
