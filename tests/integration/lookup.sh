#!/usr/bin/env bash
# tests/integration/lookup.sh SHMRUN: the lookup operator (runtime/ops/lookup.c).
#   - sequence -> lookup -> file_sink at widths 1/1/1, 1/2/1, 1/4/1 (and 1/4/1
#     behind a by-key edge), miss = pass and miss = drop: the output equals,
#     line for line after sorting, a reference computed here with awk.
#   - a table line without a TAB, a key twice, an empty table, a missing
#     table: exit 2, naming file:line (or the file), nothing started.
#   - checkpointed run stopped with SIGTERM, the table FILE changed, resumed:
#     the output uses the checkpoint's table, never the file's (per-worker
#     state with rule union restored); a fresh start (STREAM_RESET_STATE=1)
#     does use the changed file, so the check can tell the two apart.
#   - --rescale of the lookup stage 4 -> 2 -> 4 after stops (union: every new
#     instance gets every row): exact output with the checkpoint's table.
#   - a FIFO, device, directory, /proc or /sys table, or one over 1 GiB, is
#     refused by `check` at once (no hang, bounded memory).
#   - --rescale adding a lookup stage: the stage is new to the checkpoint, so
#     it reads the file; records before the stop are not enriched, every
#     record after it is.
set -euo pipefail
shmrun=${1:?usage: lookup.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

N=20000 # records of the plain runs; keys k0..k9
printf 'k0\tzero\nk3\tthree\t3\nk7\t\nzz\tnot a key of the sequence\n' > "$tmp/table.tsv"
printf 'k0\tCHANGED\nk1\tNEW\nk3\tthree\t3\nk7\t\n' > "$tmp/changed.tsv"

# expected N table miss: sequence records enriched from table as lookup must
expected() {
	awk -v n="$1" -v miss="$3" 'BEGIN { FS = "\n" }
		NR == FNR { t = index($0, "\t"); tab[substr($0, 1, t - 1)] = substr($0, t + 1); next }
		END {
			for (i = 0; i < n; i++) {
				k = "k" (i % 10)
				if (k in tab)
					print k "\t" i "\t" tab[k]
				else if (miss == "pass")
					print k "\t" i
			}
		}' "$2" /dev/null | sort
}

# conf DIR COUNT LOOKUP_WIDTH MISS INPUT_KIND [JOB_LINES] [RATE]
conf() {
	mkdir -p "$1"
	cat > "$1/job.conf" <<CONF
[job]
${6:-}
[gen]
op = sequence
count = $2
keys = 10
piece_records = 1000
${7:+rate = $7}
[look]
op = lookup
input = gen$5
table = table.tsv
miss = $4
width = $3
[out]
op = file_sink
input = look
path = out/result.tsv
CONF
}

check_output() { # dir expected-file what
	sort "$1/out/result.tsv" > "$1/got"
	cmp -s "$2" "$1/got" || { diff "$2" "$1/got" | head -5 >&2 || true; fail "$3: output differs"; }
	ls -a "$1/out" | qgrep '\.staged$' && fail "$3: staging files left"
	return 0
}

# 1. Widths, edges and miss policies, without checkpoints.
for miss in pass drop; do
	expected $N "$tmp/table.tsv" $miss > "$tmp/expected.$miss"
done
[ "$(wc -l < "$tmp/expected.pass")" -eq $N ] || fail "reference: wrong line count"
[ "$(wc -l < "$tmp/expected.drop")" -eq $((N * 3 / 10)) ] || fail "reference: wrong drop count"
grep -qxF "k3	13	three	3" "$tmp/expected.pass" || fail "reference: no k3 row"
grep -qxF "k7	17	" "$tmp/expected.pass" || fail "reference: no empty-value row"
grep -qxF "k1	11" "$tmp/expected.pass" || fail "reference: no passed-through row"
for case in "1 pass" "2 pass" "4 pass" "1 drop" "2 drop" "4 drop" "4 pass by" "4 drop by"; do
	set -- $case
	w=$1 miss=$2 kind=${3:+ by key}
	d="$tmp/plain-$w-$miss-${3:-rr}"
	conf "$d" $N "$w" "$miss" "$kind"
	cp "$tmp/table.tsv" "$d/"
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" > /dev/null || fail "$case: exit $?"
	grep -q "stage 'look' \[0\]: table $d/table.tsv: 4 rows" "$tmp/log" || fail "$case: no table log line"
	check_output "$d" "$tmp/expected.$miss" "width 1/$w/1 miss=$miss${kind}"
	echo "ok widths 1/$w/1${kind:+ (by key)}, miss = $miss: exact output"
done

# 2. Bad tables: exit 2 before anything starts, naming file:line.
bad() { # name table-bytes expected-message
	local d="$tmp/bad-$1" rc
	conf "$d" 100 2 pass ""
	[ "$1" = missing ] || printf "$2" > "$d/table.tsv"
	set +e; (cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" > /dev/null; rc=$?; set -e
	[ $rc -eq 2 ] || fail "$1: exit $rc, expected 2"
	grep -qF "$3" "$tmp/log" || fail "$1: no '$3' in the message"
	grep -q "nothing was started" "$tmp/log" || fail "$1: does not say nothing was started"
	[ ! -e "$d/out" ] || fail "$1: the job started (out/ exists)"
	echo "ok bad table ($1): exit 2, '$3'"
}
bad notab 'k0\tzero\nk1 one\nk2\ttwo\n' "$tmp/bad-notab/table.tsv:2: no TAB in this line"
bad emptyline 'k0\tzero\n\nk2\ttwo\n' "$tmp/bad-emptyline/table.tsv:2: no TAB in this line"
bad lastline 'k0\tzero\nk1' "$tmp/bad-lastline/table.tsv:2: no TAB in this line"
bad dupkey 'k0\tzero\nk1\tone\nk0\tnull\n' "$tmp/bad-dupkey/table.tsv:3: key 'k0' is already on line 1"
bad empty '' "table $tmp/bad-empty/table.tsv is empty"
bad missing '' "table $tmp/bad-missing/table.tsv: No such file or directory"

# 3. Checkpointed: stop, change the table file, resume -> the checkpoint's table.
C=400000
expected $C "$tmp/table.tsv" pass > "$tmp/expected.ckpt"
expected $C "$tmp/changed.tsv" pass > "$tmp/expected.changed"
cmp -s "$tmp/expected.ckpt" "$tmp/expected.changed" && fail "reference: the tables give the same output"
CKPT=$'checkpoint_dir = ckpt\ncheckpoint_interval = 100ms'

stop_after() { # dir seconds: start the job, SIGTERM it, expect "stopped at epoch"
	local rc
	(cd "$1" && exec "$shmrun" job.conf) 2> "$tmp/log" > /dev/null &
	launcher=$!
	wait_started
	sleep "$2"
	kill -TERM $launcher 2>/dev/null || true
	set +e; wait $launcher; rc=$?; set -e
	launcher=
	[ $rc -eq 0 ] || fail "$1: SIGTERM: exit $rc, expected 0"
	grep -q "stopped at epoch [0-9]" "$tmp/log" || fail "$1: no 'stopped at epoch'"
	local lines=$(wc -l < "$1/out/result.tsv")
	[ "$lines" -gt 0 ] && [ "$lines" -lt $C ] || fail "$1: $lines lines committed at the stop"
}

d="$tmp/ckpt"
conf "$d" $C 2 pass "" "$CKPT" 200000
cp "$tmp/table.tsv" "$d/"
stop_after "$d" 0.8
cp "$tmp/changed.tsv" "$d/table.tsv"
sed -i 's/^rate = .*/rate = 4000000/' "$d/job.conf" # tuning: same fingerprint
(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" > /dev/null || fail "resume: exit $?"
grep -q "restoring epoch" "$tmp/log" || fail "resume: did not restore"
grep -q "table $d/table.tsv:" "$tmp/log" && fail "resume: the table file was read"
grep -q "CHANGED\|NEW" "$d/out/result.tsv" && fail "resume: output uses the changed file"
check_output "$d" "$tmp/expected.ckpt" "stop, change the table, resume"
echo "ok SIGTERM, table file changed, resume: the checkpoint's table, exact output"

rm -rf "$d/out"
(cd "$d" && STREAM_RESET_STATE=1 "$shmrun" job.conf) 2> "$tmp/log" > /dev/null || fail "reset: exit $?"
grep -q "table $d/table.tsv: 4 rows" "$tmp/log" || fail "reset: the table file was not read"
check_output "$d" "$tmp/expected.changed" "STREAM_RESET_STATE=1 after the change"
echo "ok STREAM_RESET_STATE=1: a fresh start reads the changed table file"

# 4. --rescale of the lookup stage 4 -> 2 -> 4: union gives every instance every row.
d="$tmp/rescale"
conf "$d" $C 4 pass "" "$CKPT" 100000
cp "$tmp/table.tsv" "$d/"
stop_after "$d" 0.8
cp "$tmp/changed.tsv" "$d/table.tsv"
sed -i 's/^width = 4/width = 2/' "$d/job.conf"
set +e; (cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" > /dev/null; rc=$?; set -e
[ $rc -ne 0 ] || fail "width 4 -> 2 without --rescale: exit 0"
grep -q "stage look: width 4 → 2" "$tmp/log" || fail "width 4 -> 2: refusal does not name it"
"$shmrun" plan --rescale-from "$d/ckpt" "$d/job.conf" > "$tmp/plan" 2> "$tmp/log" || fail "plan --rescale-from: exit $?"
grep -q "look: union of 4 entries" "$tmp/plan" || fail "plan: no union pool of 4 rows for look"
for i in 0 1; do
	grep -q "look\[$i\]: .* 4 per-worker entries" "$tmp/plan" || fail "plan: look[$i] does not get 4 rows"
done
# stop again at width 2, then finish at width 4
(cd "$d" && exec "$shmrun" --rescale job.conf) 2> "$tmp/log" > /dev/null &
launcher=$!
wait_started
sleep 0.8
kill -TERM $launcher 2>/dev/null || true
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 0 ] || fail "rescale 4 -> 2: exit $rc"
grep -q "rescale: .* re-assigned" "$tmp/log" || fail "rescale 4 -> 2: not re-assigned"
sed -i 's/^width = 2/width = 4/; s/^rate = .*/rate = 4000000/' "$d/job.conf"
"$shmrun" plan --rescale-from "$d/ckpt" "$d/job.conf" > "$tmp/plan" 2> "$tmp/log" || fail "plan 2 -> 4: exit $?"
for i in 0 1 2 3; do
	grep -q "look\[$i\]: .* 4 per-worker entries" "$tmp/plan" || fail "plan 2 -> 4: look[$i] does not get exactly the 4 rows"
done
(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" > /dev/null || fail "rescale 2 -> 4: exit $?"
grep -q "CHANGED\|NEW" "$d/out/result.tsv" && fail "rescale: output uses the changed file"
check_output "$d" "$tmp/expected.ckpt" "rescale 4 -> 2 -> 4"
echo "ok --rescale lookup 4 -> 2 -> 4: every instance has exactly the checkpoint's table, exact output"

# 5. --rescale adding a lookup stage: new to the checkpoint, it reads the file.
d="$tmp/newstage"
mkdir -p "$d"
cat > "$d/job.conf" <<CONF
[job]
$CKPT
[gen]
op = sequence
count = $C
keys = 10
rate = 200000
[out]
op = file_sink
input = gen
path = out/result.tsv
CONF
cp "$tmp/table.tsv" "$d/"
stop_after "$d" 0.8
L=$(wc -l < "$d/out/result.tsv")
cat > "$d/job.conf" <<CONF
[job]
$CKPT
[gen]
op = sequence
count = $C
keys = 10
[look]
op = lookup
input = gen
table = table.tsv
[out]
op = file_sink
input = look
path = out/result.tsv
CONF
(cd "$d" && "$shmrun" --rescale job.conf) 2> "$tmp/log" > /dev/null || fail "new stage: exit $?"
grep -q "no table for this stage (new to it): table $d/table.tsv: 4 rows" "$tmp/log" ||
	fail "new stage: did not read the table file"
# widths 1 and forward edges keep the sequence's order: lines before the stop
# are plain, every later one is enriched
awk -v n=$C -v from="$L" 'BEGIN {
	tab["k0"] = "zero"; tab["k3"] = "three\t3"; tab["k7"] = ""
	for (i = 0; i < n; i++) {
		k = "k" (i % 10)
		if (i >= from && k in tab) print k "\t" i "\t" tab[k]; else print k "\t" i
	} }' > "$tmp/want"
cmp -s "$tmp/want" "$d/out/result.tsv" || { diff "$tmp/want" "$d/out/result.tsv" | head -5 >&2 || true; fail "new stage: output differs"; }
echo "ok --rescale adding a lookup stage: it reads the table file; $L lines before, $((C - L)) after"

# bounded memory (400 MB of address space), except under a sanitizer, whose
# shadow memory needs terabytes of address space
vlimit=400000
ldd "$shmrun" 2> /dev/null | qgrep 'libasan\|libtsan' && vlimit=unlimited
# Tables that are not regular files, or whose size is not their content's, are
# refused by `check` (prepare) at once: a FIFO would block, /dev/zero never end.
d=$tmp/special
mkdir -p "$d"
mkfifo "$d/fifo"
for t in "$d/fifo" /dev/zero /dev/urandom /proc/self/status \
	/sys/kernel/mm/transparent_hugepage/enabled "$d"; do
	[ -e "$t" ] || continue
	cat > "$d/job.conf" <<CONF
[gen]
op = sequence
count = 3
[look]
op = lookup
input = gen
table = $t
[out]
op = null_sink
input = look
CONF
	rc=0
	( ulimit -v $vlimit; timeout 30 "$shmrun" check "$d/job.conf" ) 2> "$tmp/log" || rc=$?
	[ $rc -eq 2 ] || fail "table $t: check exit status $rc, expected 2 (124: it hung)"
	grep -q "job.conf:7: stage 'look' \[0\]: table $t is " "$tmp/log" ||
		fail "table $t: the refusal does not name the stage and the table"
	grep -Eq "not a regular file|pseudo file system" "$tmp/log" ||
		fail "table $t: the refusal does not say why"
done
echo "ok FIFO, device, directory, /proc and /sys tables: refused by check, exit 2, at once"

# a table over the 1 GiB limit is refused with the limit (a sparse file)
truncate -s 1100M "$d/big.tsv"
sed -i "s|^table = .*|table = big.tsv|" "$d/job.conf"
rc=0
( ulimit -v $vlimit; timeout 30 "$shmrun" check "$d/job.conf" ) 2> "$tmp/log" || rc=$?
[ $rc -eq 2 ] && grep -q "table $d/big.tsv is larger than 1024 MiB" "$tmp/log" ||
	fail "a 1.1 GiB table: exit $rc, no limit message"
rm -f "$d/big.tsv"
echo "ok a table over 1 GiB: refused with the limit"
