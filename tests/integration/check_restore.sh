#!/usr/bin/env bash
# tests/integration/check_restore.sh SHMRUN: `shmrun check` makes the checks a
# run makes before it starts, the restore's included, and the help's words
# are true.
#   - a checkpoint of another topology (a width changed): check and run both
#     refuse with exit 2 ("nothing was started"), check touches nothing;
#     STREAM_RESET_STATE=1 check says the checkpoints would be moved aside
#     (exit 0, nothing moved); check --rescale plans the rescale (exit 0);
#     STREAM_RESET_STATE=2 is refused by check as by a run (exit 2).
#     A refused run removes an output file it created (empty).
#   - --rescale with no checkpoint to rescale (or no checkpoint_dir): check
#     --rescale and the run refuse it alike, exit 2, in the same words, naming
#     job.conf:line of checkpoint_dir and what to do; the job does not run.
#   - --help says how a stop by signal ends; -h/--help with an extra argument
#     is a usage error, as --version is.
set -euo pipefail
shmrun=${1:?usage: check_restore.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"

d="$tmp/j"
mkdir -p "$d"
cat > "$d/job.conf" <<'CONF'
[job]
workers = 2
checkpoint_dir = ck
[gen]
op = sequence
count = 1000
keys = 10
width = 2
[c]
op = count
input = gen by key
width = 2
[out]
op = file_sink
input = c
path = out.tsv
CONF
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "first run failed"
ls "$d"/ck/ckpt-*/MANIFEST > /dev/null || fail "no checkpoint"
sed -i '/^op = count/,/^width/s/^width = 2/width = 1/' "$d/job.conf"
before=$(cd "$d" && find . | sort)

rc=0
(cd "$d" && "$shmrun" check job.conf) > "$tmp/out" 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] || fail "check of a changed width: exit $rc, expected 2"
grep -q "different topology" "$tmp/log" || fail "check does not say the checkpoint's topology differs"
grep -q "ok" "$tmp/out" && fail "check printed ok"
[ "$before" = "$(cd "$d" && find . | sort)" ] || fail "check created or moved files"
echo "ok check refuses a checkpoint of another topology (exit 2), touching nothing"

rc=0
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] || fail "run with a changed width: exit $rc, expected 2"
grep -q "nothing was started" "$tmp/log" || fail "run's refusal does not say nothing was started"
echo "ok the run refuses it with exit 2"

# a refusal leaves nothing behind: an output it had to create is removed again
cp -a "$d" "$tmp/j2"
rm "$tmp/j2/out.tsv"
rc=0
(cd "$tmp/j2" && "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] || fail "refused run without its output: exit $rc, expected 2"
[ ! -e "$tmp/j2/out.tsv" ] || fail "the refused run left an empty out.tsv behind"
echo "ok a refused run removes the empty output it created"

rc=0
(cd "$d" && STREAM_RESET_STATE=1 "$shmrun" check job.conf) > "$tmp/out" 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "STREAM_RESET_STATE=1 check: exit $rc, expected 0"
grep -q "would move the checkpoints" "$tmp/log" || fail "STREAM_RESET_STATE=1 check does not say they would be moved"
[ "$before" = "$(cd "$d" && find . | sort)" ] || fail "STREAM_RESET_STATE=1 check moved files"
echo "ok STREAM_RESET_STATE=1 check says the checkpoints would be moved aside, moves nothing"

rc=0
(cd "$d" && "$shmrun" check --rescale job.conf) > "$tmp/out" 2> "$tmp/log" || rc=$?
[ $rc -eq 0 ] || fail "check --rescale: exit $rc, expected 0"
grep -q "rescale would re-assign" "$tmp/log" || fail "check --rescale does not say it would rescale"
[ "$before" = "$(cd "$d" && find . | sort)" ] || fail "check --rescale wrote files"
echo "ok check --rescale plans the rescale, writes nothing"

for how in check run; do
	rc=0
	if [ $how = check ]; then
		(cd "$d" && STREAM_RESET_STATE=2 "$shmrun" check job.conf) > /dev/null 2> "$tmp/log" || rc=$?
	else
		(cd "$d" && STREAM_RESET_STATE=2 "$shmrun" job.conf) 2> "$tmp/log" || rc=$?
	fi
	[ $rc -eq 2 ] || fail "STREAM_RESET_STATE=2 $how: exit $rc, expected 2"
	grep -q "STREAM_RESET_STATE=2" "$tmp/log" || fail "STREAM_RESET_STATE=2 $how: not named"
done
echo "ok STREAM_RESET_STATE=2 is refused by check and run (exit 2)"

# --- --rescale with nothing to rescale: check and run agree (exit 2) ---------------
e="$tmp/empty"
mkdir -p "$e"
sed 's/^checkpoint_dir = ck$/checkpoint_dir = none/' "$d/job.conf" > "$e/job.conf"
want="rescale refused: job.conf:3: checkpoint_dir $e/none holds no checkpoint to rescale; to start from empty state, run without --rescale"
for how in check run; do
	rc=0
	if [ $how = check ]; then
		(cd "$e" && "$shmrun" check --rescale job.conf) > "$tmp/out" 2> "$tmp/log" || rc=$?
		grep -q "ok" "$tmp/out" && fail "check --rescale, no checkpoint: printed ok"
	else
		(cd "$e" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || rc=$?
		grep -q "nothing was started" "$tmp/log" || fail "run --rescale, no checkpoint: does not say nothing was started"
		[ -e "$e/out.tsv" ] && fail "run --rescale, no checkpoint: the job ran"
	fi
	[ $rc -eq 2 ] || fail "$how --rescale, no checkpoint: exit $rc, expected 2"
	grep -qF "$want" "$tmp/log" || fail "$how --rescale, no checkpoint: does not say: $want"
done
sed '/^checkpoint_dir/d' "$d/job.conf" > "$e/job.conf"
for how in check run; do
	rc=0
	if [ $how = check ]; then
		(cd "$e" && "$shmrun" check --rescale job.conf) > /dev/null 2> "$tmp/log" || rc=$?
	else
		(cd "$e" && "$shmrun" --rescale job.conf) 2> "$tmp/log" || rc=$?
	fi
	[ $rc -eq 2 ] || fail "$how --rescale, no checkpoint_dir: exit $rc, expected 2"
	grep -q -- "--rescale needs checkpoint_dir in \[job\] of job.conf" "$tmp/log" ||
		fail "$how --rescale, no checkpoint_dir: not said"
done
echo "ok --rescale with no checkpoint (or no checkpoint_dir): check and run refuse alike (exit 2)"

# --- help ------------------------------------------------------------------------
"$shmrun" --help > "$tmp/help"
grep -q "128+N stopped" "$tmp/help" && fail "--help still says '128+N stopped by signal N'"
grep -q "dies by signal N" "$tmp/help" || fail "--help does not say a stop by signal dies by it"
for opt in -h --help --version -V; do
	for args in "$opt extra" "extra $opt"; do
		rc=0
		"$shmrun" $args > /dev/null 2> "$tmp/log" || rc=$?
		[ $rc -eq 2 ] || fail "'shmrun $args': exit $rc, expected 2 (usage error)"
		grep -q "takes no arguments" "$tmp/log" || fail "'shmrun $args': no usage message"
	done
	"$shmrun" $opt > /dev/null || fail "'shmrun $opt' alone failed"
done
echo "ok --help tells how a signal ends it; -h/--help/--version with an argument are usage errors"
