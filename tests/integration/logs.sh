#!/usr/bin/env bash
# tests/integration/logs.sh SHMRUN: log lines (issue 13 item 7).
#   1. --log-format=json: every line of stderr (the end-of-run report too) is
#      one JSON object with time, level, job and msg; a worker's lines carry
#      worker, a task's stage and instance (checked against the text run's
#      lines: the same warnings, the same stage and instance);
#   2. text: every log line names the job and the process (launcher or
#      worker N), a task's line its stage and instance;
#   3. per-epoch checkpoint lines are debug: none at info, there at debug
#      (from worker 0, the coordinator);
#   4. a bad --log-format is a usage error: exit 2, nothing started.
set -euo pipefail
shmrun=${1:?usage: logs.sh path/to/shmrun}
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
jc=$src/tests/integration/json_check.py
sample=$src/tests/integration/data/dpkg-sample.log

# dpkg-extract over the sample, which has bad lines: parse [i] warns about each
mkdir -p "$tmp/j"
sed -e "s#^path = /var/log/dpkg.log#path = $sample#" \
    -e "s#^path = out/dpkg-actions.tsv#path = $tmp/j/out.tsv#" \
    -e "s#^workers = 2#&\ncheckpoint_dir = $tmp/j/ckpt\ncheckpoint_interval = 50ms#" \
    "$src/docs/examples/dpkg-extract.conf" > "$tmp/j/job.conf"
grep -q "^checkpoint_dir" "$tmp/j/job.conf" || fail "conf: the example's [job] changed"

# 1. JSON
"$shmrun" --log-format=json --log-level debug "$tmp/j/job.conf" 2> "$tmp/log" || fail "json run: exit $?"
python3 "$jc" log "$tmp/log" worker stage launcher job=dpkg-extract 'msg~^epoch [0-9]+ complete$' \
	'msg~^records in: +[0-9]+$' || fail "json log lines"
python3 - "$tmp/log" > "$tmp/json.warn" <<'PY' || fail "json: the bad-record warnings"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
warn = [l for l in lines if l["level"] == "warn" and l["msg"].startswith("bad record ")]
assert warn, "no bad-record warning"
for l in warn:
    # from the task that found it: a worker, stage parse, an instance of 2
    assert l.get("stage") == "parse" and l["instance"] in (0, 1) and l["worker"] in (0, 1), l
    assert not l["msg"].startswith("stage "), l  # the stage is a field, not in msg
    print(l["instance"], l["msg"])
epochs = [l for l in lines if l["msg"].endswith(" complete") and l["msg"].startswith("epoch ")]
assert epochs and all(l["level"] == "debug" and l["worker"] == 0 for l in epochs), epochs
PY
sort -o "$tmp/json.warn" "$tmp/json.warn"
rm -rf "$tmp/j/ckpt" "$tmp/j/out.tsv"
echo "ok --log-format=json: every line an object with job, worker, stage and instance where they apply"

# 2. text: the same run; the same warnings, with the stage and instance in the line
"$shmrun" "$tmp/j/job.conf" 2> "$tmp/log" || fail "text run: exit $?"
t='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'
bad=$(grep -Ev "^$t dpkg-extract (ERROR|WARN |INFO |DEBUG) (launcher|worker [0-9]+): " "$tmp/log" |
	grep -Ev "^(records in|records out|distinct keys|bad records|output): " || true)
[ -z "$bad" ] || fail "text lines without time, job, level and process: $bad"
grep -Eo "^$t dpkg-extract WARN  worker [01]: stage 'parse' \[[01]\]: bad record .*" "$tmp/log" |
	sed -E "s/^.*stage 'parse' \[([01])\]: /\1 /" | sort > "$tmp/text.warn"
[ -s "$tmp/text.warn" ] || fail "text: no bad-record warning naming worker, stage and instance"
cmp -s "$tmp/json.warn" "$tmp/text.warn" ||
	{ diff "$tmp/json.warn" "$tmp/text.warn" | head >&2 || true; fail "the json and text runs warn differently"; }
echo "ok text lines name time, job, level, process, and a task's stage and instance"

# 3. per-epoch lines: debug only
grep -Eq "epoch [0-9]+ (complete|started)|per-worker state per instance" "$tmp/log" &&
	fail "per-epoch checkpoint lines at info"
rm -rf "$tmp/j/ckpt" "$tmp/j/out.tsv"
"$shmrun" --log-level debug "$tmp/j/job.conf" 2> "$tmp/log" || fail "debug run: exit $?"
grep -Eq "^$t dpkg-extract DEBUG worker 0: epoch [0-9]+ complete$" "$tmp/log" || fail "no epoch line at debug"
echo "ok per-epoch checkpoint lines at debug only"

# 4. a bad --log-format
rm -rf "$tmp/j/ckpt" "$tmp/j/out.tsv"
for f in xml JSON ''; do
	set +e; "$shmrun" --log-format="$f" "$tmp/j/job.conf" > "$tmp/out" 2> "$tmp/err"; rc=$?; set -e
	[ $rc -eq 2 ] || fail "--log-format='$f': exit $rc, want 2"
	grep -qx "shmrun: --log-format must be text or json, not '$f'" "$tmp/err" || fail "--log-format='$f': $(cat "$tmp/err")"
done
[ ! -e "$tmp/j/out.tsv" ] && [ ! -e "$tmp/j/ckpt" ] || fail "a bad --log-format started the job"
echo "ok a bad --log-format: exit 2, nothing started"

# 5. the line composed in advance for a crash in prepare() (callback.c) is JSON too
if "$shmrun" --version | qgrep -x "fault injection: on"; then
	mkdir -p "$tmp/prep"
	echo hello > "$tmp/prep/in.txt"
	printf '[read]\nop = file_source\npath = in.txt\n[out]\nop = null_sink\ninput = read\n' > "$tmp/prep/job.conf"
	rc=0
	(cd "$tmp/prep" && SHMRUN_TEST_CALLBACK=file_source.prepare:segv:1 "$shmrun" --log-format=json job.conf) 2> "$tmp/log" || rc=$?
	[ $rc -eq 139 ] || fail "prepare crash: exit $rc, want 139"
	python3 "$jc" log "$tmp/log" launcher job=job \
		'msg~^prepare\(\) of stage read, instance 0, operator file_source \(built-in\) crashed with SIGSEGV in the launcher' ||
		fail "prepare crash: the line is not JSON"
	echo "ok a crash in prepare() under --log-format=json: one JSON line"
fi
