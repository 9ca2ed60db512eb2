#!/usr/bin/env bash
# tests/integration/sink_special.sh SHMRUN: file_sink writes only regular files.
#   - an output that exists and is a FIFO, a character device or a directory:
#     check and run refuse it before anything starts (exit 2), naming the
#     stage, the key, the path, and stdout_sink with a redirection; nothing
#     blocks (with and without checkpoint_dir).
#   - width 2: each instance's file is checked.
set -euo pipefail
shmrun=${1:?usage: sink_special.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

conf() { # dir path checkpoints width
	mkdir -p "$1"
	{
		echo "[job]"
		[ "$3" = yes ] && echo "checkpoint_dir = ck"
		cat <<CONF
[gen]
op = sequence
count = 100
[out]
op = file_sink
input = gen
path = $2
width = $4
CONF
	} > "$1/job.conf"
}

n=0
for ck in yes no; do
	for kind in fifo dev dir fifo-w2; do
		n=$((n + 1))
		d="$tmp/$n"
		w=1
		case $kind in
		fifo) conf "$d" fifo.tsv $ck 1; mkfifo "$d/fifo.tsv"; target=fifo.tsv ;;
		dev) conf "$d" /dev/null $ck 1; target=/dev/null ;;
		dir) conf "$d" sub $ck 1; mkdir "$d/sub"; target=sub ;;
		fifo-w2) conf "$d" o.tsv $ck 2; mkfifo "$d/o.tsv.1"; target=o.tsv.1; w=2 ;;
		esac
		for how in check run; do
			rc=0
			if [ $how = check ]; then
				(cd "$d" && timeout 30 "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" || rc=$?
			else
				(cd "$d" && timeout 30 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
			fi
			[ $rc -eq 2 ] || fail "$kind (checkpoints $ck) $how: exit $rc, expected 2"
			grep -q "stage 'out'" "$tmp/log" || fail "$kind $how: stage not named"
			grep -q "path = " "$tmp/log" || fail "$kind $how: key not named"
			grep -q "$target" "$tmp/log" || fail "$kind $how: path not named"
			if [ $kind = dir ]; then # not "redirect: shmrun job.conf > sub", into a directory
				grep -q "name a file (e.g. .*$target/out.tsv)" "$tmp/log" || fail "$kind $how: no 'name a file'"
				if grep -q "stdout_sink" "$tmp/log"; then fail "$kind $how: redirect into a directory suggested"; fi
			else
				grep -q "stdout_sink" "$tmp/log" || fail "$kind $how: stdout_sink not suggested"
			fi
			grep -q "nothing was started" "$tmp/log" || fail "$kind $how: not refused before the start"
		done
		[ -p "$d/fifo.tsv" ] || [ $kind != fifo ] || fail "fifo: the FIFO was replaced"
		echo "ok file_sink to $kind (width $w, checkpoints $ck): check and run refuse it, exit 2"
	done
done
