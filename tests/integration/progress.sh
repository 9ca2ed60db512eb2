#!/usr/bin/env bash
# tests/integration/progress.sh SHMRUN: the progress line (issue 13 item 5),
# in a real terminal (tmux):
#   1. a paced file_source job shows "JOB: P% X of TOTAL, RATE/s, ETA T" on
#      stderr while it runs, TOTAL the input's size, P growing;
#   2. log lines (worker 0's per-epoch lines at debug, every 250 ms) never
#      share a screen line with it: each starts at column 0 on a line of its own;
#   3. at exit it is gone: the last screen lines are the report, no progress
#      text is left on any line;
#   4. none with --no-progress, none when stderr is a file (and no terminal
#      control bytes in that file), none for a job without file_source.
# Skipped (exit 77) without tmux.
set -euo pipefail
shmrun=${1:?usage: progress.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

if ! command -v tmux > /dev/null 2>&1; then
	echo "skipped: tmux is not installed (tools/bootstrap.sh installs it)"
	exit 77
fi
sock="$tmp/tmux.sock"
trap 'tmux -S "$sock" kill-server 2> /dev/null || true; cleanup' EXIT
tmux_keep "$sock"

# 120000 lines of 40 bytes (4.8 MB) at 40000 lines/s: about 3 s
mkdir -p "$tmp/d"
awk 'BEGIN { for (i = 0; i < 120000; i++) printf "line %034d\n", i }' > "$tmp/d/in.txt"
size=$(stat -c %s "$tmp/d/in.txt")
cat > "$tmp/d/prog.conf" <<'CONF'
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 250ms
[read]
op = file_source
path = in.txt
rate = 40000
width = 2
[out]
op = null_sink
input = read
width = 2
CONF

t='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
# run NAME ARGS...: shmrun ARGS in a 160x50 pane; screen captures every 0.1 s
# in $tmp/NAME.N until it exits; its exit status in $tmp/d/NAME.status
run() {
	local name=$1 n=0
	shift
	rm -rf "$tmp/d/ckpt" "$tmp/d/$name.status"
	tmux -S "$sock" new-session -d -s "$name" -x 160 -y 50 \
		"cd '$tmp/d' && clear && \"$shmrun\" $* ; echo \$? > $name.status; sleep 600"
	for _ in $(seq 600); do
		n=$((n + 1))
		tmux -S "$sock" capture-pane -p -t "$name" > "$tmp/$name.$n"
		[ -e "$tmp/d/$name.status" ] && break
		sleep 0.1
	done
	tmux -S "$sock" capture-pane -p -t "$name" > "$tmp/$name.end"
	tmux -S "$sock" kill-session -t "$name" 2> /dev/null || true
	[ "$(cat "$tmp/d/$name.status" 2> /dev/null)" = 0 ] || fail "$name: exit $(cat "$tmp/d/$name.status" 2> /dev/null)"
}
prog="^prog: [0-9]+% [0-9.]+ (B|KiB|MiB) of [0-9.]+ (B|KiB|MiB)(, [0-9.]+ (B|KiB|MiB)/s(, ETA [0-9]+ s)?)?(, checkpoint [0-9]+)?$"

# 1-3. on a terminal, with worker log lines coming every 250 ms
run on --log-level debug prog.conf
grep -Ehx "$prog" "$tmp"/on.[0-9]* > "$tmp/lines" || fail "no progress line on the terminal"
echo "$(wc -l < "$tmp/lines") progress lines seen, e.g. $(tail -1 "$tmp/lines")"
grep -Eq "of 4\.[0-9] MiB" "$tmp/lines" || fail "the total is not the input's size ($size bytes)"
pcts=$(sed -E 's/^prog: ([0-9]+)%.*/\1/' "$tmp/lines" | sort -un)
[ "$(echo "$pcts" | wc -l)" -ge 3 ] || fail "the percentage did not move: $pcts"
grep -Eq ", [0-9.]+ (KiB|MiB)/s, ETA [0-9]+ s(, checkpoint [0-9]+)?$" "$tmp/lines" || fail "no rate and ETA"
grep -Eq ", checkpoint [0-9]+$" "$tmp/lines" || fail "no checkpoint epoch"
# a log line never shares a line with the progress line, nor starts mid-line
grep -Eh "$t" "$tmp"/on.* | grep -Ev "^$t prog (DEBUG|INFO |WARN ) (launcher|worker [01]): " &&
	fail "a log line that does not start at column 0"
grep -Eh "prog: [0-9]+%.*$t|$t.*prog: [0-9]+%" "$tmp"/on.* && fail "a log line and the progress line on one line"
grep -Eqh "^$t prog DEBUG worker 0: epoch [0-9]+ complete$" "$tmp"/on.[0-9]* || fail "no worker log line while it ran"
# gone at exit: the report's last line, then nothing of the progress line
grep -E "^prog: " "$tmp/on.end" && fail "the progress line is left on the screen at exit"
grep -q "^output:\|^records in: " "$tmp/on.end" || grep -q "checkpoint stalls" "$tmp/on.end" ||
	fail "no report at the end: $(cat "$tmp/on.end")"
echo "ok progress line on a terminal: total, percentage, rate, ETA; log lines on lines of their own; gone at exit"

# 4. --no-progress; stderr to a file
run off --no-progress prog.conf
grep -Eh "^prog: [0-9]+%|prog: .* read" "$tmp"/off.* && fail "--no-progress: a progress line"
grep -q "job prog: 2 workers" "$tmp/off.end" || fail "--no-progress: the run did not log"
run file 'prog.conf 2> file.log'
[ -s "$tmp/d/file.log" ] || fail "stderr to a file: nothing written"
grep -Eh "^prog: " "$tmp"/file.* && fail "stderr to a file: a progress line on the terminal"
grep -E "prog: [0-9]+%" "$tmp/d/file.log" && fail "stderr to a file: a progress line in it"
if grep -q $'\r\|\e' "$tmp/d/file.log"; then fail "stderr to a file: terminal control bytes in it"; fi
# a job without file input: nothing to measure, no line, no erasing
sed -e 's/^op = file_source$/op = sequence\ncount = 120000/' -e '/^path = in.txt$/d' \
	"$tmp/d/prog.conf" > "$tmp/d/seq.conf"
run seq --log-level debug seq.conf
grep -Eh "^seq: " "$tmp"/seq.* && fail "a job without file_source: a progress line"
grep -Eqh "^$t seq DEBUG worker 0: epoch [0-9]+ complete$" "$tmp"/seq.* || fail "a job without file_source: the run did not log"
echo "ok no progress line with --no-progress, with stderr to a file, or without file_source"
