#!/usr/bin/env bash
# tests/integration/extract.sh SHMRUN: the extract operator (runtime/ops/extract.c,
# issue 12 item 1) on real and on bad input.
#   - docs/examples/dpkg-extract.conf over a copy of /var/log/dpkg.log: the
#     counts per action equal an awk oracle's over the same copy, and no line
#     is bad; extract -> file_sink at width 2 gives, line for line after
#     sorting, the action and package awk finds in each line.
#   - the checked-in sample tests/integration/data/dpkg-sample.log, whose bad
#     lines (no date, empty, a month 13, a status line without a package) the
#     oracle finds by its own rules: the summary's "bad records" equals its
#     count, one warning per bad line naming the line's text, `log_bad = 2`
#     logs two and says the rest are only counted; the good lines are counted.
#   - on_bad_record = fail: exit status 1, the message names the line and the
#     key; the launcher does not restart the job.
#   - rejects = FILE: exactly the oracle's bad lines, in order; at width 2 with
#     checkpoints (file_sink's two-phase commit) each once over both files; not
#     counted as records out; a directory is refused naming the key's line;
#     a kill -9 of a worker mid-run: after the restart each bad line is in the
#     committed rejects once, and the counts are exact.
#   - --rescale of the extract stage 2 -> 1 after a stop: exact counts without
#     rejects; refused (exit 2, with the reason) with rejects.
#   - the event time reaches the next stage across a ring: lines stamped
#     1000 s (epoch_s) and 2000 s (epoch_ms) ago give a latency_sink behind a
#     shuffle p50 and max within those ages (plus the run's own seconds).
#   - where a bad line is (section 6): two files with bad lines at known
#     line numbers, read in 4 KiB pieces (pieces start mid-file), at widths 1
#     and 2: each warning names path:line of its line, the text it shows is
#     that line, and together they name every bad line; the same after a
#     kill -9 of a worker and a restore from a checkpoint (read positions
#     mid-piece), with warnings after the restart; across a ring (width 2 ->
#     1) the warning gives the input record number and says why there is no
#     file:line; on_bad_record = fail names the first bad line's path:line
#     (and, for the sample, section 3 its first bad line); behind another
#     operator on forward edges (tokenize; with PLUGIN_DIR, wm_probe, which
#     passes the same records on) no path:line either.
#   - bad confs, refused by `shmrun check` with exit 2 and the file:line of
#     the key: a regex PCRE2 refuses (its message and offset), a group name
#     the regex lacks, an unsupported time_format, an unknown time_zone (the
#     message says where zones live).
set -euo pipefail
shmrun=$(realpath "${1:?usage: extract.sh path/to/shmrun [PLUGIN_DIR]}")
pdir=${2:+$(realpath "$2")} # the test plugins' builds (watermark.so), optional
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
sample=$src/tests/integration/data/dpkg-sample.log

# The oracle. A good line: a valid "YYYY-MM-DD HH:MM:SS" date, an action and a
# package (for status, the word after the state). Prints "action<TAB>package"
# per good line, and "BAD" per bad one; with a second argument "lines", only
# the bad lines themselves.
oracle() {
	awk -v lines="${2:-}" '{
		ok = $1 ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$/ &&
		     $2 ~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/
		if (ok) {
			split($1, d, "-"); split($2, t, ":")
			ok = d[2] >= 1 && d[2] <= 12 && d[3] >= 1 && d[3] <= 31 &&
			     t[1] <= 23 && t[2] <= 59 && t[3] <= 60
		}
		if (ok && $3 == "status")
			ok = NF >= 5
		else if (ok)
			ok = NF >= 4
		if (lines != "") {
			if (!ok)
				print
		} else if (!ok)
			print "BAD"
		else
			print $3 "\t" ($3 == "status" ? $5 : $4)
	}' "$1"
}

# conf DIR INPUT [EXTRA_LINES]: the example, reading INPUT, writing DIR/out.tsv
conf() {
	mkdir -p "$1"
	sed -e "s#^path = /var/log/dpkg.log#path = $2#" \
	    -e "s#^path = out/dpkg-actions.tsv#path = $1/out.tsv#" \
	    -e "s#^time_zone = .*#&\n${3:-}#" \
	    "$src/docs/examples/dpkg-extract.conf" > "$1/job.conf"
	grep -q "^path = $2" "$1/job.conf" || fail "conf: the example's input path changed"
}

# 1. real data ----------------------------------------------------------------
if [ -s /var/log/dpkg.log ]; then
	cp /var/log/dpkg.log "$tmp/dpkg.log" # apt may append while we run
	conf "$tmp/real" "$tmp/dpkg.log"
	"$shmrun" "$tmp/real/job.conf" 2> "$tmp/log" || fail "dpkg-extract failed"
	oracle "$tmp/dpkg.log" | grep -v '^BAD$' | cut -f1 | sort | uniq -c |
		awk '{ print $2 "\t" $1 }' > "$tmp/want"
	sort "$tmp/real/out.tsv" > "$tmp/got"
	[ -s "$tmp/want" ] || fail "the oracle found no line in /var/log/dpkg.log"
	cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" | head >&2 || true; fail "counts per action differ from awk's"; }
	! grep -q "bad record" "$tmp/log" || fail "dpkg's own lines reported bad"
	[ "$(oracle "$tmp/dpkg.log" | grep -c '^BAD$' || true)" = 0 ] || fail "the oracle finds bad lines in dpkg.log"

	# key and value of every line, through extract -> file_sink at width 2
	sed -e '/^\[count\]/,/^width/d' -e 's/^input = count/input = parse/' \
	    -e 's/^width = 1/width = 2/' "$tmp/real/job.conf" > "$tmp/real/kv.conf"
	"$shmrun" "$tmp/real/kv.conf" 2> "$tmp/log" || fail "extract -> file_sink failed"
	cat "$tmp/real/out.tsv".0 "$tmp/real/out.tsv".1 | sort > "$tmp/got"
	oracle "$tmp/dpkg.log" | sort > "$tmp/want"
	cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" | head >&2 || true; fail "key/value per line differ from awk's"; }
else
	echo "note: no /var/log/dpkg.log here; only the sample is checked" >&2
fi

# 2. the sample with bad lines ------------------------------------------------
bad=$(oracle "$sample" | grep -c '^BAD$' || true)
[ "$bad" -ge 3 ] || fail "the sample should have bad lines (oracle: $bad)"
oracle "$sample" | grep -v '^BAD$' | cut -f1 | sort | uniq -c | awk '{ print $2 "\t" $1 }' > "$tmp/want"
conf "$tmp/s" "$sample"
sed -i 's/^width = 2/width = 1/' "$tmp/s/job.conf" # one instance logs every bad line
"$shmrun" "$tmp/s/job.conf" 2> "$tmp/log" || fail "sample run failed"
sort "$tmp/s/out.tsv" > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" >&2 || true; fail "sample: counts differ"; }
grep -q "^bad records:   $bad " "$tmp/log" || fail "summary does not say bad records: $bad"
[ "$(grep -c "WARN .*stage 'parse' \[0\]: bad record [0-9]" "$tmp/log")" = "$bad" ] ||
	fail "expected $bad warnings"
grep -q "bad record .*: the time does not fit time_format: 'garbage line without a date'" "$tmp/log" ||
	fail "the warning does not name the line"
grep -q "bad record .*: the regex does not match: '2024-01-31 12:35:01 status'" "$tmp/log" ||
	fail "the warning does not name the line without a package"
grep -q "stage 'parse' \[0\]: $bad bad records of $(wc -l < "$sample") skipped" "$tmp/log" ||
	fail "no closing count"

# log_bad = 2: two warnings, the rest counted
conf "$tmp/l" "$sample" "log_bad = 2"
sed -i 's/^width = 2/width = 1/' "$tmp/l/job.conf"
"$shmrun" "$tmp/l/job.conf" 2> "$tmp/log" || fail "log_bad run failed"
[ "$(grep -c "bad record [0-9]* (" "$tmp/log")" = 2 ] || fail "log_bad = 2 logged another number"
grep -q "further bad records are counted, not logged" "$tmp/log" || fail "no word about the rest"
grep -q "^bad records:   $bad " "$tmp/log" || fail "log_bad changed the count"

# rejects: the bad lines as they came, in order; at width 2 with checkpoints
# (file_sink's exactly-once path) both files together hold each once
oracle "$sample" lines > "$tmp/bad-lines"
[ "$(wc -l < "$tmp/bad-lines")" = "$bad" ] || fail "oracle: bad lines miscounted"
conf "$tmp/r" "$sample" "rejects = $tmp/r/rejects.txt"
sed -i 's/^width = 2/width = 1/' "$tmp/r/job.conf"
"$shmrun" "$tmp/r/job.conf" 2> "$tmp/log" || fail "rejects run failed"
cmp -s "$tmp/bad-lines" "$tmp/r/rejects.txt" || { diff "$tmp/bad-lines" "$tmp/r/rejects.txt" >&2 || true; fail "rejects differ from the bad lines"; }
grep -q "^output: *$tmp/r/rejects.txt$" "$tmp/log" || fail "the summary does not list the rejects file"
grep -q "^records out: *$(sort -u "$tmp/r/out.tsv" | wc -l)$" "$tmp/log" || fail "rejects counted as records out"
conf "$tmp/rc" "$sample" "rejects = $tmp/rc/rejects.txt"
sed -i "s#^\[job\]#&\ncheckpoint_dir = $tmp/rc/ckpt\ncheckpoint_interval = 10ms#" "$tmp/rc/job.conf"
"$shmrun" "$tmp/rc/job.conf" 2> "$tmp/log" || fail "checkpointed rejects run failed"
sort "$tmp/rc/rejects.txt".0 "$tmp/rc/rejects.txt".1 > "$tmp/got"
sort "$tmp/bad-lines" > "$tmp/want"
cmp -s "$tmp/want" "$tmp/got" || { diff "$tmp/want" "$tmp/got" >&2 || true; fail "checkpointed rejects differ"; }
ls -a "$tmp/rc" | grep -q staged && fail "staging files left beside the rejects"
# a directory is not a rejects file: refused before anything starts
conf "$tmp/rd" "$sample" "rejects = $tmp"
sed -i 's/^width = 2/width = 1/' "$tmp/rd/job.conf" # width 2 would write $tmp.0, $tmp.1
line=$(grep -n "^rejects = " "$tmp/rd/job.conf" | cut -d: -f1)
rc=0
"$shmrun" check "$tmp/rd/job.conf" 2> "$tmp/log" || rc=$?
[ "$rc" = 2 ] || fail "rejects = a directory: exit $rc, want 2"
grep -q "job.conf:$line: stage 'parse' \[0\]: rejects = $tmp: .* is a directory" "$tmp/log" ||
	fail "rejects = a directory: not named at line $line"

# kill -9 of a worker while a checkpointed job writes rejects: after the
# restart the committed rejects hold each bad line once (and the counts are
# exact), as file_sink's output would
awk 'BEGIN { for (i = 0; i < 30000; i++)
	if (i % 7 == 3) print "bad line " i; else printf "2024-01-31 12:%02d:%02d install p%d:amd64 <none> 1\n", (i / 60) % 60, i % 60, i % 13 }' > "$tmp/big.log"
oracle "$tmp/big.log" lines | sort > "$tmp/big-bad"
oracle "$tmp/big.log" | grep -v '^BAD$' | cut -f1 | sort | uniq -c | awk '{ print $2 "\t" $1 }' > "$tmp/big-want"
conf "$tmp/k" "$tmp/big.log" "rejects = $tmp/k/rejects.txt"
sed -i -e "s#^\[job\]#&\ncheckpoint_dir = $tmp/k/ckpt\ncheckpoint_interval = 20ms#" \
       -e "s#^path = $tmp/big.log#&\nrate = 15000\npiece_bytes = 64K#" "$tmp/k/job.conf"
"$shmrun" --log-level info "$tmp/k/job.conf" 2> "$tmp/log" &
launcher=$!
wait_started || fail "the job did not start"
sleep 0.8
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -gt 0 ] && kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}" 2> /dev/null || true
set +e; wait $launcher; rc=$?; set -e
launcher=
[ "$rc" = 0 ] || fail "kill -9 with rejects: exit $rc"
grep -q "restart 1 of" "$tmp/log" || echo "note: the job ended before the kill landed" >&2
sort "$tmp/k/rejects.txt".0 "$tmp/k/rejects.txt".1 > "$tmp/got"
cmp -s "$tmp/big-bad" "$tmp/got" || { diff "$tmp/big-bad" "$tmp/got" | head >&2 || true; fail "rejects after kill -9 differ"; }
sort "$tmp/k/out.tsv" > "$tmp/got"
cmp -s "$tmp/big-want" "$tmp/got" || { diff "$tmp/big-want" "$tmp/got" | head >&2 || true; fail "counts after kill -9 differ"; }
ls -a "$tmp/k" | grep -q staged && fail "staging files left after kill -9"

# --rescale: extract keeps no state of its own, so its width may change
# (2 -> 1) after a stop, output exact; with rejects (file_sink's committed
# length, no rule) the same rescale is refused
for rej in no yes; do
	d=$tmp/rs-$rej
	conf "$d" "$tmp/big.log" "$([ $rej = yes ] && echo "rejects = $d/rejects.txt")"
	sed -i -e "s#^\[job\]#&\ncheckpoint_dir = $d/ckpt\ncheckpoint_interval = 50ms#" \
	       -e "s#^path = $tmp/big.log#&\nrate = 10000\npiece_bytes = 64K#" "$d/job.conf"
	"$shmrun" "$d/job.conf" 2> "$tmp/log" &
	launcher=$!
	wait_started || fail "rescale ($rej): the job did not start"
	sleep 1
	kill -TERM $launcher 2> /dev/null || true
	wait $launcher || fail "rescale ($rej): the stop failed"
	launcher=
	grep -q "stopped at epoch" "$tmp/log" || fail "rescale ($rej): finished before the stop"
	awk '/^\[parse\]/ { p = 1 } p && /^width = 2$/ { print "width = 1"; p = 0; next } { print }' \
		"$d/job.conf" > "$d/job1.conf"
	mv "$d/job1.conf" "$d/job.conf"
	rc=0
	"$shmrun" --rescale "$d/job.conf" 2> "$tmp/log" || rc=$?
	if [ $rej = no ]; then
		[ $rc = 0 ] || fail "rescale of extract 2 -> 1: exit $rc"
		sort "$d/out.tsv" > "$tmp/got"
		cmp -s "$tmp/big-want" "$tmp/got" || { diff "$tmp/big-want" "$tmp/got" | head >&2 || true; fail "counts after the rescale differ"; }
	else
		[ $rc = 2 ] || fail "rescale of extract with rejects: exit $rc, want 2"
		grep -q "stage parse: its per-worker state is how much of each instance.s output file (rejects: one file per instance) is committed" "$tmp/log" ||
			fail "rescale with rejects: no reason"
	fi
done

# 3. on_bad_record = fail -----------------------------------------------------
conf "$tmp/f" "$sample" "on_bad_record = fail"
rc=0
timeout 60 "$shmrun" "$tmp/f/job.conf" 2> "$tmp/log" || rc=$?
[ "$rc" = 1 ] || fail "on_bad_record = fail: exit status $rc, want 1"
grep -q "on_bad_record = fail stops the job" "$tmp/log" || fail "no reason given"
# the sample is one piece, read by instance 0 behind a forward edge: its
# first bad line is the one named, by path:line
first=$(oracle "$sample" | grep -n '^BAD$' | head -1 | cut -d: -f1)
grep -qF "bad record ($sample:$first): " "$tmp/log" || fail "the first bad line ($sample:$first) is not named"
grep -qF "'$(sed -n "${first}p" "$sample")'; on_bad_record = fail" "$tmp/log" || fail "the line's text is not shown"
! grep -q "restarting" "$tmp/log" || fail "a bad record was restarted"
grep -q "a restart cannot cure a malformed input record (it would meet it again), so it is not restarted: fix the cause, then run it again$" "$tmp/log" ||
	fail "the launcher does not say why it does not restart (or offers a resume without checkpoint_dir)"
[ "$(grep -c "launcher: job dpkg-extract: 2 workers" "$tmp/log")" = 1 ] || fail "started more than once"

# 5. the event time reaches the next stage, across a ring: lines stamped
# 1000 s (epoch_s, with a fraction) and 2000 s (epoch_ms) before now; a
# latency_sink behind a shuffle measures now - event time for each
now=$(date +%s)
awk -v now="$now" 'BEGIN { for (i = 0; i < 500; i++) {
	printf "s%d,%d.5\n", i % 7, now - 1000; printf "m%d,%d250\n", i % 7, now - 2000 } }' > "$tmp/stamped.csv"
for unit in s ms; do
	d=$tmp/lat-$unit
	mkdir -p "$d"
	grep "^${unit:0:1}[0-9]," "$tmp/stamped.csv" > "$d/in.csv"
	cat > "$d/job.conf" <<CONF
[job]
workers = 2
[read]
op = file_source
path = in.csv
[parse]
op = extract
input = read
separator = ,
key = 1
time = 2
time_format = epoch_$unit
[lat]
op = latency_sink
input = parse by key
path = lat.txt
width = 1
CONF
	(cd "$d" && "$shmrun" job.conf) 2> "$tmp/log" || fail "latency run ($unit) failed"
	want=$([ "$unit" = s ] && echo 1000 || echo 2000)
	awk -v want="$want" '
		$1 == "count" { n = $2 }
		$1 == "p50_ns" { p50 = $2 }
		$1 == "max_ns" { max = $2 }
		END {
			lo = (want - 1) * 1e9; hi = (want + 120) * 1e9
			if (n != 500 || p50 < lo || p50 > hi || max > hi) {
				printf "count %s p50 %s max %s, want 500 and %d s\n", n, p50, max, want
				exit 1
			}
		}' "$d/lat.txt" >&2 || fail "event time ($unit) did not reach the sink"
done

# 4. bad confs: exit 2, file:line of the key -----------------------------------
# badconf NAME KEY VALUE PATTERN: set KEY = VALUE in the example, expect PATTERN
badconf() {
	local d=$tmp/bad-$1 line rc=0
	conf "$d" "$sample"
	sed -i "s#^$2 = .*#$2 = $3#" "$d/job.conf"
	line=$(grep -n "^$2 = " "$d/job.conf" | cut -d: -f1)
	"$shmrun" check "$d/job.conf" 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "$1: exit $rc, want 2"
	grep -qF "$d/job.conf:$line: stage 'parse' [0]: $2 = " "$tmp/log" || fail "$1: not named at line $line"
	grep -qE "$4" "$tmp/log" || fail "$1: message lacks /$4/"
}
badconf regex regex '^(?<time>\S+ \S+ (?<action>\S+)' 'PCRE2 error at offset [0-9]+: missing closing parenthesis'
badconf group key 'actoin' "the regex has no group named 'actoin'"
badconf format time_format '%Y-%m-%d %H:%M:%S %Z' '%Z at offset 18 is not supported: .*use time_zone'
badconf zone time_zone 'Europe/Berln' "no time zone 'Europe/Berln': /usr/share/zoneinfo/Europe/Berln: .*zones are the files under /usr/share/zoneinfo"
# 6. where a bad line is: path:line -------------------------------------------
# Two files with bad lines at known line numbers, read in 4 KiB pieces (most
# pieces start mid-file; at width 2 instance 1 reads only such pieces); the
# warnings name path:line of each, and the text shown is that line of that
# file (check_where). Across a ring the warning says why there is none.
mkdir -p "$tmp/o"
gen() { # gen FILE N BAD...: N lines, those numbered BAD... bad
	local f=$1 n=$2
	shift 2
	awk -v n="$n" -v bad=" $* " 'BEGIN { for (i = 1; i <= n; i++)
		if (index(bad, " " i " ")) print "bad line " i " of '"${f##*/}"'"
		else printf "2024-01-31 12:%02d:%02d install p%d:amd64 <none> 1\n", (i / 60) % 60, i % 60, i % 13 }' > "$f"
}
gen "$tmp/o/a.log" 3000 3 500 1501 2999
gen "$tmp/o/b.log" 2000 1 998 2000
for f in a b; do grep -n '^bad' "$tmp/o/$f.log" | cut -d: -f1 | sed "s#^#$tmp/o/$f.log:#"; done | sort > "$tmp/o/want"
[ "$(wc -l < "$tmp/o/want")" = 7 ] || fail "where: the generator made $(wc -l < "$tmp/o/want") bad lines, want 7"
# where LOG: "PATH:LINE" of each bad-record message, sorted, de-duplicated
where() {
	sed -n "s/.*: bad record [0-9]* (\([^ ()]*:[0-9]*\)): .*/\1/p" "$1" | sort -u
}
# check_where LOG: every message's quoted text is line LINE of PATH
check_where() {
	local p l t n=0
	while IFS=$'\t' read -r p l t; do
		[ "$(sed -n "${l}p" "$p")" = "$t" ] || fail "where: $p:$l is '$(sed -n "${l}p" "$p")', the warning shows '$t'"
		n=$((n + 1))
	done < <(sed -n "s/.*: bad record [0-9]* (\([^ ()]*\):\([0-9]*\)): [^']*: '\(.*\)'\(; further.*\)\{0,1\}$/\1\t\2\t\3/p" "$1")
	[ $n -gt 0 ] || fail "where: no warning names a path:line"
}
# oconf DIR READ_WIDTH PARSE_WIDTH [JOB_LINES [READ_LINES [PARSE_LINES]]]
oconf() {
	mkdir -p "$1"
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
${4:-}
[read]
op = file_source
path = $tmp/o/a.log $tmp/o/b.log
piece_bytes = 4K
width = $2
${5:-}
[parse]
op = extract
input = read
regex = ^(?<time>\S+ \S+) (?<action>\S+) (?<package>\S+)
key = action
value = package
time = time
time_format = %Y-%m-%d %H:%M:%S
log_bad = 1000
width = $3
${6:-}
[out]
op = file_sink
input = parse by key
path = out.tsv
width = 1
CONF
}
for wd in 1 2; do
	oconf "$tmp/o/w$wd" $wd $wd
	"$shmrun" "$tmp/o/w$wd/job.conf" 2> "$tmp/log" || fail "where, width $wd: the run failed"
	grep -q "^bad records:   7 " "$tmp/log" || fail "where, width $wd: not 7 bad records"
	[ "$(grep -c ": bad record [0-9]* (" "$tmp/log")" = 7 ] || fail "where, width $wd: not 7 warnings"
	where "$tmp/log" > "$tmp/o/got"
	cmp -s "$tmp/o/want" "$tmp/o/got" || { diff "$tmp/o/want" "$tmp/o/got" >&2 || true; fail "where, width $wd: path:line differ"; }
	check_where "$tmp/log"
	if [ $wd = 2 ]; then # instance 1 reads only pieces that start mid-file
		grep -q "stage 'parse' \[1\]: bad record [0-9]* ($tmp/o/[ab].log:[0-9]*)" "$tmp/log" ||
			fail "where, width 2: instance 1 (mid-file pieces) named no path:line"
	fi
done
# across a ring (read width 2 -> parse width 1): no path:line, and it says why
oconf "$tmp/o/ring" 2 1
"$shmrun" "$tmp/o/ring/job.conf" 2> "$tmp/log" || fail "where, ring: the run failed"
[ "$(grep -c ": bad record [0-9]* (input record [0-9]* of this instance; no file:line: it is known only directly behind file_source on a forward edge): " "$tmp/log")" = 7 ] ||
	fail "where, ring: not 7 warnings saying why there is no file:line"
! grep -q "bad record [0-9]* ($tmp/o" "$tmp/log" || fail "where, ring: a path:line across a ring"
grep -q "bad record [0-9]* (input record [0-9]* of this instance; .*'bad line 1501 of a.log'" "$tmp/log" ||
	fail "where, ring: the line's text is not shown"

# behind another operator on forward edges (file_source -> tokenize ->
# extract, equal widths): the records are tokenize's, so no path:line either
mkdir -p "$tmp/o/tok"
cat > "$tmp/o/tok/job.conf" <<CONF
[job]
workers = 2
[read]
op = file_source
path = $tmp/o/a.log
width = 2
[tok]
op = tokenize
input = read
width = 2
[parse]
op = extract
input = tok
regex = ^(?<action>[a-z]+)\$
key = action
log_bad = 3
width = 2
[out]
op = null_sink
input = parse
width = 2
CONF
"$shmrun" "$tmp/o/tok/job.conf" 2> "$tmp/log" || fail "where, behind tokenize: the run failed"
grep -q "bad record 1 (input record [0-9]* of this instance; no file:line: it is known only directly behind file_source on a forward edge): " "$tmp/log" ||
	fail "where, behind tokenize: no warning saying why there is no file:line"
! grep -q "bad record [0-9]* ($tmp/o" "$tmp/log" || fail "where, behind tokenize: a path:line for another operator's record"

# behind an operator that hands the very records it was given on
# (watermark.so's wm_probe: shmrun_emit(task, rec)) the rule is the same:
# only the stage directly behind file_source names path:line
if [ -n "$pdir" ]; then
	sed -e "s#^\[job\]#&\nplugins = $pdir/watermark.so#" \
	    -e 's/^op = tokenize$/op = wm_probe\npath = probe.txt/' \
	    -e 's/^regex = .*/regex = ^(?<action>[a-z]+)$/' "$tmp/o/tok/job.conf" > "$tmp/o/tok/probe.conf"
	qgrep -x "op = wm_probe" "$tmp/o/tok/probe.conf" || fail "where, behind wm_probe: conf not made"
	"$shmrun" "$tmp/o/tok/probe.conf" 2> "$tmp/log" || fail "where, behind wm_probe: the run failed"
	grep -q "bad record 3 (input record 3 of this instance; no file:line: .*'bad line 3 of a.log'" "$tmp/log" ||
		fail "where, behind wm_probe: no warning saying why there is no file:line"
	! grep -q "bad record [0-9]* ($tmp/o" "$tmp/log" || fail "where, behind wm_probe: a path:line two stages behind file_source"
else
	echo "note: no PLUGIN_DIR: extract behind a pass-through operator not checked" >&2
fi

# on_bad_record = fail at width 1: the first bad line, by path:line
oconf "$tmp/o/fail" 1 1 "" "" "on_bad_record = fail"
rc=0
timeout 60 "$shmrun" "$tmp/o/fail/job.conf" 2> "$tmp/log" || rc=$?
[ "$rc" = 1 ] || fail "where, on_bad_record = fail: exit $rc, want 1"
grep -qE "bad record \($tmp/o/a.log:3\): [a-z_ ]+: 'bad line 3 of a.log'; on_bad_record = fail stops the job" "$tmp/log" ||
	fail "where, on_bad_record = fail: a.log:3 is not named"

# kill -9 of a worker mid-run with checkpoints: the restored read positions
# lie mid-piece; every warning, before and after the restart, names the right
# path:line, and together they name every bad line
gen "$tmp/o/a.log" 30000 $(seq 7 997 30000)
gen "$tmp/o/b.log" 20000 $(seq 1 1499 20000) 20000
for f in a b; do grep -n '^bad' "$tmp/o/$f.log" | cut -d: -f1 | sed "s#^#$tmp/o/$f.log:#"; done | sort > "$tmp/o/want"
oconf "$tmp/o/k" 2 2 "checkpoint_dir = ckpt
checkpoint_interval = 20ms" "rate = 20000"
sed -i 's/^piece_bytes = 4K/piece_bytes = 256K/' "$tmp/o/k/job.conf"
"$shmrun" --log-level info "$tmp/o/k/job.conf" 2> "$tmp/log" &
launcher=$!
wait_started || fail "where, kill -9: the job did not start"
wait_manifest "$tmp/o/k/ckpt" || fail "where, kill -9: no checkpoint"
sleep 0.5
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -gt 0 ] && kill -9 "${ws[$((RANDOM % ${#ws[@]}))]}" 2> /dev/null || true
set +e; wait $launcher; rc=$?; set -e
launcher=
[ "$rc" = 0 ] || fail "where, kill -9: exit $rc"
grep -q "restart 1 of" "$tmp/log" || fail "where, kill -9: the job ended before the kill landed"
awk '/restart 1 of/ { r = 1 } r && /: bad record [0-9]* \(\// { n++ } END { exit !(n > 0) }' "$tmp/log" ||
	fail "where, kill -9: no bad line named after the restore"
where "$tmp/log" > "$tmp/o/got"
cmp -s "$tmp/o/want" "$tmp/o/got" || { diff "$tmp/o/want" "$tmp/o/got" >&2 || true; fail "where, kill -9: path:line differ"; }
check_where "$tmp/log"
echo "extract: ok"
